"""Declarative pipeline files (``topologies/*.yaml``): load and validate.

A topology names an input topic and its encoding, the shard key, the
mechanism, the privacy parameters, the release cadence and the dead-letter
topic. It is validated once at start-up; every error names the file, the
field path and the fix. The full format is documented in docs/TOPOLOGY.md.

This module holds the topology's data model and the rules; the typed YAML
access that words every error is :class:`worker.config.spec_reader.SpecReader`.

Examples
--------
>>> text = '''
... name: demo
... input: {topic: events, partitions: 2, fields: {shard: router, item: src}}
... mechanism: {name: lazy_cms, params: {depth: 4, width: 256}}
... privacy: {eps: 1.0, delta: 1.0e-6, tick_ms: 1000, epoch_ticks: 3600}
... release: {every_ticks: 10, topic: demo-releases}
... dead_letter: {topic: demo-dlq}
... '''
>>> t = parse_topology(text, "demo.yaml")
>>> t.input.fields.item, t.privacy.relation, t.noise.kind
('src', 'add_remove', 'secure')
>>> parse_topology(text.replace("eps: 1.0", "eps: -1"), "demo.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SpecError: demo.yaml: privacy.eps: must be a number > 0, got -1; set a positive ...
"""

from __future__ import annotations

import glob
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from sketches.errors import SpecError
from worker.config.spec_reader import SpecReader

RELATIONS = ("add_remove", "replace")
CLOCKS = ("tick", "arrival")
TIMES = ("event", "processing")
ENCODINGS = ("json", "columnar", "arrow")
MANY_EVENT_ENCODINGS = ("columnar", "arrow")
NOISE_KINDS = ("secure", "fast", "zero")
ITEM_TYPES = ("str", "int")


@dataclass(frozen=True)
class FieldPaths:
    """Dotted paths into a JSON event (``a.b`` reads ``event["a"]["b"]``)."""

    shard: str
    item: str
    unit: str | None = None
    weight: str | None = None


@dataclass(frozen=True)
class InputSpec:
    """The input topic, its partition count, encoding and field paths."""

    topic: str
    partitions: int
    encoding: str
    fields: FieldPaths
    max_message_bytes: int = 1_048_576
    item_type: str = "str"
    signed_weights: bool = False
    """Accept negative weights (turnstile deletions, e.g. ``weight: -1``)."""
    item_bits: int | None = None
    """Integer items must lie in ``[0, 2**item_bits)`` (from the mechanism's ``bits``)."""
    max_item_bytes: int = 1024
    """Longest item, shard key or unit in UTF-8 bytes; longer ones are dead-lettered as
    ``oversized_item`` (bounds the work and memory per event)."""
    max_events_per_message: int | None = None
    """``columnar`` / ``arrow``: public bound on events per message. A failure that
    cannot be pinned to one row drops a whole message, so the noise is calibrated for
    a group of this many events (docs/PRIVACY.md §2); longer messages are
    dead-lettered (``too_many_events``). Required in production for these encodings."""

    max_arrow_expansion: int = 64
    """``arrow``: the bytes a message may expand to, as a multiple of its size (at
    least :data:`worker.ingest.arrow.EXPANSION_FLOOR`): the declared uncompressed
    size of its LZ4/ZSTD-compressed buffers, and the text that its dictionary and
    view columns make (values shared by many rows); over it, ``oversized``."""

    budget: tuple[float, float | None] | None = None
    """``input.budget``: the (eps, delta) every topology reading this topic may spend
    together (worker.engine.composition); ``None``: not declared."""

    @property
    def many_events(self) -> bool:
        """Whether one message carries many events (``columnar``, ``arrow``)."""
        return self.encoding in MANY_EVENT_ENCODINGS


@dataclass(frozen=True)
class PrivacySpec:
    """Privacy parameters; ``unit_field`` None means event-level privacy."""

    eps: float
    delta: float
    relation: str = "add_remove"
    clock: str = "tick"
    tick_ms: int = 1000
    epoch_ticks: int = 3600
    epoch_events: int = 0
    unit_field: str | None = None
    unit_cap: int = 1
    time: str = "processing"
    """Tick clock: ``event`` (a record's tick from its Kafka timestamp, LogAppendTime)
    or ``processing`` (the tick in which the worker processes its batch)."""
    allowed_lateness_ms: int = 2000
    """Event time: a tick closes when the wall clock passes its end plus this."""


