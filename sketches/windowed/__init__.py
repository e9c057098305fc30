"""Windowed single-release mechanisms: one release per window, one window's budget.

- :mod:`~sketches.windowed.single_release`: the release-once guard they share;
- :mod:`sketches.windowed.misra_gries`: PMG, PAMG and their merge (paper 000);
- :mod:`sketches.windowed.triehh`: TrieHH with counts (paper 001);
- :mod:`sketches.windowed.linear`: DP Count-Min / Count-Sketch, dyadic heavy
  hitters and quantiles (paper 003);
- :mod:`sketches.windowed.fp`: the F_p moment sketch (paper 004).

May import: :mod:`sketches.errors`, ``sketches.core``, ``sketches.privacy``,
``sketches.counters`` and ``sketches.windowed`` itself. Never
``sketches.continual``, never Kafka.
"""
