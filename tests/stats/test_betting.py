"""Tests of deviations.stats.betting: betting on smoothed sequential ranks (Vovk; Waudby-Smith
and Ramdas 2024), against a direct loop implementation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from deviations.stats.betting import (
    HELD_OUT,
    STEPS,
    TUNED_FACTORS,
    TUNED_TAIL,
    TUNED_WEIGHTS,
    RankBettingTest,
    bets,
    earlier_counts,
    held_out_bets,
    log_wealth,
    scores,
    shifted_effect,
    tuned_bets,
)
from tests.simulations.canary_ranks import (
    bimodal,
    first_rejections,
    gamma,
    lognormal,
    stopping_ns,
)
from tests.simulations.canary_ranks_oracle import (
    ADAPTIVE_FALLBACK,
    adaptive_effects,
    adaptive_lambdas,
    adaptive_weights,
    run_sets,
)


def _loop_test(batches: list[tuple[np.ndarray, np.ndarray]], alpha: float, seed: int,
               lambdas: np.ndarray, weights: np.ndarray | None = None
               ) -> tuple[float, float, bool, str]:
    """The test written out one observation at a time in plain Python: the same
    value-independent draws as the class (each batch's random order, then pairs A, B as
    they complete), the rank of each value among all earlier ones counted by comparison,
    the wealth of each bet multiplied up.
    Returns (log max of the mixture, log mixture now, positive side richer, decision)."""
    pooled: list[float] = []
    wait_a: list[float] = []
    wait_b: list[float] = []
    wealth = [1.0] * len(lambdas)
    share = [1.0 / len(lambdas)] * len(lambdas) if weights is None else weights.tolist()
    log_max = 0.0
    decision = "continue"
    side = False
    look = -1
    for a, b in batches:
        if not (a.size or b.size):
            continue  # not a look: no draws
        look += 1
        rng = np.random.default_rng([seed, look])
        wait_a += a[rng.permutation(a.size)].tolist()
        wait_b += b[rng.permutation(b.size)].tolist()
        m = min(len(wait_a), len(wait_b))
        sequence = []
        for i in range(m):
            sequence += [(wait_a[i], False), (wait_b[i], True)]
        wait_a, wait_b = wait_a[m:], wait_b[m:]
        v = rng.random(2 * m).tolist() if m else []
        for (value, label_b), draw in zip(sequence, v, strict=True):
            below = sum(1 for old in pooled if old < value)
            equal = sum(1 for old in pooled if old == value)
            pooled.append(value)
            u = (below + draw * (equal + 1)) / len(pooled)
            x = (1.0 if label_b else -1.0) * (2 * u - 1)
            wealth = [w * (1 + lam * x) for w, lam in zip(wealth, lambdas, strict=True)]
            log_max = max(log_max, math.log(sum(
                c * w for c, w in zip(share, wealth, strict=True))))
        if decision == "continue":
            up = sum(c * w for c, w, lam in zip(share, wealth, lambdas, strict=True) if lam > 0)
            down = sum(c * w for c, w, lam in zip(share, wealth, lambdas, strict=True)
                       if lam < 0)
            side = up >= down
            if log_max >= math.log(1 / alpha):
                decision = "reject"
    return log_max, math.log(sum(c * w for c, w in zip(share, wealth, strict=True))), side, \
        decision


@pytest.mark.parametrize("m", [0, 1, 2, 3, 5, 8, 17, 64, 100])
def test_earlier_counts_against_a_double_loop(m: int) -> None:
    rng = np.random.default_rng(m)
    keys = rng.integers(0, max(1, m // 3), size=(3, m))
    below, equal = earlier_counts(keys)
    for r in range(3):
        for j in range(m):
            assert below[r, j] == sum(keys[r, i] < keys[r, j] for i in range(j))
            assert equal[r, j] == sum(keys[r, i] == keys[r, j] for i in range(j))


@pytest.mark.parametrize(("ties", "sizes"), [
    (False, [(20, 20)] * 6),
    (True, [(20, 20)] * 6),
    (False, [(1, 0), (0, 3), (7, 2), (13, 29), (0, 0), (40, 41)]),
    (True, [(5, 9), (30, 1), (2, 2), (50, 50)]),
])
@pytest.mark.parametrize("tuned", [False, True])
def test_class_against_the_loop(ties: bool, sizes: list[tuple[int, int]], tuned: bool) -> None:
    rng = np.random.default_rng(7)
    batches = []
    for n_a, n_b in sizes:
        a, b = rng.lognormal(0, 0.4, n_a), rng.lognormal(0.15, 0.4, n_b)
        if ties:
            a, b = np.round(a, 1), np.round(b, 1)
        batches.append((a, b))
    lam, w = tuned_bets(0.05) if tuned else (bets(), None)
    test = RankBettingTest(0.2, seed=3, lambdas=lam, weights=w)
    for a, b in batches:
        result = test.update(a, b)
    log_max, now, side, decision = _loop_test(batches, 0.2, 3, lam, w)
    assert math.log(1 / result.p_value) == pytest.approx(log_max, rel=1e-9, abs=1e-12)
    assert result.log_wealth == pytest.approx(now, rel=1e-9, abs=1e-12)
    assert (result.b_larger, result.decision) == (side, decision)
    assert result.n_a == sum(a.size for a, _ in batches)


def test_a_drift_common_to_both_arms_is_not_a_difference() -> None:
    """Each arm sent in its own looks while the level of both drifts upwards (A =d B at
    every moment): pairing cancels the drift."""
    rng = np.random.default_rng(12)
    rejected = 0
    for stream in range(20):
        test = RankBettingTest(0.05, seed=stream)
        for i in range(60):
            level = 1 + 0.02 * i
            test.update(level * rng.lognormal(0, 0.4, 20), [])
            test.update([], level * rng.lognormal(0, 0.4, 20))
        rejected += test.decision == "reject"
    assert rejected <= 3


def test_simulation_pipeline_against_the_class() -> None:
    """The simulation's whole-stream computation stops where the class, fed the same
    batches of 20 per arm, rejects: the class's value-independent draws replayed give the
    pipeline its sequence and smoothing."""
    rng = np.random.default_rng(13)
    checked = 0
    for seed in range(12):
        batches = [(rng.lognormal(0, 0.4, 20), rng.lognormal(0.12, 0.4, 20))
                   for _ in range(40)]
        test = RankBettingTest(0.05, seed=seed)
        stop = np.inf
        for i, (a, b) in enumerate(batches):
            if test.update(a, b).decision == "reject":
                stop = (i + 1) * 20
                break
        z, v = [], []
        for look, (a, b) in enumerate(batches):
            draws = np.random.default_rng([seed, look])
            pairs = np.empty(40)
            pairs[0::2], pairs[1::2] = a[draws.permutation(20)], b[draws.permutation(20)]
            z.append(pairs)
            v.append(draws.random(40))
        assert first_rejections(np.concatenate(z)[None, :], np.concatenate(v)[None, :])[0] == stop
        checked += np.isfinite(stop)
    assert checked >= 6  # most streams reject: the comparison is about something


def test_scores_are_uniform_and_independent_under_the_null_with_ties() -> None:
    """The smoothed ranks of an i.i.d. sequence with heavy ties are i.i.d. U(0, 1)."""
    rng = np.random.default_rng(11)
    z = rng.integers(0, 4, size=(400, 60))
    below, equal = earlier_counts(z)
    t = np.arange(1, 61)
    u = (scores(below, equal, t, np.ones(60), rng.random(z.shape)) + 1) / 2
    assert stats.kstest(u.ravel(), "uniform").pvalue > 0.01
    lagged = np.corrcoef(u[:, 1:].ravel(), u[:, :-1].ravel())[0, 1]
    assert abs(lagged) < 0.02


def test_mixture_of_log_wealth() -> None:
    x = np.array([0.3, -0.2, 0.9, -1.0, 0.0])
    lam = np.array([0.5, 0.1, -0.25])
    per_bet, mixture = log_wealth(x, lam, start=np.array([0.1, 0.0, -0.2]))
    direct = np.array([[s + sum(math.log1p(k * xi) for xi in x[:j + 1]) for j in range(5)]
                       for k, s in zip(lam, [0.1, 0.0, -0.2], strict=True)])
    np.testing.assert_allclose(per_bet, direct, rtol=1e-12)
    np.testing.assert_allclose(mixture, np.log(np.exp(direct).mean(axis=0)), rtol=1e-12)


def test_bets_grid() -> None:
    grid = bets()
    assert grid.size == 24
    np.testing.assert_allclose(grid[:12], 0.5 * np.sqrt(2.0) ** -np.arange(12))
    np.testing.assert_array_equal(grid[12:], -grid[:12])


def test_type_one_error_under_monitoring_vectorised() -> None:
    """A/A, 150 streams per family looked at after every batch of 20 per arm, up to 3,000
    per arm: Ville's bound, 5 %, with a binomial margin (the full table: 500 streams)."""
    rng = np.random.default_rng(2201)
    for family in (lognormal, gamma, bimodal):
        stops = stopping_ns(rng, family(), family(), 150, 3_000)
        rejected = int(np.isfinite(stops).sum())
        assert rejected <= 0.05 * 150 + 2 * math.sqrt(0.05 * 0.95 * 150)  # 7.5 + 5.3


