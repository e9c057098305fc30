"""One way to compile a kernel: ``numba.njit(cache=True, nogil=True)``.

Every compiled module (:mod:`sketches.core.candidates_kernel`,
:mod:`sketches.core.noise_kernel`, :mod:`sketches.counters.lazy_kernel`,
:mod:`sketches.continual.lazy_hh.kernel`) decorates its kernels with :func:`njit`.
Kernels are compiled on first use and cached on disk next to their module; where
no cache location is writable (numba then refuses ``cache=True``, e.g. a read-only
root filesystem without ``NUMBA_CACHE_DIR``) they are compiled once per process.
``nogil``: the worker's threads (restores run in one) are not held up by a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

__all__ = ["njit"]

_F = TypeVar("_F", bound=Callable[..., Any])


def njit(fn: _F) -> _F:
    """``numba.njit(cache=True, nogil=True)(fn)``, or without the cache when no cache
    location is writable (compiled once per process instead)."""
    try:
        return cast(_F, numba.njit(cache=True, nogil=True)(fn))
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return cast(_F, numba.njit(nogil=True)(fn))
