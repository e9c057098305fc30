"""The ``dpstream`` command line: one entry point, one module per command group.

:mod:`~worker.cli.main` builds the parser and dispatches; :mod:`~worker.cli.run`
(``run``, ``demo``), :mod:`~worker.cli.plan` (``validate``, ``plan``),
:mod:`~worker.cli.read` (``tail``, ``query``), :mod:`~worker.cli.dashboard`
(``dashboard``) and :mod:`~worker.cli.demo_producer` (``python -m
worker.cli.demo_producer``) parse their flags and call the library modules,
which expose functions, not parsers.

The top layer: may import every other layer.
"""
