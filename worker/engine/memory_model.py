"""The memory model: bytes per shard of a topology, worst case per worker, start-up limit.

One function, :func:`shard_bytes`, gives the bytes one shard's state holds; both
``dpstream plan`` (:func:`worker.plan.analysis.memory`) and the worker's start-up check
(:func:`check_memory_limit`, called by :func:`worker.runtime.worker.create_worker`) use it:

Each source is a capability the mechanism declares on its registry entry
(:class:`sketches.core.base.Capabilities`); this module never tests a name:

- ``memory_for_item_bytes(spec, input.max_item_bytes)`` when the peak depends on the
  longest item (PMG: at most ``k`` keys of exact item bytes), the worst case;
- ``memory_model(spec)``: a model of the epoch's *peak* (LazyCMS/LazyCS, LazyHH,
  PunctualCMS/CS, CMS/CS, DP Count-Min/Sketch; each tested against the measured
  state in tests/unit/worker/test_memory_model.py);
- else a fresh mechanism built with zero noise, measured (``memory_bytes()`` at the
  epoch's start: fixed-size mechanisms allocate up front). PAMG and TrieHH grow
  within a window with no fixed bound (their ``state_growth``): with a limit
  set they are refused, since there is no worst case to check (docs/OPERATIONS.md
  "Memory model").

Worst case per worker (:func:`worst_case_bytes`): a worker may own every partition, so
a closed shard set (``shards.allowed``) counts all its shards, and an open set counts
the bound ``DPSTREAM_MAX_OPEN_SHARDS`` (enforced: :class:`worker.ingest.routing.ShardBudget`
dead-letters records of further new shards as ``shard_limit``). With
``DPSTREAM_MEMORY_LIMIT_BYTES`` set (> 0), a topology
set whose worst case exceeds it is refused at start-up with the numbers and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sketches.errors import SpecError
from worker.config.topology import Topology


def shard_bytes(topo: Topology, spec: Any = None, mechanism: Any = None) -> tuple[int, str]:
    """``(bytes per shard, source)`` of ``topo``'s state (see the module docstring).

    ``spec``/``mechanism``: already built ones (``dpstream plan`` passes its probe's);
    otherwise built here as the worker builds them, with zero noise.
    """
    from sketches import ZeroNoise, lookup

    entry = lookup(topo.mechanism)
    caps = entry.capabilities
    if spec is None:
        spec = entry.build_spec(topo.spec_params())
    if caps.memory_for_item_bytes is not None:  # peak depends on the item bound
        return (int(caps.memory_for_item_bytes(spec, topo.input.max_item_bytes)),
                "spec.memory_bytes_for(input.max_item_bytes) (worst case)")
    if caps.memory_model is not None:
        return int(caps.memory_model(spec)), "spec.memory_bytes() (model)"
    if mechanism is None:
        mechanism = entry.build(spec, ZeroNoise())
    growth = unbounded_growth(topo.mechanism)
    source = "mechanism at epoch start (measured)"
    if growth:
        source += f"; grows within a window with {growth}: no worst case"
    return int(mechanism.memory_bytes()), source


def unbounded_growth(mechanism: str) -> str | None:
    """What a state of mechanism ``mechanism`` grows with inside a window when that has no
    fixed bound (its ``state_growth`` capability: PAMG, TrieHH), else None."""
    from sketches import lookup

    growth = lookup(mechanism).capabilities.state_growth
    return str(growth) if growth else None


def worst_case_bytes(topologies: Sequence[Topology], max_open_shards: int
                     ) -> tuple[int, list[str]]:
    """``(total bytes, one line per topology)``: the worst case of one worker owning every
    partition. Open sets count ``max_open_shards`` shards (0: unknown, counted as 0)."""
    total, lines = 0, []
    for t in topologies:
        per, _ = shard_bytes(t)
        closed = t.allowed_shards is not None
        n = len(t.allowed_shards) if t.allowed_shards is not None else max_open_shards
        total += per * n
        kind = "closed shard set" if closed else "open shard set, DPSTREAM_MAX_OPEN_SHARDS"
        lines.append(f"{t.name}: {n:,} shards ({kind}) x {per:,} bytes = {per * n:,} bytes")
    return total, lines


def check_memory_limit(topologies: Sequence[Topology], limit: int,
                       max_open_shards: int) -> None:
    """Refuse (SpecError naming the numbers and the fix) a topology set whose worst-case
    memory exceeds ``limit`` bytes; ``limit`` 0 disables the check."""
    if limit <= 0:
        return
    open_sets = [t.name for t in topologies if t.allowed_shards is None]
    if open_sets and max_open_shards <= 0:
        raise SpecError(
            f"DPSTREAM_MEMORY_LIMIT_BYTES={limit:,}: topology {', '.join(open_sets)} has an "
            "open shard set, so its worst-case memory is unbounded; set "
            "DPSTREAM_MAX_OPEN_SHARDS to the most shards of one open-set topology a worker "
            "may hold (enforced: records of further new shards are dead-lettered "
            "shard_limit), or list them in `shards.allowed`")
    growing = [(t.name, t.mechanism, g) for t in topologies
               if (g := unbounded_growth(t.mechanism))]
    if growing:
        raise SpecError(
            f"DPSTREAM_MEMORY_LIMIT_BYTES={limit:,}: "
            + "; ".join(f"topology {n} ({m}) holds {g}" for n, m, g in growing)
            + ": a state with no worst case cannot be checked against the limit; run it "
            "on a worker without DPSTREAM_MEMORY_LIMIT_BYTES (and bound its event rate per "
            "window), or use a mechanism whose state is bounded (pmg, dp_cms_hh)")
    total, lines = worst_case_bytes(topologies, max_open_shards)
    if total > limit:
        raise SpecError(
            f"DPSTREAM_MEMORY_LIMIT_BYTES={limit:,}: the worst-case state of these topologies "
            f"is {total:,} bytes (one worker owning every partition: {'; '.join(lines)}); "
            "raise the limit, reduce the shards (shards.allowed / DPSTREAM_MAX_OPEN_SHARDS), "
            "or shrink the sketch (mechanism.params width/depth/k; `dpstream plan` prints "
            "the bytes per shard of each setting)")
