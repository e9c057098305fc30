"""What every continual counter shares: the exact prefix and the round clock.

:class:`PrefixCounters` holds ``n`` exact int64 prefixes (``_prefix``), the rounds
opened (``rounds``) and the ``horizon``; subclasses (the binary tree
:class:`~sketches.counters.gauss_bm.ContinualCounters`, the factorization
:class:`~sketches.counters.factorized.FactorizedCounters`) add their noise in
``_commit(total, k)``, which opens ``k`` rounds with ``total`` added.
"""

from __future__ import annotations

import numpy as np

from sketches.errors import HorizonExceededError, SpecError


def round_rows(increments: np.ndarray, n: int,
               empty_rounds: int = 0) -> tuple[np.ndarray | None, int]:
    """Validate ``advance``'s ``(k, n)`` increments: ``(their int64 total or None, rounds)``.

    Shared by every continual counter (tree, factorized): the rounds opened are the
    rows plus ``empty_rounds``.

    >>> round_rows(np.ones((2, 3), dtype=np.int64), 3, empty_rounds=1)
    (array([2, 2, 2]), 3)
    """
    inc = np.asarray(increments)
    if inc.ndim != 2 or inc.shape[1] != n:
        raise SpecError(
            f"increments: expected shape (k, {n}), got {inc.shape}; pass one row per round"
        )
    total = inc.sum(axis=0, dtype=np.int64) if inc.shape[0] else None
    return total, inc.shape[0] + int(empty_rounds)


class PrefixCounters:
    """Base of the continual counters: shape checks, the horizon, exact prefix updates."""

    n: int
    horizon: int
    rounds: int
    _prefix: np.ndarray

    def _commit(self, total: np.ndarray | None, k: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def _push_args(self, total: np.ndarray, new_rounds: int) -> tuple[np.ndarray, int]:
        """``push``'s checks, shared by every counter: ``(total as an array, rounds)``;
        the horizon is checked for the rounds ``push`` would open (state unchanged)."""
        inc = np.asarray(total)
        if inc.shape != (self.n,):
            raise SpecError(f"total: expected shape ({self.n},), got {inc.shape}")
        k = int(new_rounds)
        if k < 0:
            raise HorizonExceededError(f"new_rounds: must be >= 0, got {k}")
        self._check_horizon(self.rounds + k)
        return inc, k

    def _check_horizon(self, rounds: int) -> None:
        """HorizonExceededError (state unchanged) if ``rounds`` would pass the horizon."""
        if rounds > self.horizon:
            raise HorizonExceededError(
                f"horizon: {rounds} rounds requested but the horizon is {self.horizon};"
                " start a new epoch (fresh sketch) or raise the horizon")

    def advance(self, increments: np.ndarray, empty_rounds: int = 0) -> None:
        """Open ``k + empty_rounds`` rounds; row ``i`` of ``increments`` (shape
        ``(k, n)``) is round ``rounds + 1 + i``, the empty rounds have zero increments.

        Raises
        ------
        HorizonExceededError
            If the rounds would exceed the horizon (state is left unchanged).
        """
        total, k = round_rows(increments, self.n, empty_rounds)
        self._check_horizon(self.rounds + k)
        if k > 0:
            self._commit(total, k)

    def add_to_current(self, increments: np.ndarray) -> None:
        """Add ``increments`` (shape ``(n,)``) to the current, already opened round."""
        if self.rounds == 0:
            raise SpecError("increments: no round is open yet; call advance() first")
        inc = np.asarray(increments)
        if inc.shape != (self.n,):
            raise SpecError(f"increments: expected shape ({self.n},), got {inc.shape}")
        self._prefix += inc.astype(np.int64, copy=False)
