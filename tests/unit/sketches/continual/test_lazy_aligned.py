"""Aligned rounds (``round_ticks``, issue 20c): every column pushed at a round's last tick.

Exactness with noise off: at every round boundary the released matrix is the exact count
of every event before it, between boundaries it is the last boundary's (lag < R ticks);
any batching gives the same state; the counters run ``horizon / R`` rounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec, sampler_term
from sketches.core.noise import make_noise
from sketches.errors import SerializationError, SpecError
from tests.support.noise_sources import FailsAtDraw

ZERO = make_noise("zero", allow_insecure=True)
H, R = 120, 10
KINDS = [(cls, c) for cls in (LazyCMS, LazyCS) for c in ("tree", "blt", "blt_int")]


def _stream(seed: int, n: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 60, n), np.sort(rng.integers(0, H, n))


def _exact(cls, items: np.ndarray, ticks: np.ndarray, before: int) -> np.ndarray:
    """The exact matrix of the events of ticks ``< before`` (per-tick rounds, zero noise)."""
    ref = cls(LazySketchSpec(depth=3, width=16, horizon=H, eps=1.0, delta=1e-6), ZERO)
    m = ticks < before
    ref.update_batch(items[m], ticks[m])
    ref.advance_to(before)
    return ref.noisy_matrix()


@pytest.mark.parametrize(("cls", "counter"), KINDS)
def test_a_release_at_a_round_boundary_counts_every_earlier_event_and_none_later(
        cls, counter) -> None:
    items, ticks = _stream(1)
    sk = cls(LazySketchSpec(depth=3, width=16, horizon=H, eps=1.0, delta=1e-6,
                            counter=counter, round_ticks=R), ZERO)
    for t in range(H):
        m = ticks == t
        sk.update_batch(items[m], ticks[m])
        sk.advance_to(t + 1)
        boundary = (t + 1) // R * R  # the last round boundary closed
        assert sk.rounds == boundary // R
        assert np.array_equal(sk.noisy_matrix(), _exact(cls, items, ticks, boundary)), t
    assert sk.rounds == H // R == sk.spec.rounds


@pytest.mark.parametrize(("cls", "counter"), KINDS)
def test_any_batching_gives_the_state_of_one_tick_at_a_time(cls, counter) -> None:
    items, ticks = _stream(2)
    spec = LazySketchSpec(depth=3, width=16, horizon=H, eps=1.0, delta=1e-6,
                          counter=counter, round_ticks=R)
    one = cls(spec, ZERO)
    for t in range(H):
        m = ticks == t
        one.update_batch(items[m], ticks[m])
        one.advance_to(t + 1)
    rng = np.random.default_rng(3)
    for trial in range(5):
        many = cls(spec, ZERO)
        cuts = np.sort(rng.choice(items.size, 25 + trial, replace=False))
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, items.size], strict=True):
            many.update_batch(items[a:b], ticks[a:b])
            if rng.random() < 0.3:  # an advance inside a round, never past the next event
                many.advance_to(int(ticks[b]) if b < items.size else H)
        many.advance_to(H)
        assert np.array_equal(many.noisy_matrix(), one.noisy_matrix())
        # every event in the round of its own tick, however the batches cut the stream (a
        # lattice release depends on where each increment sits: review of issue 20c, F1)
        assert many.to_bytes() == one.to_bytes()


def test_mid_round_events_wait_in_p_and_a_query_sees_the_last_boundary() -> None:
    sk = LazyCMS(LazySketchSpec(depth=1, width=4, horizon=20, eps=1.0, delta=1e-6,
                                round_ticks=5), ZERO)
    sk.update_batch(np.array([7, 7, 7]), np.array([0, 3, 6]))  # closes ticks 0..5
    assert sk.rounds == 1 and sk.query(np.array([7])).tolist() == [2]
    sk.advance_to(9)  # round 2 (ticks 5..9) still open
    assert sk.rounds == 1 and sk.query(np.array([7])).tolist() == [2]
    sk.advance_to(10)
    assert sk.rounds == 2 and sk.query(np.array([7])).tolist() == [3]
    assert sk.lag_bound()["lag_bound_ticks"] == 5
    assert sk.release()["error_bound"]["lag"] == [-5, 0]


def test_aligned_rounds_calibrate_for_horizon_over_r_rounds_and_lower_the_noise() -> None:
    kw = {"depth": 4, "width": 256, "horizon": 3600, "eps": 1.0, "delta": 1e-6}
    for counter in ("tree", "blt_int"):
        tick = LazySketchSpec(**kw, counter=counter)
        aligned = LazySketchSpec(**kw, counter=counter, round_ticks=60)
        assert (tick.rounds, aligned.rounds) == (3600, 60)
        assert aligned.calibration().levels == 6  # 60 rounds: a 6-level tree
        # 60 rounds instead of 3,600: tree 308 against 691, blt_int 118 against 207
        assert aligned.error_bound_epoch(0.05) < 0.6 * tick.error_bound_epoch(0.05)
    # the lattice sampler's term counts one draw per cell and aligned round
    spec = LazySketchSpec(**kw, counter="blt_int", round_ticks=60)
    assert sampler_term(spec, spec.sigma())["draws"] == 4 * 256 * 60


@pytest.mark.parametrize(("kw", "field"), [
    ({"round_ticks": 7}, "must divide horizon=120"),
    ({"round_ticks": 0}, "integer >= 1"),
    ({"round_ticks": True}, "integer >= 1"),
    ({"round_ticks": 2.0}, "integer >= 1"),
    ({"round_ticks": 10, "columns_per_tick": 4}, "columns_per_tick=4 staggers"),
    ({"round_ticks": 10, "relation": "replace", "clock": "arrival"}, "arrival clock"),
])
def test_round_ticks_is_refused_where_it_cannot_hold(kw, field) -> None:
    base = {"depth": 2, "width": 16, "horizon": 120, "eps": 1.0, "delta": 1e-6}
    with pytest.raises(SpecError, match="round_ticks") as err:
        LazySketchSpec(**{**base, **kw})
    assert field in str(err.value)


def test_round_ticks_is_stored_only_when_set_and_restores() -> None:
    base = {"depth": 2, "width": 16, "horizon": 120, "eps": 1.0, "delta": 1e-6}
    assert "round_ticks" not in LazySketchSpec(**base).to_dict()  # old checkpoints' bytes
    spec = LazySketchSpec(**base, round_ticks=np.int64(10), counter="blt_int")
    assert spec.to_dict()["round_ticks"] == 10 and type(spec.round_ticks) is int
    sk = LazyCS(spec, ZERO)
    items, ticks = _stream(4)
    sk.update_batch(items, ticks)  # closes every tick but the last one
    back = LazyCS.from_bytes(sk.to_bytes(), ZERO, expected_spec=spec)
    assert back.spec == spec and back.rounds == sk.rounds == int(ticks[-1]) // 10
    assert np.array_equal(back.noisy_matrix(), sk.noisy_matrix())


def test_a_state_whose_rounds_disagree_with_its_aligned_steps_is_refused() -> None:
    from sketches.core.serialization import state_from_bytes, state_to_bytes

    spec = LazySketchSpec(depth=1, width=4, horizon=20, eps=1.0, delta=1e-6, round_ticks=5)
    sk = LazyCMS(spec, ZERO)
    sk.advance_to(9)  # one round closed, tick 9 open
    _, state, arrays = state_from_bytes("lazy_cms", LazySketchSpec, sk.to_bytes(), None)
    assert LazyCMS.from_bytes(state_to_bytes("lazy_cms", spec, state, arrays), ZERO).rounds == 1
    state["steps"] = 10  # 10 closed ticks are 2 aligned rounds, the counters hold 1
    with pytest.raises(SerializationError, match="inconsistent"):
        LazyCMS.from_bytes(state_to_bytes("lazy_cms", spec, state, arrays), ZERO)


@pytest.mark.parametrize("round_ticks", [None, R])
def test_blt_int_puts_each_event_in_its_own_round_atomically(round_ticks) -> None:
    """Per-tick and aligned rounds: a batch closing many rounds gives the state of one tick
    at a time (review of issue 20c, F1), and a draw failing in its third round leaves the
    sketch byte-identical to before the call; it then continues as if nothing happened."""
    items, ticks = _stream(5)
    spec = LazySketchSpec(depth=2, width=8, horizon=H, eps=1.0, delta=1e-6,
                          counter="blt_int", round_ticks=round_ticks)
    one = LazyCMS(spec, ZERO)
    for t in range(H):
        m = ticks == t
        one.update_batch(items[m], ticks[m])
    noise = FailsAtDraw()
    sk = LazyCMS(spec, noise)  # type: ignore[arg-type]
    head = ticks < 30
    sk.update_batch(items[head], ticks[head])
    before = sk.to_bytes()
    noise.fail_at = noise.calls + 3
    with pytest.raises(RuntimeError):
        sk.update_batch(items[~head], ticks[~head])
    assert sk.to_bytes() == before
    sk.update_batch(items[~head], ticks[~head])
    zero = LazyCMS(spec, ZERO)
    zero.update_batch(items, ticks)
    assert zero.to_bytes() == one.to_bytes()  # every event in its own tick's round
