"""The shift rule (``deviations.stats.releases.shifts``): windows, finality, the one
comparison behind each verdict, one-run releases."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from deviations.stats.releases import (
    APPEARED,
    IMPROVEMENT,
    NO_VERDICT,
    NONSIGNIFICANT_OVERLAP,
    REGRESSION,
    SIGNIFICANT_OVERLAP,
    VANISHED,
    compare_matrix,
    get_rule,
    shift_verdicts,
    shift_windows,
)
from deviations.stats.releases.rules import (
    EARLY_ALPHA,
    MAX_AFTER,
    MIN_AFTER,
    RUNS_AFTER,
    RUNS_BEFORE,
)
from deviations.stats.releases.shifts import _moses_rank, _shift_intervals

DEVIATIONS = (REGRESSION, IMPROVEMENT)


def steps(rng: np.random.Generator, functions: int, releases: int, runs: int, *,
          at: int, factor: float, sd: float = 0.05) -> np.ndarray:
    """Lognormal runs around 1 ms, the first half of the functions stepping by ``factor``
    after release ``at``."""
    x = 1000.0 * rng.lognormal(0.0, sd, (functions, releases, runs))
    x[: functions // 2, at + 1 :] *= factor
    return x


# --- windows ---------------------------------------------------------------------------------


def test_windows_reach_the_runs_they_need():
    runs = np.full(40, 5)
    win = shift_windows(runs)
    after = max(MIN_AFTER, -(-RUNS_AFTER // 5))
    b = 20
    assert win.final[b]
    assert win.final_at[b] == b + after
    assert win.stop[b] == b + after
    assert win.start[b] == b - RUNS_BEFORE // 5 + 1
    # One run a release: the most releases after, and before.
    one = shift_windows(np.ones(60, dtype=int))
    assert one.final_at[20] == 20 + MAX_AFTER
    # Many runs a release: never fewer than MIN_AFTER releases after.
    many = shift_windows(np.full(30, 100))
    assert many.final_at[10] == 10 + MIN_AFTER


def test_provisional_boundaries_share_one_window_to_the_newest_release():
    runs = np.full(30, 5)
    win = shift_windows(runs)
    late = ~win.final
    # boundary b is final once release b + 5 exists: the last 4 wait for their runs
    assert late.sum() == max(MIN_AFTER, -(-RUNS_AFTER // 5)) - 1
    assert np.all(win.stop[late] == 29)
    assert len(set(win.start[late].tolist())) == 1
    assert np.all(win.final_at[late] == -1)
    # ... with the boundary the newest release made final: one window for all five.
    just = win.final & (win.stop == 29)
    assert just.sum() == 1
    assert set(zip(win.start[late | just].tolist(), win.stop[late | just].tolist(),
                   strict=True)) == {
        (int(win.start[just][0]), 29)}


def test_ragged_runs_count_runs_not_releases():
    runs = np.array([1] * 10 + [9, 9, 9] + [1] * 10)
    win = shift_windows(runs)
    # boundary 9 (between the last one-run release and the first of 9 runs): 27 runs
    # follow in three releases, but a verdict waits for MIN_AFTER releases at least
    assert win.final_at[9] == 9 + MIN_AFTER
    assert win.final_at[0] == 0 + 11  # nine one-run releases and 9 runs: 18 < 25; 27
    assert not win.final[22 - 1]


def test_rule_objects_say_which_verdicts_are_provisional():
    runs = np.full(12, 5)
    shifts, paper = get_rule("shifts"), get_rule("paper")
    assert not paper.provisional(runs).any()
    late = shifts.provisional(runs)
    assert late[-1]
    assert not late[0]
    to_final = shifts.releases_to_final(runs)
    assert np.all(to_final[~late] == 0)
    assert np.all(to_final[late] > 0)
    with pytest.raises(ValueError, match="unknown rule"):
        get_rule("segments")


# --- verdicts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("runs", [1, 3, 5, 10])
def test_a_step_is_flagged_on_its_boundary_only(runs):
    rng = np.random.default_rng(runs)
    x = steps(rng, 20, 40, runs, at=19, factor=1.5)
    got = shift_verdicts(x)
    up = got.verdict[:10]
    assert np.mean(up[:, 19] == REGRESSION) >= 0.9
    # Elsewhere a rare false flag (about 1 in 2,000 stable boundaries) or a step placed one
    # release off (one run a release), no more.
    others = np.delete(got.verdict, 19, axis=1)
    assert np.isin(others, DEVIATIONS).sum() <= 1


def test_direction_decides_the_name():
    rng = np.random.default_rng(3)
    x = steps(rng, 10, 30, 5, at=14, factor=1.5)
    lower = shift_verdicts(x).verdict[:5, 14]
    higher = shift_verdicts(x, direction="higher_is_better").verdict[:5, 14]
    assert np.all(lower == REGRESSION)
    assert np.all(higher == IMPROVEMENT)


def test_every_flag_comes_with_its_own_numbers():
    """A regression has diff > 0, an improvement diff < 0, and the interval shown beside a
    flag excludes 0 (issue 19, item 3): they are the same comparison."""
    rng = np.random.default_rng(11)
    x = 1000.0 * rng.lognormal(0.0, 0.2, (300, 40, 5))
    x[:100, 20:] *= 1.3
    x[100:150, 25:] *= 0.75
    # Heavy tails and ties as in real traces
    x[rng.random(x.shape) < 0.05] *= 4.0
    x = np.round(x / 10.0) * 10.0
    got = shift_verdicts(x)
    reg, imp = got.verdict == REGRESSION, got.verdict == IMPROVEMENT
    assert reg.sum() > 50
    assert imp.sum() > 20
    assert np.all(got.diff[reg] > 0)
    assert np.all(got.diff_lo[reg] > 0)
    assert np.all(got.diff[imp] < 0)
    assert np.all(got.diff_hi[imp] < 0)
    flagged = reg | imp
    assert np.all(got.p_value[flagged] <= 1e-3)
    assert np.all(got.change[flagged])
    assert np.all(np.sign(got.relative[flagged]) == np.sign(got.diff[flagged]))


def test_hodges_lehmann_and_moses_interval_equal_the_pairwise_differences():
    rng = np.random.default_rng(5)
    for m, n in [(5, 5), (12, 7), (50, 25), (60, 70)]:
        a = rng.lognormal(0, 0.3, (4, m))
        b = rng.lognormal(0.2, 0.3, (4, n))
        est, lo, hi = _shift_intervals(a, b, 0.95)
        k = _moses_rank(m, n, 0.95)
        for row in range(4):
            d = np.sort((b[row][None, :] - a[row][:, None]).ravel())
            assert est[row] == pytest.approx(np.median(d))
            assert lo[row] == d[k - 1]
            assert hi[row] == d[m * n - k]


def test_moses_rank_is_the_mann_whitney_critical_value():
    """``k`` is the largest with P(U <= k - 1) <= 2.5% under the null, U counted over
    every arrangement of the pooled ranks (brute force); m = n = 10 gives Hollander &
    Wolfe's C = 24, the interval [D_(24), D_(77)]."""
    assert _moses_rank(10, 10, 0.95) == 24
    for m, n in [(4, 6), (5, 5), (6, 7)]:
        counts = np.zeros(m * n + 1)
        for left in combinations(range(m + n), m):
            u = sum(sum(1 for j in range(m + n) if j not in left and j < i) for i in left)
            counts[u] += 1
        cdf = np.cumsum(counts) / counts.sum()
        k = _moses_rank(m, n, 0.95)
        assert cdf[k - 1] <= 0.025 < cdf[k] or (k == 1 and cdf[0] > 0.025)


