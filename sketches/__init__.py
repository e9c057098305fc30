"""dpstream sketches: differentially private streaming mechanisms in pure numpy.

Every mechanism is a frozen spec dataclass plus private numpy state, with one
small interface (``update_batch``, ``release``, ``to_bytes``/``from_bytes``,
``memory_bytes``) and a registry entry (:mod:`sketches.core.base`). Noise is always
injected (:mod:`sketches.core.noise`); privacy calibration and error bounds live in
:mod:`sketches.privacy`. Nothing here imports Kafka.

Subpackages by family (layers, bottom to top; docs/ARCHITECTURE.md): ``core``
(with :mod:`sketches.errors`), ``privacy``, ``counters``, then ``continual`` and
``windowed``, which never import each other. This module is the public API.

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

from sketches.continual.lazy import LazyCMS, LazyCS
from sketches.continual.lazy_hh.sketch import LazyHH
from sketches.continual.lazy_hh.spec import LazyHHSpec
from sketches.continual.lazy_spec import LazySketchSpec
from sketches.continual.plain import CMS, CS, PlainSketchSpec
from sketches.continual.punctual import PunctualCMS, PunctualCS, PunctualSketchSpec
from sketches.core.base import Mechanism, MechanismEntry, lookup, register, registered
from sketches.core.hashing import HashSpec
from sketches.core.noise import FastNoise, NoiseSource, SecureNoise, ZeroNoise, make_noise
from sketches.core.release import query_release
from sketches.counters.gauss_bm import ContinualCounters
from sketches.errors import (
    DPStreamError,
    HorizonExceededError,
    IncompatibleSpecError,
    PrivacyError,
    SerializationError,
    SpecError,
)
from sketches.windowed.fp.fp_sketch import FpSketch, FpSketchSpec, pad_for_eps
from sketches.windowed.linear.dp_cms_hh import DPCMSHeavyHitters, DPCMSHeavyHittersSpec
from sketches.windowed.linear.dp_linear import DPCountMin, DPCountSketch, DPLinearSpec
from sketches.windowed.linear.dyadic_quantiles import DyadicQuantiles, DyadicQuantilesSpec
from sketches.windowed.misra_gries.misra_gries import PMG, PMGSpec
from sketches.windowed.misra_gries.pamg import PAMG, PAMGSpec, merge_mg, merge_pamg
from sketches.windowed.triehh.triehh import TrieHH, TrieHHSpec

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
