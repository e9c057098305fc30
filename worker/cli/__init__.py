"""The ``dpstream`` command line: one entry point, one module per command group.

:mod:`~worker.cli.main` builds the parser and dispatches; :mod:`~worker.cli.run`
(``run``, ``demo``), :mod:`~worker.cli.plan` (``validate``, ``plan``),
:mod:`~worker.cli.read` (``tail``, ``query``), :mod:`~worker.cli.dashboard`
(``dashboard``) and :mod:`~worker.cli.demo_producer` (``python -m
worker.cli.demo_producer``) parse their flags and call the library modules,
which expose functions, not parsers.

The top layer: may import every other layer.
"""

import os as _os

if "NUMBA_CACHE_DIR" not in _os.environ:
    # before any kernel module is imported (they compile with cache=True when decorated):
    # numba's cache goes to the per-user state directory (worker.config.state_dir), not
    # next to the installed sources; numba falls back to its own locators if unwritable
    from worker.config.state_dir import default_numba_cache as _cache

    _os.environ["NUMBA_CACHE_DIR"] = _cache()
