"""LazyHH (paper 002, Algorithm 6): continual heavy hitters over a LazySketch.

- :mod:`~sketches.continual.lazy_hh.spec`: ``LazyHHSpec`` (parameters,
  thresholds, the guarantee);
- :mod:`~sketches.continual.lazy_hh.sketch`: ``LazyHH`` (update, release,
  checkpoint);
- :mod:`~sketches.continual.lazy_hh.state`, :mod:`~sketches.continual.lazy_hh.release`,
  :mod:`~sketches.continual.lazy_hh.catchup`: the pieces of ``LazyHH``'s work
  (checkpoint state, release evaluation, catch-up over skipped outputs).

May import what :mod:`sketches.continual` may import.
"""
