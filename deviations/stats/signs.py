"""An anytime-valid sequential sign test on pairs of arms: a mixture martingale (betting).

Arm A's and arm B's observations are paired in arrival order (each batch first put in a
random order drawn independently of its values), and each pair gives the sign of
``b - a`` (ties dropped). If ``A =d B`` (i.i.d. arms, independent of each other) the signs
are i.i.d. fair coins, so the Beta(1/2, 1/2) mixture of the likelihood ratios
``prod_i (2 q)^{s_i} (2 (1 - q))^{1 - s_i}``,

    ``M_n = 2^n B(k + 1/2, n - k + 1/2) / B(1/2, 1/2)``      (k of n signs positive),

is a non-negative martingale with ``M_0 = 1``, and Ville's inequality gives
``P(sup_n M_n >= 1 / alpha) <= alpha``: rejecting the first time ``M_n >= 1 / alpha`` is a
level-alpha test however often it is looked at, and ``min(1, 1 / max_{t <= n} M_t)`` is an
anytime-valid p-value. It tests ``P(B > A) = 1/2`` (given no tie), which ``A =d B``
implies, so a rejection is also evidence against ``A =d B``; it has power against shifts
(``P(B > A)`` away from 1/2), none against changes that keep ``P(B > A) = 1/2`` (a
spread that widens symmetrically), which the distribution-function test
(``sequential.SequentialTest``) does detect.

References
----------
Ville (1939), Étude critique de la notion de collectif; Robbins (1970), Statistical
methods related to the law of the iterated logarithm, Ann. Math. Stat. 41(5) (mixture
martingales); Ramdas, Grünwald, Vovk and Shafer (2023), Game-theoretic statistics and
safe anytime-valid inference, Stat. Sci. 38(4); Howard, Ramdas, McAuliffe and Sekhon
(2021), Time-uniform, nonparametric, nonasymptotic confidence sequences, Ann. Stat.
49(2) (the Beta-binomial mixture).

Only numpy and scipy are imported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.special import betaln  # type: ignore[import-untyped]  # no scipy-stubs in the venv

from ._checks import as_sample
from ._typing import FloatArray

__all__ = ["SignTestResult", "SequentialSignTest", "log_mixture"]

Decision = Literal["continue", "reject"]

# Beta(1/2, 1/2): the Jeffreys prior on P(B > A); log B(1/2, 1/2) = log(pi).
_PRIOR = 0.5
_LOG_BETA_PRIOR = math.log(math.pi)
_STATE_FORMAT = 1


def log_mixture(k: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """``log M_n`` of the Beta(1/2, 1/2) mixture martingale after ``k`` positive of ``n``.

    ``log M_n = n log 2 + log B(k + 1/2, n - k + 1/2) - log B(1/2, 1/2)``.

    Parameters
    ----------
    k, n : array_like of int
        Positive signs and signs (``0 <= k <= n``).

    Returns
    -------
    FloatArray
        ``log M_n`` (0 at ``n = 0``).
    """
    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    if np.any((k_arr < 0) | (k_arr > n_arr)):
        raise ValueError("need 0 <= k <= n")
    out: FloatArray = (
        n_arr * math.log(2.0) + betaln(k_arr + _PRIOR, n_arr - k_arr + _PRIOR) - _LOG_BETA_PRIOR
    )
    return out


@dataclass(frozen=True)
class SignTestResult:
    """Snapshot of a :class:`SequentialSignTest`.

    Attributes
    ----------
    n_a, n_b : int
        Observations received per arm (paired or waiting for a partner).
    pairs : int
        Pairs formed so far; ``ties`` of them had ``a == b`` and carry no sign.
    positive : int
        Pairs with ``b > a``.
    p_value : float
        ``min(1, 1 / max M_t)`` over the pairs so far (anytime-valid).
    decision : str
        ``"continue"`` or ``"reject"`` (sticky).
    decided_at : tuple of int or None
        ``(n_a, n_b)`` when rejected.
    b_larger : bool
        Whether more signs were positive (``b > a``) than negative.
    """

    n_a: int
    n_b: int
    pairs: int
    ties: int
    positive: int
    p_value: float
    decision: Decision
    decided_at: tuple[int, int] | None
    b_larger: bool


class SequentialSignTest:
    """Anytime-valid sequential sign test of ``A =d B`` (see the module docstring).

    Parameters
    ----------
    alpha : float, default 0.05
        Type I error over the whole open-ended run.
    seed : int, default 0
        Seed of the random orders given to the batches before pairing (drawn
        independently of the values: the pairing must not depend on them, e.g. when a
        client sends sorted batches).

    Notes
    -----
    The running maximum of ``M_t`` is taken over every pair (each pair is one look, in
    order), so the result does not depend on how the data were batched, except through
    the batches' random orders. Values of an arm waiting for a partner are kept (the
    state grows with the imbalance between the arms, not with their size).
    """

    def __init__(self, alpha: float = 0.05, *, seed: int = 0) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        self.alpha = float(alpha)
        self.seed = int(seed)
        self._batches = 0
        self._wait_a: FloatArray = np.empty(0)
        self._wait_b: FloatArray = np.empty(0)
        self._n_a = self._n_b = 0
        self._pairs = self._ties = self._positive = 0
        self._log_max = 0.0
        self._decision: Decision = "continue"
        self._decided_at: tuple[int, int] | None = None

    def _shuffled(self, values: FloatArray) -> FloatArray:
        rng = np.random.default_rng([self.seed, self._batches])
        self._batches += 1
        return values[rng.permutation(values.size)]

    def update(self, a_values: npt.ArrayLike, b_values: npt.ArrayLike) -> SignTestResult:
        """Add a batch to each arm (either may be empty), pair and test.

        Returns
        -------
        SignTestResult
        """
        a = as_sample(a_values, "a_values")
        b = as_sample(b_values, "b_values")
        if a.size:
            self._wait_a = np.concatenate((self._wait_a, self._shuffled(a)))
        if b.size:
            self._wait_b = np.concatenate((self._wait_b, self._shuffled(b)))
        self._n_a += a.size
        self._n_b += b.size
        m = min(self._wait_a.size, self._wait_b.size)
        if m:
            diff = self._wait_b[:m] - self._wait_a[:m]
            self._wait_a, self._wait_b = self._wait_a[m:], self._wait_b[m:]
            signed = diff[diff != 0]
            steps = self._positive + np.cumsum(signed > 0)
            counts = (self._pairs - self._ties) + np.arange(1, signed.size + 1)
            self._ties += m - signed.size
            self._pairs += m
            if signed.size:
                self._log_max = max(self._log_max, float(log_mixture(steps, counts).max()))
                self._positive = int(steps[-1])
            if self._decision == "continue" and self._log_max >= math.log(1.0 / self.alpha):
                self._decision = "reject"
                self._decided_at = (self._n_a, self._n_b)
        return self.result()

    @property
    def p_value(self) -> float:
        return min(1.0, math.exp(-self._log_max))

    @property
    def decision(self) -> Decision:
        return self._decision

    def result(self) -> SignTestResult:
        signed = self._pairs - self._ties
        return SignTestResult(
            n_a=self._n_a, n_b=self._n_b, pairs=self._pairs, ties=self._ties,
            positive=self._positive, p_value=self.p_value, decision=self._decision,
            decided_at=self._decided_at, b_larger=2 * self._positive > signed,
        )

    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state, restored exactly by :meth:`from_state`."""
        return {
            "format": _STATE_FORMAT, "alpha": self.alpha, "seed": self.seed,
            "batches": self._batches, "wait_a": self._wait_a.tolist(),
            "wait_b": self._wait_b.tolist(), "n_a": self._n_a, "n_b": self._n_b,
            "pairs": self._pairs, "ties": self._ties, "positive": self._positive,
            "log_max": self._log_max, "decision": self._decision,
            "decided_at": None if self._decided_at is None else list(self._decided_at),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SequentialSignTest:
        """Rebuild a test from :meth:`to_state` output (validated; errors raise)."""
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"unsupported state format {state.get('format')!r}")
        test = cls(state["alpha"], seed=state["seed"])
        test._batches = int(state["batches"])
        test._wait_a = np.asarray(state["wait_a"], dtype=np.float64)
        test._wait_b = np.asarray(state["wait_b"], dtype=np.float64)
        test._n_a, test._n_b = int(state["n_a"]), int(state["n_b"])
        test._pairs, test._ties = int(state["pairs"]), int(state["ties"])
        test._positive = int(state["positive"])
        test._log_max = float(state["log_max"])
        if state["decision"] not in ("continue", "reject"):
            raise ValueError(f"unknown decision {state['decision']!r}")
        test._decision = state["decision"]
        at = state["decided_at"]
        test._decided_at = None if at is None else (int(at[0]), int(at[1]))
        if not (0 <= test._ties <= test._pairs and 0 <= test._positive <= test._pairs
                and test._log_max >= 0.0):
            raise ValueError("inconsistent counts")
        return test