def test_type_one_error_of_the_class_with_sorted_batches() -> None:
    """A/A through the class itself, half the streams sending sorted batches."""
    rng = np.random.default_rng(2202)
    rejected = 0
    for stream in range(100):
        test = RankBettingTest(0.05, seed=stream)
        for _ in range(40):
            a, b = rng.gamma(6.25, 1, 25), rng.gamma(6.25, 1, 25)
            if stream % 2:
                a, b = np.sort(a), np.sort(b)
            test.update(a, b)
        rejected += test.decision == "reject"
    assert rejected <= 0.05 * 100 + 2 * math.sqrt(0.05 * 0.95 * 100)


def test_stopping_n_against_fixed_n_mann_whitney() -> None:
    """Lognormal, median +10 % and +5 % (60 streams each, batches of 20): the median stop is
    within 1.5× of the n at which a one-look Mann–Whitney has 90 % power (430 and 1,476
    per arm, docs/statistics.md), with margin for 60 streams."""
    rng = np.random.default_rng(2203)
    for scale, mw_90 in ((1.10, 430), (1.05, 1_476)):
        stops = stopping_ns(rng, lognormal(), lognormal(scale), 60, 6_000)
        assert np.isfinite(stops).mean() >= 0.95
        assert np.median(stops) <= 1.5 * mw_90
    # and the direction: B larger
    test = RankBettingTest(0.05, seed=1)
    for _ in range(100):
        if test.update(rng.lognormal(0, 0.4, 20), rng.lognormal(0.1, 0.4, 20)).decision != (
                "continue"):
            break
    assert test.decision == "reject"
    assert test.result().b_larger
    assert test.result().effect > 0.5