@pytest.mark.parametrize(("runs", "length"), [(3, 3), (5, 2), (10, 2), (1, 6)])
def test_both_ends_of_a_short_digression_and_its_mark(runs, length):
    """Both ends are flagged on their boundaries and the first is marked a digression. One
    run a release needs a longer digression: three one-run releases at another level are
    3 of ~30 runs, which a rank test cannot tell from chance among the window's places."""
    rng = np.random.default_rng(21 + runs)
    x = 1000.0 * rng.lognormal(0.0, 0.03, (6, 40, runs))
    x[:, 20 : 20 + length] *= 1.6  # up at boundary 19, back at boundary 19 + length
    m = compare_matrix(x, rule="shifts")
    share = 4 / 6 if runs == 1 else 5 / 6
    assert np.mean(m.verdict[:, 19] == REGRESSION) >= share
    assert np.mean(m.verdict[:, 19 + length] == IMPROVEMENT) >= share
    assert np.mean(m.digression[:, 19]) >= share
    assert not m.digression[:, 19 + length].any()


def test_one_run_releases_are_judged():
    rng = np.random.default_rng(2)
    x = steps(rng, 40, 60, 1, at=29, factor=1.5, sd=0.05)
    got = shift_verdicts(x)
    assert np.mean(got.verdict[:20, 29] == REGRESSION) >= 0.9
    assert np.all(got.verdict[:, :] != NO_VERDICT)


