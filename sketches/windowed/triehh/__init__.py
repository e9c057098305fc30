"""TrieHH with counts (paper 001): windowed heavy hitters by prefix descent.

- :mod:`~sketches.windowed.triehh.triehh`: ``TrieHH`` and its spec;
- :mod:`~sketches.windowed.triehh.accounting`: its privacy accounting.

May import what :mod:`sketches.windowed` may import (it reuses the Misra-Gries
summary of :mod:`sketches.windowed.misra_gries`).
"""