def test_direction_is_valid_under_a_one_sided_null() -> None:
    """B stochastically smaller than A: "B larger" is never said (the coupling argument)."""
    rng = np.random.default_rng(2204)
    wrong = 0
    for stream in range(60):
        test = RankBettingTest(0.05, seed=stream)
        for _ in range(50):
            test.update(rng.lognormal(0, 0.4, 20), rng.lognormal(-0.05, 0.4, 20))
        wrong += test.decision == "reject" and test.result().b_larger
    assert wrong == 0


@pytest.mark.parametrize("tuned", [False, True])
def test_state_round_trip_continues_identically(tuned: bool) -> None:
    """Also with values waiting for a partner (B sends fewer), and with tuned weights."""
    rng = np.random.default_rng(5)
    lam, w = tuned_bets(0.05) if tuned else (None, None)
    test = RankBettingTest(0.05, seed=9, lambdas=lam, weights=w)
    for _ in range(5):
        test.update(np.round(rng.lognormal(0, 0.4, 20), 2), rng.lognormal(0.1, 0.4, 17))
    assert test.to_state()["wait_a"]
    # Equal weights: the state is the one before weights (format 1, no "weights").
    assert (test.to_state()["format"], "weights" in test.to_state()) == (
        (2, True) if tuned else (1, False))
    _copies_continue_identically(test, rng)


