"""Typed, validating access to a parsed YAML mapping (the topology file reader).

:func:`worker.config.topology.parse_topology` reads each section of a topology file
through a :class:`SpecReader`, so every validation error has one shape:
``<file>: <field path>: <problem>; <fix>`` (a :class:`~sketches.errors.SpecError`).

Examples
--------
>>> r = SpecReader("demo.yaml", {"release": {"every_ticks": 0, "topic": "out"}})
>>> r.sub("release").name("topic")
'out'
>>> r.sub("release").positive_int("every_ticks")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SpecError: demo.yaml: release.every_ticks: must be an integer >= 1, got 0; ...
>>> r.sub("noise", required=False).choice("kind", ("secure", "fast"), "secure")
'secure'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sketches.errors import SpecError

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
"""Topology and topic names: 1-100 characters from ``A-Z a-z 0-9 . _ -``."""


class SpecReader:
    """Typed access to one YAML mapping; every error names the file, the field path and the fix.

    ``path`` is the dotted path of this mapping inside the file (``""`` at the
    top level); :meth:`sub` descends into a nested section.
    """

    def __init__(self, source: str, data: Any, path: str = "") -> None:
        self.source, self.path = source, path
        if not isinstance(data, dict):
            where = path or "top level"
            raise self.error(where, f"must be a mapping, got {type(data).__name__}",
                             "write `key: value` lines")
        self.data: dict[str, Any] = data

    def error(self, field: str, problem: str, fix: str) -> SpecError:
        return SpecError(f"{self.source}: {field}: {problem}; {fix}")

    def full(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def sub(self, key: str, required: bool = True) -> SpecReader:
        if key not in self.data:
            if required:
                raise self.error(self.full(key), "missing section", f"add a `{key}:` section")
            return SpecReader(self.source, {}, self.full(key))
        return SpecReader(self.source, self.data[key], self.full(key))

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...,
            fix: str = "") -> Any:
        if key not in self.data or self.data[key] is None:
            if default is ...:
                raise self.error(self.full(key), "missing", fix or f"add `{key}:`")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(value, kinds)
        if not ok:
            names = "/".join(k.__name__ for k in kinds)
            raise self.error(self.full(key), f"expected {names}, got {value!r}",
                             fix or f"set `{key}` to a {names}")
        return value

    def name(self, key: str, default: Any = ...) -> str:
        value = self.get(key, str, default)
        if value is not None and not NAME_RE.match(value):
            raise self.error(self.full(key), f"invalid name {value!r}",
                             "use 1-100 characters from A-Z a-z 0-9 . _ -")
        return str(value)

    def positive_int(self, key: str, default: Any = ...) -> int:
        value = self.get(key, int, default)
        if value < 1:
            raise self.error(self.full(key), f"must be an integer >= 1, got {value}",
                             "use a positive whole number")
        return int(value)

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, default)
        if value not in options:
            raise self.error(self.full(key), f"unknown value {value!r}",
                             f"use one of: {', '.join(options)}")
        return str(value)

    def reject_unknown(self, known: Iterable[str]) -> None:
        extra = sorted(set(self.data) - set(known))
        if extra:
            raise self.error(self.full(extra[0]), "unknown key",
                             f"remove it or use one of: {', '.join(sorted(known))}")