@dataclass(frozen=True)
class NoiseSpec:
    """Noise source; anything but ``secure`` needs ``allow_insecure_noise: true``."""

    kind: str = "secure"
    allow_insecure_noise: bool = False
    seed: int | None = None


@dataclass(frozen=True)
class ReleaseSpec:
    """Release cadence (every N ticks of the topology's tick clock) and output."""

    every_ticks: int
    topic: str
    partitions: int = 1


@dataclass(frozen=True)
class Topology:
    """A validated topology."""

    name: str
    source: str
    production: bool
    input: InputSpec
    allowed_shards: frozenset[str] | None
    mechanism: str
    mechanism_params: Mapping[str, Any]
    privacy: PrivacySpec
    noise: NoiseSpec
    release: ReleaseSpec
    dead_letter_topic: str
    description: str = ""
    topic_total: Mapping[str, Any] | None = None
    """The composition over every loaded topology reading the same input topic and unit
    (set by :func:`worker.engine.composition.compose`; releases state it)."""

    @property
    def horizon(self) -> int:
        """Rounds per epoch: ticks (tick clock) or events (arrival clock)."""
        if self.privacy.clock == "tick":
            return self.privacy.epoch_ticks
        return self.privacy.epoch_events

    def spec_params(self) -> dict[str, Any]:
        """Parameters handed to ``MechanismEntry.build_spec``.

        The mechanism's own ``params`` plus the privacy fields every continual
        mechanism needs: ``eps``, ``delta``, ``relation``, ``clock``,
        ``horizon`` (rounds per epoch) and ``unit_cap`` (1 for event-level).
        """
        params = dict(self.mechanism_params)
        params.update(
            eps=self.privacy.eps,
            delta=self.privacy.delta,
            relation=self.privacy.relation,
            clock=self.privacy.clock,
            horizon=self.horizon,
            unit_cap=self.calibration_cap,
        )
        rounds = self.release_rounds()
        if rounds is not None:
            params["round_ticks"] = rounds
        return params

    def release_rounds(self) -> int | None:
        """The ``round_ticks`` the worker gives a mechanism with aligned rounds: counter
        rounds of ``release.every_ticks`` ticks, so every release sees all its ticks and
        the counters run one round per release (docs/PRIVACY.md 13.2). None when the
        topology pins ``round_ticks`` or ``columns_per_tick``, on the arrival clock, for
        releases every tick, or when ``every_ticks`` does not divide ``epoch_ticks``."""
        from sketches import lookup, registered

        every = self.release.every_ticks
        if (self.privacy.clock != "tick" or every <= 1
                or self.privacy.epoch_ticks % every
                or "round_ticks" in self.mechanism_params
                or "columns_per_tick" in self.mechanism_params
                or self.mechanism not in registered()
                or not lookup(self.mechanism).capabilities.aligned_rounds):
            return None
        return every

    @property
    def calibration_cap(self) -> int:
        """The group of events the noise is calibrated for (``unit_cap`` of the spec).

        The unit cap (1 for event-level), times ``input.max_events_per_message`` on a
        many-event encoding: a failure that cannot be pinned to a row (not JSON or
        not Arrow, oversized, too many rows, ...) drops every event of its message, so
        one event can change up to that many counted events (docs/PRIVACY.md §2).
        """
        cap = self.privacy.unit_cap if self.privacy.unit_field else 1
        if self.input.many_events and self.input.max_events_per_message is not None:
            cap *= self.input.max_events_per_message
        return cap

    def message_unit_reason(self) -> str | None:
        """Why message-level dead letters are not covered by the noise, or None.

        A many-event encoding without ``input.max_events_per_message`` has no bound
        on the events one message-level failure drops; with a privacy unit, one
        unit can spoil any number of other units' messages (its events past the cap
        still reach the decoder). Production refuses both; other topologies' releases
        say ``private: false`` with this reason.
        """
        if not self.input.many_events:
            return None
        enc = self.input.encoding
        if self.privacy.unit_field:
            return (f"encoding {enc!r} with a privacy unit: one unit's messages can make "
                    "other units' events be dropped by a message-level dead letter, with no "
                    "bound; use encoding: json for user-level privacy")
        if self.input.max_events_per_message is None:
            return (f"encoding {enc!r} without input.max_events_per_message: a message-level "
                    "dead letter drops every event of its message, with no public bound")
        return None


