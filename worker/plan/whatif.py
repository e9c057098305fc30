"""``dpstream plan``'s "what if": knob variations of a topology, each planned the same way.

:func:`variations`: eps x2 and /2, width x2 (``width``, ``k_tilde`` or ``k``, whichever
the spec has), epoch length x2 and /2, ``unit_cap`` /2 and, when the spec has a
``counter`` field, each other counter it accepts; :func:`what_if` plans each as a
modified topology. :func:`fix_search` looks for the smallest power-of-two change of
one knob that makes a plan pass a test (the verdict's "fix:" line).

A spec's parameters are read through :func:`sketches.core.base.spec_fields` only.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from collections.abc import Callable, Sequence
from typing import Any

from sketches.core.base import spec_fields
from sketches.errors import DPStreamError
from worker.config.topology import Topology
from worker.plan.analysis import bounds, memory, sigmas, timing
from worker.plan.build import Probe, probe
from worker.release.envelope import is_private

WIDTH_KNOBS = ("width", "k_tilde", "k")
"""The spec field ``width x2`` doubles: the first one the spec has."""

PROBE_MEMORY_LIMIT = 256 << 20
"""A what-if or fix search never builds a variation whose state would exceed this (bytes,
estimated from the topology's own state times the size factor)."""


def _replace_privacy(topo: Topology, **kw: Any) -> Topology:
    return dataclasses.replace(topo, privacy=dataclasses.replace(topo.privacy, **kw))


def _replace_param(topo: Topology, name: str, value: Any) -> Topology:
    return _replace_params(topo, {name: value})


def _replace_params(topo: Topology, values: dict[str, Any]) -> Topology:
    return dataclasses.replace(topo, mechanism_params={**topo.mechanism_params, **values})


def _scale_params(topo: Topology, values: dict[str, int], factor: int) -> Topology:
    return _replace_params(topo, {k: x * factor for k, x in values.items()})


def _scale_params_by(topo: Topology, factor: int, values: dict[str, int]) -> Topology:
    return _scale_params(topo, values, factor)


def _say_scaled(factor: int, values: dict[str, int]) -> str:
    return ", ".join(f"{k} {x} -> {x * factor}" for k, x in values.items()) + f" (x{factor})"


def _int_fields(spec: Any, names: Sequence[str]) -> list[str]:
    have = spec_fields(spec)
    return [n for n in names if n in have and isinstance(have[n], int)
            and not isinstance(have[n], bool)]


def _size_knobs(spec: Any) -> list[tuple[str, ...]]:
    """Size fields the fix search scales: the width knob, and LazyHH's ``k`` with ``k_tilde``."""
    out: list[tuple[str, ...]] = [tuple(_int_fields(spec, WIDTH_KNOBS)[:1])]
    if len(_int_fields(spec, ("k", "k_tilde"))) == 2:
        out.append(("k", "k_tilde"))
    return [k for k in out if k]


def _scale_epoch(topo: Topology, factor: float) -> Topology:
    pr = topo.privacy
    if pr.clock != "tick":
        return _replace_privacy(topo, epoch_events=max(1, round(pr.epoch_events * factor)))
    ticks = max(1, round(pr.epoch_ticks * factor))
    if topo.release.every_ticks == pr.epoch_ticks:  # windowed: one release per epoch
        topo = dataclasses.replace(topo, release=dataclasses.replace(topo.release,
                                                                     every_ticks=ticks))
    return _replace_privacy(topo, epoch_ticks=ticks)


def counter_choices(spec: Any) -> list[Any]:
    """The values a spec's ``counter`` field accepts (an Enum's members or a Literal's)."""
    fields_ = spec_fields(spec)
    if "counter" not in fields_:
        return []
    value = fields_["counter"]
    if isinstance(value, enum.Enum):
        return [m.value for m in type(value)]
    try:
        hint = typing.get_type_hints(type(spec)).get("counter")
    except (NameError, TypeError):
        hint = None
    if typing.get_origin(hint) is typing.Literal:
        return list(typing.get_args(hint))
    return []


Variation = tuple[str, Callable[[Topology], Topology]]


def variations(topo: Topology, spec: Any) -> list[Variation]:
    """Knob variations of ``topo``: eps, width, epoch length and, if any, the counter."""
    pr = topo.privacy
    out: list[Variation] = [
        ("eps x2", lambda t: _replace_privacy(t, eps=pr.eps * 2)),
        ("eps /2", lambda t: _replace_privacy(t, eps=pr.eps / 2)),
    ]
    for knob in _int_fields(spec, WIDTH_KNOBS)[:1]:
        out.append((f"{knob} x2", functools.partial(_scale_params, values={
            knob: spec_fields(spec)[knob]}, factor=2)))
    out.append(("epoch x2", lambda t: _scale_epoch(t, 2)))
    out.append(("epoch /2", lambda t: _scale_epoch(t, 0.5)))
    if pr.unit_field and pr.unit_cap > 1:
        out.append(("unit_cap /2", lambda t: _replace_privacy(t, unit_cap=max(1,
                                                                          pr.unit_cap // 2))))
    current = spec_fields(spec).get("counter")
    current = current.value if isinstance(current, enum.Enum) else current
    for alt in counter_choices(spec):
        if alt != current:
            out.append((f"counter {alt}", functools.partial(_replace_param, name="counter",
                                                             value=alt)))
    return out


def _summary(p: Probe, rate: float | None, shares: Sequence[float],
             shards: int | None = None) -> dict[str, Any]:
    t = timing(p.topology, rate, shards)
    b = bounds(p, t, shares)
    head = (b.get("headline") or {}).get("value")
    if head is not None and "total" in (b.get("epoch_end") or {}):
        head = b["epoch_end"]["total"]  # Misra-Gries: noise plus the undercount n/(k+1)
    s = {"sigma": sigmas(p).get("sketch"), "headline": head,
         "memory_per_shard_bytes": memory(p)["per_shard_bytes"], "epoch_s": t["epoch_s"],
         "epoch_events": t["epoch_events"]}
    if "detection" in b:
        s["detection_s"] = [d["seconds"] for d in b["detection"]]
        s["detection_events"] = [d["events"] for d in b["detection"]]
        s["min_detectable_share"] = b["min_detectable_share"]
    return s


def what_if(topo: Topology, base: Probe, rate: float | None, shares: Sequence[float],
            shards: int | None = None) -> list[dict[str, Any]]:
    """Each knob variation planned like the topology; ``error`` if the variation is invalid."""
    ref = _summary(base, rate, shares, shards)
    rows = []
    base_mem = ref["memory_per_shard_bytes"]
    for label, change in variations(topo, base.spec):
        row: dict[str, Any] = {"label": label}
        if label.endswith(" x2") and base_mem * 2 > PROBE_MEMORY_LIMIT and not label.startswith(
                ("eps", "epoch")):
            row["error"] = (f"not planned: the state would exceed {PROBE_MEMORY_LIMIT >> 20} MiB "
                            "per shard")
            rows.append(row)
            continue
        try:
            varied = probe(change(topo))
            row.update(_summary(varied, rate, shares, shards))
            row["private"] = is_private(varied.envelope)
        except (DPStreamError, TypeError, ValueError) as exc:
            row["error"] = str(exc)
            rows.append(row)
            continue
        if ref["headline"] and row.get("headline") is not None:
            row["headline_ratio"] = row["headline"] / ref["headline"]
        rows.append(row)
    return rows


def fix_search(topo: Topology, shares: Sequence[float], rate: float, shards: int | None,
               ok: Callable[[dict[str, Any]], bool]) -> list[str]:
    """Smallest power-of-two change of eps, epoch length or width that satisfies ``ok``."""
    tips = []
    pr = topo.privacy
    base = probe(topo)
    knobs: list[tuple[str, Callable[[Topology, int], Topology], Callable[[int], str]]] = [
        ("privacy.eps", lambda t, f: _replace_privacy(t, eps=pr.eps * f),
         lambda f: f"{pr.eps:g} -> {pr.eps * f:g} (x{f})"),
        ("privacy.epoch_ticks" if pr.clock == "tick" else "privacy.epoch_events",
         lambda t, f: _scale_epoch(t, f),
         lambda f: (f"{pr.epoch_ticks} -> {pr.epoch_ticks * f} (x{f})" if pr.clock == "tick"
                    else f"{pr.epoch_events} -> {pr.epoch_events * f} (x{f})")),
    ]
    for fields_ in _size_knobs(base.spec):
        values = {k: spec_fields(base.spec)[k] for k in fields_}
        knobs.append(("mechanism.params:",
                      functools.partial(_scale_params_by, values=values),
                      functools.partial(_say_scaled, values=values)))
    if pr.unit_field and pr.unit_cap > 1:
        knobs.append(("privacy.unit_cap", lambda t, f: _replace_privacy(
            t, unit_cap=max(1, pr.unit_cap // f)),
            lambda f: f"{pr.unit_cap} -> {max(1, pr.unit_cap // f)}"))
    base_mem = memory(base)["per_shard_bytes"]
    for path, change, say in knobs:
        for j in range(1, 7):
            f = 2 ** j
            if path.startswith("mechanism.params") and base_mem * f > PROBE_MEMORY_LIMIT:
                break  # never allocate a huge probe: the state grows with the size knobs
            if path == "privacy.unit_cap" and pr.unit_cap // f < 1:
                break
            try:
                s = _summary(probe(change(topo, f)), rate, shares, shards)
            except (DPStreamError, TypeError, ValueError):
                break
            if ok(s):
                tips.append(f"{path} {say(f)}")
                break
    return tips

