"""The step schedule of LazyCMS / LazyCS (paper 002, Algorithm 5), vectorised.

:mod:`sketches.continual.lazy` (module docstring, "Clocks") defines the schedule: step
``s`` first adds its events to ``P``, then pushes ``c = columns_per_tick``
consecutive columns into the GaussBM counters; a round is ``R = w / c`` steps.
This module turns a batch into that schedule without a per-event loop:
:func:`batch_steps` gives the step of every event and the step the batch
closes to (checking clock, ticks and horizon), :func:`split_sums` and
:func:`pushed_columns` say which counts a closed step pushes and which wait
in ``P``.

Vectorised update
-----------------
For an event at step ``s`` hashed to column ``j`` (slot ``q = j // c``), the
column is next pushed at step ``s' = s - (s mod R) + q + (R if q < s mod R)``
(``R = w/c`` steps per round), i.e. in round ``s'//R + 1``. The GaussBM state
(:mod:`sketches.counters.gauss_bm`) is the exact prefix plus one noise value per level,
so a batch only needs, per cell, the sum of the events pushed by a closed step
(added to the prefix) and of those still waiting (kept in ``P``); the rounds
opened by the batch only decide which noise levels are drawn. One ``bincount``
over ``2 d w`` bins does it. The test-suite checks state and releases against
a per-event implementation of Algorithm 5 with explicit trees.

Examples
--------
>>> import numpy as np
>>> from sketches.continual.lazy_spec import LazySketchSpec
>>> spec = LazySketchSpec(depth=1, width=4, horizon=64, eps=1.0, delta=1e-6)
>>> steps, close_to = batch_steps(spec, 0, 3, np.array([0, 0, 2]))
>>> steps.tolist(), close_to
([0, 0, 2], 2)
>>> spec.steps_per_round      # default tick clock: every column pushed per tick
1
>>> slot = np.arange(spec.width) // spec.cpt
>>> pushed_columns(slot, spec.steps_per_round, 0, close_to).tolist()
[True, True, True, True]
>>> pushed_columns(np.arange(4), 4, 1, 3).tolist()   # one column per step, steps 1, 2
[False, True, True, False]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sketches.errors import HorizonExceededError, SpecError
from sketches.privacy import Clock

if TYPE_CHECKING:
    from sketches.continual.lazy_spec import LazySketchSpec
    from sketches.core.hashing import HashSpec

__all__ = ["batch_steps", "pushed_columns", "split_sums"]


def batch_steps(
    spec: LazySketchSpec, steps_closed: int, n: int, ticks: np.ndarray | None,
) -> tuple[np.ndarray, int] | None:
    """Step of each of ``n`` events and the step the batch closes to (None: empty batch).

    Arrival clock: one step per event, all of them closed (``ticks`` must be
    None). Tick clock: the events' ticks (non-decreasing, ``>=`` the open tick
    ``steps_closed``, ``< horizon``); every tick before the last one is closed.

    Raises
    ------
    SpecError
        Ticks missing, given to the arrival clock, of the wrong length,
        decreasing or already closed.
    HorizonExceededError
        The batch runs past the horizon (start a new epoch).
    """
    if spec.clock is Clock.ARRIVAL:
        if ticks is not None:
            raise SpecError("ticks: the arrival clock takes no ticks; pass ticks=None")
        if steps_closed + n > spec.horizon:
            raise HorizonExceededError(
                f"horizon: {steps_closed + n} events exceed the horizon of {spec.horizon}"
                " events; start a new epoch (fresh sketch)"
            )
        steps = np.arange(steps_closed, steps_closed + n, dtype=np.int64)
        close_to = steps_closed + n
    else:
        if ticks is None:
            raise SpecError("ticks: the tick clock needs the tick of every event")
        steps = np.asarray(ticks, dtype=np.int64).reshape(-1)
        if steps.shape[0] != n:
            raise SpecError(f"ticks: length {steps.shape[0]} != number of items {n}")
        if n == 0:
            return None
        if np.any(steps[1:] < steps[:-1]):
            raise SpecError("ticks: must be non-decreasing within a batch; sort the batch")
        if int(steps[0]) < steps_closed:
            raise SpecError(
                f"ticks: tick {int(steps[0])} is already closed (open tick is {steps_closed});"
                " assign late events to the open tick"
            )
        if int(steps[-1]) >= spec.horizon:
            raise HorizonExceededError(
                f"horizon: tick {int(steps[-1])} is past the horizon of {spec.horizon} ticks;"
                " start a new epoch (fresh sketch)"
            )
        close_to = int(steps[-1])
    if n == 0:
        return None
    return steps, close_to


def split_sums(
    spec: LazySketchSpec, hash_spec: HashSpec, steps: np.ndarray, keys: np.ndarray,
    close_to: int, work: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    limbs: np.ndarray,
) -> np.ndarray:
    """Per-cell sums of the batch, split by whether the cell's push happens
    in a closed step: returns ``(2, d, w)``: ``[0]`` pushed, ``[1]`` waiting in P.

    An event at step ``s`` (``pos = s mod R``, ``R`` steps per round) in
    column ``j`` (slot ``j // c``) is pushed at step
    ``s' = s - pos + slot + R [slot < pos]``, i.e. within ``R - 1`` steps.
    So every event with ``s <= close_to - R`` is pushed (one add per row);
    only the tail needs the comparison ``s' >= close_to``, done in column
    units as ``j + w [j < pos c] >= (close_to - s + pos) c``. Aligned rounds
    (``round_ticks``) push every column at the round's last step: the events of the
    open round (``s >= close_to - close_to mod R``) wait, all others are pushed. Row by row, in
    place, one integer ``bincount`` over ``2 d w`` bins (``4 d w`` for CS:
    events with sign -1 go to a second half and are subtracted).

    ``work`` are reusable int64 buffers ``(idx[d, n], tmp[n], signs[d, n] or
    None)`` (signs: Count Sketch only), ``limbs`` a uint64 ``(3, n)`` buffer
    (key limbs and hash scratch); their contents are overwritten.
    """
    d, w, spr, cpt = spec.depth, spec.width, spec.steps_per_round, spec.cpt
    dw = d * w
    n = keys.shape[0]
    aligned = spec.aligned
    if aligned:  # pushed iff its round ended: s < the last round boundary <= close_to
        head = int(np.searchsorted(steps, close_to - close_to % spr, side="left"))
    else:
        head = int(np.searchsorted(steps, close_to - spr, side="right"))
    idx, tmp, weights = work
    lo, hi, hscratch = limbs
    np.bitwise_and(keys, np.uint64(0xFFFFFFFF), out=lo)
    np.right_shift(keys, np.uint64(32), out=hi)
    if head < n and not aligned:
        tail_steps = steps[head:]
        pos = tail_steps % spr
        limit = pos * cpt
        thr = (close_to - tail_steps + pos) * cpt
        waiting = np.empty(n - head, dtype=bool)
    for i in range(d):
        o = idx[i]
        hash_spec.row_into((lo, hi), i, o, None if weights is None else weights[i],
                           scratch=hscratch)
        if head < n and aligned:
            o[head:] += dw  # the open round's events all wait in P
        elif head < n:
            col, t = o[head:], tmp[head:]
            np.subtract(col, limit, out=t)  # < 0  <=>  slot already pushed this round
            t >>= 63
            t *= -w
            t += col
            np.greater_equal(t, thr, out=waiting)
            np.multiply(waiting, dw, out=t)
            col += t
        o += i * w
        if weights is not None:  # CS: negative signs counted in bins shifted by 2dw
            sgn = weights[i]
            sgn *= -dw
            o += sgn
            o += dw
    flat = idx.ravel() if idx.flags.c_contiguous else idx.copy().ravel()
    if weights is None:
        return np.bincount(flat, minlength=2 * dw).reshape(2, d, w)
    sums = np.bincount(flat, minlength=4 * dw).reshape(2, 2, d, w)
    return sums[0] - sums[1]


def pushed_columns(slot: np.ndarray, steps_per_round: int, s0: int, close_to: int) -> np.ndarray:
    """Which pending ``P`` columns a batch closing steps ``s0 .. close_to - 1`` pushes.

    A column with slot ``q`` is pushed at the next step ``>= s0`` serving
    ``q``: ``s0 - pos0 + q + R [q < pos0]`` with ``pos0 = s0 mod R``. Aligned rounds
    give every column the slot ``R - 1`` (pushed at the round's last step).
    """
    pos0 = s0 % steps_per_round
    p_step = s0 - pos0 + slot + steps_per_round * (slot < pos0)
    return p_step < close_to