def test_a_change_of_spread_alone_is_never_a_deviation():
    rng = np.random.default_rng(8)
    noise = rng.lognormal(0.0, 0.05, (200, 40, 5))
    noise[:, 20:] = np.exp(3.0 * np.log(noise[:, 20:]))  # spread ×3, median unchanged
    got = shift_verdicts(1000.0 * noise)
    # Mann–Whitney alone flagged 0.24% of these boundaries (test_ranks: its null variance
    # assumes an equal spread); with Brunner–Munzel no more than stable series get.
    assert np.isin(got.verdict, DEVIATIONS).mean() <= 0.001


def test_stable_series_get_almost_no_flags():
    rng = np.random.default_rng(9)
    x = 1000.0 * rng.lognormal(0.0, 0.1, (300, 40, 5))
    got = shift_verdicts(x)
    assert np.isin(got.verdict, DEVIATIONS).mean() <= 0.001
    assert np.all(np.isin(got.verdict, (NONSIGNIFICANT_OVERLAP, SIGNIFICANT_OVERLAP,
                                        *DEVIATIONS)))


def test_appeared_and_vanished_one_run_releases_included():
    rng = np.random.default_rng(4)
    x = 100.0 * rng.lognormal(0.0, 0.05, (3, 30, 1))
    x[0, :15] = 0.0  # appears at release 15
    x[1, 12:] = 0.0  # vanishes after release 11
    x[2, :] = 0.0  # never measured
    got = shift_verdicts(x)
    assert got.verdict[0, 14] == APPEARED
    assert not np.isin(got.verdict[0, :14], DEVIATIONS).any()
    assert got.verdict[1, 11] == VANISHED
    assert np.all(got.verdict[2] == NO_VERDICT)


def test_a_slice_gives_the_verdicts_of_the_whole_series():
    """What an incremental analysis computes: a few boundaries from the releases of their
    windows (``offset``, ``runs`` of the whole series) equal the full computation."""
    rng = np.random.default_rng(6)
    runs = rng.integers(1, 8, 50)
    x = np.full((30, 50, runs.max()), np.nan)
    for r, n in enumerate(runs):
        x[:, r, :n] = 1000.0 * rng.lognormal(0.0, 0.1, (30, n))
    x[:10, 25:] *= 1.4
    full = shift_verdicts(x, runs=runs)
    win = shift_windows(runs)
    for ks in ([24], [10, 11, 12], list(range(40, 49))):
        first, last = int(win.start[ks].min()), int(win.stop[ks].max())
        part = shift_verdicts(x[:, first : last + 1], runs=runs, boundaries=ks, offset=first)
        for field in ("verdict", "p_value", "diff", "diff_lo", "diff_hi", "before", "first",
                      "last", "n_before", "n_after", "early"):
            np.testing.assert_array_equal(getattr(part, field), getattr(full, field)[:, ks])
    with pytest.raises(ValueError, match="do not cover"):
        shift_verdicts(x[:, 20:30], runs=runs, boundaries=[24], offset=20)


