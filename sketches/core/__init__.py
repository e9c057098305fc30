"""Foundations every mechanism shares: no privacy reasoning lives here.

- :mod:`~sketches.core.base`: the ``Mechanism`` protocol and the registry the
  worker builds mechanisms from;
- :mod:`~sketches.core.noise`, :mod:`~sketches.core.noise_tables`: the noise
  sources (secure, seeded, zero) and the exact integer-sampler tables;
- :mod:`~sketches.core.hashing`, :mod:`~sketches.core.hash_family`,
  :mod:`~sketches.core.hash_keys`, :mod:`~sketches.core.keyed_prf`: the public
  hash spec, item keys and the keyed PRF;
- :mod:`~sketches.core.serialization`: the versioned binary checkpoint format;
- :mod:`~sketches.core.release`: ``query_release``, point queries on a published
  sketch matrix of either family (what readers use; post-processing);
- :mod:`~sketches.core.candidates`: the sorted candidate-item set shared by
  LazyHH and the Misra-Gries family, and the item encoding of checkpoints.

May import: numpy, xxhash, the standard library, :mod:`sketches.errors` and
``sketches.core`` itself. Never a layer above (privacy, counters, continual,
windowed), never Kafka. The import rule is enforced by
``tests/unit/sketches/test_import_rule.py`` (docs/ARCHITECTURE.md).
"""
