"""LazyHH (paper 002, Algorithm 6): continual heavy hitters over a LazySketch.

- :mod:`~sketches.continual.lazy_hh.spec`: ``LazyHHSpec`` (parameters,
  thresholds, the guarantee);
- :mod:`~sketches.continual.lazy_hh.state`: ``LazyHHState`` (the epoch's
  mutable state), the secret hash and item key, the checkpoint layout;
- :mod:`~sketches.continual.lazy_hh.release`: the public ``heavy_hitters``
  payload, post-processing of a ``LazyHHState``;
- :mod:`~sketches.continual.lazy_hh.sketch`: ``LazyHH`` (updates, outputs,
  catch-up of a quiet shard, checkpoints). It imports the three above; none of
  them imports it.

May import what :mod:`sketches.continual` may import.
"""
