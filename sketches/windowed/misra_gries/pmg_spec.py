"""PMGSpec: every parameter of a PMG sketch, validated, plus the release threshold
and error bound of paper 000 (Lebeda & Tětek) derived from it.

Kept apart from :mod:`sketches.windowed.misra_gries.misra_gries` (the algorithm; it re-exports
every name here) so the spec and its bounds can be imported and validated on
their own, as :mod:`sketches.continual.lazy_spec` is for :mod:`sketches.continual.lazy`.

- :func:`pmg_threshold`: ``tau`` of Algorithm 2 (Lemma 5, Laplace; §5.2,
  two-sided geometric).
- :func:`pmg_error_bound`: ``|released - MG count|`` bound (Lemma 7).
- :class:`PMGSpec`: parameters of Algorithms 1-3 and the per-event budget of
  user-level releases (§8, group privacy).

Examples
--------
>>> spec = PMGSpec(k=2, eps=1.0, delta=1e-6)
>>> spec.event_budget()
(1.0, 1e-06)
>>> pmg_threshold(1.0, 1e-6, "laplace") == 1 + 2 * math.log(3 / 1e-6)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sketches.errors import SpecError
from sketches.windowed.misra_gries.mg_state import ItemCodec

__all__ = ["PMGSpec", "pmg_error_bound", "pmg_threshold"]

_NOISES = ("geometric", "laplace")
_MODES = ("approx", "pure")


def pmg_threshold(eps: float, delta: float, noise: str = "geometric") -> float:
    """Threshold ``tau`` of Algorithm 2 (paper 000, Lemma 5 and §5.2).

    Laplace(1/eps): ``tau = 1 + 2 ln(3/delta)/eps``. A count-1 key that exists
    in one sketch only clears ``tau`` only if its own or the shared draw is
    ``>= ln(3/delta)/eps``; ``Pr[Lap(1/eps) >= t] = exp(-eps t)/2`` and at most
    6 draws matter (4 keys + 2 shared), so the union bound gives ``delta``.

    Two-sided geometric, ``P(Z=z) ∝ a^|z|`` with ``a = e^-eps``:
    ``Pr[Z >= s] = a^s/(1+a)`` for integer ``s >= 1``, so
    ``tau = 1 + 2 ln(6 e^eps / ((e^eps + 1) delta))/eps`` (our check of the
    digest's [D] formula; see docs/MECHANISMS_000_001.md).

    Examples
    --------
    >>> round(pmg_threshold(1.0, 1e-6, "laplace"), 3)
    30.828
    >>> round(pmg_threshold(1.0, 1e-6) - pmg_threshold(1.0, 1e-6, "laplace"), 3)
    0.76
    """
    if noise == "laplace":
        return 1.0 + 2.0 * math.log(3.0 / delta) / eps
    if noise == "geometric":
        return 1.0 + 2.0 * math.log(6.0 * math.exp(eps) / ((math.exp(eps) + 1.0) * delta)) / eps
    raise SpecError(f"noise: unknown noise {noise!r}; use one of {_NOISES}")


def pmg_error_bound(k: int, eps: float, delta: float, noise: str, beta: float = 0.05) -> float:
    """Bound on ``|released - MG count|`` over all keys, w.p. >= 1-beta (Lemma 7).

    ``tau + 2 t`` where ``t`` bounds all ``k+1`` draws: Laplace
    ``t = ln((k+1)/beta)/eps``; geometric ``t = ln(2(k+1)/((1+a) beta))/eps``.
    Against the truth add the sketch error ``n/(k+1)`` (Fact 1; ``n`` is private
    so it is reported as a formula, not a number).

    Examples
    --------
    >>> b = pmg_error_bound(100, 1.0, 1e-6, "laplace", 0.05)
    >>> round(b - pmg_threshold(1.0, 1e-6, "laplace"), 3) == round(2 * math.log(101 / .05), 3)
    True
    """
    tau = pmg_threshold(eps, delta, noise)
    if noise == "laplace":
        t = math.log((k + 1) / beta) / eps
    else:
        t = math.log(2 * (k + 1) / ((1 + math.exp(-eps)) * beta)) / eps
    return tau + 2.0 * t


@dataclass(frozen=True)
class PMGSpec:
    """Every parameter of a PMG sketch (paper 000, Algorithms 1-3).

    Parameters
    ----------
    k : int
        Number of counters (memory 2k words; sketch error ``n/(k+1)``).
    eps, delta : float
        Budget of the single release. ``delta`` is unused (must be 0 or any
        value) when ``release_mode="pure"``.
    noise : {"geometric", "laplace"}
        Two-sided geometric (integer, default) or continuous Laplace.
    release_mode : {"approx", "pure"}
        Algorithm 2 ((eps, delta)) or Algorithm 3 + top-k over the universe (eps).
    universe : int or None
        ``release_mode="pure"`` only: items are ints in ``[0, universe)``.
    item_kind : {"int", "str"}
        ``"int"``: integer items, the key is the int itself (exact). ``"str"``:
        str/bytes items keyed by their exact bytes (str as UTF-8;
        :class:`~sketches.windowed.misra_gries.mg_state.ItemCodec`): no hash, so
        no two items can share a published label (docs/PRIVACY.md §10.4).
    hash_seed : int
        Unused by the keys (exact bytes); kept so older specs, checkpoints and
        merges of shards built from one spec still compare equal.
    beta : float
        Failure probability of the reported error bound (not a privacy parameter).
    unit_cap : int
        User-level by group privacy (paper 000 §8 Lemma 2 / Cor. 3): a unit with
        at most ``unit_cap`` events (capped exactly, e.g. by the worker) gets
        (eps, delta) when the events are released at ``eps' = eps/unit_cap``,
        ``delta' = delta/(unit_cap e^eps)`` (:meth:`event_budget`).
    """

    k: int
    eps: float
    delta: float
    noise: str = "geometric"
    release_mode: str = "approx"
    universe: int | None = None
    item_kind: str = "int"
    hash_seed: int = 0
    beta: float = 0.05
    unit_cap: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.k, int) and 1 <= self.k <= 1 << 24):
            raise SpecError(f"k: need an int in [1, 2**24], got {self.k!r}")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise SpecError(f"eps: need a finite eps > 0, got {self.eps!r}")
        if self.noise not in _NOISES:
            raise SpecError(f"noise: use one of {_NOISES}, got {self.noise!r}")
        if self.release_mode not in _MODES:
            raise SpecError(f"release_mode: use one of {_MODES}, got {self.release_mode!r}")
        if self.release_mode == "approx" and not 0 < self.delta < 1:
            raise SpecError(
                f"delta: need 0 < delta < 1 for release_mode='approx', got {self.delta}"
            )
        if self.release_mode == "pure":
            if self.universe is None or self.universe < 1 or self.item_kind != "int":
                raise SpecError(
                    "universe: release_mode='pure' adds noise to every item, so it needs "
                    "item_kind='int' and universe=d (items in [0, d)); set both"
                )
        if not 0 < self.beta < 1:
            raise SpecError(f"beta: need 0 < beta < 1, got {self.beta}")
        if not (isinstance(self.unit_cap, int) and self.unit_cap >= 1):
            raise SpecError(f"unit_cap: need an int >= 1, got {self.unit_cap!r}")
        ItemCodec(self.item_kind, self.hash_seed)  # validates item_kind

    def memory_bytes_for(self, max_item_bytes: int) -> int:
        """Worst-case bytes of one window's state when str items hold at most
        ``max_item_bytes`` bytes (the model ``MisraGries.memory_bytes()`` measures).

        ``16 k`` for the slots and counters, ``8 (4 k + 64)`` for the lazy heap of
        zero counters (rebuilt when it grows past ``4 k + 64``), and for str items,
        which are keyed by their exact bytes, ``k (max_item_bytes + 33)``. The
        sketch never holds more than ``k`` keys, so this bounds a window whatever
        it receives. ``dpstream plan`` and the start-up memory limit use it.

        Examples
        --------
        >>> PMGSpec(k=256, eps=1.0, delta=1e-6).memory_bytes_for(1024)
        12800
        >>> PMGSpec(k=256, eps=1.0, delta=1e-6, item_kind="str").memory_bytes_for(1024)
        283392
        """
        heap = 8 * (4 * self.k + 64)
        keys = self.k * (int(max_item_bytes) + 33) if self.item_kind == "str" else 0
        return 16 * self.k + heap + keys

    def sketch_error(self, events: float) -> float:
        """Misra-Gries undercount bound ``n/(k+1)`` after ``events`` events (paper 000 Fact 1).

        One-sided and deterministic: ``f - n/(k+1) <= MG count <= f``; the release's
        noise (:func:`pmg_error_bound`) comes on top. ``dpstream plan`` uses it.

        Examples
        --------
        >>> PMGSpec(k=255, eps=1.0, delta=1e-6).sketch_error(9_000_000)
        35156.25
        """
        return float(events) / (self.k + 1)

    def event_budget(self) -> tuple[float, float]:
        """Per-event (eps', delta') so that ``unit_cap`` events get (eps, delta).

        Group privacy: (eps', delta') per event gives (m eps', m e^((m-1) eps') delta')
        for m events (Dwork & Roth; paper 000 §8 Lemma 1), hence
        ``eps' = eps/m``, ``delta' = delta/(m e^eps)``.

        Examples
        --------
        >>> PMGSpec(k=4, eps=1.0, delta=1e-6).event_budget()
        (1.0, 1e-06)
        """
        m = self.unit_cap
        if m == 1:
            return self.eps, self.delta
        return self.eps / m, self.delta / (m * math.exp(self.eps))