def _copies_continue_identically(test: RankBettingTest, rng: np.random.Generator
                                 ) -> RankBettingTest:
    """Copies of ``test`` through JSON and through the canary's path (the state without the
    arms' data, given them back) continue as it does for five more looks; the JSON copy."""
    full = test.to_state()
    copy = RankBettingTest.from_state(json.loads(json.dumps(full)))
    rebuilt = RankBettingTest.from_state({**test.to_state(data=False),
                                          "support": full["support"],
                                          "counts_a": full["counts_a"],
                                          "counts_b": full["counts_b"]})
    for _ in range(5):
        a, b = rng.lognormal(0, 0.4, 20), rng.lognormal(0.1, 0.4, 20)
        want = test.update(a, b)
        assert copy.update(a, b) == want
        assert rebuilt.update(a, b) == want
    return copy


def test_rank_effect_is_mann_whitney_u() -> None:
    """Kept up to date look by look, with ties and values waiting for a partner: the scored
    values' Mann–Whitney U / (n_a n_b)."""
    rng = np.random.default_rng(6)
    test = RankBettingTest()
    for n_a, n_b in ((200, 150), (10, 90), (33, 0), (0, 40)):
        test.update(np.round(rng.normal(0, 1, n_a), 1), np.round(rng.normal(0.3, 1, n_b), 1))
        scored_a, scored_b = test._a, test._b
        a = np.repeat(scored_a.values, scored_a.counts())
        b = np.repeat(scored_b.values, scored_b.counts())
        u = stats.mannwhitneyu(b, a).statistic
        assert test.result().effect == pytest.approx(u / (a.size * b.size), rel=1e-12)
    assert RankBettingTest.from_state(test.to_state()).result() == test.result()


@pytest.mark.parametrize("state_change", [
    {"format": 2}, {"format": 3}, {"weights": [1 / 24] * 24}, {"decision": "accept"},
    {"log_bets": [0.0]},
    {"support": [2.0, 1.0], "counts_a": [1, 1], "counts_b": [0, 0]}, {"log_max": -1.0},
])
def test_bad_states_raise(state_change: dict[str, object]) -> None:
    test = RankBettingTest()
    test.update([1.0, 2.0], [3.0])
    with pytest.raises(ValueError, match=r"\w"):
        RankBettingTest.from_state({**test.to_state(), **state_change})


@pytest.mark.parametrize("kwargs", [{"alpha": 0.0}, {"alpha": 1.0}, {"lambdas": [1.0]},
                                    {"lambdas": []}])
def test_bad_parameters_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"\w"):
        RankBettingTest(**kwargs)  # type: ignore[arg-type]


def test_nan_raises() -> None:
    with pytest.raises(ValueError, match="finite"):
        RankBettingTest().update([np.nan], [1.0])


def test_log_wealth_with_weights() -> None:
    x = np.array([0.3, -0.2, 0.9, -1.0, 0.0])
    lam = np.array([0.5, 0.1, -0.25])
    w = np.array([0.2, 0.5, 0.3])
    per_bet, mixture = log_wealth(x, lam, start=np.array([0.1, 0.0, -0.2]), weights=w)
    np.testing.assert_allclose(mixture, np.log(w @ np.exp(per_bet)), rtol=1e-12)
    _, equal_mix = log_wealth(x, lam, weights=np.full(3, 1 / 3))
    np.testing.assert_allclose(equal_mix, log_wealth(x, lam)[1], rtol=1e-12)
    for bad in ([0.5, 0.5, 0.5], [1.0, 0.0, 0.0], [0.5, 0.5]):
        with pytest.raises(ValueError, match="weights"):
            log_wealth(x, lam, weights=bad)


