"""Linear sketches of paper 003: DP Count-Min / Count-Sketch and dyadic structures.

- :mod:`~sketches.windowed.linear.dp_linear`: ``DPCountMin``, ``DPCountSketch``;
- :mod:`~sketches.windowed.linear.dyadic_levels`,
  :mod:`~sketches.windowed.linear.dyadic_window`: the dyadic decomposition of a
  domain and its per-window state;
- :mod:`~sketches.windowed.linear.dp_cms_hh`: hierarchical heavy hitters;
- :mod:`~sketches.windowed.linear.dyadic_quantiles`: quantiles.

May import what :mod:`sketches.windowed` may import.
"""
