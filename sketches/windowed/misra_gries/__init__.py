"""The Misra-Gries family (paper 000): PMG, PAMG, merging shards.

- :mod:`~sketches.windowed.misra_gries.mg_state`: the Misra-Gries summary and
  the item codec;
- :mod:`~sketches.windowed.misra_gries.pmg_spec`: ``PMGSpec`` and thresholds;
- :mod:`~sketches.windowed.misra_gries.misra_gries`: ``PMG``;
- :mod:`~sketches.windowed.misra_gries.pamg`: ``PAMG``, ``merge_mg``, ``merge_pamg``.

May import what :mod:`sketches.windowed` may import.
"""