def parse_topology(text: str, source: str = "<string>") -> Topology:
    """Parse and validate one topology from YAML ``text`` (``source`` names it in errors)."""
    try:
        data = _load_yaml(text, source)
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: not valid YAML ({exc}); fix the syntax") from None
    top = SpecReader(source, data)
    top.reject_unknown(["name", "description", "production", "input", "shards", "mechanism",
                        "privacy", "noise", "release", "dead_letter"])
    name = top.name("name")
    production = top.get("production", bool, False)
    inp = _parse_input(top.sub("input"))
    shards = top.sub("shards", required=False)
    shards.reject_unknown(["allowed"])
    allowed_raw = shards.get("allowed", list, None)
    allowed = None
    if allowed_raw is not None:
        # YAML 1.1 scalars that are not strings (NO, on, 010, 1.0) are refused with the
        # fix by _load_yaml; plain decimal integers name the shard of their digits
        if not allowed_raw or not all(isinstance(s, (str, int)) and not isinstance(s, bool)
                                      for s in allowed_raw):
            raise shards.error("shards.allowed", "must be a non-empty list of strings",
                               "list the public shard keys, or drop `allowed` for an open set")
        allowed = frozenset(str(s) for s in allowed_raw)
    mech = top.sub("mechanism")
    mech.reject_unknown(["name", "params"])
    mech_name = mech.get("name", str)
    params = mech.get("params", dict, {})
    bits = params.get("bits")
    if inp.item_type == "int" and isinstance(bits, int) and not isinstance(bits, bool):
        inp = replace(inp, item_bits=bits)  # out-of-domain items become dead letters
    privacy = _parse_privacy(top.sub("privacy"), inp.fields, production)
    if inp.many_events and privacy.clock == "arrival":
        raise top.error("privacy.clock", f"the arrival clock is refused with encoding "
                        f"{inp.encoding!r}: one row can make its whole message fail "
                        "(oversized, too many rows), which removes up to "
                        "max_events_per_message arrivals and moves every later event's "
                        "step, and the epoch boundaries with them (replace assumes the "
                        "length is public)", "use clock: tick (the default)")
    noise = _parse_noise(top.sub("noise", required=False), production)
    rel = top.sub("release")
    rel.reject_unknown(["every_ticks", "topic", "partitions"])
    release = ReleaseSpec(rel.positive_int("every_ticks"), rel.name("topic"),
                          rel.positive_int("partitions", 1))
    dlq = top.sub("dead_letter")
    dlq.reject_unknown(["topic"])
    dlq_topic = dlq.name("topic")
    if len({inp.topic, release.topic, dlq_topic}) < 3:
        raise top.error("release.topic", "input, release and dead-letter topics must differ",
                        "give each its own topic name")
    topo = Topology(name, source, production, inp, allowed, mech_name, params, privacy,
                    noise, release, dlq_topic, top.get("description", str, ""))
    if production:
        _check_production(top, allowed, params, mech_name)
        reason = topo.message_unit_reason()
        if reason is not None:
            raise top.error("input.max_events_per_message" if not privacy.unit_field
                            else "input.encoding", f"{reason}; refused in a production "
                            "topology", "declare input.max_events_per_message (the noise is "
                            "then calibrated for a group of that many events)"
                            if not privacy.unit_field else "use encoding: json")
    return topo


STRING_FIELDS = ("name", "description", "input.topic", "input.encoding", "input.item_type",
                 "input.fields.shard", "input.fields.item", "input.fields.unit",
                 "input.fields.weight", "mechanism.name", "privacy.relation", "privacy.clock",
                 "privacy.time", "noise.kind", "release.topic", "dead_letter.topic")
"""Fields whose value must be a YAML string (checked on the YAML text by :func:`_load_yaml`)."""

_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_DECIMAL = re.compile(r"^(0|-?[1-9][0-9]*)$")
_READ_AS = {"tag:yaml.org,2002:bool": "the boolean", "tag:yaml.org,2002:int": "the integer",
            "tag:yaml.org,2002:float": "the number", _NULL_TAG: "null",
            "tag:yaml.org,2002:timestamp": "the date"}


