"""Shared dyadic window (sketches/windowed/linear/dyadic_window.py) and single-release guard
(sketches/windowed/single_release.py): the refusals and checkpoint errors each mechanism
reported before the code was shared stay word for word the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sketches.core.noise import make_noise
from sketches.core.serialization import pack
from sketches.errors import PrivacyError, SerializationError
from sketches.windowed.linear.dp_cms_hh import DPCMSHeavyHitters, DPCMSHeavyHittersSpec
from sketches.windowed.linear.dp_linear import DPLinearSketch, DPLinearSpec
from sketches.windowed.linear.dyadic_quantiles import DyadicQuantiles, DyadicQuantilesSpec

TAIL = "; a second release after more updates reveals the exact increments"


def zero() -> Any:
    return make_noise("zero", allow_insecure=True)


@pytest.mark.parametrize(("build", "lead"), [
    (lambda: DPCMSHeavyHitters(DPCMSHeavyHittersSpec(bits=8, eps=1, delta=1e-6), zero()),
     "release: already released"),
    (lambda: DyadicQuantiles(DyadicQuantilesSpec(bits=8, eps=1, delta=1e-6), zero()),
     "release: this quantile sketch was already released"),
    (lambda: DPLinearSketch(DPLinearSpec("cms", 2, 8, 1.0, 1e-6), zero()),
     "release: this DP sketch was already released"),
])
def test_single_release_refusals(build: Callable[[], Any], lead: str) -> None:
    m = build()
    m.update_batch(np.array([1, 2, 3]))
    m.release()
    with pytest.raises(PrivacyError) as exc:
        m.release()
    assert str(exc.value) == lead + TAIL
    with pytest.raises(PrivacyError, match=r"^update_batch: this window was already released"):
        m.update_batch(np.array([1]))
    restored = type(m).from_bytes(m.to_bytes(), zero())
    with pytest.raises(PrivacyError):
        restored.release()


@pytest.mark.parametrize("cls", [DPCMSHeavyHitters, DyadicQuantiles])
def test_restore_errors_name_the_mechanism(cls: Any) -> None:
    data = pack(cls.name, {"bits": 8, "eps": 1, "delta": 1e-6}, {"released": False}, {})
    with pytest.raises(SerializationError, match=f"^{cls.name} state: 'counts_0'$"):
        cls.from_bytes(data, None)


def test_restore_keeps_noise_and_counts() -> None:
    spec = DyadicQuantilesSpec(bits=6, eps=1, delta=1e-6, width=4, depth=2)
    q = DyadicQuantiles(spec, make_noise("fast", 5, allow_insecure=True))
    q.update_batch(np.arange(40) % 64)
    r = DyadicQuantiles.from_bytes(q.to_bytes(), None)
    assert r.to_bytes() == q.to_bytes()
    assert r.release() == q.release()
