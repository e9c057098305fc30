"""Issue 8 item 4: LazyHH past ``event_horizon`` (tick clock, add/remove).

The worker admits the first ``event_horizon`` events of a (shard, epoch) and
drops the rest. Adding one event early then pushes the last admitted event
out: the admitted streams differ by one added and one removed event, in two
ticks and up to two cells per row. The calibration must cover that in every
release (whether the bound is reached depends on the data).
"""

from __future__ import annotations

import numpy as np

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.core.noise import make_noise
from sketches.privacy.calibration import calibrate

FAST = make_noise("fast", 7, allow_insecure=True)


def _cell_counts(hh: LazyHH, items: np.ndarray, ticks: np.ndarray) -> np.ndarray:
    keys = hh._item_keys(items)
    cells = hh.hash.buckets(keys)  # [d, n]
    out = np.zeros((hh.sketch_spec.depth, ticks.max() + 1, hh.spec.k_tilde), np.int64)
    for i in range(cells.shape[0]):
        np.add.at(out[i], (ticks, cells[i]), 1)
    return out


def test_truncation_changes_two_cells_per_row_and_two_ticks_and_is_calibrated() -> None:
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=8, eps=1.0, delta=1e-4, event_horizon=50,
                      hash_seed=3)
    hh = LazyHH(spec, FAST)
    rng = np.random.default_rng(0)
    x_items = rng.integers(0, 1000, 60)
    x_ticks = np.sort(rng.integers(0, 8, 60))
    # X' = X plus one event at tick 0 (item 5000); both truncated to the first 50 events
    xp_items = np.concatenate([[5000], x_items])
    xp_ticks = np.concatenate([[0], x_ticks])
    a = _cell_counts(hh, x_items[:50], x_ticks[:50])
    b = _cell_counts(hh, xp_items[:50], xp_ticks[:50])
    diff = b - a
    assert x_ticks[49] != 0  # the pushed-out event is in another tick than the added one
    changed_per_row = (diff != 0).reshape(diff.shape[0], -1).sum(axis=1)
    assert changed_per_row.max() == 2 > 1  # more than add/remove's one cell per row
    per_tick = np.bincount(xp_ticks[:50], minlength=8) - np.bincount(x_ticks[:50], minlength=8)
    assert np.count_nonzero(per_tick) == 2  # the length counter sees two ticks change
    d = hh.sketch_spec.depth
    eps_s, delta_s = spec.sketch_budget
    assert hh.calibration == calibrate(eps_s, delta_s, m=2 * d, rounds=hh.sketch_spec.rounds,
                                       calibrator=spec.calibrator)
    assert hh.params.count is not None and hh.params.count.m == 2
    bound = hh.privacy()["event_bound"]
    assert bound["covered"] and bound["event_horizon"] == 50


def test_replace_and_arrival_clock_have_no_truncation_term() -> None:
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=64, eps=1.0, delta=1e-4, relation="replace",  # type: ignore[arg-type]
                      clock="arrival", hash_seed=3)  # type: ignore[arg-type]
    hh = LazyHH(spec, FAST)
    assert not spec.truncated and hh.privacy()["event_bound"] is None
    assert hh.calibration.m == 2 * hh.sketch_spec.depth  # replace's own 2d
