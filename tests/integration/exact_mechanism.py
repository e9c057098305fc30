"""A tiny exact-count "mechanism" for integration tests only (NOT private).

Registered as ``test_exact_counts`` when imported (the worker imports it via
``DPSTREAM_PLUGINS=tests.integration.exact_mechanism``). It keeps exact item
counts per closed tick and releases them, so tests can compare the released
state with the exact counts of every event produced (nothing lost, nothing
counted twice) independently of the DP sketches.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import Capabilities, MechanismEntry, register
from sketches.core.hashing import HashSpec

POISON = "__poison__"
"""An item that makes ``update_batch`` raise (tests of worker.runtime.poison)."""
_HASH = HashSpec(seed=0, depth=1, width=2)


@dataclass(frozen=True)
class ExactSpec:
    horizon: int
    clock: str = "tick"


class ExactCounts:
    name: ClassVar[str] = "test_exact_counts"

    def __init__(self, spec: ExactSpec, noise: Any) -> None:
        self.spec = spec
        self.counts: Counter[str] = Counter()
        self.rounds = 0

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        if ticks is not None and len(ticks) and int(ticks.max()) >= self.spec.horizon:
            raise ValueError("tick beyond horizon")
        if POISON in items.tolist():  # test-only fault: a record that defeats a mechanism
            raise RuntimeError("test poison item")
        _HASH.item_keys(items)  # the real item-hashing path (as a sketch would hash them)
        w = np.ones(len(items)) if weights is None else weights
        for item, x in zip(items.tolist(), w.tolist(), strict=True):
            self.counts[str(item)] += int(x)

    def advance_to(self, tick: int) -> None:
        if tick > self.spec.horizon:
            raise ValueError("advance beyond horizon")
        self.rounds = max(self.rounds, tick)

    def release(self) -> dict[str, Any]:
        return {"kind": "exact_counts", "counts": dict(sorted(self.counts.items())),
                "rounds": self.rounds, "error_bound": None, "lag_bound": 0}

    def to_bytes(self) -> bytes:
        return json.dumps({"h": self.spec.horizon, "c": self.counts, "r": self.rounds}).encode()

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> ExactCounts:
        doc = json.loads(data)
        obj = cls(ExactSpec(doc["h"]), noise)
        obj.counts = Counter(doc["c"])
        obj.rounds = doc["r"]
        return obj

    def memory_bytes(self) -> int:
        return 64 * len(self.counts)


def _spec(params: Mapping[str, Any]) -> ExactSpec:
    return ExactSpec(int(params["horizon"]), str(params.get("clock", "tick")))


register(MechanismEntry("test_exact_counts", _spec, ExactCounts, ExactCounts.from_bytes,
                        continual=True, capabilities=Capabilities(tick_clock=True)))