def test_tuned_bets() -> None:
    """The bets tuned to a stated effect: ``f lambda_s`` per side with ``lambda_s = 3
    delta_s``, the most weight on 0.7, the default grid's smaller bets sharing the tail."""
    effect = 0.0344  # lognormal, log-sd 0.4, median +5 %
    lam, w = tuned_bets(effect)
    k = len(TUNED_FACTORS)
    np.testing.assert_allclose(lam[:k], 3 * effect * np.array(TUNED_FACTORS))
    np.testing.assert_allclose(w[:k], (1 - TUNED_TAIL) * np.array(TUNED_WEIGHTS) / 2)
    half = lam.size // 2
    np.testing.assert_array_equal(lam[half:], -lam[:half])
    np.testing.assert_array_equal(w[half:], w[:half])
    assert math.isclose(w.sum(), 1.0)
    tail = lam[k:half]
    assert tail.size
    assert np.all(tail < lam[:k].min())
    assert set(tail.tolist()) <= set(bets()[:12].tolist())
    assert lam[int(np.argmax(w))] == pytest.approx(0.7 * 3 * effect)
    one, w1 = tuned_bets(effect, two_sided=False)
    np.testing.assert_array_equal(one, lam[:half])
    np.testing.assert_allclose(w1, 2 * w[:half])
    big, _ = tuned_bets(0.4)  # capped at lambda_max
    assert np.abs(big).max() == 0.5
    for bad in (0.0, 0.5, -0.1):
        with pytest.raises(ValueError, match="effect"):
            tuned_bets(bad)
    with pytest.raises(ValueError, match="factors"):
        tuned_bets(effect, factors=(1.0,), weights=(0.5, 0.5))


def test_tuned_bets_type_one_error_and_speed() -> None:
    """The tuned bets keep Ville's bound under A/A (150 streams up to 3,000 per arm, looked
    at after every batch of 20) and, at the stated effect, stop sooner than the default
    grid on the same streams (lognormal median +10 %, 60 streams: the 80 % point of the
    stopping n)."""
    rng = np.random.default_rng(2205)
    effect = 0.0669  # P(B > A) - 1/2 at median +10 %, lognormal log-sd 0.4
    sets = {"default": (bets(), np.full(24, 1 / 24)), "2s": tuned_bets(effect),
            "1s": tuned_bets(effect, two_sided=False)}
    stops = run_sets(rng, lognormal(), lognormal(), 150, 3_000, sets)
    for name, s in stops.items():
        assert np.isfinite(s).sum() <= 0.05 * 150 + 2 * math.sqrt(0.05 * 0.95 * 150), name
    stops = run_sets(rng, lognormal(), lognormal(1.10), 60, 3_000, sets)
    q = {name: np.quantile(s, 0.8) for name, s in stops.items()}
    assert q["1s"] < q["2s"] < q["default"]


def test_weights_change_the_wealth_and_bad_weights_raise() -> None:
    """The same data under tuned weights and under equal weights on the same bets differ
    (the weights are used), and weights that do not fit the bets raise."""
    lam, w = tuned_bets(0.05)
    rng = np.random.default_rng(8)
    a, b = rng.lognormal(0, 0.4, 200), rng.lognormal(0.1, 0.4, 200)
    tuned = RankBettingTest(seed=1, lambdas=lam, weights=w).update(a, b)
    flat = RankBettingTest(seed=1, lambdas=lam).update(a, b)
    assert tuned.log_wealth != pytest.approx(flat.log_wealth, rel=1e-6)
    for bad in (w[:-1], w * 2, -w):
        with pytest.raises(ValueError, match="weights"):
            RankBettingTest(lambdas=lam, weights=bad)


def _pairs_effect(a: np.ndarray, d: float) -> float:
    """``P(A' + d > A) + P(A' + d = A)/2`` over ordered pairs i != j, by comparison."""
    total = 0.0
    for i in range(a.size):
        for j in range(a.size):
            if i != j:
                total += 1.0 if a[i] + d > a[j] else 0.5 if a[i] + d == a[j] else 0.0
    return total / (a.size * (a.size - 1))


@pytest.mark.parametrize("d", [40.0, -40.0, 1.0, -1.0])
def test_shifted_effect_against_pairs(d: float) -> None:
    """theta_hat(d) against a double loop, continuous values and values on a grid (ties at
    the shift: half)."""
    rng = np.random.default_rng(31)
    for a in (rng.lognormal(np.log(800), 0.4, 60), np.round(rng.lognormal(0, 0.3, 60) * 5)):
        assert shifted_effect(a, d) == pytest.approx(_pairs_effect(a, d), abs=1e-12)
    assert shifted_effect(np.array([1.0]), d) == 0.5


