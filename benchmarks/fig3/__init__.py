"""Paper 002, Figure 3: the code behind ``benchmarks/bench_fig3.py`` (its command line).

Modules: :mod:`.model` (memory model), :mod:`.streams` (Zipf streams, top
items, ARE), :mod:`.runs` (sketch construction, one ARE or throughput run),
:mod:`.panels` (configuration, one function per panel), :mod:`.plot` (PNG) and
:mod:`.report` (markdown tables, the paper's claims checked, notes).
"""
