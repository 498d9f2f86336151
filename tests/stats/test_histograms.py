"""Histogram distances and the build-series change rule (deviations.stats.histograms)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import distance as spd

from deviations.stats.histograms import (
    bhattacharyya,
    bhattacharyya_coefficient,
    classify_change,
    common_edges,
    detect_changes,
    detect_changes_adaptive,
    hellinger,
    lagged_hellinger,
    normalise,
    rebin,
)
from tests.stats.samples import expected_series, noisy

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "histograms"

# --- reference values ------------------------------------------------------------------
# Produced once with OpenCV 5.0.0 (opencv-python-headless, installed outside the project):
#   cv2.compareHist(np.float32(p), np.float32(q), cv2.HISTCMP_BHATTACHARYYA)
# OpenCV computes sqrt(1 - sum(sqrt(p*q)) / sqrt(mean(p) * mean(q) * N^2)). Each value is
# also derived by hand below, with BC = sum sqrt(p_i q_i) on normalised histograms:
OPENCV_HISTCMP_BHATTACHARYYA = [
    # p = (1,2,3,4)/10, q = (4,3,2,1)/10: BC = (2 + sqrt6 + sqrt6 + 2)/10 = 0.4 + 0.2 sqrt6,
    # H = sqrt(0.6 - 0.2 sqrt6)
    ([1, 2, 3, 4], [4, 3, 2, 1], 0.3318162917087773, math.sqrt(0.6 - 0.2 * math.sqrt(6))),
    # disjoint supports: BC = 0, H = 1
    ([10, 0, 0], [0, 5, 5], 1.0, 1.0),
    # BC = sqrt(.45) + sqrt(.05) = 2/sqrt5; OpenCV works in float32 (hence the 7th digit)
    ([0.5, 0.5], [0.9, 0.1], 0.3249196919600545, math.sqrt(1 - 2 / math.sqrt(5))),
    # p = (.3,.1,0,0,.6), q = .2 each: BC = sqrt(.06) + sqrt(.02) + sqrt(.12)
    (
        [3, 1, 0, 0, 6],
        [1, 1, 1, 1, 1],
        0.5169327886394877,
        math.sqrt(1 - math.sqrt(0.06) - math.sqrt(0.02) - math.sqrt(0.12)),
    ),
    # same distribution at another total: H = 0 (the distance ignores sample size)
    ([2, 2], [1, 1], 0.0, 0.0),
    # p = (1/4, 3/4), q = (3/4, 1/4): BC = 2 sqrt(3/16) = sqrt3/2, H = sqrt(1 - sqrt3/2)
    ([1, 3], [3, 1], 0.3660254037844387, math.sqrt(1 - math.sqrt(3) / 2)),
]


@pytest.mark.parametrize(("p", "q", "opencv", "by_hand"), OPENCV_HISTCMP_BHATTACHARYYA)
def test_hellinger_matches_opencv_and_hand_derivation(p, q, opencv, by_hand):
    h = float(hellinger(p, q))
    assert h == pytest.approx(by_hand, abs=1e-12)
    assert h == pytest.approx(opencv, abs=1e-7)  # float32 inside OpenCV
    assert float(hellinger(q, p)) == pytest.approx(h, abs=1e-15)


def test_bhattacharyya_is_minus_log_of_the_coefficient():
    # p = (1/4, 3/4), q = (3/4, 1/4): BC = sqrt3/2, D_B = -ln(sqrt3/2) = 0.143841036...
    assert float(bhattacharyya_coefficient([1, 3], [3, 1])) == pytest.approx(math.sqrt(3) / 2)
    assert float(bhattacharyya([1, 3], [3, 1])) == pytest.approx(0.1438410362258904, rel=1e-12)
    assert float(bhattacharyya([5, 5], [1, 1])) == 0.0
    assert float(bhattacharyya([1, 0], [0, 1])) == math.inf


def test_hellinger_agrees_with_scipy_euclidean_on_square_roots():
    # H^2 = 1 - BC = (1/2) sum (sqrt p - sqrt q)^2, so H = ||sqrt p - sqrt q||_2 / sqrt 2.
    rng = np.random.default_rng(1)
    p = rng.gamma(0.5, size=(20, 30))
    q = rng.gamma(0.5, size=(20, 30))
    ours = hellinger(p, q)
    pn, qn = normalise(p), normalise(q)
    ref = [
        spd.euclidean(np.sqrt(a), np.sqrt(b)) / math.sqrt(2) for a, b in zip(pn, qn, strict=True)
    ]
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-14)
    # and the Bhattacharyya coefficient with scipy's Jensen-Shannon-free identity check:
    # D_B >= H^2 (since -ln x >= 1 - x)
    assert np.all(bhattacharyya(p, q) >= ours**2 - 1e-15)


def test_distances_broadcast_over_leading_axes():
    rng = np.random.default_rng(2)
    many = rng.poisson(50, size=(3, 4, 12))
    one = rng.poisson(50, size=12)
    out = hellinger(many, one)
    assert out.shape == (3, 4)
    assert out[2, 1] == pytest.approx(float(hellinger(many[2, 1], one)))


@pytest.mark.parametrize(
    ("p", "q", "message"),
    [
        ([0, 0, 0], [1, 2, 3], "empty histogram"),
        ([1, -1, 3], [1, 2, 3], "non-negative"),
        ([1, np.nan, 3], [1, 2, 3], "finite"),
        ([1, 2, 3], [1, 2], "bucket layouts differ"),
        ([], [], "at least one bucket"),
    ],
)
def test_invalid_histograms_raise(p, q, message):
    with pytest.raises(ValueError, match=message):
        hellinger(p, q)


def test_rebin_splits_mass_proportionally():
    # [4, 6] on [0, 2, 4] -> halves of each bucket on [0, 1, 2, 3, 4]
    np.testing.assert_allclose(rebin([4, 6], [0, 2, 4], [0, 1, 2, 3, 4]), [2, 2, 3, 3])
    # wider new edges: the uncovered part receives nothing, the mass is kept
    np.testing.assert_allclose(rebin([4, 6], [0, 2, 4], [-1, 0.5, 4, 9]), [1, 9, 0])
    edges = common_edges([0, 2, 4], [0, 1, 4])
    np.testing.assert_allclose(edges, [0, 1, 2, 4])
    a = rebin([4, 6], [0, 2, 4], edges)
    b = rebin([3, 7], [0, 1, 4], edges)
    np.testing.assert_allclose(a, [2, 2, 6])
    np.testing.assert_allclose(b, [3, 7 / 3, 14 / 3])
    assert float(hellinger(a, b)) > 0
    # splitting only never changes the distance of one histogram to itself
    assert float(hellinger(a, rebin([4, 6], [0, 2, 4], edges))) == 0.0


def test_rebin_rejects_edges_that_lose_mass():
    with pytest.raises(ValueError, match="do not cover"):
        rebin([4, 6], [0, 2, 4], [0, 1, 3])
    with pytest.raises(ValueError, match="strictly increasing"):
        rebin([4, 6], [0, 2, 2], [0, 4])


# --- the rule --------------------------------------------------------------------------


def test_lasting_shift_is_reported_at_its_build():
    scan = detect_changes(expected_series(shift_at=20))
    assert scan.changed.nonzero()[0].tolist() == [20]
    change = scan.changes()[0]
    assert change.build == 20
    assert change.kind == "shift"
    assert change.shift_buckets == pytest.approx(3.0)
    assert change.distance > 0.12
    reasons = [d.reason for d in scan.decisions()]
    assert reasons[:4] == ["too few past builds"] * 4
    assert reasons[21] == "below cutoff"


def test_one_build_spike_is_not_reported():
    scan = detect_changes(expected_series(shift_at=20, duration=1))
    assert not scan.changed.any()
    assert scan.decisions()[20].reason == "not persistent"
    # the return to normal right after the spike: far from the spike, near the past
    assert scan.decisions()[21].reason == "past unstable"


def test_low_data_probe_is_skipped_with_its_reason():
    series = expected_series(shift_at=20, n=5000)  # largest bucket ~ 500 < 1000
    scan = detect_changes(series)
    assert not scan.changed.any()
    assert set(scan.reason.tolist()) == {"too little data"}
    adaptive = detect_changes_adaptive(series)
    assert set(adaptive.reason.tolist()) == {"too little data"}


def test_change_with_an_unstable_past_is_rejected():
    series = expected_series(shift_at=17)
    series[20:] = expected_series(shift_at=0, shift=6.0)[20:]
    scan = detect_changes(series)
    assert scan.changed.nonzero()[0].tolist() == [17]
    decision = scan.decisions()[20]
    assert decision.reason == "past unstable"
    assert decision.distance > 0.12
    assert decision.past_std > 0.01


def test_end_of_series_waits_for_later_builds():
    scan = detect_changes(expected_series(shift_at=39))
    assert scan.decisions()[39].reason == "awaiting later builds"


def test_later_build_without_data_cannot_confirm():
    series = expected_series(shift_at=20)
    series[21] = 0.0
    scan = detect_changes(series)
    assert scan.decisions()[20].reason == "later build has too little data"


def test_adaptive_finds_small_lasting_shift_that_the_fixed_cutoff_misses():
    rng = np.random.default_rng(3)
    series = noisy(expected_series(builds=50, shift_at=30, shift=1.0, n=2e5), rng)
    fixed = detect_changes(series)
    adaptive = detect_changes_adaptive(series)
    assert not fixed.changed.any()
    assert fixed.decisions()[30].reason == "below cutoff"
    found = adaptive.changed.nonzero()[0].tolist()
    assert len(found) == 1
    assert found[0] in (30, 31)
    assert adaptive.kind[found[0]] == "shift"
    assert adaptive.cutoff[30] < 0.12


def test_adaptive_ignores_one_build_spike():
    rng = np.random.default_rng(4)
    series = noisy(expected_series(builds=50, shift_at=30, shift=3.0, duration=1), rng)
    scan = detect_changes_adaptive(series)
    assert not scan.changed.any()
    assert scan.decisions()[30].reason == "not persistent"


def test_classify_change_shift_vs_shape():
    base = expected_series(builds=1)[0]
    moved = expected_series(builds=1, shift_at=0, shift=2.5)[0]
    assert classify_change(base, moved) == ("shift", 2.5)
    wide = expected_series(builds=1, sd=5.5)[0]
    assert classify_change(base, wide)[0] == "shape"
    second = expected_series(builds=1, shift_at=0, shift=12.0)[0]
    before, after = 0.65 * base + 0.35 * second, 0.4 * base + 0.6 * second
    assert classify_change(before, after)[0] == "shape"


def test_lagged_hellinger_layout():
    rng = np.random.default_rng(5)
    c = rng.poisson(100, size=(2, 6, 8)).astype(float)
    D = lagged_hellinger(c, 3)
    assert D.shape == (2, 6, 3)
    assert np.isnan(D[:, 0, :]).all()
    assert np.isnan(D[:, 1, 1:]).all()
    assert D[1, 5, 2] == pytest.approx(float(hellinger(c[1, 5], c[1, 2])))


def test_rule_is_vectorised_and_fast():
    rng = np.random.default_rng(6)
    counts = rng.poisson(3000, size=(1000, 60, 50)).astype(float)
    start = time.perf_counter()
    fixed = detect_changes(counts)
    adaptive = detect_changes_adaptive(counts)
    elapsed = time.perf_counter() - start
    assert fixed.changed.shape == adaptive.changed.shape == (1000, 60)
    # well under a second each on an idle machine; generous bound for a shared CI host
    assert elapsed < 3.0


# --- real data -------------------------------------------------------------------------


def _glam(kind):
    path = DATA / f"glam__{kind}_histogram_build_id.json"
    if not path.exists():
        pytest.skip(f"shared GLAM data not found at {path}")
    rows = sorted(json.loads(path.read_text())["response"], key=lambda r: r["build_id"])
    buckets = sorted({int(b) for r in rows for b in r["histogram"]})
    share = np.array([[r["histogram"].get(str(b), 0.0) for b in buckets] for r in rows])
    users = np.array([r["total_users"] for r in rows], dtype=float)
    # GLAM gives normalised buckets and a client count: counts ~ share x clients
    return share * users[:, None]


@pytest.mark.parametrize("kind", ["boolean", "enumerated", "exponential"])
def test_glam_nightly_series_raises_no_alert(kind):
    counts = _glam(kind)
    assert counts.shape[0] == 134
    for scan in (detect_changes(counts), detect_changes_adaptive(counts)):
        assert not scan.changed.any(), scan.changes()


def test_glam_spikes_are_rejected_for_the_right_reason():
    counts = _glam("exponential")
    scan = detect_changes(counts)
    spikes = np.nonzero(scan.distance > 0.12)[0]
    assert spikes.size >= 4  # the isolated spikes of the data set exceed Mozilla's cutoff
    assert set(scan.reason[spikes].tolist()) <= {"not persistent", "past unstable"}
