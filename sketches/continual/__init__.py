"""Continual-observation sketches (paper 002): one release per output time, one epoch's budget.

- :mod:`~sketches.continual.lazy_spec`, :mod:`~sketches.continual.lazy_schedule`,
  :mod:`~sketches.continual.lazy`: LazySketch (``LazyCMS``/``LazyCS``);
- :mod:`~sketches.continual.punctual`: the punctual baseline sketches;
- :mod:`~sketches.continual.plain`: the non-private CMS/CS baselines;
- :mod:`~sketches.core.release`: ``query_release`` (estimates from a
  published sketch payload; what readers use);
- :mod:`sketches.continual.lazy_hh`: LazyHH, its own small package.

May import: :mod:`sketches.errors`, ``sketches.core``, ``sketches.privacy``,
``sketches.counters`` and ``sketches.continual`` itself. Never
``sketches.windowed`` (the two mechanism families are independent), never Kafka.
"""
