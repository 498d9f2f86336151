"""Paired A/B statistics (deviations.stats.paired) against independent implementations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from deviations.stats.intervals import Interval
from deviations.stats.multiple import holm
from deviations.stats.paired import (
    GUARD_GROWTH,
    MIN_N,
    PILOT_N,
    AAFloor,
    PairedResult,
    aa_floor,
    bonferroni_confidence,
    bootstrap_mean_ci,
    classify,
    exceeds_floor,
    floor_change,
    guarded_sd,
    holm_paired,
    paired_ci,
    paired_ci_from_differences,
    precision_paired,
    precision_ratio_paired,
    precision_ratio_two_sample,
    precision_two_sample,
    result_line,
    scaled_halfwidth,
    sequence_halfwidth,
    sign_test,
    welch_ci,
)


def _interleaved(n=30, effect=1.0, seed=0):
    """Slices sharing a noise term, as in seed 002's interleaved protocol."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.6, n)
    a = 12.4 + shared + rng.normal(0, 0.1, n)
    b = 12.4 - effect + shared + rng.normal(0, 0.1, n)
    return a, b


@pytest.mark.parametrize(("n", "confidence"), [(15, 0.95), (30, 0.9), (60, 0.99)])
def test_bootstrap_matches_scipy_percentile_bootstrap(n, confidence):
    a, b = _interleaved(n, seed=n)
    ours = paired_ci(a, b, confidence=confidence, resamples=20_000, seed=1, method="percentile")
    ref = stats.bootstrap(
        (b - a,),
        np.mean,
        confidence_level=confidence,
        n_resamples=50_000,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    width = ref.high - ref.low
    # Monte Carlo error of a 2.5 % quantile of 20,000 resamples is ~0.7 % of the width
    assert ours.lo == pytest.approx(ref.low, abs=0.04 * width)
    assert ours.hi == pytest.approx(ref.high, abs=0.04 * width)
    assert ours.estimate == pytest.approx(np.mean(b - a), rel=1e-12)
    assert ours.n == n
    assert ours.confidence == confidence


def test_sign_test_is_exact_binomial_with_ties_dropped():
    d = np.array([1.0, 2.0, 0.5, 0.0, -1.0, 0.0, 3.0])
    res = sign_test(d)
    assert (res.n_positive, res.n_negative, res.n_ties) == (4, 1, 2)
    # 4 of 5 non-tied positive: P = 2 * (C(5,4) + C(5,5)) / 2^5 = 2 * 6 / 32 = 0.375
    assert res.p_value == pytest.approx(0.375, rel=1e-12)
    assert res.p_value == pytest.approx(stats.binomtest(4, 5, 0.5).pvalue, rel=1e-12)
    assert sign_test([0.0, 0.0]).p_value == 1.0
    a, b = _interleaved(25)
    r = paired_ci(a, b)
    k = int(np.sum(b - a > 0))
    assert r.sign_p == pytest.approx(stats.binomtest(k, 25).pvalue)


def test_paired_ci_is_reproducible_and_detects_the_effect():
    a, b = _interleaved(30, effect=1.0)
    r1 = paired_ci(a, b)
    r2 = paired_ci(a, b)
    assert r1 == r2
    assert -1.2 < r1.lo < r1.estimate < r1.hi < -0.8  # B is 1.0 faster: b - a < 0
    assert r1.sign_p < 1e-6
    assert not r1.contains_zero
    assert paired_ci(a, b, seed=5) != r1


def test_bonferroni_widening():
    assert bonferroni_confidence(0.95, 3) == pytest.approx(1 - 0.05 / 3)
    a, b = _interleaved(30, effect=0.2)
    one = paired_ci(a, b)
    three = paired_ci(a, b, comparisons=3)
    assert three.confidence == pytest.approx(0.98333333333)
    assert three.lo < one.lo
    assert three.hi > one.hi
    with pytest.raises(ValueError, match="positive integer"):
        bonferroni_confidence(0.95, 0)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0], "differ in length"),
        ([1.0], [2.0], "at least 2"),
        ([1.0, np.nan], [1.0, 2.0], "finite"),
        ([[1.0, 2.0]], [[1.0, 2.0]], "one-dimensional"),
    ],
)
def test_paired_ci_rejects_bad_input(a, b, message):
    with pytest.raises(ValueError, match=message):
        paired_ci(a, b)


