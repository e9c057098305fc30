"""The keyed PRF of item keys (``sketches/core/keyed_prf.py``): key checks, empty batches and
the collision term (issue 24: mutants of these paths survived the SipHash vector tests)."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.core.keyed_prf import (
    KEY_BYTES,
    collision_bound,
    item_bytes,
    siphash24,
    siphash24_multi,
    siphash24_scalar,
)
from sketches.errors import SpecError

KEY = bytes(range(16))


@pytest.mark.parametrize("bad", [b"", bytes(15), bytes(17), bytes(32), bytearray(16),
                                 "0123456789abcdef", memoryview(bytes(16))])
def test_a_key_that_is_not_16_bytes_is_refused(bad: object) -> None:
    """Only a ``bytes`` key of exactly 16 bytes keys the PRF: a shorter or longer one would
    silently change (or weaken) the key, a str/bytearray/memoryview is not the checkpointed
    secret's type. The check runs for every key of ``siphash24_multi``."""
    assert KEY_BYTES == 16
    with pytest.raises(SpecError, match="key"):
        siphash24(bad, ["a"])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="key"):
        siphash24_multi([KEY, bad], ["a"])  # type: ignore[list-item]
    with pytest.raises(SpecError, match="key"):
        siphash24_multi([KEY, bad], [])  # type: ignore[list-item]


@pytest.mark.parametrize("n_keys", [1, 3])
def test_an_empty_batch_gives_an_empty_uint64_row_per_key(n_keys: int) -> None:
    """No items: ``uint64[len(keys), 0]``, the shape and dtype of a non-empty answer."""
    keys = [bytes([i]) * 16 for i in range(n_keys)]
    out = siphash24_multi(keys, [])
    assert out.shape == (n_keys, 0) and out.dtype == np.uint64
    one = siphash24(KEY, np.array([], dtype=object))
    assert one.shape == (0,) and one.dtype == np.uint64
    full = siphash24_multi(keys, ["x"])
    assert full.shape == (n_keys, 1) and full.dtype == out.dtype


def test_collision_bound_is_n_choose_2_over_2_64() -> None:
    """``P[any two of n distinct items share a 64-bit key] <= n (n - 1) / 2**65`` (pairs times
    ``2**-64``): 0 for no item or one item (nothing to collide), never negative."""
    assert collision_bound(0) == 0.0 and collision_bound(1) == 0.0
    assert collision_bound(-5) == 0.0
    assert collision_bound(2) == 2.0**-64
    assert collision_bound(3) == 3 * 2.0**-64
    assert collision_bound(10**7) == 10**7 * (10**7 - 1) / 2.0**65


def test_scalar_reference_uses_the_whole_16_byte_key() -> None:
    """Every key byte changes the reference hash (k0 = bytes 0-7, k1 = bytes 8-15, little
    endian), and the vectorised hash agrees for each changed key."""
    base = siphash24_scalar(KEY, b"abc")
    for i in range(16):
        key = bytearray(KEY)
        key[i] ^= 0x01
        h = siphash24_scalar(bytes(key), b"abc")
        assert h != base
        assert h == int(siphash24(bytes(key), [b"abc"])[0])


def test_an_items_array_of_any_shape_is_read_in_c_order() -> None:
    """``item_bytes`` (and so ``siphash24``) reads a numpy batch flattened in C order, for
    object, str (``U``) and bytes (``S``) arrays alike: one key per item, as for the 1-D
    batch of the same items."""
    flat = ["a", "bc", "d\u00e9", "", "xyz", "q"]
    for arr in (np.array(flat, dtype=object).reshape(2, 3),
                np.array(flat).reshape(3, 2),
                np.array([s.encode() for s in flat]).reshape(2, 3)):
        assert item_bytes(arr) == [s.encode() for s in flat]
        assert siphash24(KEY, arr).tolist() == siphash24(KEY, flat).tolist()


@pytest.mark.parametrize("arr", [np.array([1, 2], dtype=np.uint64), np.array([1, 2]),
                                 np.array([1.5]), np.array([True])])
def test_a_numeric_items_array_is_refused_with_a_spec_error(arr: np.ndarray) -> None:
    """Only str and bytes items have a key: a numeric array (unsigned, signed, float, bool)
    is refused with a SpecError naming the items, not hashed and not an AttributeError."""
    with pytest.raises(SpecError, match="items"):
        item_bytes(arr)
    with pytest.raises(SpecError, match="items"):
        siphash24(KEY, arr)