def test_adaptive_effects_of_the_simulation_per_look() -> None:
    """The simulation's prefix counts give ``shifted_effect`` of the A values scored before
    each look (NaN until ``ADAPTIVE_MIN_A``)."""
    rng = np.random.default_rng(32)
    a = rng.gamma(6.25, 120.0, (3, 200))
    for d in (35.0, -35.0):
        got = adaptive_effects(a, d, step=20)
        assert got.shape == (3, 10)
        assert np.all(np.isnan(got[:, :3]))
        for row in range(3):
            for look in range(3, 10):
                assert got[row, look] == pytest.approx(shifted_effect(a[row, :20 * look], d),
                                                       abs=1e-12)


def test_adaptive_lambdas_and_weights() -> None:
    """Fixed K per side (tuned factors, then the default grid), fallback before the effect
    is estimated, clipping, signs per side; weights fixed and summing to 1."""
    k = len(TUNED_FACTORS)
    lam = adaptive_lambdas(np.array([np.nan, 0.03, 0.4, -0.01]), np.nan, 1)
    assert lam.shape == (4, k + STEPS)
    np.testing.assert_allclose(lam[0, :k], ADAPTIVE_FALLBACK)
    np.testing.assert_allclose(lam[1, :k], 0.09 * np.array(TUNED_FACTORS))
    assert lam[2, :k].max() == 0.5
    assert lam[3, :k].min() == bets()[STEPS - 1]
    np.testing.assert_array_equal(lam[:, k:], np.broadcast_to(bets()[:STEPS], (4, STEPS)))
    down = adaptive_lambdas(np.nan, 0.03, -1)
    np.testing.assert_allclose(down, -lam[1])
    both = adaptive_lambdas(0.03, 0.02, 0)
    np.testing.assert_allclose(both[: k + STEPS], lam[1])
    np.testing.assert_allclose(both[k + STEPS:], -adaptive_lambdas(0.02, np.nan, 1))
    for sides, size in ((1, k + STEPS), (0, 2 * (k + STEPS))):
        w = adaptive_weights(sides)
        assert w.shape == (size,)
        assert math.isclose(w.sum(), 1.0)
    np.testing.assert_allclose(adaptive_weights(1)[:k],
                               (1 - TUNED_TAIL) * np.array(TUNED_WEIGHTS))


def test_held_out_bets() -> None:
    """tuned_bets at theta_hat(+d) - 1/2 (B larger), 1/2 - theta_hat(-d) (B smaller)."""
    a = np.random.default_rng(3).lognormal(np.log(800), 0.4, HELD_OUT)
    up, down = shifted_effect(a, 80.0) - 0.5, 0.5 - shifted_effect(a, -80.0)
    assert 0.0 < up < 0.49
    assert 0.0 < down < 0.49
    for got, want in ((held_out_bets(a, 80.0, 1), tuned_bets(up, two_sided=False)),
                      (held_out_bets(a, 80.0, -1), tuple(-x if k == 0 else x for k, x in
                                                        enumerate(tuned_bets(
                                                            down, two_sided=False))))):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    lam, w = held_out_bets(a, 80.0, 0)
    assert (lam > 0).sum() == (lam < 0).sum()
    assert math.isclose(w.sum(), 1.0)
    assert math.isclose(w[lam > 0].sum(), 0.5)
    # a stated change far beyond the spread: the effect is clipped, the bets stay < 1
    assert np.all(np.abs(held_out_bets(a, 1e6, 0)[0]) < 1.0)
    for change, sides in ((0.0, 1), (-1.0, 1), (math.nan, 1), (1.0, 2)):
        with pytest.raises(ValueError, match="change"):
            held_out_bets(a, change, sides)
        with pytest.raises(ValueError, match="tuned"):
            RankBettingTest(tuned=(change, sides))


