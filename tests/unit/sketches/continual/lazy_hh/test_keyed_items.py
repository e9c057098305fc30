"""Issue 8 items 1 and 7 for LazyHH: keyed PRF item keys, their collision term, delta = guarantee.

- str/bytes items are keyed by SipHash-2-4 under a secret 16-byte key drawn per
  sketch from the noise source and checkpointed (never released);
- ``delta_tilde`` includes the key-collision term ``(N + 2c)^2 / 2^129`` (128-bit identities);
- the release's (and the worker envelope's) ``delta`` is the guarantee
  ``delta_tilde``; the sketch's input delta is ``delta_parameter``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.core.keyed_prf import siphash24, siphash24_scalar
from sketches.core.noise import make_noise
from sketches.core.serialization import state_from_bytes, state_to_bytes
from sketches.errors import SerializationError
from sketches.privacy import delta_tilde

FAST = make_noise("fast", 3, allow_insecure=True)


def _spec(**kw: object) -> LazyHHSpec:
    base = dict(k=2, k_tilde=16, horizon=8, eps=1.0, delta=1e-4, event_horizon=10**6)
    return LazyHHSpec(**(base | kw))  # type: ignore[arg-type]


def test_siphash_matches_reference_vectors_and_scalar() -> None:
    key = bytes(range(16))
    assert int(siphash24(key, [b""])[0]) == 0x726FDB47DD0E0E31  # SipHash paper, vectors.h
    assert int(siphash24(key, [bytes(range(15))])[0]) == 0xA129CA6149BE45E5
    rng = np.random.default_rng(0)
    items = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes()
             for n in rng.integers(0, 40, 300)]
    got = siphash24(key, np.array(items, dtype=object)).tolist()
    assert got == [siphash24_scalar(key, b) for b in items]
    assert siphash24(key, ["a", "a\x00", b"a"]).tolist()[0] != siphash24(key, ["a\x00"])[0]


def test_secret_item_key_is_drawn_per_sketch_checkpointed_and_never_released() -> None:
    a, b = LazyHH(_spec(), FAST), LazyHH(_spec(), FAST)
    assert a._item_key != b._item_key and len(a._item_key) == 16
    a.update_batch(np.array(["x", "y", "x"], dtype=object), ticks=np.zeros(3, np.int64))
    again = LazyHH.from_bytes(a.to_bytes(), FAST)
    assert again._item_key == a._item_key
    keys = siphash24(a._item_key, np.array(["x", "y"], dtype=object))
    assert again._st.cands.keys.tolist() == a._st.cands.keys.tolist() == sorted(keys.tolist())
    a.advance_to(2)
    assert a._item_key.hex() not in json.dumps(a.release())


def test_old_checkpoint_without_item_key_refuses_str_items_and_restores_int_items() -> None:
    for items, ok in ((np.array(["x"], dtype=object), False), (np.array([5]), True)):
        hh = LazyHH(_spec(), FAST)
        hh.update_batch(items, ticks=np.zeros(1, np.int64))
        spec, state, arrays = state_from_bytes("lazy_hh", LazyHHSpec, hh.to_bytes())
        del state["item_key"]
        old = state_to_bytes("lazy_hh", spec, state, arrays)
        if ok:
            assert LazyHH.from_bytes(old, FAST).to_bytes() == LazyHH.from_bytes(old, FAST) \
                .to_bytes()  # a derived key, the same at every restore
        else:
            with pytest.raises(SerializationError, match="predates the keyed item PRF"):
                LazyHH.from_bytes(old, FAST)


def test_delta_tilde_includes_key_collisions_and_delta_is_the_guarantee() -> None:
    spec = _spec(relation="replace", clock="arrival", horizon=64, event_horizon=0, hash_seed=1)
    rel = LazyHH(spec, FAST).release()
    collide = (64 + 2) ** 2 / 2**129  # any collision among N + 2c items (10.4)
    sampler = rel["budget"]["sampler"]["delta"]
    assert rel["delta_tilde"] == delta_tilde(1.0, 1e-4) + collide + sampler
    assert rel["budget"]["item_key_collisions"]["delta"] == collide
    assert rel["delta"] == rel["delta_tilde"] > spec.delta  # item 7: the guarantee
    assert rel["delta_parameter"] == spec.delta
    ar = LazyHH(_spec(unit_cap=3, hash_seed=1), FAST).release()
    sk = ar["budget"]["sketch"]
    sampler = ar["budget"]["sampler"]["delta"]
    assert 0 < sampler < 1e-20  # discrete calibrator: the table sampler's TV (item 9)
    expect = (delta_tilde(sk["eps"], sk["delta"]) + math.exp(sk["eps"]) *
              ar["budget"]["length"]["delta"] + sk["beta"] + (10**6 + 6) ** 2 / 2**129 + sampler)
    assert ar["delta"] == pytest.approx(expect, rel=1e-12)


def test_worker_envelope_states_delta_tilde_as_delta() -> None:
    from worker.config.topology import parse_topology
    from worker.release.envelope import envelope

    topo = parse_topology('''
name: hh
input: {topic: t, partitions: 1, fields: {shard: s, item: i}}
mechanism: {name: lazy_hh, params: {k: 2, k_tilde: 16, event_horizon: 1000}}
privacy: {eps: 1.0, delta: 1.0e-4, epoch_ticks: 8}
release: {every_ticks: 1, topic: out}
dead_letter: {topic: dlq}''')
    payload = LazyHH(_spec(hash_seed=1), FAST).release()
    doc = envelope(topo, "s", epoch=0, seq=0, rounds=0, final=False, payload=payload,
                   published_at_ms=0)
    assert doc["delta"] == doc["delta_tilde"] == payload["delta_tilde"] > 1e-4


def test_sampler_delta_uses_the_composed_sampler_tv_above_one_table() -> None:
    """Issue 20: a sketch sigma above the one-table limit is sampled by two composed
    tables (TV < 2^-102.99 per draw, not 2^-104); sampler_delta must count that."""
    from sketches.continual.lazy_hh.spec import (
        SAMPLER_TV_PER_DRAW,
        derive_params,
        sampler_delta,
        sampler_tv_per_draw,
    )
    from sketches.core.noise_compose import discrete_gaussian_tv

    spec = _spec(unit_cap=3, hash_seed=1)
    params = derive_params(spec, None, None)
    assert sampler_tv_per_draw(params, 50.0) == SAMPLER_TV_PER_DRAW == 2.0**-104
    assert sampler_delta(spec, params, 50.0) == sampler_delta(spec, params)
    big = sampler_tv_per_draw(params, 1e7)
    assert big == discrete_gaussian_tv(1e7) > 2 * SAMPLER_TV_PER_DRAW
    assert sampler_delta(spec, params, 1e7) == pytest.approx(
        sampler_delta(spec, params) * big / SAMPLER_TV_PER_DRAW, rel=1e-12, abs=0)

def _siphash24_spec(key: bytes, data: bytes) -> int:
    """SipHash-2-4 written from the paper's padding rule (test oracle, independent of the
    module's code): the message is padded with zeros to ``8 w - 1`` bytes, then one byte
    ``len(data) mod 256`` is appended, and the ``w`` little-endian words are compressed."""
    mask = (1 << 64) - 1
    pad = (-(len(data) + 1)) % 8
    msg = data + bytes(pad) + bytes([len(data) % 256])
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    def sipround() -> None:
        v[0] = (v[0] + v[1]) & mask; v[1] = rotl(v[1], 13) ^ v[0]; v[0] = rotl(v[0], 32)  # noqa: E702
        v[2] = (v[2] + v[3]) & mask; v[3] = rotl(v[3], 16) ^ v[2]  # noqa: E702
        v[0] = (v[0] + v[3]) & mask; v[3] = rotl(v[3], 21) ^ v[0]  # noqa: E702
        v[2] = (v[2] + v[1]) & mask; v[1] = rotl(v[1], 17) ^ v[2]; v[2] = rotl(v[2], 32)  # noqa: E702

    for i in range(0, len(msg), 8):
        m = int.from_bytes(msg[i:i + 8], "little")
        v[3] ^= m
        sipround()
        sipround()
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        sipround()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


# lengths around every bit of the length byte: 127/128 (bit 7), 255/256/257 (wrap mod 256)
LONG_LENGTHS = (0, 7, 8, 63, 64, 127, 128, 129, 200, 255, 256, 257, 300, 511, 1000)


def test_siphash_length_byte_is_len_mod_256_for_items_of_128_bytes_and_more() -> None:
    """SipHash's last word carries ``len mod 256`` in its top byte. A wrongly masked
    length byte (e.g. ``& 0x7F``) changes every key of an item of 128 bytes or more
    but no key of the short items the other tests use (issue 24 survivor). All three
    implementations (vectorised numpy, scalar reference, compiled LazyHH kernel) must
    equal the oracle above on long ASCII items, including different items of lengths
    ``L`` and ``L + 256`` (only the length byte's wrap tells their paddings apart)."""
    from sketches.continual.lazy_hh import kernel
    from sketches.core.keyed_prf import siphash24_multi

    keys = (bytes(range(16)), bytes(range(100, 116)))
    rng = np.random.default_rng(24)
    items = ["".join(rng.choice(list("abcdefgh0123456789"), n)) for n in LONG_LENGTHS]
    raw = [s.encode() for s in items]
    want = [[_siphash24_spec(k, b) for b in raw] for k in keys]
    assert _siphash24_spec(keys[0], b"") == 0x726FDB47DD0E0E31  # the oracle: paper vector
    assert _siphash24_spec(keys[0], bytes(range(15))) == 0xA129CA6149BE45E5
    assert siphash24_multi(keys, np.array(items, dtype=object)).tolist() == want
    assert [siphash24_scalar(keys[1], b) for b in raw] == want[1]
    enc = kernel.ascii_blob(np.array(items, dtype=object))
    assert enc is not None
    out = np.empty((2, len(items)), dtype=np.uint64)
    words = np.frombuffer(keys[0] + keys[1], dtype="<u8").astype(np.uint64)
    kernel.siphash_pair(*enc, words, out)
    assert out.tolist() == want
