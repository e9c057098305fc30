"""dpstream sketches: differentially private streaming mechanisms in pure numpy.

Every mechanism is a frozen spec dataclass plus private numpy state, with one
small interface (``update_batch``, ``release``, ``to_bytes``/``from_bytes``,
``memory_bytes``) and a registry entry (:mod:`sketches.base`). Noise is always
injected (:mod:`sketches.noise`); privacy calibration and error bounds live in
:mod:`sketches.privacy`. Nothing here imports Kafka.

Examples
--------
>>> import numpy as np
>>> from sketches import LazyCMS, LazySketchSpec, ZeroNoise
>>> spec = LazySketchSpec(depth=2, width=8, horizon=64, eps=1.0, delta=1e-6,
...                       relation="replace", clock="arrival", hash_seed=7)
>>> sketch = LazyCMS(spec, ZeroNoise())
>>> sketch.update_batch(np.array([5] * 16))
>>> est = float(sketch.query(np.array([5]))[0])   # zero noise: exact up to the lazy lag
>>> 16 - spec.width <= est <= 16
True
"""

from sketches.base import Mechanism, MechanismEntry, lookup, register, registered
from sketches.dp_cms_hh import DPCMSHeavyHitters, DPCMSHeavyHittersSpec
from sketches.dp_linear import DPCountMin, DPCountSketch, DPLinearSpec
from sketches.dyadic_quantiles import DyadicQuantiles, DyadicQuantilesSpec
from sketches.errors import (
    DPStreamError,
    HorizonExceededError,
    IncompatibleSpecError,
    PrivacyError,
    SerializationError,
    SpecError,
)
from sketches.fp_sketch import FpSketch, FpSketchSpec, pad_for_eps
from sketches.gauss_bm import ContinualCounters
from sketches.hashing import HashSpec
from sketches.lazy import LazyCMS, LazyCS
from sketches.lazy_hh import LazyHH
from sketches.lazy_hh_spec import LazyHHSpec
from sketches.lazy_spec import LazySketchSpec
from sketches.misra_gries import PMG, PMGSpec
from sketches.noise import FastNoise, NoiseSource, SecureNoise, ZeroNoise, make_noise
from sketches.pamg import PAMG, PAMGSpec, merge_mg, merge_pamg
from sketches.plain import CMS, CS, PlainSketchSpec
from sketches.punctual import PunctualCMS, PunctualCS, PunctualSketchSpec
from sketches.release import query_release
from sketches.triehh import TrieHH, TrieHHSpec

__all__ = [
    "CMS",
    "CS",
    "PAMG",
    "PMG",
    "ContinualCounters",
    "DPCMSHeavyHitters",
    "DPCMSHeavyHittersSpec",
    "DPCountMin",
    "DPCountSketch",
    "DPLinearSpec",
    "DPStreamError",
    "DyadicQuantiles",
    "DyadicQuantilesSpec",
    "FastNoise",
    "FpSketch",
    "FpSketchSpec",
    "HashSpec",
    "HorizonExceededError",
    "IncompatibleSpecError",
    "LazyCMS",
    "LazyCS",
    "LazyHH",
    "LazyHHSpec",
    "LazySketchSpec",
    "Mechanism",
    "MechanismEntry",
    "NoiseSource",
    "PAMGSpec",
    "PMGSpec",
    "PlainSketchSpec",
    "PrivacyError",
    "PunctualCMS",
    "PunctualCS",
    "PunctualSketchSpec",
    "SecureNoise",
    "SerializationError",
    "SpecError",
    "TrieHH",
    "TrieHHSpec",
    "ZeroNoise",
    "lookup",
    "make_noise",
    "merge_mg",
    "merge_pamg",
    "pad_for_eps",
    "query_release",
    "register",
    "registered",
]