def _load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``, refusing YAML 1.1 scalars that are not the string written.

    YAML 1.1 (PyYAML) reads the unquoted ``NO``, ``no``, ``off``, ``On``, ``yes``
    as booleans, ``010`` as 8, ``0x1F`` as 31, ``1_000`` as 1000, ``1:30`` as 90 and
    ``2024-01-01`` as a date. Where a string is required (:data:`STRING_FIELDS`, every
    entry of ``shards.allowed``, every key outside ``mechanism.params``) such a scalar
    is a :class:`SpecError` naming the field and the fix (quote it); a shard key may
    still be a plain decimal integer (``7`` is the shard ``"7"``). A boolean key is
    refused everywhere (``on:`` is the key ``True``).

    >>> _load_yaml("shards: {allowed: [r1, NO]}", "t.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketches.errors.SpecError: t.yaml: shards.allowed[1]: YAML 1.1 reads the unquoted NO as \
the boolean False, not the shard key "NO"; quote it: "NO"...
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_strings(loader, node, "", source, set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _not_a_string(loader: yaml.SafeLoader, node: yaml.Node, field: str, source: str,
                  what: str = "string") -> SpecError:
    read = _READ_AS.get(node.tag, node.tag)
    if isinstance(node, yaml.ScalarNode) and node.tag != _NULL_TAG:
        read = f"{read} {loader.construct_object(node, deep=True)!r}"
    text = node.value if isinstance(node, yaml.ScalarNode) else "..."
    return SpecError(f'{source}: {field}: YAML 1.1 reads the unquoted {text} as {read}, not the '
                     f'{what} "{text}"; quote it: "{text}" (YAML 1.1 turns unquoted yes/no/'
                     "on/off into booleans and 010, 0x1F, 1_000, 1:30 into numbers)")


def _check_strings(loader: yaml.SafeLoader, node: yaml.Node, path: str, source: str,
                   seen: set[int]) -> None:
    if id(node) in seen:  # an alias (possibly recursive) is checked once
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, child in enumerate(node.value):
            if path == "shards.allowed":
                ok = isinstance(child, yaml.ScalarNode) and (
                    child.tag == _STR_TAG or (child.tag == _INT_TAG
                                              and _DECIMAL.match(child.value) is not None))
                if not ok:
                    if not isinstance(child, yaml.ScalarNode):
                        raise SpecError(f"{source}: shards.allowed[{i}]: must be a string, got "
                                        "a list or mapping; list the shard keys as strings")
                    raise _not_a_string(loader, child, f"shards.allowed[{i}]", source,
                                        "shard key")
            _check_strings(loader, child, f"{path}[{i}]", source, seen)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    in_params = path == "mechanism.params" or path.startswith("mechanism.params.")
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            raise SpecError(f"{source}: {path or 'top level'}: a key is a list or mapping; "
                            "keys are names")
        if key.tag == _MERGE_TAG:
            _check_strings(loader, value, path, source, seen)
            continue
        full = f"{path}.{key.value}" if path else str(key.value)
        if key.tag != _STR_TAG and (not in_params or key.tag == "tag:yaml.org,2002:bool"):
            raise _not_a_string(loader, key, full, source, "key")
        if (full in STRING_FIELDS and isinstance(value, yaml.ScalarNode)
                and value.tag not in (_STR_TAG, _NULL_TAG)):
            raise _not_a_string(loader, value, full, source)
        _check_strings(loader, value, full, source, seen)


def _check_production(top: SpecReader, allowed: frozenset[str] | None,
                      params: Mapping[str, Any], mechanism: str = "") -> None:
    """Rules only a ``production: true`` topology must obey (docs/TOPOLOGY.md).

    - a closed shard set: with an open set, which shards exist and the tick of
      each shard's first event are public (its state starts with that event);
    - integer noise: float noise (``calibrator: analytic`` or ``paper``, PMG's
      ``laplace``) is open to the floating-point attack (Mironov 2012);
      mechanisms registered ``float_noise_only`` (PAMG) are refused by
      :func:`validate_mechanism_params`.
    """
    if allowed is None:
        raise top.error("shards.allowed", "a production topology needs a closed shard set "
                        "(with an open set, a shard's first-event time is public)",
                        "list every shard key under `shards: {allowed: [r1, r2, ...]}`")
    if unbounded_lattice_cells(mechanism, params):
        raise top.error("mechanism.params.counter", UNBOUNDED_LATTICE
                        + "; refused in a production topology",
                        "use `counter: tree`, or `counter: blt_int` with lazy_hh (its cells are "
                        "bounded by the truncated event_horizon)")
    field = float_noise_field("", params)
    if field == "mechanism.params.noise":  # PMG/PAMG: float Laplace noise
        raise top.error("mechanism.params.noise", "'laplace' draws float noise (floating-point "
                        "attack); refused in a production topology",
                        "use `noise: geometric` (integer noise), or set `production: false`")
    if field == "mechanism.params.counter":
        raise top.error("mechanism.params.counter", f"{params.get('counter')!r} draws continuous "
                        "Gaussian noise (rounded to integers before it meets the data, but the "
                        "float sampler's distance to the ideal Gaussian is not bounded, so its "
                        "guarantee is not certified, docs/PRIVACY.md section 13); refused in a "
                        "production topology",
                        "use `counter: blt_int` (the same factorization with exact integer "
                        "noise on a lattice, certified) or `counter: tree`, or set "
                        "`production: false` to evaluate it (its releases say private: false)")
    if field == "mechanism.params.calibrator":
        calibrator = params.get("calibrator")
        raise top.error("mechanism.params.calibrator", f"{calibrator!r} calibrates float noise "
                        "(floating-point attack); refused in a production topology",
                        "use `calibrator: discrete` (integer noise), or set "
                        "`production: false` to reproduce a paper")


UNBOUNDED_LATTICE = (
    "counter 'blt_int' on lazy_cms/lazy_cs has no enforced per-cell count bound: its "
    "float-error bound assumes at most 2**31 events per cell and epoch (reachable: one "
    "item at 600k events/s for an hour), and a cell past it stops the shard's releases, "
    "which one event can decide (independent review of issue 20)")
"""Why ``blt_int`` under LazyCMS/LazyCS is not certified yet (docs/PRIVACY.md §13.1)."""


def unbounded_lattice_cells(mechanism: str, params: Mapping[str, Any]) -> bool:
    """``counter: blt_int`` on a sketch whose cells have no public, enforced count bound.

    The mechanism declares it (``unbounded_lattice_cells`` capability of its registry
    entry). None does since issue 20b: LazyHH's cells are bounded by its truncated
    ``event_horizon`` (arrival clock: the horizon); LazyCMS/LazyCS clamp each round's
    per-cell increment at ``2**31 // rounds``, a public clamp inside the sensitivity
    analysis (docs/PRIVACY.md 13.1), so no cell passes ``2**31`` and no event can stop
    a shard's releases. Kept as the one place of the rule (the production check and
    ``not_private_reason`` call it) for a mechanism that would declare it.

    >>> unbounded_lattice_cells("lazy_cms", {"counter": "blt_int"})
    False
    >>> unbounded_lattice_cells("lazy_hh", {"counter": "blt_int"})
    False
    """
    from sketches import lookup, registered

    return (params.get("counter") == "blt_int" and mechanism in registered()
            and lookup(mechanism).capabilities.unbounded_lattice_cells)


def float_noise_field(mechanism: str, params: Mapping[str, Any]) -> str | None:
    """The topology field that makes a mechanism draw float noise, or None.

    Float noise (``calibrator: analytic|paper``, PMG's ``noise: laplace``, a
    mechanism registered ``float_noise_only`` such as PAMG) is open to the
    floating-point attack (Mironov 2012); a float factorized counter (``counter:
    blt|sqrt``) rounds its continuous Gaussian before it meets the data, but the
    float sampler's gap to the ideal Gaussian is not bounded (``counter: blt_int``,
    exact integer noise on a lattice, is not float noise). Production
    topologies refuse both, and the releases of any other topology using them
    say ``private: false``: only certified guarantees are stated.

    >>> float_noise_field("lazy_cms", {"calibrator": "analytic"})
    'mechanism.params.calibrator'
    >>> float_noise_field("lazy_cms", {}) is None
    True
    """
    if params.get("noise", "geometric") == "laplace":
        return "mechanism.params.noise"
    if params.get("calibrator", "discrete") != "discrete":
        return "mechanism.params.calibrator"
    if params.get("counter", "tree") not in ("tree", "blt_int"):
        # BLT / sqrt: a continuous Gaussian, rounded before it meets the data (no
        # Mironov leak), but the float sampler's gap to the ideal is not bounded;
        # blt_int is the exact discrete Gaussian on a lattice (certified, PRIVACY.md 13)
        return "mechanism.params.counter"
    if mechanism:
        from sketches import lookup, registered

        if mechanism in registered() and lookup(mechanism).float_noise_only:
            return "mechanism.name"
    return None


def _parse_input(r: SpecReader) -> InputSpec:
    r.reject_unknown(["topic", "partitions", "encoding", "fields", "max_message_bytes",
                      "item_type", "signed_weights", "max_item_bytes", "max_events_per_message",
                      "max_arrow_expansion", "budget"])
    f = r.sub("fields")
    f.reject_unknown(["shard", "item", "unit", "weight"])
    fields_ = FieldPaths(f.get("shard", str), f.get("item", str),
                         f.get("unit", str, None), f.get("weight", str, None))
    encoding = r.choice("encoding", ENCODINGS, "json")
    max_events = (r.positive_int("max_events_per_message")
                  if "max_events_per_message" in r.data else None)
    if max_events is not None and encoding not in MANY_EVENT_ENCODINGS:
        raise r.error("input.max_events_per_message", f"encoding {encoding!r} carries one "
                      "event per message", "remove max_events_per_message (it bounds the "
                      "events of a columnar or arrow message)")
    expansion = r.positive_int("max_arrow_expansion", 64)
    if "max_arrow_expansion" in r.data and encoding != "arrow":
        raise r.error("input.max_arrow_expansion", f"encoding {encoding!r} has no "
                      "compressed or dictionary-encoded columns", "remove max_arrow_expansion "
                      "(it bounds what an arrow message expands to)")
    return InputSpec(r.name("topic"), r.positive_int("partitions"), encoding, fields_,
                     r.positive_int("max_message_bytes", 1_048_576),
                     r.choice("item_type", ITEM_TYPES, "str"),
                     r.get("signed_weights", bool, False),
                     max_item_bytes=r.positive_int("max_item_bytes", 1024),
                     max_events_per_message=max_events, max_arrow_expansion=expansion,
                     budget=_parse_budget(r))


def _parse_budget(r: SpecReader) -> tuple[float, float | None] | None:
    """``input.budget: {eps: E, delta: D}`` (delta optional): the topic's total budget."""
    if "budget" not in r.data:
        return None
    b = r.sub("budget")
    b.reject_unknown(["eps", "delta"])
    eps = b.get("eps", (int, float))
    delta = b.get("delta", (int, float), None)
    if isinstance(eps, bool) or not (math.isfinite(eps) and eps > 0):
        raise b.error("input.budget.eps", f"must be a finite number > 0, got {eps!r}",
                      "set the total eps all topologies on this topic may spend")
    if delta is not None and (isinstance(delta, bool) or not 0 < delta < 1):
        raise b.error("input.budget.delta", f"must be in (0, 1), got {delta!r}",
                      "set the total delta, or leave it out to cap eps only")
    return float(eps), None if delta is None else float(delta)


def _parse_privacy(r: SpecReader, fields_: FieldPaths, production: bool = False) -> PrivacySpec:
    r.reject_unknown(["eps", "delta", "relation", "clock", "tick_ms", "epoch_ticks",
                      "epoch_events", "unit_cap", "time", "allowed_lateness_ms"])
    eps = r.get("eps", (int, float), fix="set a positive epsilon such as 1.0")
    if not eps > 0:
        raise r.error("privacy.eps", f"must be a number > 0, got {eps}",
                      "set a positive epsilon such as 1.0")
    delta = r.get("delta", (int, float), fix="set delta such as 1.0e-6")
    if not 0 < delta < 1:
        raise r.error("privacy.delta", f"must be in (0, 1), got {delta}",
                      "set delta well below 1/stream length, e.g. 1.0e-6")
    relation = r.choice("relation", RELATIONS, "add_remove")
    clock = r.choice("clock", CLOCKS, "tick")
    if clock == "arrival" and relation != "replace":
        raise r.error("privacy.clock", "the arrival clock is only private under relation "
                      "'replace' (stream length public)",
                      "use `clock: tick`, or `relation: replace` if the stream length is public")
    tick_ms = r.positive_int("tick_ms", 1000)
    epoch_ticks = r.positive_int("epoch_ticks", 3600)
    epoch_events = r.get("epoch_events", int, 0)
    if clock == "arrival" and epoch_events < 1:
        raise r.error("privacy.epoch_events", "required (>= 1) with the arrival clock",
                      "set the number of events per epoch, e.g. 1000000")
    unit_cap = r.positive_int("unit_cap", 1)
    time_, lateness = _parse_time(r, clock, production)
    if fields_.unit is None and "unit_cap" in r.data:
        raise r.error("privacy.unit_cap", "a contribution cap needs a privacy unit",
                      "set input.fields.unit (e.g. user_id) or remove unit_cap")
    if fields_.unit == "event":
        raise r.error("input.fields.unit", "the unit field may not be called 'event' (releases "
                      "state `unit: event` for event-level privacy)", "rename the field path")
    if fields_.unit is not None and fields_.weight is not None:
        raise r.error("input.fields.weight", "weights cannot be combined with a privacy unit "
                      "(the cap counts events)", "remove input.fields.weight or the unit")
    return PrivacySpec(float(eps), float(delta), relation, clock, tick_ms, epoch_ticks,
                       int(epoch_events), fields_.unit, unit_cap, time_, lateness)


def _parse_time(r: SpecReader, clock: str, production: bool) -> tuple[str, int]:
    """``privacy.time`` and ``privacy.allowed_lateness_ms`` (docs/TOPOLOGY.md "Event time").

    Event time is the default of production tick-clock topologies and the only
    time they accept: with processing time one extra event can move others
    across a tick boundary (SEMANTICS.md §2).
    """
    default = "event" if production and clock == "tick" else "processing"
    time_ = r.choice("time", TIMES, default)
    lateness = r.get("allowed_lateness_ms", int, 2000)
    if isinstance(lateness, bool) or lateness < 0:
        raise r.error("privacy.allowed_lateness_ms", f"must be an integer >= 0, got {lateness}",
                      "set the longest delay from a record's append to its ingestion, "
                      "e.g. 2000")
    if time_ == "event" and clock != "tick":
        raise r.error("privacy.time", "event time assigns ticks; the arrival clock has none",
                      "use `clock: tick`, or drop `time: event`")
    if production and clock == "tick" and time_ != "event":
        raise r.error("privacy.time", "processing time lets one extra event move others "
                      "across a tick boundary (load-dependent batching); refused in a "
                      "production topology",
                      "use `time: event` (input topics with message.timestamp.type="
                      "LogAppendTime), or set `production: false`")
    return time_, int(lateness)


def _parse_noise(r: SpecReader, production: bool) -> NoiseSpec:
    r.reject_unknown(["kind", "allow_insecure_noise", "seed"])
    kind = r.choice("kind", NOISE_KINDS, "secure")
    allow = r.get("allow_insecure_noise", bool, False)
    seed = r.get("seed", int, None)
    if kind != "secure":
        if production:
            raise r.error("noise.kind", f"{kind!r} noise is refused in a production topology",
                          "use `kind: secure` (or set `production: false` for tests)")
        if not allow:
            raise r.error("noise.kind", f"{kind!r} noise is not differentially private",
                          "use `kind: secure`, or set `allow_insecure_noise: true` for "
                          "benchmarks/tests only")
    elif seed is not None:
        raise r.error("noise.seed", "secure noise cannot be seeded", "remove `seed`")
    return NoiseSpec(kind, allow, seed)


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Load and validate one YAML file; also builds the mechanism spec to validate params."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{p}: cannot read ({exc.strerror}); check the path") from None
    topo = parse_topology(text, str(p))
    validate_mechanism_params(topo)
    return topo


def validate_mechanism_params(topo: Topology) -> None:
    """Build the mechanism spec once so bad ``mechanism.params`` fail at start-up."""
    from sketches import lookup, registered
    from worker.config.mechanism_loader import FAILED

    if topo.mechanism not in registered():
        known = ", ".join(registered()) or "(none registered)"
        broken = f" (modules that failed to import: {FAILED})" if FAILED else ""
        raise SpecError(f"{topo.source}: mechanism.name: unknown mechanism {topo.mechanism!r}; "
                        f"use one of: {known}{broken}")
    entry = lookup(topo.mechanism)
    if topo.production and entry.float_noise_only:
        raise SpecError(
            f"{topo.source}: mechanism.name: {topo.mechanism!r} releases with float noise only "
            "(floating-point attack); refused in a production topology; use `pmg` (geometric "
            "noise) or `lazy_hh` with `privacy.unit_cap` for user-level heavy hitters, or set "
            "`production: false`")
    if not entry.continual and topo.release.every_ticks != topo.privacy.epoch_ticks:
        raise SpecError(
            f"{topo.source}: release.every_ticks: {topo.mechanism!r} is a windowed mechanism "
            "(one release per window = epoch), so the release cadence must equal the epoch; "
            f"set release.every_ticks to privacy.epoch_ticks ({topo.privacy.epoch_ticks})")
    if not entry.continual and topo.privacy.clock != "tick":
        raise SpecError(f"{topo.source}: privacy.clock: windowed mechanisms run on the tick "
                        "clock (a window is one epoch of ticks); set `clock: tick`")
    try:
        spec = entry.build_spec(topo.spec_params())
    except (SpecError, TypeError, ValueError) as exc:
        raise SpecError(f"{topo.source}: mechanism.params: {exc}") from None
    kind = None if entry.capabilities.item_kind is None else entry.capabilities.item_kind(spec)
    if kind is not None and kind != topo.input.item_type:
        raise SpecError(f"{topo.source}: mechanism.params.item_kind: {kind!r} does not match "
                        f"input.item_type {topo.input.item_type!r}; set `item_kind: "
                        f"{topo.input.item_type}` (or change input.item_type)")


def load_topologies(paths: Iterable[str]) -> list[Topology]:
    """Load every ``*.yaml``/``*.yml`` file named or found in the given directories.

    Topology names must be unique; the topics they use must not collide
    (:func:`check_topics`).
    """
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.yaml")) +
                            glob.glob(os.path.join(p, "*.yml")))
        else:
            files.append(p)
    if not files:
        raise SpecError(f"topologies: no topology files found in {list(paths)}; "
                        "pass --topology FILE or set DPSTREAM_TOPOLOGIES")
    topos = [load_topology(f) for f in files]
    seen: dict[str, str] = {}
    for t in topos:
        if t.name in seen:
            raise SpecError(f"{t.source}: name: {t.name!r} already used by {seen[t.name]}; "
                            "give each topology a unique name")
        seen[t.name] = t.source
    check_topics(topos)
    return topos