@pytest.mark.parametrize(("releases", "max_runs"), [(60, 1), (60, 5), (60, 10), (120, 3)])
def test_a_final_verdict_never_changes(releases, max_runs):
    """The replay (issue 19, item 1): releases arrive one at a time; once a boundary's
    window is complete, its verdict and every number beside it stay as they are. Each
    prefix judges the boundaries not final yet, those just final, and three older final
    ones at random (all of them would take minutes; the rule reads only the window)."""
    rng = np.random.default_rng(releases + max_runs)
    runs = rng.integers(1, max_runs + 1, releases)
    functions = 16
    x = np.full((functions, releases, max_runs), np.nan)
    for r, n in enumerate(runs):
        x[:, r, :n] = 1000.0 * rng.lognormal(0.0, 0.08, (functions, n))
    for f in range(functions // 2):  # steps and digressions
        k = int(rng.integers(5, releases - 5))
        x[f, k + 1 :] *= rng.choice([0.7, 1.3, 1.6])
        if f % 2:
            x[f, k + 1 + int(rng.integers(2, 5)) :] /= 1.45
    final_seen: dict[int, tuple[np.ndarray, ...]] = {}
    checked_again = 0
    for upto in range(2, releases + 1):
        win = shift_windows(runs[:upto])
        recent = [b for b in range(upto - 1) if not win.final[b] or b not in final_seen]
        older = [b for b in final_seen if win.final[b]]
        again = [int(b) for b in rng.choice(older, min(3, len(older)), replace=False)]
        ks = sorted(set(recent) | set(again))
        got = shift_verdicts(x[:, :upto], runs=runs[:upto], boundaries=ks)
        for col, b in enumerate(ks):
            if not got.final[col]:
                continue
            now = (got.verdict[:, col], got.p_value[:, col], got.diff[:, col],
                   got.diff_lo[:, col], got.before[:, col], got.early[:, col])
            if b in final_seen:
                checked_again += 1
                for before, after in zip(final_seen[b], now, strict=True):
                    np.testing.assert_array_equal(before, after)
            else:
                final_seen[b] = now
    assert len(final_seen) >= releases - MAX_AFTER - 1
    assert checked_again >= releases
    # and the last state agrees with every final verdict recorded on its way
    got = shift_verdicts(x, runs=runs)
    for b, seen in final_seen.items():
        np.testing.assert_array_equal(seen[0], got.verdict[:, b])


def test_early_marks_only_provisional_deviations_with_overwhelming_evidence():
    rng = np.random.default_rng(12)
    x = 1000.0 * rng.lognormal(0.0, 0.03, (10, 30, 10))
    x[:, 28:] *= 2.0  # a ×2 step before the last two releases
    got = shift_verdicts(x)
    assert not got.final[27]
    assert np.all(got.verdict[:, 27] == REGRESSION)
    # Two releases after it: early where the evidence reaches EARLY_ALPHA, not elsewhere.
    np.testing.assert_array_equal(got.early[:, 27], got.p_value[:, 27] <= EARLY_ALPHA)
    assert got.early[:, 27].sum() >= 4
    assert not got.early[:, got.final].any()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="shape"):
        shift_verdicts(np.ones((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        shift_verdicts(np.full((1, 3, 2), np.inf))
    with pytest.raises(ValueError, match="early_alpha"):
        shift_verdicts(np.ones((1, 3, 2)), alpha=1e-3, early_alpha=1e-2)
    with pytest.raises(ValueError, match="outside"):
        shift_verdicts(np.ones((1, 3, 2)), boundaries=[5])


def test_the_run_tests_skipped_where_the_release_test_decides_change_no_verdict():
    """Where Student's t of the releases is above the level at a boundary that is no change
    point, the run tests are not computed: the verdicts and every significant p-value
    equal those of computing all three tests (forced here by a level above every p)."""
    rng = np.random.default_rng(23)
    x = rng.lognormal(0, 0.2, (200, 30, 5)) * np.exp(rng.normal(0, 0.03, (200, 30, 1))) * 100
    x[:60, 15:] *= rng.choice([0.8, 1.2, 1.5], 60)[:, None, None]
    fast = shift_verdicts(x)
    full = shift_verdicts(x, alpha=1 - 1e-12, early_alpha=1e-6)  # every row tested
    significant = fast.p_value <= 1e-3
    np.testing.assert_allclose(fast.p_value[significant], full.p_value[significant])
    # With every test computed, a row the release test left above the level stays above it.
    assert np.all(full.p_value[~significant & ~fast.change] > 1e-3 - 1e-15)