def test_paired_ci_rejects_bad_settings():
    a, b = _interleaved(10)
    with pytest.raises(ValueError, match="confidence"):
        paired_ci(a, b, confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        paired_ci(a, b, resamples=10)


# --- hypothesis properties ------------------------------------------------------------

values = arrays(
    np.float64,
    st.integers(5, 60),
    elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_ci_contains_the_mean_difference(d):
    r = paired_ci(np.zeros_like(d), d, resamples=2_000)
    tol = 1e-9 * (1.0 + np.max(np.abs(d)))
    assert r.lo - tol <= r.estimate <= r.hi + tol


@settings(max_examples=60, deadline=None)
@given(values, st.integers(0, 2**32 - 1))
def test_swapping_a_and_b_negates_the_ci(a, seed):
    b = np.roll(a, 1) * 0.5
    d = a - b
    # exact mirror unless some difference v != 0 also occurs as -v (see bootstrap_mean_ci)
    assume(not np.intersect1d(d[d != 0], -d[d != 0]).size)
    ab = paired_ci(a, b, resamples=2_000, seed=seed)
    ba = paired_ci(b, a, resamples=2_000, seed=seed)
    tol = 1e-9 * (1.0 + np.max(np.abs(a)))
    assert ba.estimate == pytest.approx(-ab.estimate, abs=tol)
    assert ba.lo == pytest.approx(-ab.hi, abs=tol)
    assert ba.hi == pytest.approx(-ab.lo, abs=tol)
    assert ba.sign_p == pytest.approx(ab.sign_p)


@settings(max_examples=60, deadline=None)
@given(values, st.randoms(use_true_random=False))
def test_invariant_to_slice_order(a, rnd):
    b = np.sqrt(np.abs(a))
    perm = np.array(rnd.sample(range(a.size), a.size))
    r = paired_ci(a, b, resamples=2_000)
    p = paired_ci(a[perm], b[perm], resamples=2_000)
    assert p == r


# --- Welch ----------------------------------------------------------------------------


@pytest.mark.parametrize(("na", "nb", "confidence"), [(10, 25, 0.95), (40, 7, 0.9), (3, 3, 0.99)])
def test_welch_matches_scipy(na, nb, confidence):
    rng = np.random.default_rng(na * nb)
    a = rng.normal(10, 1, na)
    b = rng.normal(9.5, 3, nb)
    ours = welch_ci(a, b, confidence)
    ref = stats.ttest_ind(b, a, equal_var=False)  # mean(b) - mean(a), later − earlier
    ci = ref.confidence_interval(confidence_level=confidence)
    assert ours.lo == pytest.approx(ci.low, rel=1e-10)
    assert ours.hi == pytest.approx(ci.high, rel=1e-10)
    assert ours.df == pytest.approx(ref.df, rel=1e-10)
    assert ours.estimate == pytest.approx(b.mean() - a.mean())
    assert ours.interval == Interval(ours.estimate, ours.lo, ours.hi)


def test_welch_widening_and_errors():
    rng = np.random.default_rng(9)
    a, b = rng.normal(0, 1, 20), rng.normal(0, 1, 20)
    wide = welch_ci(a, b, comparisons=2)
    ref = stats.ttest_ind(b, a, equal_var=False).confidence_interval(confidence_level=0.975)
    assert (wide.lo, wide.hi) == pytest.approx((ref.low, ref.high), rel=1e-10)
    with pytest.raises(ValueError, match="constant"):
        welch_ci([1.0, 1.0], [2.0, 2.0])


# --- A/A floor and the result line ---------------------------------------------------


def _result(mean, lo, hi, n=15, confidence=0.95):
    return PairedResult(mean, lo, hi, confidence, 0.001, n, n, 0, 0, 10_000, 0)


def test_aa_floor_is_the_largest_bound_of_the_aa_ci():
    floor = aa_floor(_result(0.01, -0.05, 0.07))
    assert floor.floor == pytest.approx(0.07)
    assert not floor.biased
    biased = aa_floor(_result(0.47, 0.40, 0.55))
    assert biased.floor == pytest.approx(0.55)
    assert biased.biased
    rng = np.random.default_rng(11)
    d = rng.normal(0, 0.1, 30)
    f = aa_floor(d)
    r = paired_ci(np.zeros(30), d)
    assert f.floor == pytest.approx(max(abs(r.lo), abs(r.hi)))
    assert isinstance(f, AAFloor)
    assert f.n == 30


def test_seed_002_result_line():
    # The seed's line printed A - B; ours prints B - A (B is faster: negative).
    line = result_line(_result(-0.93, -1.01, -0.85), metric="p99", unit="ms", floor=0.07)
    assert (
        line
        == "B is 0.93 ms faster at p99 (95% CI [-1.01, -0.85]; A/A floor ±0.07; n=15 slice pairs)"
    )


def test_result_line_wording_rules():
    assert result_line(_result(0.01, -0.05, 0.07), floor=0.07) == (
        "no detectable difference at p99 (95% CI [-0.05, +0.07]; A/A floor ±0.07; n=15 slice pairs)"
    )
    assert result_line(_result(0.05, 0.03, 0.08), floor=0.07).startswith(
        "no detectable difference at p99 beyond the A/A floor (95% CI [+0.03, +0.08]"
    )
    # seed 002: an effect only 2x the floor is "a tentative result"
    assert result_line(_result(-1.0, -1.1, -0.9), floor=0.5).startswith(
        "B is tentatively 1.00 ms faster at p99"
    )
    slower = result_line(_result(0.93, 0.85, 1.01), floor=aa_floor(_result(0, -0.05, 0.07)))
    assert slower.startswith("B is 0.93 ms slower at p99 (95% CI [+0.85, +1.01]; A/A floor ±0.07")
    assert "A/A floor not measured" in result_line(_result(0.93, 0.85, 1.01))
    wide = result_line(_result(0.93, 0.8, 1.05, confidence=bonferroni_confidence(0.95, 3)))
    assert "(98.33% CI" in wide
    throughput = result_line(
        _result(2.0, 1.5, 2.5, n=1), metric="throughput", unit="%", direction="higher_is_better"
    )
    # A throughput is higher or lower, not faster (issue 23: "41.13 rps faster").
    assert throughput.startswith("B is 2.00% higher (better) at throughput")
    lower = result_line(_result(-2.0, -2.5, -1.5), metric="rps", unit="rps",
                        direction="higher_is_better")
    assert lower.startswith("B is 2.00 rps lower (worse) at rps")
    assert "n=1 slice pair)" in throughput


def test_classify_and_exceeds_floor():
    assert classify(_result(-0.93, -1.01, -0.85), 0.07) == "faster"
    assert classify(_result(0.93, 0.85, 1.01), 0.07) == "slower"
    assert classify(_result(-0.93, -1.01, -0.85), 0.07, direction="higher_is_better") == "slower"
    assert classify(_result(0.93, 0.85, 1.01), 0.07, direction="higher_is_better") == "faster"
    with pytest.raises(ValueError, match="direction"):
        classify(_result(0.93, 0.85, 1.01), direction="up")  # type: ignore[arg-type]
    assert classify(_result(0.0, -0.1, 0.1), 0.07) == "no difference"
    assert classify(_result(0.05, 0.03, 0.08), 0.07) == "within floor"
    assert exceeds_floor(_result(0.93, 0.85, 1.01), 0.07)
    assert not exceeds_floor(_result(0.05, 0.03, 0.08), 0.07)
    with pytest.raises(ValueError, match="floor"):
        exceeds_floor(_result(0.93, 0.85, 1.01), -1.0)


def test_bootstrap_mean_ci_is_one_vectorised_draw():
    x = np.arange(10.0)
    lo, hi = bootstrap_mean_ci(x, resamples=1000, seed=3)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 10, size=(1000, 10))
    means = x[idx].mean(axis=1)  # x is already in canonical order (|x|, then x)
    assert (lo, hi) == tuple(np.percentile(means, [2.5, 97.5]))


# --- Holm, disagreement, anytime-valid precision, floor change (issue 11) ----------------


def test_holm_paired_calls_exactly_what_holm_rejects():
    rng = np.random.default_rng(21)
    diffs = [rng.normal(mu, 1.0, 12) for mu in (1.5, 0.9, 0.6, 0.0, 0.3)]
    res = holm_paired(diffs, resamples=2_000)
    p = np.array([paired_ci_from_differences(d, resamples=2_000).p_value for d in diffs])
    rejected = holm(p, 0.05).reject
    assert [not r.contains_zero for r in res] == rejected.tolist()
    order = np.argsort(p)
    assert res[order[0]].confidence == pytest.approx(1 - 0.05 / 5)
    assert all(r.confidence <= 1 - 0.05 / 5 + 1e-12 for r in res)


def test_disagreement_warnings():
    few = paired_ci(np.zeros(5), np.array([1.0, 1.1, 0.9, 1.2, 1.05]))
    assert not few.contains_zero
    assert "too few for the sign test" in few.disagreement()
    outliers = paired_ci(np.zeros(12), np.array([-0.1] * 7 + [5.0, 6.0, 5.5, 7.0, 6.5]))
    assert not outliers.contains_zero
    assert outliers.sign_p > 0.05
    assert "outlier slices" in outliers.disagreement()
    agree = paired_ci(*_interleaved(30))
    assert agree.disagreement() is None


def test_sequence_halfwidth_formula_and_monitoring():
    # Waudby-Smith et al. (2024): rho^2 = (-2 log a + log(1 - 2 log a)) / n*
    a, n_star, n, s = 0.05, 30, 50, 2.0
    rho2 = (-2 * np.log(a) + np.log(1 - 2 * np.log(a))) / n_star
    v = n * s**2 * rho2 + 1
    assert sequence_halfwidth(n, s, a, n_star) == pytest.approx(
        np.sqrt(2 * v / (n**2 * rho2) * np.log(np.sqrt(v) / a)))
    # Looking after every pair from n = 5 to 500: the sequence misses the mean at some look
    # in ~6 % of normal runs; the fixed-n t interval, looked at the same way, in ~45 %.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1_000, 500))
    k = np.arange(1, 501)
    m = np.cumsum(x, 1) / k
    sd = np.sqrt(np.maximum((np.cumsum(x**2, 1) - k * m**2) / np.maximum(k - 1, 1), 0))
    h = sequence_halfwidth(k[4:], sd[:, 4:])
    t = stats.t.ppf(0.975, k[4:] - 1) * sd[:, 4:] / np.sqrt(k[4:])
    assert np.mean(np.any(np.abs(m[:, 4:]) > h, axis=1)) < 0.08
    assert np.mean(np.any(np.abs(m[:, 4:]) > t, axis=1)) > 0.3


def test_precision_samples_needed():
    rng = np.random.default_rng(2)
    d = rng.normal(0.5, 1.0, 20)
    p = precision_paired(d, min_change=0.5)
    assert not p.narrow_enough
    assert p.more_needed > 0
    s = max(d[:k].std(ddof=1) for k in range(PILOT_N, 21))  # the guarded spread
    assert guarded_sd(d) == pytest.approx(s)
    n_total = 20 + p.more_needed
    # predicted at the guarded spread with its growth allowance, s (1 + 0.3 / sqrt(20));
    # bisection to half a sample: the count is the smallest total, or one more
    g = s * (1 + GUARD_GROWTH / np.sqrt(20))
    assert 2 * scaled_halfwidth(n_total, g) <= 0.5 < 2 * scaled_halfwidth(n_total - 2, g)
    # 20 pairs are fewer than MIN_N = 30: never narrow enough yet, at least 10 more
    assert precision_paired(d, min_change=10.0).more_needed == MIN_N - 20
    assert not precision_paired(d, min_change=10.0).narrow_enough
    assert precision_paired(rng.normal(0.5, 1.0, 40), min_change=10.0).narrow_enough
    a, b = rng.normal(10, 1, 15), rng.normal(10.5, 2, 15)
    two = precision_two_sample(a, b, 1.0)
    assert two.n == pytest.approx(15)
    half = scaled_halfwidth(15, np.sqrt(guarded_sd(a) ** 2 + guarded_sd(b) ** 2))
    diff = b.mean() - a.mean()
    assert (two.lo, two.hi) == pytest.approx((diff - half, diff + half))
    with pytest.raises(ValueError, match="min_change"):
        precision_paired(d, 0.0)


def test_scaled_halfwidth_is_unit_free():
    # the sequence of x / sigma mapped back: the same relative width in ms or in us
    assert scaled_halfwidth(50, 1000.0) == pytest.approx(1000 * sequence_halfwidth(50, 1.0))
    assert scaled_halfwidth(50, 0.05) / 0.05 == pytest.approx(scaled_halfwidth(50, 1.0))
    # at n* = 30 it is 1.48x the t interval's half-width (docs, §3.8)
    assert scaled_halfwidth(30, 1.0) / (stats.t.ppf(0.975, 29) / np.sqrt(30)) == pytest.approx(
        1.48, abs=0.01)


def test_guarded_sd_cannot_dip():
    x = np.array([1.0, 9.0, 1.2, 0.8, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0] + [1.0] * 30)
    assert guarded_sd(x) == pytest.approx(x[:10].std(ddof=1))
    assert guarded_sd(x) > x.std(ddof=1)
    assert guarded_sd(x[:5]) == pytest.approx(x[:5].std(ddof=1))  # below the pilot
    with pytest.raises(ValueError, match="pilot"):
        guarded_sd(x, pilot=1)


def test_precision_ratio_log_scale():
    rng = np.random.default_rng(3)
    a = rng.lognormal(np.log(10), 0.3, 40)
    b = a * 1.05 * rng.lognormal(0, 0.02, 40)
    p = precision_ratio_paired(a, b, 2.0)
    d = np.log(b / a)
    h = scaled_halfwidth(40, guarded_sd(d))
    assert p.scale == "log"
    assert (p.estimate, p.lo, p.hi) == pytest.approx(
        tuple(100 * np.expm1(v) for v in (d.mean(), d.mean() - h, d.mean() + h)))
    assert p.excludes_zero
    assert p.narrow_enough == (2 * h <= np.log(1.02))
    assert "geometric mean" in p.sentence()
    two = precision_ratio_two_sample(a, b, 2.0)
    assert two.estimate == pytest.approx(100 * np.expm1(np.log(b).mean() - np.log(a).mean()))
    with pytest.raises(ValueError, match="positive"):
        precision_ratio_paired(a, np.append(b[:-1], 0.0), 2.0)
    with pytest.raises(ValueError, match="same length"):
        precision_ratio_paired(a, b[:-1], 2.0)


def test_floor_change():
    rng = np.random.default_rng(4)
    before = rng.normal(0, 0.05, 30)
    same = floor_change(before, rng.normal(0, 0.05, 30))
    assert not same.moved
    wider = floor_change(before, rng.normal(0, 0.2, 30))
    assert wider.moved
    assert wider.spread_ratio > 2
    shifted = floor_change(before, rng.normal(0.08, 0.05, 30))
    assert shifted.moved
    assert shifted.shift == pytest.approx(0.08, abs=0.03)


def test_relative_precision_picks_the_log_scale_only_for_positive_values():
    """Issue 22 part 4: with a smallest change in percent, all values > 0 -> the change of
    the geometric mean (``precision_ratio_*``), else the difference of means against that
    percentage of the earlier sample's mean."""
    from deviations.stats.paired import (
        precision_paired,
        precision_ratio_paired,
        precision_ratio_two_sample,
        precision_relative_paired,
        precision_relative_two_sample,
        precision_two_sample,
        relative_scale,
    )

    rng = np.random.default_rng(11)
    a = rng.lognormal(0.0, 0.5, 40)
    b = a * rng.lognormal(0.05, 0.1, 40)
    assert relative_scale(a, b) == "log"
    p = precision_relative_paired(a, b, 2.0)
    assert p == precision_ratio_paired(a, b, 2.0)
    assert p.estimand == "change of the geometric mean"
    q = precision_relative_two_sample(a, b, 2.0)
    assert q == precision_ratio_two_sample(a, b, 2.0)
    z = a.copy()
    z[3] = 0.0
    assert relative_scale(z, b) == "linear"
    p = precision_relative_paired(z, b, 2.0)
    assert p == precision_paired(b - z, z.mean() * 0.02)
    assert p.estimand == "difference of means"
    assert p.scale == "linear"
    assert "difference of means" in p.sentence("ms")
    assert precision_relative_two_sample(z, b, 2.0) == precision_two_sample(z, b, z.mean() * 0.02)
    assert relative_scale(-a, b) == "linear"
    with pytest.raises(ValueError, match="mean is 0"):
        precision_relative_two_sample(np.zeros(5), b[:5], 2.0)
    with pytest.raises(ValueError, match="same length"):
        precision_relative_paired(a, b[:-1], 2.0)