_ROLE_FIELD = {"input": "input.topic", "release": "release.topic",
               "dead-letter": "dead_letter.topic"}


def check_topics(topos: Iterable[Topology], checkpoint_topic: str | None = None) -> None:
    """Input, release, dead-letter and checkpoint topics are pairwise disjoint across
    every loaded topology, except input topics shared on purpose (they compose,
    :mod:`worker.engine.composition`) and dead-letter topics shared by several topologies
    (operator-only, each record names its topology).

    Releases are public; dead letters and checkpoints hold exact private data, and
    an input is counted: a release topic that is another topology's dead-letter or
    checkpoint topic would publish private records, one that is an input would feed
    releases back as events.

    >>> t = parse_topology(TOPOLOGY_EXAMPLE, "a.yaml")
    >>> check_topics([t], checkpoint_topic="out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketches.errors.SpecError: a.yaml: release.topic: 'out' is also the checkpoint topic ...
    """
    seen: dict[str, tuple[str, Topology | None]] = {}
    if checkpoint_topic is not None:
        seen[checkpoint_topic] = ("checkpoint", None)
    for t in topos:
        for role, topic in (("input", t.input.topic), ("release", t.release.topic),
                            ("dead-letter", t.dead_letter_topic)):
            prev = seen.get(topic)
            if prev is None:
                seen[topic] = (role, t)
                continue
            prev_role, other = prev
            if prev_role == role and role in ("input", "dead-letter"):
                continue  # a shared input composes; a shared dead-letter topic is operator-only
            owner = ("the checkpoint topic (DPSTREAM_CHECKPOINT_TOPIC)" if other is None
                     else f"the {prev_role} topic of {other.name!r} ({other.source})")
            raise SpecError(
                f"{t.source}: {_ROLE_FIELD[role]}: {topic!r} is also {owner}; input, "
                "release, dead-letter and checkpoint topics must be pairwise disjoint "
                "(releases are public, dead letters and checkpoints hold private data); "
                f"give {_ROLE_FIELD[role]} its own topic name")


TOPOLOGY_EXAMPLE = """
name: a
input: {topic: in, partitions: 1, fields: {shard: r, item: i}}
mechanism: {name: lazy_cms}
privacy: {eps: 1.0, delta: 1.0e-6}
release: {every_ticks: 5, topic: out}
dead_letter: {topic: dlq}
"""
"""A minimal topology (doctests)."""
