"""Tests of deviations.stats.quantiles: anytime-valid decisions on chosen quantiles
(Howard and Ramdas 2022's beta-binomial quantile confidence sequences, two arms)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

from deviations.stats import quantiles as qmod
from deviations.stats.quantiles import (
    QuantileSequentialTest,
    directional_evidence,
    log_mixture,
    prior_size,
)

MEDIAN = 800.0
LOG_SD = 0.4


def lognormal(rng: np.random.Generator, n: int, scale: float = 1.0) -> np.ndarray:
    return rng.lognormal(math.log(MEDIAN * scale), LOG_SD, n)


@pytest.mark.parametrize(("k", "n", "q", "c"),
                         [(0, 0, 0.5, 3.0), (3, 10, 0.5, 3.0), (9, 10, 0.9, 20.0),
                          (50, 50, 0.99, 100.0), (40, 100, 0.3, 7.5)])
def test_log_mixture_is_the_beta_mixture(k: int, n: int, q: float, c: float) -> None:
    """Eq. (1) against direct integration of the likelihood ratios over the Beta prior."""
    prior = stats.beta(c * q, c * (1 - q))

    def ratio(r: float) -> float:
        return float((r / q) ** k * ((1 - r) / (1 - q)) ** (n - k) * prior.pdf(r))

    value, _ = integrate.quad(ratio, 0, 1, limit=400, points=[q])
    assert float(log_mixture(k, n, q, c)) == pytest.approx(math.log(value), rel=1e-6)


@pytest.mark.parametrize(("n", "q"), [(0, 0.5), (7, 0.9), (300, 0.99), (2_000, 0.5)])
def test_mixture_is_a_martingale_at_the_true_quantile(n: int, q: float) -> None:
    c = prior_size(q, 1_000, 0.05)
    k = np.arange(n + 1)
    now = log_mixture(k, n, q, c)
    after = np.logaddexp(math.log(q) + log_mixture(k + 1, n + 1, q, c),
                         math.log1p(-q) + log_mixture(k, n + 1, q, c))
    np.testing.assert_allclose(after, now, rtol=1e-9, atol=1e-9)


def test_prior_size_follows_the_normal_mixture_tuning() -> None:
    log_inv = math.log(20)
    assert prior_size(0.5, 10_000, 0.05) == pytest.approx(
        10_000 / (2 * log_inv + math.log1p(2 * log_inv)) - 1)
    assert prior_size(0.5, 2, 0.05) == 1.0
    with pytest.raises(ValueError, match="quantile"):
        prior_size(1.0, 100, 0.05)


def _brute_evidence(a: np.ndarray, b: np.ndarray, q: float, c: float) -> tuple[float, float]:
    """Independent check: g on a grid holding every data point and a point between
    consecutive ones, both ends beyond the data; all pairs compared directly."""
    pts = np.unique(np.concatenate((a, b)))
    mids = (pts[:-1] + pts[1:]) / 2
    grid = np.sort(np.concatenate(([pts[0] - 1], pts, mids, [pts[-1] + 1])))

    def g(x: np.ndarray) -> np.ndarray:
        n = x.size
        ks = np.arange(n + 1)
        values = log_mixture(ks, n, q, c)
        out = []
        for v in grid:
            lo, hi = int(np.sum(x < v)), int(np.sum(x <= v))
            out.append(values[lo:hi + 1].min())
        return np.array(out)

    ga, gb = g(a), g(b)
    total = ga[:, None] + gb[None, :]
    xa, xb = np.meshgrid(grid, grid, indexing="ij")
    above = total[xb <= xa].min()
    below = total[xa <= xb].min()
    return float(above), float(below)


@pytest.mark.parametrize("seed", range(12))
def test_evidence_against_brute_force_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_a, n_b = (int(x) for x in rng.integers(1, 120, 2))
    q = float(rng.choice([0.1, 0.5, 0.9, 0.99]))
    digits = int(rng.integers(0, 3))  # heavy ties at 0 digits
    a = np.round(rng.lognormal(0, 0.5, n_a), digits)
    b = np.round(rng.lognormal(float(rng.choice([0, 0.3, -0.6])), 0.5, n_b), digits)
    alpha, tuned = 0.05, 50.0
    got = directional_evidence(a, b, q, alpha=alpha, tuned_n=tuned)
    cap = math.log(1 / alpha) + math.log(100)
    want = _brute_evidence(a, b, q, prior_size(q, tuned, alpha))
    np.testing.assert_allclose(got, np.minimum(want, cap), rtol=1e-10, atol=1e-10)


def test_windowed_evidence_equals_evaluation_on_every_cell() -> None:
    """The window (about sqrt(n log n) order statistics per arm) changes nothing below the
    cap, at sizes where the window is a small part of the data."""
    rng = np.random.default_rng(7)
    for scale, q in ((1.0, 0.5), (1.04, 0.5), (1.05, 0.9), (0.97, 0.99)):
        a = np.sort(lognormal(rng, 3_000))
        b = np.sort(lognormal(rng, 2_500, scale))
        c = prior_size(q, 10_000, 0.05 / 3)
        level = math.log(60)
        arm_a, arm_b = qmod.ArmCounts.empty().merged(a), qmod.ArmCounts.empty().merged(b)
        got = qmod._directional(arm_a, arm_b, q, c, level)
        pts = np.unique(np.concatenate((a, b)))
        ga = qmod._arm_g(arm_a, pts, q, c, qmod._window(a.size, q, c, None).k_min)
        gb = qmod._arm_g(arm_b, pts, q, c, qmod._window(b.size, q, c, None).k_min)
        cap = level + math.log(100)
        want = (min(qmod._evidence(gb, ga), cap), min(qmod._evidence(ga, gb), cap))
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_family_type_one_error_under_monitoring() -> None:
    """A/A, 80 streams of lognormal latencies (half rounded to 50 ms: ties), batches of
    20 per arm looked at after each up to 800 per arm: Ville's bound is 5 % for the
    family of p50, p90, p99; the mixture is conservative, so asserting ≤ 5 % is slack.
    The full-size figure (500 streams, 5,000 per arm) is in docs/statistics.md."""
    rng = np.random.default_rng(2201)
    decided = 0
    for stream in range(80):
        test = QuantileSequentialTest()
        for _ in range(40):
            a, b = lognormal(rng, 20), lognormal(rng, 20)
            if stream % 2:
                a, b = np.round(a / 50) * 50, np.round(b / 50) * 50
            test.update(a, b)
        decided += bool(test.result().decided_by)
    assert decided <= 4


def _stop(test: QuantileSequentialTest, rng: np.random.Generator, draw_b, max_n: int) -> int:
    for n in range(20, max_n + 1, 20):
        if test.update(lognormal(rng, 20), draw_b(rng, 20)).decided_by:
            return n
    return max_n + 1


def _tail_only(rng: np.random.Generator, n: int) -> np.ndarray:
    """p50 and p90 unchanged, p99 × 1.25 (tests/simulations/canary_quantiles.py)."""
    z90, z99 = stats.norm.ppf(0.9), stats.norm.ppf(0.99)
    stretch = (z99 + math.log(1.25) / LOG_SD - z90) / (z99 - z90)
    z = rng.standard_normal(n)
    z = np.where(z > z90, z90 + (z - z90) * stretch, z)
    return MEDIAN * np.exp(LOG_SD * z)


def test_p99_only_change_is_decided_by_the_p99_within_20000() -> None:
    rng = np.random.default_rng(2202)
    for _ in range(6):
        test = QuantileSequentialTest()
        assert _stop(test, rng, _tail_only, 20_000) <= 20_000
        result = test.result()
        assert result.decided_by == (0.99,)
        assert result.decision == "b_above"
        assert result.verdicts[2].p_above <= 0.05 < result.verdicts[2].p_below


def test_median_shift_is_decided_in_the_right_direction() -> None:
    rng = np.random.default_rng(2203)
    stops = []
    for scale, direction in ((1.10, "b_above"), (1 / 1.10, "b_below")) * 3:
        test = QuantileSequentialTest()
        stops.append(_stop(test, rng, lambda r, n, s=scale: lognormal(r, n, s), 5_000))
        assert test.result().decision == direction
    assert max(stops) <= 5_000


def test_intervals_agree_with_the_decision_and_cover() -> None:
    rng = np.random.default_rng(2204)
    test = QuantileSequentialTest((0.5, 0.9))
    test.update(lognormal(rng, 3_000), lognormal(rng, 3_000, 1.15))
    result = test.result()
    for interval, verdict in zip(test.intervals(), result.verdicts, strict=True):
        true = MEDIAN * math.exp(LOG_SD * stats.norm.ppf(interval.q))
        assert interval.lo_a <= true <= interval.hi_a
        assert interval.lo_b <= true * 1.15 <= interval.hi_b
        assert interval.diff_lo <= 0.15 * true <= interval.diff_hi
        assert interval.lo_a <= interval.estimate_a <= interval.hi_a
        if verdict.decision == "b_above":
            assert interval.diff_lo >= 0
        else:
            assert interval.diff_lo < 0 < interval.diff_hi
    assert result.verdicts[0].decision == "b_above"


def test_decided_exactly_when_the_difference_band_leaves_zero() -> None:
    rng = np.random.default_rng(2205)
    agree = 0
    for _ in range(40):
        scale = float(rng.choice([1.0, 1.05, 1.1, 0.9]))
        test = QuantileSequentialTest((0.5,))
        result = test.update(lognormal(rng, 800), lognormal(rng, 700, scale))
        (interval,) = test.intervals()
        decided = result.decision
        if decided == "b_above":
            assert interval.diff_lo >= 0
        elif decided == "b_below":
            assert interval.diff_hi <= 0
        else:
            assert interval.diff_lo <= 0 <= interval.diff_hi
        agree += 1
    assert agree == 40


def test_batches_give_the_same_data_and_evidence_as_one_shot() -> None:
    rng = np.random.default_rng(2206)
    a, b = lognormal(rng, 1_000), lognormal(rng, 900, 1.03)
    one = QuantileSequentialTest()
    one.update(a, b)
    many = QuantileSequentialTest()
    cuts_a = np.sort(rng.choice(np.arange(1, 1_000), 9, replace=False))
    cuts_b = np.sort(rng.choice(np.arange(1, 900), 9, replace=False))
    for part_a, part_b in zip(np.split(a, cuts_a), np.split(b, cuts_b), strict=True):
        many.update(part_a, part_b)
    for key in ("support", "counts_a", "counts_b"):
        assert one.to_state()[key] == many.to_state()[key]
    for q in one.quantiles:
        assert directional_evidence(a, b, q, tuned_n=10_000, alpha=0.05 / 3) == (
            qmod._directional(many._a, many._b, q, prior_size(q, 10_000, 0.05 / 3),
                              math.log(60)))


def test_state_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(2207)
    test = QuantileSequentialTest((0.5, 0.99), alpha=0.1, tuned_n=2_000)
    for _ in range(30):
        test.update(lognormal(rng, 20), lognormal(rng, 20, 1.2))
    state = json.loads(json.dumps(test.to_state()))
    again = QuantileSequentialTest.from_state(state)
    assert again.result() == test.result()
    batches = [(lognormal(rng, 20), lognormal(rng, 20, 1.2)) for _ in range(30)]
    for a, b in batches:
        assert again.update(a, b) == test.update(a, b)
    assert test.result().decided_by  # the shift was decided along the way


@pytest.mark.parametrize(("key", "value", "message"), [
    ("format", 2, "format"),
    ("support", [2.0, 1.0], "sorted"),
    ("counts_a", [-1], "non-negative"),
    ("decisions", ["b_above", "sideways"], "decision"),
    ("above", [-1.0, 0.0], "non-negative"),
    ("order", [0.5], "order"),
    ("decided_at", [None], "match"),
])
def test_bad_states_raise(key: str, value: object, message: str) -> None:
    state = QuantileSequentialTest((0.5, 0.9)).to_state()
    state[key] = value
    with pytest.raises(ValueError, match=message):
        QuantileSequentialTest.from_state(state)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"quantiles": (0.5, 1.0)}, "quantiles"),
    ({"quantiles": ()}, "quantiles"),
    ({"quantiles": (0.5, 0.5)}, "distinct"),
    ({"alpha": 0.0}, "alpha"),
    ({"tuned_n": 0}, "tuned_n"),
])
def test_bad_parameters_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QuantileSequentialTest(**kwargs)  # type: ignore[arg-type]


def test_nan_and_empty_arms() -> None:
    test = QuantileSequentialTest()
    with pytest.raises(ValueError, match="finite"):
        test.update([1.0, math.nan], [1.0])
    result = test.update([1.0, 2.0], [])
    assert (result.n_a, result.n_b, result.decision) == (2, 0, "continue")
    assert math.isnan(result.verdicts[0].estimate_b)
    with pytest.raises(ValueError, match="both arms"):
        test.intervals()
    assert result.verdicts[2].label == "p99"


def _raw_arm_g(sorted_x: np.ndarray, points: np.ndarray, q: float, c: float,
               k_min: int) -> np.ndarray:
    """The evaluation on raw sorted arrays, as before the arms were held as counts."""
    less = np.searchsorted(sorted_x, points, side="left")
    less_eq = np.searchsorted(sorted_x, points, side="right")
    counts = np.empty(2 * points.size + 1, dtype=np.int64)
    counts[0:-1:2] = less
    counts[-1] = less_eq[-1]
    counts[1::2] = np.clip(k_min, less, less_eq)
    return log_mixture(counts, sorted_x.size, q, c)


def _raw_evidence(sa: np.ndarray, sb: np.ndarray, q: float, c: float,
                  level: float) -> tuple[float, float]:
    cap = level + math.log(100)
    min_a = qmod._window(sa.size, q, c, None).minimum
    min_b = qmod._window(sb.size, q, c, None).minimum
    win_a = qmod._window(sa.size, q, c, cap - min_b)
    win_b = qmod._window(sb.size, q, c, cap - min_a)
    pa = sa[max(win_a.k_lo - 1, 0):min(win_a.k_hi + 1, sa.size)]
    pb = sb[max(win_b.k_lo - 1, 0):min(win_b.k_hi + 1, sb.size)]
    points = np.unique(np.concatenate((pa, pb)))
    ga = _raw_arm_g(sa, points, q, c, win_a.k_min)
    gb = _raw_arm_g(sb, points, q, c, win_b.k_min)
    return min(qmod._evidence(gb, ga), cap), min(qmod._evidence(ga, gb), cap)


@pytest.mark.parametrize("seed", range(4))
def test_counts_give_the_raw_arrays_results(seed: int) -> None:
    """The arms held as distinct values with cumulative counts decide exactly as the raw
    sorted arrays did: evidence after every batch, estimates, on random streams with and
    without ties (the raw evaluation above is the implementation before issue 24)."""
    rng = np.random.default_rng(2400 + seed)
    digits = (None, 2, 1, 0)[seed]
    test = QuantileSequentialTest((0.5, 0.9, 0.99), tuned_n=2_000)
    sa, sb = np.empty(0), np.empty(0)
    above = np.zeros(3)
    below = np.zeros(3)
    for _ in range(25):
        a = lognormal(rng, int(rng.integers(1, 60)))
        b = lognormal(rng, int(rng.integers(1, 60)), 1.08)
        if digits is not None:
            a, b = np.round(a, digits), np.round(b, digits)
        sa, sb = np.sort(np.concatenate((sa, a))), np.sort(np.concatenate((sb, b)))
        result = test.update(a, b)
        for j, (q, c) in enumerate(zip(test.quantiles, test._priors, strict=True)):
            if test._decided_at[j] is None or test._decided_at[j] == (sa.size, sb.size):
                up, down = _raw_evidence(sa, sb, q, c, test._log_level)
                above[j], below[j] = max(above[j], up), max(below[j], down)
            verdict = result.verdicts[j]
            rank_a, rank_b = max(math.ceil(sa.size * q), 1), max(math.ceil(sb.size * q), 1)
            assert (verdict.estimate_a, verdict.estimate_b) == (sa[rank_a - 1], sb[rank_b - 1])
        assert test._above == above.tolist()
        assert test._below == below.tolist()
    state = test.to_state()
    np.testing.assert_array_equal(np.repeat(state["support"], state["counts_a"]), sa)
    np.testing.assert_array_equal(np.repeat(state["support"], state["counts_b"]), sb)
