"""Configuration: settings, topology files and the mechanism loader.

The bottom layer of the worker: what a deployment is told (``Settings``, one typed
settings object from the environment), what a topology file says (``Topology``,
parsed and validated by :mod:`worker.config.topology` through
:class:`~worker.config.spec_reader.SpecReader`) and which mechanisms exist
(:mod:`worker.config.mechanism_loader`).

May import: ``sketches`` only (no other worker layer, no Kafka client).
"""
