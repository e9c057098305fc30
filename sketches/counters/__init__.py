"""Continual counters: the binary tree (Gaussian binary mechanism) and factorization counters.

- :mod:`~sketches.counters.prefix`: ``PrefixCounters``, what every counter shares
  (exact prefix, round clock, horizon, ``advance``/``add_to_current``);
- :mod:`~sketches.counters.gauss_bm`: ``ContinualCounters``, many independent
  tree counters in one numpy state, with cached noise nodes;
- :mod:`~sketches.counters.gauss_bm_lazy`: the lazy noise variant of LazyHH
  (noise drawn only for the counters that are read);
- :mod:`~sketches.counters.gauss_bm_catchup`: the vectorised catch-up over many
  skipped rounds (same nodes, same bytes as round-by-round);
- :mod:`~sketches.counters.factorization`, :mod:`~sketches.counters.factorized`,
  :mod:`~sketches.counters.family`: the BLT and square-root factorization
  counters behind the same interface, calibrated and built by kind;
- :mod:`~sketches.counters.lattice`: the lattice BLT (``counter: blt_int``), the
  BLT factorization with exact discrete Gaussian noise on an integer lattice.

May import: :mod:`sketches.errors`, ``sketches.core``, ``sketches.privacy`` and
``sketches.counters`` itself. Never continual or windowed, never Kafka.
"""
