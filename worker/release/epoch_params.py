"""The parameters an epoch's noise was drawn with, kept in the checkpoint.

A shard's mechanism is built once per epoch from the topology; its noise (and
its exact unit cap) belong to the parameters of that moment. A topology edited
while a worker was down must therefore never change what a release of the
running epoch *states* (SEMANTICS.md §12). Every shard state
carries an :func:`epoch_params` block; on restore :func:`reconcile` compares
it with the topology:

- **privacy knobs** (``SOFT``: ``eps``, ``delta``, ``relation``, ``unit_cap``
  and the mechanism's own ``params``): the epoch is finished on the
  checkpointed values (the restored mechanism keeps its noise, the cap stays,
  every release of the epoch states them); the new values apply from the next
  epoch. Nothing a reader sees is ever wrong, and releases keep flowing.
- ``closed_shards`` (``shards.allowed`` given when the epoch started): a shard
  state created by its first event under an open set and restored under a
  closed set keeps stating ``covers_shard_presence: false`` until its epoch
  ends (its presence was revealed); a block without the field states false.
- **structural fields** (``HARD``: ``mechanism``, ``clock``, ``time``,
  ``tick_ms``, ``epoch_ticks``, ``epoch_events``, ``unit``, ``noise``,
  ``item_type``, ``max_events_per_message``, ``encoding``, ``every_ticks``): they decide
  which epoch and tick an event belongs to, what kind of noise the epoch draws, (the
  message bound of a many-event encoding) which messages the decoder accepts for noise
  already calibrated, or (the release interval) the units of the epoch's release slots and
  of a LazyCMS's aligned rounds, so the old epoch cannot be finished consistently under the
  new topology. The worker refuses to start with an
  error naming the field, both values and the fix.

Examples
--------
>>> from worker.config.topology import parse_topology
>>> t = parse_topology('''
... name: v
... input: {topic: in, partitions: 1, fields: {shard: r, item: i, unit: u}}
... mechanism: {name: lazy_cms}
... privacy: {eps: 4.0, delta: 1.0e-6, unit_cap: 1}
... release: {every_ticks: 5, topic: out}
... dead_letter: {topic: dlq}''')
>>> old = epoch_params(t)
>>> (old["eps"], old["unit_cap"], old["noise"], old["private"])
(4.0, 1, 'secure', True)
>>> new = epoch_params(t.__class__(**{**t.__dict__, "privacy": t.privacy.__class__(
...     **{**t.privacy.__dict__, "eps": 0.5, "unit_cap": 20})}))
>>> sorted(soft_changes(old, new))
['eps', 'unit_cap']
>>> check_hard(old, dict(new, tick_ms=500), "v.yaml", "r1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SpecError: v.yaml: privacy.tick_ms: changed from 1000 to 500, but shard 'r1' ...
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sketches.errors import SpecError
from worker.config.topology import (
    UNBOUNDED_LATTICE,
    Topology,
    float_noise_field,
    unbounded_lattice_cells,
)

PARAMS_VERSION = 1

SOFT = ("eps", "delta", "relation", "unit_cap", "mechanism_params")
"""Finished on the checkpointed values; the topology's apply from the next epoch."""

HARD: dict[str, str] = {
    "mechanism": "mechanism.name",
    "clock": "privacy.clock",
    "time": "privacy.time",
    "tick_ms": "privacy.tick_ms",
    "epoch_ticks": "privacy.epoch_ticks",
    "epoch_events": "privacy.epoch_events",
    "unit": "input.fields.unit",
    "noise": "noise.kind",
    "item_type": "input.item_type",
    "max_events_per_message": "input.max_events_per_message",
    "encoding": "input.encoding",
    "every_ticks": "release.every_ticks",
}
"""Structural fields (key -> topology field path): a mid-epoch change is refused."""


def epoch_params(topo: Topology) -> dict[str, Any]:
    """The privacy block of a new epoch of ``topo`` (JSON types; stored per shard state)."""
    p = topo.privacy
    return {
        "v": PARAMS_VERSION,
        "mechanism": topo.mechanism,
        "mechanism_params": json.loads(json.dumps(dict(topo.mechanism_params), sort_keys=True,
                                                default=str)),
        "eps": p.eps,
        "delta": p.delta,
        "relation": p.relation,
        "clock": p.clock,
        "time": p.time,
        "tick_ms": p.tick_ms,
        "epoch_ticks": p.epoch_ticks,
        "epoch_events": p.epoch_events,
        # the release slots (and a LazyCMS's aligned rounds) are counted in its units
        "every_ticks": topo.release.every_ticks,
        "unit": p.unit_field or "event",
        "unit_cap": p.unit_cap if p.unit_field else 1,
        "noise": topo.noise.kind,
        # judged as the envelope judges it (worker.release.envelope.not_private_reason)
        "private": not_private_reason(topo.mechanism, topo.noise.kind,
                                     topo.mechanism_params) is None
        and topo.message_unit_reason() is None,
        "item_type": topo.input.item_type,
        # one event is the unit on every encoding: a many-event encoding calibrates its
        # noise for the events one message-level dead letter can drop (docs/PRIVACY.md §2)
        "encoding": topo.input.encoding,
        "max_events_per_message": topo.input.max_events_per_message,
        "calibration_cap": topo.calibration_cap,
        "input_not_private": topo.message_unit_reason(),
        # the shard's state exists from assignment (closed set) rather than from its first
        # event: its releases cover shard presence (a block without it: not covered)
        "closed_shards": topo.allowed_shards is not None,
    }


