"""Tests of deviations.stats.signs: the mixture sign test (Ville, Robbins)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

from deviations.stats.signs import SequentialSignTest, log_mixture


@pytest.mark.parametrize(("k", "n"), [(0, 0), (0, 1), (1, 1), (3, 10), (7, 10), (40, 50)])
def test_log_mixture_is_the_beta_mixture(k: int, n: int) -> None:
    """Against direct integration of the likelihood ratios over the Beta(1/2, 1/2) prior."""
    prior = stats.beta(0.5, 0.5)

    def ratio(q: float) -> float:
        return float((2 * q) ** k * (2 * (1 - q)) ** (n - k) * prior.pdf(q))

    value, _ = integrate.quad(ratio, 0, 1, limit=200)
    assert float(log_mixture(k, n)) == pytest.approx(math.log(value), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("n", [0, 1, 5, 30, 400])
def test_mixture_is_a_martingale_under_fair_signs(n: int) -> None:
    k = np.arange(n + 1)
    now = np.exp(log_mixture(k, n))
    after = 0.5 * np.exp(log_mixture(k + 1, n + 1)) + 0.5 * np.exp(log_mixture(k, n + 1))
    np.testing.assert_allclose(after, now, rtol=1e-10)


def test_type_one_error_under_monitoring_including_sorted_batches() -> None:
    """A/A, 300 streams of 2,000 pairs looked at every 50, half of them sent as sorted
    batches (the random order before pairing keeps the signs fair coins)."""
    rng = np.random.default_rng(41)
    rejected = 0
    for stream in range(300):
        test = SequentialSignTest(0.05, seed=stream)
        for _ in range(40):
            a, b = rng.gamma(10, 10, 50), rng.gamma(10, 10, 50)
            if stream % 2:
                a, b = np.sort(a), np.sort(b)
            test.update(a, b)
        rejected += test.decision == "reject"
    assert rejected <= 0.05 * 300 + 2 * math.sqrt(0.05 * 0.95 * 300)  # 15 + 7.5


def test_power_on_appendix_e_alternative() -> None:
    rng = np.random.default_rng(42)
    stops = []
    for stream in range(50):
        test = SequentialSignTest(0.05, seed=stream)
        for i in range(30):
            if test.update(rng.gamma(10, 10, 50), rng.gamma(10, 11, 50)).decision == "reject":
                stops.append((i + 1) * 50)
                break
    assert len(stops) >= 45  # by 1,500 pairs
    assert np.median(stops) < 800
    assert test.result().b_larger


def test_ties_carry_no_sign_and_arms_wait_for_partners() -> None:
    test = SequentialSignTest(0.05)
    result = test.update(np.ones(500), np.ones(300))
    assert (result.pairs, result.ties, result.positive, result.p_value) == (300, 300, 0, 1.0)
    result = test.update([], np.full(200, 2.0))
    assert (result.n_a, result.n_b, result.pairs, result.positive) == (500, 500, 500, 200)
    assert result.decision == "reject"
    assert result.decided_at == (500, 500)
    assert result.b_larger


def test_state_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(43)
    test = SequentialSignTest(0.01, seed=7)
    test.update(rng.normal(0, 1, 120), rng.normal(0.1, 1, 80))
    copy = SequentialSignTest.from_state(json.loads(json.dumps(test.to_state())))
    a, b = rng.normal(0, 1, 300), rng.normal(0.1, 1, 340)
    assert test.update(a, b) == copy.update(a, b)
    with pytest.raises(ValueError, match="format"):
        SequentialSignTest.from_state({"format": 9})
    with pytest.raises(ValueError, match="alpha"):
        SequentialSignTest(1.5)