def test_a_tuned_test_holds_out_its_first_a_values_then_bets_as_they_set() -> None:
    """Nothing is scored before HELD_OUT A values are held; they set the bets and are never
    scored: afterwards the test is a test with those bets fed the other values."""
    rng = np.random.default_rng(8)
    held = rng.lognormal(0, 0.4, HELD_OUT)
    early = RankBettingTest(0.05, seed=4, tuned=(0.05, 1))
    first = early.update(held[:12], rng.lognormal(0, 0.4, 30))  # B before A's held values
    assert (early.ready, first.log_wealth, first.n_a, first.n_b, first.effect) == (
        False, 0.0, 12, 30, 0.5)
    test = RankBettingTest(0.05, seed=4, tuned=(0.05, 1))
    test.update(held[:12], [])
    test.update(held[12:], [])
    assert test.ready
    lam, w = held_out_bets(held, 0.05, 1)
    np.testing.assert_array_equal(test.lambdas, lam)
    np.testing.assert_array_equal(test.weights, w)
    assert np.all(test.lambdas > 0)  # one-sided: "B larger" only
    # the same later looks through a test built with those bets (its looks counter where
    # the tuned test's is, so that both draw the same orders and smoothing)
    reference = RankBettingTest(0.05, seed=4, lambdas=lam, weights=w)
    reference._looks = test._looks  # noqa: SLF001
    for _ in range(6):
        a, b = rng.lognormal(0, 0.4, 20), rng.lognormal(0.1, 0.4, 20)
        got, want = test.update(a, b), reference.update(a, b)
        assert got.log_wealth == want.log_wealth
        assert got.p_value == want.p_value
        assert (got.n_a, got.n_b) == (want.n_a + HELD_OUT, want.n_b)
        assert got.effect == want.effect
    assert test.result().log_wealth != 0.0


@pytest.mark.parametrize("looks", [1, 4])
def test_a_tuned_tests_state_round_trip_continues_identically(looks: int) -> None:
    """Before the held-out values are complete (1 look) and after (4), through JSON and
    through the canary's path (the arms' data passed back)."""
    rng = np.random.default_rng(6)
    test = RankBettingTest(0.05, seed=2, tuned=(0.1, 0))
    for _ in range(looks):
        test.update(np.round(rng.lognormal(0, 0.4, 7), 2), rng.lognormal(0.1, 0.4, 5))
    state = test.to_state()
    assert (state["format"], state["tuned"], len(state["held"])) == (
        3, [0.1, 0], min(HELD_OUT, 7 * looks))
    assert _copies_continue_identically(test, rng).to_state() == test.to_state()
    with pytest.raises(ValueError, match="format"):
        RankBettingTest.from_state({**state, "format": 1})
    with pytest.raises(ValueError, match="held"):
        RankBettingTest.from_state({**state, "held": state["held"] * 3})


def test_a_tuned_test_keeps_type_one_error_and_stops_sooner_at_its_change() -> None:
    """Through the class, batches of 20 per arm looked at after each: A/A (60 streams up
    to 1,500 per arm) rejects within Ville's bound; lognormal median +10 % stated as a
    change of 10 % of the median (30 streams): one-sided tuned bets stop sooner than the
    default grid on the same streams (the 80 % point of the stopping n)."""
    def stop(test: RankBettingTest, rng: np.random.Generator, factor: float,
             n: int) -> float:
        for _ in range(n // 20):
            if test.update(rng.lognormal(0, 0.4, 20),
                           factor * rng.lognormal(0, 0.4, 20)).decision == "reject":
                return float(test.n_a)
        return math.inf

    change = 0.1  # 10 % of the median (1.0)
    rejected = sum(np.isfinite(stop(RankBettingTest(0.05, seed=s, tuned=(change, 1)),
                                    np.random.default_rng(900 + s), 1.0, 1500))
                   for s in range(60))
    assert rejected <= 0.05 * 60 + 2 * math.sqrt(0.05 * 0.95 * 60)
    tuned, default = [], []
    for s in range(30):
        tuned.append(stop(RankBettingTest(0.05, seed=s, tuned=(change, 1)),
                          np.random.default_rng(700 + s), 1.10, 3000))
        default.append(stop(RankBettingTest(0.05, seed=s), np.random.default_rng(700 + s),
                            1.10, 3000))
    assert np.quantile(tuned, 0.8) < np.quantile(default, 0.8)
