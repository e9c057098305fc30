"""LazyHH catch-up: close many output boundaries of a quiet shard at once (tick clock).

A tick-clock epoch is wall-clock aligned: a shard whose state is created (or
first seen) ``x`` ticks into the epoch must close ``x`` ticks, i.e. about
``x / output_every`` output boundaries, before its first event. Closing them one
by one (:meth:`LazyHH._close <sketches.continual.lazy_hh.sketch.LazyHH>`) costs a Python call and a
length-counter noise call per boundary (~90 ms for a 3,600-tick epoch, per
shard). :func:`catch_up` does the same in a few vectorised calls when the shard
is :func:`quiet`: no candidate, nothing pending (``_carry`` and ``_tick_counts``
zero). Then every skipped output reads nothing from the sketch counters, so

- the sketch (:class:`~sketches.counters.gauss_bm_lazy.LazyNoiseCounters`, which draws
  noise only at reads) takes all the empty rounds in one ``push`` (its state
  does not depend on how rounds are split into calls);
- the length counter (``add_remove`` only) opens the same calls as the
  sequential path, one per boundary, through
  :meth:`~sketches.counters.gauss_bm.ContinualCounters.advance_empty`: the same nodes
  are drawn (one independent draw per node, shared by the outputs reading it),
  in the canonical order, in one noise call. Every skipped output's ``t_hat``
  enters the running maximum of ``t_up = t_hat + E + c`` exactly as
  sequentially (docs/PRIVACY.md 10.3): the output set ``I`` is data-independent
  and none is dropped;
- only the last output's ``_last`` is observable (releases read it), and it is
  computed by the same :meth:`~sketches.continual.lazy_hh.sketch.LazyHH._output`.

So releases, checkpoints and their distribution are those of the sequential
path (bit-identical for a zero or a concatenation-consistent noise source;
``tests/unit/test_lazy_hh_catchup.py``). Whether the fast path runs depends on
the data (was there an event?), which only shows in the processing time:
outside the DP model, like every timing signal (docs/PRIVACY.md 11).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sketches.continual.lazy_hh.sketch import LazyHH

__all__ = ["catch_up", "quiet"]


def quiet(hh: LazyHH) -> bool:
    """True when no output before the next event can read the sketch counters."""
    c = hh._cands
    return ((c is None or c.size == 0) and not bool(hh._carry.any())
            and not bool(hh._tick_counts.any()))


def catch_up(hh: LazyHH, bounds: range) -> None:
    """Close the output boundaries ``bounds`` of a :func:`quiet` shard at once.

    ``bounds``: ``range(boundary + every, stop, every)``, non-empty, within the
    horizon. Atomic w.r.t. a failing noise source (the only draw comes first).
    """
    ends = np.arange(bounds.start, bounds.stop, bounds.step, dtype=np.int64)
    length = None
    if hh._counter is not None:
        t_hats = hh._counter.advance_empty(ends)[:, 0].astype(np.float64)
        length = (float(t_hats[-1]), hh._running_upper(t_hats))  # every skipped output
    hh._close_ticks(int(ends[-1]))  # lazy sketch: empty rounds, no draw
    hh._boundary = int(ends[-1])
    hh._outputs += ends.size - 1  # _output counts the last one
    hh._output(length)
