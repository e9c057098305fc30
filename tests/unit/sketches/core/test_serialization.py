"""Versioned state container: round trips, exact continuation, refusal of bad bytes."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.continual.plain import CMS, CS, PlainSketchSpec
from sketches.continual.punctual import PunctualCMS, PunctualCS, PunctualSketchSpec
from sketches.core.noise import FastNoise, NoiseSource
from sketches.core.serialization import MAGIC, pack, unpack
from sketches.errors import IncompatibleSpecError, SerializationError
from sketches.privacy import Calibrator, Clock, Relation


class SwitchNoise:
    """Delegates to ``inner``; lets a test swap the stream mid-run (test double)."""

    kind = "fast"

    def __init__(self, inner: NoiseSource) -> None:
        self.inner = inner

    def gaussian(self, sigma: float, size: Any) -> np.ndarray:
        return self.inner.gaussian(sigma, size)

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
        return self.inner.discrete_gaussian(sigma, size)


def _lazy_spec(clock: Clock, cpt: int | None = None) -> LazySketchSpec:
    return LazySketchSpec(depth=3, width=16, horizon=5000, eps=1.0, delta=1e-6,
                          relation=Relation.REPLACE, clock=clock, columns_per_tick=cpt,
                          calibrator=Calibrator.DISCRETE, hash_seed=5)


def _feed(sk: Any, items: np.ndarray, start_tick: int, tick_clock: bool) -> None:
    if tick_clock:
        ticks = start_tick + np.arange(len(items)) // 7
        sk.update_batch(items, ticks=ticks.astype(np.int64))
    else:
        sk.update_batch(items)


LAZY_CASES: list[tuple[type, Clock, int | None]] = [
    (LazyCMS, Clock.ARRIVAL, None),
    (LazyCS, Clock.ARRIVAL, None),
    (LazyCMS, Clock.TICK, 4),
    (LazyCS, Clock.TICK, 16),
]


@pytest.mark.parametrize(("cls", "clock", "cpt"), LAZY_CASES)
def test_lazy_restore_mid_stream_continues_exactly(cls, clock, cpt):
    """Checkpoint mid-round, restore, continue with the same noise stream:
    the restored sketch and the original end in identical states."""
    rng = np.random.default_rng(0)
    a_items, b_items = rng.integers(0, 99, 333), rng.integers(0, 99, 517)
    tick_clock = clock is Clock.TICK
    noise = SwitchNoise(FastNoise(1))
    original = cls(_lazy_spec(clock, cpt), noise)
    _feed(original, a_items, 0, tick_clock)
    blob = original.to_bytes()
    noise.inner = FastNoise(2)
    restored = cls.from_bytes(blob, FastNoise(2), expected_spec=original.spec)
    assert restored.to_bytes() == blob
    _feed(original, b_items, 100, tick_clock)
    _feed(restored, b_items, 100, tick_clock)
    if tick_clock:
        original.advance_to(200)
        restored.advance_to(200)
    assert restored.to_bytes() == original.to_bytes()
    np.testing.assert_array_equal(restored.noisy_matrix(), original.noisy_matrix())
    assert restored.release() == original.release()


@pytest.mark.parametrize("cls", [PunctualCMS, PunctualCS])
def test_punctual_round_trip_and_continue(cls):
    spec = PunctualSketchSpec(depth=2, width=8, horizon=100, eps=0.5, delta=1e-6,
                              calibrator=Calibrator.ANALYTIC)
    noise = SwitchNoise(FastNoise(3))
    a = cls(spec, noise)
    a.update_batch(np.arange(10))
    blob = a.to_bytes()
    noise.inner = FastNoise(4)
    b = cls.from_bytes(blob, FastNoise(4), expected_spec=spec)
    a.update_batch(np.arange(7))
    b.update_batch(np.arange(7))
    assert a.to_bytes() == b.to_bytes()


@pytest.mark.parametrize("cls", [CMS, CS])
def test_plain_round_trip(cls):
    sk = cls(PlainSketchSpec(depth=3, width=32, hash_seed=2))
    sk.update_batch(np.array(["a", "b", "a"]))
    back = cls.from_bytes(sk.to_bytes())
    np.testing.assert_array_equal(back.matrix(), sk.matrix())


def _blob() -> bytes:
    sk = LazyCMS(_lazy_spec(Clock.ARRIVAL), FastNoise(0))
    sk.update_batch(np.arange(50))
    return sk.to_bytes()


CORRUPTIONS: list[tuple[str, Callable[[bytes], bytes], str]] = [
    ("magic", lambda b: b"XXXX" + b[4:], "magic"),
    ("version", lambda b: b[:4] + struct.pack("<H", 99) + b[6:], "version"),
    ("truncated", lambda b: b[:-3], "truncated"),
    ("padded", lambda b: b + b"\0", "truncated or padded"),
    ("header_len", lambda b: b[:6] + struct.pack("<I", 10**9) + b[10:], "header length"),
    ("crc", lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC"),
    ("short", lambda b: b[:5], "preamble"),
    ("json", lambda b: b[:10] + b"}" + b[11:], "JSON"),
]


@pytest.mark.parametrize(("what", "corrupt", "message"), CORRUPTIONS)
def test_corrupt_bytes_raise_serialization_error(what, corrupt, message):
    with pytest.raises(SerializationError, match=message):
        LazyCMS.from_bytes(corrupt(_blob()), FastNoise(0))


def test_mechanism_and_spec_mismatch_refused():
    blob = _blob()
    with pytest.raises(IncompatibleSpecError, match="mechanism"):
        LazyCS.from_bytes(blob, FastNoise(0))
    other = LazySketchSpec(depth=3, width=16, horizon=5000, eps=0.5, delta=1e-6,
                           relation=Relation.REPLACE, clock=Clock.ARRIVAL, hash_seed=5)
    with pytest.raises(IncompatibleSpecError, match="eps"):
        LazyCMS.from_bytes(blob, FastNoise(0), expected_spec=other)


def test_changed_calibration_refused():
    """A checkpoint whose stored sigma differs from today's calibration is refused."""
    header, arrays = unpack(_blob())
    header["state"]["sigma"] *= 1.5
    forged = pack(header["mechanism"], header["spec"], header["state"], arrays)
    with pytest.raises(IncompatibleSpecError, match="sigma"):
        LazyCMS.from_bytes(forged, FastNoise(0))


def test_container_layout_documented():
    blob = pack("x", {"a": 1}, {"b": 2}, {"v": np.array([1.5], dtype=np.float64)})
    assert blob[:4] == MAGIC
    version, hlen = struct.unpack_from("<HI", blob, 4)
    assert version == 1
    assert len(blob) == 10 + hlen + 8
    assert np.frombuffer(blob[-8:], "<f8")[0] == 1.5


def test_state_from_another_item_hash_refused():
    """A checkpoint written by a build with another item hash (v1 had no
    ``hash_algorithm`` key) would put items in other cells mid-epoch: refused."""
    import json

    blob = _blob()
    hlen = struct.unpack_from("<I", blob, 6)[0]
    header = json.loads(blob[10:10 + hlen])
    for value in (None, "dpstream-fmix64-v1"):
        if value is None:
            header.pop("hash_algorithm", None)
        else:
            header["hash_algorithm"] = value
        hj = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        forged = blob[:6] + struct.pack("<I", len(hj)) + hj + blob[10 + hlen:]
        with pytest.raises(SerializationError, match="hash_algorithm"):
            LazyCMS.from_bytes(forged, FastNoise(0))
