"""The F_p moment sketch of paper 004 (0 < p <= 1).

- :mod:`~sketches.windowed.fp.fp_projection`: the p-stable projections;
- :mod:`~sketches.windowed.fp.fp_sketch`: ``FpSketch`` (padding, release).

May import what :mod:`sketches.windowed` may import.
"""