def soft_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{field: (checkpointed, topology)}`` of the privacy knobs that differ."""
    return {k: (old.get(k), new.get(k)) for k in SOFT if old.get(k) != new.get(k)}


def check_hard(old: dict[str, Any], new: dict[str, Any], source: str, shard: str) -> None:
    """Raise SpecError naming the first structural field that differs, and the fix."""
    for key, path in HARD.items():
        if key in ("encoding", "every_ticks") and key not in old:
            # a block from before issue 19: its calibration had no message bound, which
            # `max_events_per_message` (None then) checks; the envelope judges privacy
            # from the current topology's encoding too (worker.release.envelope.envelope).
            # A block from before issue 20c does not record the release interval.
            continue
        if old.get(key) != new[key]:
            raise SpecError(
                f"{source}: {path}: changed from {old.get(key)!r} to {new[key]!r}, but shard "
                f"{shard!r} has a checkpointed epoch running under the old value, and {path} "
                "decides which tick and epoch an event belongs to (or the epoch's noise), so "
                f"that epoch cannot be finished under the new value; set {path} back to "
                f"{old.get(key)!r}, or give the topology a new `name` to start fresh state "
                "(the old state then publishes no more releases; the new name's releases of "
                "events the old name already released add to their privacy loss: count them "
                "in input.budget, docs/PRIVACY.md section 4.1)")


def topology_at(topo: Topology, params: Mapping[str, Any]) -> Topology:
    """``topo`` with the privacy knobs (``SOFT``) of an epoch's block: the topology an
    epoch that finishes on its checkpointed parameters runs as (its stated guarantee).

    >>> from worker.config.topology import TOPOLOGY_EXAMPLE, parse_topology
    >>> t = parse_topology(TOPOLOGY_EXAMPLE)
    >>> topology_at(t, dict(epoch_params(t), eps=4.0)).privacy.eps
    4.0
    """
    from dataclasses import replace

    p = topo.privacy
    unit_cap = int(params.get("unit_cap", p.unit_cap)) if p.unit_field else p.unit_cap
    privacy = replace(p, eps=float(params.get("eps", p.eps)),
                      delta=float(params.get("delta", p.delta)),
                      relation=str(params.get("relation", p.relation)), unit_cap=unit_cap)
    mech = params.get("mechanism_params")
    return replace(topo, privacy=privacy,
                   mechanism_params=dict(mech) if mech is not None else topo.mechanism_params)


def not_private_reason(mechanism: str, noise: str, mechanism_params: Mapping[str, Any]
                       ) -> str | None:
    """Why releases of an epoch are not differentially private, or None if they are.

    ``fast`` (seeded) and ``zero`` noise give no privacy; float noise
    (:func:`worker.config.topology.float_noise_field`) is open to the floating-point
    attack, so its stated eps does not hold either. Computed from the epoch's
    checkpointed block (:func:`worker.release.epoch_params.epoch_params`), so a state
    written before this rule is judged the same.

    >>> not_private_reason("lazy_cms", "secure", {}) is None
    True
    >>> not_private_reason("lazy_cms", "zero", {})
    'zero noise'
    >>> not_private_reason("lazy_cms", "secure", {"calibrator": "analytic"})  # doctest: +ELLIPSIS
    'float noise (mechanism.params.calibrator: floating-point attack...'
    """
    if noise != "secure":
        return f"{noise} noise"
    if unbounded_lattice_cells(mechanism, mechanism_params):
        return UNBOUNDED_LATTICE
    field = float_noise_field(mechanism, mechanism_params)
    if field == "mechanism.params.counter":
        return (f"float noise ({field}: a continuous Gaussian sampler whose gap to the ideal "
                "is not bounded, so the guarantee is not certified; use counter: tree)")
    if field is not None:
        return (f"float noise ({field}: floating-point attack, Mironov 2012; use integer "
                "noise for a private release)")
    return None
