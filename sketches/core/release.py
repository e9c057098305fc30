"""Point queries on a sketch matrix (Algorithm 4), from a release payload alone.

A sketch payload (see docs/ARCHITECTURE.md, "Release payloads") carries the
noisy ``d x w`` matrix, the public hash spec and the estimator. Algorithm 4 of
paper 002 (CO Sketch Query) answers a point query for item ``x`` as

- CMS (``estimator="min"``): ``min_i M[i, h_i(x)]``
- CS (``estimator="median"``): ``median_i g_i(x) * M[i, h_i(x)]``

The hash functions are recomputed from the public hash spec of the payload
(:meth:`sketches.core.hashing.HashSpec.from_public`: algorithm ``dpstream-msv-v2``,
``version`` 2, seed expansion checked against the listed row parameters); a
payload with another hash algorithm or version raises SpecError rather than
answering from the wrong cells. Reading a release is post-processing, so it
costs no privacy budget.

Examples
--------
>>> import numpy as np
>>> from sketches.core.hashing import HashSpec
>>> spec = HashSpec(seed=1, depth=2, width=4)
>>> m = np.zeros((2, 4)); b = spec.buckets(spec.item_keys([42]))
>>> m[0, b[0, 0]] = 5; m[1, b[1, 0]] = 7
>>> payload = {"kind": "sketch", "estimator": "min", "hash": spec.to_public(),
...            "matrix": m.tolist()}
>>> query_release(payload, [42]).tolist()
[5.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sketches.core.hashing import HashSpec
from sketches.errors import SpecError

__all__ = ["ESTIMATORS", "estimate", "query_release"]

ESTIMATORS = ("min", "median")


def estimate(
    matrix: np.ndarray, hash_spec: HashSpec, items: np.ndarray | Sequence[Any], estimator: str
) -> np.ndarray:
    """Algorithm 4 on a ``d x w`` matrix.

    Parameters
    ----------
    matrix : numpy.ndarray, shape (depth, width)
    hash_spec : HashSpec
    items : array-like of int / str / bytes
    estimator : {"min", "median"}
        ``min`` for CMS; ``median`` (with signs) for CS.

    Returns
    -------
    numpy.ndarray, shape (n,)
        float64 for ``median`` (the median of an even depth is a mean), else
        the matrix dtype.
    """
    m = np.asarray(matrix)
    if m.shape != (hash_spec.depth, hash_spec.width):
        raise SpecError(
            f"matrix: shape {m.shape} does not match the hash spec"
            f" ({hash_spec.depth}, {hash_spec.width})"
        )
    keys = hash_spec.item_keys(items)
    rows = np.arange(hash_spec.depth)[:, None]
    if estimator == "min":
        return m[rows, hash_spec.buckets(keys)].min(axis=0)
    if estimator == "median":
        b, s = hash_spec.buckets_and_signs(keys)
        return np.median(m[rows, b] * s, axis=0)
    raise SpecError(f"estimator: unknown estimator {estimator!r}; use one of {ESTIMATORS}")


def query_release(payload: Mapping[str, Any], items: np.ndarray | Sequence[Any]) -> np.ndarray:
    """Answer point queries for ``items`` from a sketch release payload.

    Parameters
    ----------
    payload : mapping
        ``{"kind": "sketch", "estimator", "hash", "matrix", ...}`` as produced by
        ``release()`` of LazyCMS/LazyCS/PunctualCMS/PunctualCS/CMS/CS (also
        accepts the worker envelope, reading its ``"payload"``).
    items : array-like

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
    """
    if "payload" in payload and "matrix" not in payload:
        payload = payload["payload"]
    if payload.get("kind") != "sketch":
        raise SpecError(
            f"payload.kind: expected 'sketch', got {payload.get('kind')!r}; point queries need a"
            " sketch release"
        )
    for key in ("estimator", "hash", "matrix"):
        if key not in payload:
            raise SpecError(f"payload.{key}: missing from the sketch release")
    spec = HashSpec.from_public(payload["hash"])
    matrix = np.asarray(payload["matrix"], dtype=np.float64)
    return estimate(matrix, spec, items, str(payload["estimator"])).astype(np.float64)
