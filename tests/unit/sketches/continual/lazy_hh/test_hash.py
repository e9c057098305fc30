"""LazyHH's secret hash (privacy review A3; paper 002 Lemma 6 needs a hash unknown to
the adversary): drawn from the noise source, kept in the checkpoint, never released; a
fixed ``hash_seed`` only with insecure (test) noise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.core.base import lookup
from sketches.core.noise import FastNoise, SecureNoise
from sketches.errors import PrivacyError


def test_str_state_round_trip_and_secret_hash_drawn_from_noise() -> None:
    spec = LazyHHSpec(k=2, k_tilde=8, horizon=200, eps=40.0, delta=1e-3, calibrator="analytic",  # type: ignore[arg-type]
                      relation="replace", clock="arrival")  # type: ignore[arg-type]
    hh = LazyHH(spec, FastNoise(seed=1))
    assert hh.hash.secret and hh.hash == LazyHH(spec, FastNoise(seed=1)).hash
    assert hh.hash != LazyHH(spec, FastNoise(seed=2)).hash
    hh.update_batch(np.array(["a"] * 120 + ["b", b"c"] * 40, dtype=object))
    back = LazyHH.from_bytes(hh.to_bytes(), FastNoise(seed=3))  # hash from the checkpoint
    assert back.hash == hh.hash
    assert back._st.cands is not None and hh._st.cands is not None
    assert back._st.cands.items.tolist() == hh._st.cands.items.tolist()
    assert back.release() == hh.release()


def test_fixed_hash_seed_refused_with_private_noise() -> None:
    """Review A3: a known seed breaks Lemma 6; only insecure (test) noise may carry one."""
    seeded = LazyHHSpec(k=2, k_tilde=8, horizon=200, eps=1.0, delta=1e-3, hash_seed=5,
                        relation="replace", clock="arrival")  # type: ignore[arg-type]
    with pytest.raises(PrivacyError, match="hash_seed"):
        LazyHH(seeded, SecureNoise())
    with pytest.raises(PrivacyError, match="hash_seed"):
        lookup("lazy_hh").build(seeded, SecureNoise())
    test_hh = LazyHH(seeded, FastNoise(seed=1))
    assert not test_hh.hash.secret and test_hh.hash.seed == 5
    with pytest.raises(PrivacyError, match="hash_seed"):  # nor restored under secure noise
        LazyHH.from_bytes(test_hh.to_bytes(), SecureNoise())
    secret = LazyHH(LazyHHSpec(k=2, k_tilde=8, horizon=200, eps=1.0, delta=1e-3,
                               relation="replace", clock="arrival"),  # type: ignore[arg-type]
                    SecureNoise())
    assert secret.hash.secret
    assert LazyHH.from_bytes(secret.to_bytes(), SecureNoise()).hash == secret.hash


def test_release_reveals_nothing_about_the_secret_hash() -> None:
    """Secure noise (sigma ~2.6, margin > 1500: false-failure rate < 1e-100)."""
    spec = LazyHHSpec(k=2, k_tilde=8, horizon=4000, eps=40.0, delta=1e-3,
                      relation="replace", clock="arrival")  # type: ignore[arg-type]
    hh = LazyHH(spec, SecureNoise())
    hh.update_batch(np.array([7] * 3900 + list(range(100))))
    rel = hh.release()
    assert [e["item"] for e in rel["items"]] == [7]  # a real release with content
    text = json.dumps(rel)
    assert "hash" not in text and "seed" not in text and "params" not in text
    words = hh.hash.to_state()["params"]
    numbers = {str(x) for x in words} | {str(x >> 32) for x in words}
    numbers |= {str(x & 0xFFFFFFFF) for x in words}
    assert not any(n in text for n in numbers if len(n) >= 6)
    with pytest.raises(PrivacyError):
        hh.hash.to_public()
