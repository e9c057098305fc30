"""Import every mechanism module so it registers itself in ``sketches.core.base``.

The worker never names a mechanism class: a topology's ``mechanism.name`` is
looked up in the registry. Modules that are not available are skipped with a
debug log, so a deployment without an optional mechanism still starts.
Extra modules (e.g. a site's own mechanisms) come from ``Settings.plugins``.

Examples
--------
>>> loaded = load_mechanisms()
>>> isinstance(loaded, list)
True
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)

MECHANISM_MODULES: tuple[str, ...] = (
    "sketches.continual.lazy",
    "sketches.continual.lazy_hh.sketch",
    "sketches.continual.punctual",
    "sketches.continual.plain",
    "sketches.windowed.misra_gries.misra_gries",
    "sketches.windowed.misra_gries.pamg",
    "sketches.windowed.triehh.triehh",
    "sketches.windowed.linear.dp_linear",
    "sketches.windowed.linear.dp_cms_hh",
    "sketches.windowed.linear.dyadic_quantiles",
    "sketches.windowed.fp.fp_sketch",
)


FAILED: dict[str, str] = {}
"""Built-in mechanism modules that failed to import, with the error."""


def load_mechanisms(extra: Iterable[str] = ()) -> list[str]:
    """Import the mechanism modules (and ``extra`` plugins); return those imported.

    A missing built-in module is skipped (debug log); one that fails to import
    is skipped with a warning and remembered in :data:`FAILED` (a topology
    that names one of its mechanisms then fails validation, showing the
    error). A missing plugin raises: the operator asked for it explicitly.
    """
    loaded = []
    for name in MECHANISM_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                log.debug("mechanism module %s not available; skipped", name)
            else:
                FAILED[name] = repr(exc)
                log.warning("mechanism module %s failed to import (%r); skipped", name, exc)
            continue
        except ImportError as exc:
            FAILED[name] = repr(exc)
            log.warning("mechanism module %s failed to import (%r); skipped", name, exc)
            continue
        loaded.append(name)
    for name in extra:
        importlib.import_module(name)
        loaded.append(name)
    return loaded
