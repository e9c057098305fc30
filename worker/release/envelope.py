"""The release envelope (JSON, ``schema_version`` 2), documented in docs/RELEASES.md.

The one module that knows the envelope: it **builds** it (:func:`envelope`,
:func:`envelope_bytes`, the record key :func:`release_key`), **parses** it
(:func:`parse_envelope`, :func:`split_release_key`) and **judges** it (is a
release private: :func:`not_private_reason` when it is built,
:func:`is_private`, :func:`noise_kind`, :func:`privacy_note`,
:func:`privacy_label`, :func:`not_private_warning` when it is read). The
schema version is :data:`SCHEMA_VERSION`, assigned here only.

The worker wraps a mechanism's public ``release()`` payload with the metadata
a reader needs to interpret it. The envelope is encoded once, checkpointed as
bytes and published; after a crash the same bytes are re-published, so a
``(topology, shard, epoch, seq)`` never carries two different payloads.

Examples
--------
A user-level topology: the envelope names the privacy unit and its cap.

>>> from worker.config.topology import parse_topology
>>> topo = parse_topology('''
... name: views
... input: {topic: pageviews, partitions: 4, fields: {shard: tenant, item: page, unit: user}}
... mechanism: {name: lazy_cms}
... privacy: {eps: 0.5, delta: 1.0e-7, unit_cap: 20}
... release: {every_ticks: 60, topic: views-releases}
... dead_letter: {topic: views-dlq}''')
>>> raw = envelope_bytes(topo, "acme", epoch=7, seq=0, rounds=60, final=False,
...                      payload={"kind": "sketch", "lag_bound": 1}, published_at_ms=1)
>>> doc = json.loads(raw)
>>> doc["schema_version"], doc["topology"], doc["epoch"], doc["lag_bound"], doc["tick_ms"]
(2, 'views', 7, 1, 1000)
>>> doc["unit"], doc["unit_cap"], doc["eps"], doc["private"], doc["noise"]
('user', 20, 0.5, True, 'secure')
>>> doc["covers_shard_presence"]   # open shard set: which shards publish is not covered
False

The guarantee stated is the one the epoch's noise was drawn with: ``params``
(the shard state's checkpointed block) wins over the topology.

>>> from worker.release.epoch_params import epoch_params
>>> old = dict(epoch_params(topo), eps=4.0, unit_cap=1)
>>> doc = json.loads(envelope_bytes(topo, "acme", epoch=7, seq=1, rounds=60, final=False,
...                                 payload={}, published_at_ms=1, params=old))
>>> doc["eps"], doc["unit_cap"]
(4.0, 1)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from sketches.errors import SerializationError
from worker.config.topology import (
    Topology,
)
from worker.release.epoch_params import epoch_params, not_private_reason

SCHEMA_VERSION = 2
"""The version this worker writes. Version 2 adds ``private``/``noise`` (a
``fast``/``zero`` release says it is not private), ``time``,
``covers_shard_presence``, and states the epoch's checkpointed privacy parameters."""
KNOWN_VERSIONS = (1, SCHEMA_VERSION)
"""The versions :func:`parse_envelope` reads."""

Envelope = dict[str, Any]
"""A parsed release (the JSON object; fields in docs/RELEASES.md)."""

INSECURE_NOISE = ("fast", "zero")
"""Noise kinds that give no privacy (seeded, or none at all)."""


# ---------------------------------------------------------------- the record key


def release_key(topology: str, shard: str) -> bytes:
    """Kafka key of a release: ``"<topology>/<shard>"`` (one partition per shard).

    >>> release_key("views", "acme")
    b'views/acme'
    """
    return f"{topology}/{shard}".encode()


def split_release_key(key: bytes) -> tuple[str, str]:
    """``(topology, shard)`` of a :func:`release_key` (a topology name has no ``/``).

    >>> split_release_key(release_key("views", "a/b"))
    ('views', 'a/b')
    """
    topology, shard = key.decode().split("/", 1)
    return topology, shard


# ---------------------------------------------------------------- build


def envelope(topo: Topology, shard: str, *, epoch: int, seq: int, rounds: int, final: bool,
             payload: dict[str, Any], published_at_ms: int,
             params: dict[str, Any] | None = None,
             topic_total: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The envelope as a dict (see docs/RELEASES.md for every field).

    ``params`` is the epoch's privacy block (:func:`worker.release.epoch_params.epoch_params`,
    checkpointed with the shard state); the topology's current block when None.
    ``topic_total``: the composition over the topologies reading the same input topic
    (the engine's live view, :class:`worker.engine.composition.Composition`); the one the
    topology was loaded with when None.
    """
    if params is None:
        params = epoch_params(topo)
    p = params
    tick = p["clock"] == "tick"
    # from the checkpointed block itself, so an epoch stored before a rule was added is
    # judged by it too (a block's own "private" can only make a release less private)
    reason = not_private_reason(p["mechanism"], p["noise"], p.get("mechanism_params") or {})
    if reason is None:
        reason = p.get("input_not_private")
    if reason is None:  # the current topology's encoding too: only ever less private
        reason = topo.message_unit_reason()
    if reason is None and not p["private"]:
        reason = f"{p['noise']} noise"
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "topology": topo.name,
        "shard": shard,
        "epoch": epoch,
        "seq": seq,
        "final": final,
        "mechanism": p["mechanism"],
        "private": reason is None,
        "not_private_reason": reason,
        "noise": p["noise"],
        "eps": p["eps"],
        "delta": p["delta"],
        "relation": p["relation"],
        "unit": p["unit"],
        "unit_cap": p["unit_cap"],
        # the unit per encoding: json carries one event per message; columnar/arrow
        # calibrate for the events one message-level dead letter can drop
        "input": {"encoding": p.get("encoding", "json"),
                  "max_events_per_message": p.get("max_events_per_message"),
                  "calibration_cap": p.get("calibration_cap", p["unit_cap"])},
        "clock": p["clock"],
        "time": p.get("time", "processing") if tick else None,
        "tick_ms": p["tick_ms"] if tick else None,
        "rounds": rounds,
        "horizon": p["epoch_ticks"] if tick else p["epoch_events"],
        "item_type": p["item_type"],
        # per epoch: a state created by data under an open set stays "not covered"
        # for the rest of its epoch even if the topology now lists its shards
        "covers_shard_presence": bool(p.get("closed_shards", False)),
        # every loaded topology reading the same input topic and unit spends budget on
        # the same events: their sequential composition (worker.engine.composition)
        "topic_total": (dict(topic_total) if topic_total is not None else
                        None if topo.topic_total is None else dict(topo.topic_total)),
        "published_at": published_at_ms,
        "error_bound": payload.get("error_bound"),
        "lag_bound": payload.get("lag_bound"),
        "payload": payload,
    }
    if "delta_tilde" in payload:  # LazyHH: delta is the guarantee, not the sketch parameter
        doc["delta"] = doc["delta_tilde"] = payload["delta_tilde"]
    elif isinstance(payload.get("sampler"), dict):  # LazyCMS/LazyCS blt_int: + sampler TV term
        from sketches.continual.lazy import add_up  # rounded up: never below the sum

        doc["delta"] = add_up(float(p["delta"]), float(payload["sampler"]["delta"]))
    return doc


def probe(topo: Topology, shard: str = "<probe>") -> tuple[Any, Any, dict[str, Any],
                                                          dict[str, Any]]:
    """``(spec, mechanism, payload, envelope)`` of ``topo`` built as the worker builds it,
    with zero noise and never released: the guarantee its releases state (LazyHH's
    ``delta~`` included). Used by ``dpstream plan`` and the topic composition."""
    from sketches import ZeroNoise, lookup
    from worker.config.topology import validate_mechanism_params

    validate_mechanism_params(topo)
    entry = lookup(topo.mechanism)
    spec = entry.build_spec(topo.spec_params())
    mech = entry.build(spec, ZeroNoise())
    payload = mech.release()
    env = envelope(topo, shard, epoch=0, seq=0, rounds=0, final=False, payload=payload,
                   published_at_ms=0)
    return spec, mech, payload, env


def envelope_bytes(topo: Topology, shard: str, **kw: Any) -> bytes:
    """:func:`envelope` encoded as compact UTF-8 JSON (the bytes that are published)."""
    return json.dumps(envelope(topo, shard, **kw), separators=(",", ":"),
                      allow_nan=False, default=_jsonable).encode()


def _jsonable(obj: Any) -> Any:
    """numpy scalars/arrays inside a payload become plain JSON values."""
    if isinstance(obj, np.ndarray | np.generic):
        return obj.tolist()
    raise TypeError(f"release payload: {type(obj).__name__} is not JSON-serialisable; "
                    "the mechanism's release() must return JSON types")


# ---------------------------------------------------------------- parse


def parse_envelope(raw: bytes) -> Envelope:
    """Decode and validate one release record value (schema versions 1 and 2).

    >>> try:
    ...     parse_envelope(b'{"schema_version": 3}')
    ... except SerializationError as exc:
    ...     print(exc)
    release schema_version 3 is not supported by this reader (knows 1, 2); upgrade dpstream
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SerializationError(f"release is not UTF-8 JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SerializationError("release must be a JSON object (the envelope)")
    version = doc.get("schema_version")
    if version not in KNOWN_VERSIONS:
        raise SerializationError(
            f"release schema_version {version} is not supported by this reader "
            f"(knows {', '.join(map(str, KNOWN_VERSIONS))}); upgrade dpstream")
    for name, kind in (("topology", str), ("shard", str), ("epoch", int), ("seq", int),
                       ("payload", dict)):
        if not isinstance(doc.get(name), kind):
            raise SerializationError(
                f"release field {name!r} is missing or not a {kind.__name__}")
    return doc


# ---------------------------------------------------------------- judge
#
# (:func:`~worker.release.epoch_params.not_private_reason` judges an epoch's checkpointed
# parameter block, so it lives beside that block and is re-exported here.)
#
# One answer for every reader (tail, query, dashboard, plan, Python readers). A
# release states the guarantee its noise has (docs/PRIVACY.md): a release made with
# seeded (``fast``) or ``zero`` noise, or with float noise, is not differentially
# private and says so with ``"private": false`` and a ``not_private_reason``; the
# envelope may also name the noise kind. A reader treats a release as **not
# private** when either says so: ``private`` is ``false``, or the noise kind
# (``noise_kind``, or ``noise`` as a string or as an object with a ``kind``) is
# ``fast`` or ``zero``. An envelope that states neither (written before these
# fields existed) is shown as it claims, private, with its kind unknown.


def noise_kind(env: Mapping[str, Any]) -> str | None:
    """The noise kind an envelope states (``secure``/``fast``/``zero``), or None.

    >>> noise_kind({"noise": {"kind": "fast"}}), noise_kind({"noise_kind": "zero"}), noise_kind({})
    ('fast', 'zero', None)
    """
    for name in ("noise_kind", "noise"):
        value = env.get(name)
        if isinstance(value, Mapping):
            value = value.get("kind")
        if isinstance(value, str):
            return value
    return None


def is_private(env: Mapping[str, Any]) -> bool:
    """False when the envelope says ``private: false`` or names fast/zero noise.

    >>> is_private({"private": False})
    False
    >>> is_private({"noise_kind": "zero"}), is_private({"noise": {"kind": "fast"}})
    (False, False)
    >>> is_private({"noise": "secure"}), is_private({})
    (True, True)
    """
    return env.get("private") is not False and noise_kind(env) not in INSECURE_NOISE


def privacy_note(env: Mapping[str, Any]) -> str:
    """``""`` for a private release, else a loud marker naming the noise kind.

    >>> privacy_note({"private": False, "noise_kind": "zero"})
    'NOT PRIVATE (zero noise)'
    """
    if is_private(env):
        return ""
    why = env.get("not_private_reason")
    if isinstance(why, str) and why:
        return f"NOT PRIVATE ({why})"
    kind = noise_kind(env)
    return "NOT PRIVATE" + (f" ({kind} noise)" if kind else "")


def not_private_warning(env: Mapping[str, Any]) -> str | None:
    """The warning to show before a release made without secure noise, else None.

    >>> not_private_warning({"private": False, "noise": "fast", "eps": 1.0})
    'NOT PRIVATE: made with fast noise; the stated eps 1.0 does not hold'
    >>> not_private_warning({"private": True}) is None
    True
    """
    if env.get("private") is False:
        why = env.get("not_private_reason") or f"{env.get('noise')} noise"
        return f"NOT PRIVATE: made with {why}; the stated eps {env.get('eps')} does not hold"
    return None


def privacy_label(doc: Mapping[str, Any]) -> str:
    """How a reader should label a release's guarantee (``NOT PRIVATE`` first if so).

    >>> privacy_label({"eps": 1.0, "private": True})
    'eps 1.0'
    >>> privacy_label({"eps": 1.0, "private": False, "noise": "zero"})
    'NOT PRIVATE: zero noise, eps 1.0 not provided'
    """
    if doc.get("private") is False:
        why = doc.get("not_private_reason") or f"{doc.get('noise')} noise"
        return f"NOT PRIVATE: {why}, eps {doc.get('eps')} not provided"
    return f"eps {doc.get('eps')}"


# ---------------------------------------------------------------- render


def summarize_release(raw: bytes, top: int = 5, probe: str | None = None) -> str:
    """One human-readable line for a published release (demo output).

    For a sketch release, ``probe`` is an item whose noisy estimate is shown
    (answered from the release alone, like any reader would).

    >>> summarize_release(b'{"topology":"t","shard":"r1","epoch":2,"seq":5,"eps":1.0,'
    ...                   b'"payload":{"kind":"heavy_hitters",'
    ...                   b'"items":[{"item":"a","estimate":9.5}]}}')
    't/r1 epoch 2 seq 5 (eps 1.0): heavy hitters a~9.5'
    """
    try:
        doc = json.loads(raw)
    except ValueError:
        return f"<unreadable release of {len(raw)} bytes>"
    head = (f"{doc.get('topology')}/{doc.get('shard')} epoch {doc.get('epoch')} "
            f"seq {doc.get('seq')} ({privacy_label(doc)})")
    payload = doc.get("payload") or {}
    kind = payload.get("kind")
    if kind == "heavy_hitters":
        items = payload.get("items") or []
        hh = ", ".join(f"{i.get('item')}~{float(i.get('estimate', 0)):.1f}" for i in items[:top])
        if not hh:
            thr = payload.get("threshold")
            hh = "(none above the threshold yet" + (f", {float(thr):.0f})" if thr else ")")
        return f"{head}: heavy hitters {hh}"
    if kind == "sketch":
        matrix = payload.get("matrix") or []
        shape = f"sketch {len(matrix)}x{len(matrix[0]) if matrix else 0}"
        if probe is None:
            return f"{head}: {shape}"
        from sketches import query_release

        est = float(query_release(payload, [probe])[0])
        return f"{head}: {shape}, {probe} ~ {est:.0f}"
    return f"{head}: {kind}"
