"""Canary services and the incremental state: batches atomic and idempotent by id, count
metrics through waiting times, the state updated incrementally and equal to one test over
all the data, restored from a checkpoint after a cold start, stopping once decided."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from deviations.core.errors import UserError
from deviations.core.packing import unpack
from deviations.experiments.canaries import selectors, services, state, tasks
from deviations.experiments.canaries.models import (
    Canary,
    CanaryBatch,
    CanaryCheckpoint,
    CanaryPoint,
    CanaryState,
)
from deviations.stats.betting import RankBettingTest
from deviations.stats.resolution import grid_up, to_grid
from deviations.stats.sequential import SequentialTest, inter_arrival_times
from deviations.stats.signs import SequentialSignTest

pytestmark = pytest.mark.django_db


def _canary(**kw: Any) -> Canary:
    """A canary; seed 000's DKW test unless the test names another method (the tests of
    the distribution-function test's state were written for it)."""
    kw.setdefault("method", Canary.DKW)
    return services.create_canary(kw.pop("name", "play"), bad=kw.pop("bad", "higher"), **kw)


def test_default_method() -> None:
    """The rank betting test, unless tau or quantiles need the DKW test's data."""
    assert services.create_canary("r", bad="higher").method == Canary.RANKS
    assert services.create_canary("t", bad="higher", tau=0.1).method == Canary.DKW
    assert services.create_canary("q", bad="higher", quantiles=[0.5]).method == Canary.DKW
    assert services.create_canary("d", bad="higher", method="dkw").method == Canary.DKW
    with pytest.raises(UserError, match="tau"):
        services.create_canary("x", bad="higher", method="ranks", tau=0.1)
    with pytest.raises(UserError, match="method"):
        services.create_canary("x", bad="higher", method="mean")


def _state(canary: Canary) -> CanaryState:
    return CanaryState.objects.get(canary=canary)


@pytest.mark.parametrize(("field", "kwargs", "message"), [
    ("name", {"name": " "}, "name"),
    ("bad", {"bad": "worse"}, "bad"),
    ("alpha", {"alpha": 0.7}, "alpha"),
    ("tau", {"tau": 1.5}, "tau"),
    ("resolution", {"resolution": 0.5}, "resolution"),
    ("resolution", {"resolution": -1e-4}, "resolution"),
    ("quantile", {"quantile": 1.0}, "quantile"),
    ("min_effect", {"min_effect": -1.0}, "min_effect"),
    ("owners", {"owners": ["not-an-address"]}, "owners"),
])
def test_create_refuses_bad_fields(field: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        _canary(**kwargs)
    assert not Canary.objects.exists()


def test_a_bad_batch_is_refused_whole(committed: Any) -> None:
    canary = _canary()
    for values, message in [
        ([1.0, float("nan")], r"values\[1\]: not a finite number"),
        ([1.0, "2"], r"values\[1\]: '2' is not a number"),
        ([1.0, True], r"values\[1\]"),
        ("1,2", "a list of numbers"),
        (None, "values: required"),
    ]:
        with pytest.raises(UserError, match=message):
            committed(services.receive_batch, canary.pk, "b1", "A", values)
    with pytest.raises(UserError, match="arm"):
        services.receive_batch(canary.pk, "b1", "C", [1.0])
    with pytest.raises(UserError, match="batch"):
        services.receive_batch(canary.pk, "", "A", [1.0])
    with pytest.raises(UserError, match="at most"):
        services.receive_batch(canary.pk, "big", "A", [1.0] * (services.MAX_BATCH + 1))
    with pytest.raises(UserError, match="no canary"):
        services.receive_batch(canary.pk + 1, "b1", "A", [1.0])
    assert not CanaryBatch.objects.exists()
    assert Canary.objects.get(pk=canary.pk).batches_received == 0


def test_batches_are_idempotent_by_id(committed: Any) -> None:
    canary = _canary()
    first = committed(services.receive_batch, canary.pk, "ci-1", "A", [1.0, 2.0])
    again = committed(services.receive_batch, canary.pk, "ci-1", "A", [1.0, 2.0])
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    with pytest.raises(services.ConflictError, match="already received with other data"):
        services.receive_batch(canary.pk, "ci-1", "A", [1.0, 3.0])
    with pytest.raises(services.ConflictError):
        services.receive_batch(canary.pk, "ci-1", "B", [1.0, 2.0])
    assert CanaryBatch.objects.count() == 1
    assert _state(canary).n_a == 2


def test_state_is_incremental_and_equals_one_test_on_all_data(committed: Any) -> None:
    canary = _canary(tau=None)
    rng = np.random.default_rng(3)
    a, b = rng.gamma(10, 10, 3000), rng.gamma(10, 10, 3000)
    reference = SequentialTest("equal")
    for i in range(6):
        part = slice(i * 500, (i + 1) * 500)
        committed(services.receive_batch, canary.pk, f"a{i}", "A", a[part].tolist())
        committed(services.receive_batch, canary.pk, f"b{i}", "B", b[part].tolist())
        # the test holds the values on the canary's grid (default resolution 1e-4)
        reference.update(to_grid(a[part], canary.resolution), [])
        reference.update([], to_grid(b[part], canary.resolution))
    st = _state(canary)
    assert (st.applied_seq, st.n_a, st.n_b) == (12, 3000, 3000)
    assert st.p_value == pytest.approx(reference.p_value, rel=1e-12)
    assert st.statistic == pytest.approx(reference.statistic)
    assert st.decision == reference.decision == "continue"
    assert CanaryPoint.objects.filter(canary=canary).count() == 12
    # applying again changes nothing
    assert state.apply_pending(canary.pk) == state.NOTHING
    assert _state(canary).updated == st.updated
    bands = reference.quantile_bands(state.grid_for(canary))
    np.testing.assert_allclose(st.summary["diff"]["estimate"], bands.diff.estimate)


def test_a_cold_worker_restores_from_the_checkpoint(committed: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(state, "CHECKPOINT_MIN", 1000)
    canary = _canary(tau=0.05)
    rng = np.random.default_rng(4)
    warm = SequentialTest("equal", tau=0.05)
    for i in range(13):
        values = rng.normal(0, 1, 400)
        arm = "AB"[i % 2]
        committed(services.receive_batch, canary.pk, f"x{i}", arm, values.tolist())
        held = to_grid(values, canary.resolution)
        warm.update(held if arm == "A" else [], held if arm == "B" else [])
        if i == 7:
            state.forget_cache()
    checkpoint = CanaryCheckpoint.objects.get(canary=canary)
    assert checkpoint.seq == 12  # at 1,200, 2,400 and 4,800 observations
    assert int(unpack(checkpoint.counts_a, np.dtype("<i8")).sum()) == checkpoint.n_a
    st = _state(canary)
    assert (st.n_a, st.n_b) == (warm.n_a, warm.n_b)
    assert st.p_value == pytest.approx(warm.p_value, rel=1e-12)
    assert st.decision == warm.decision
    # a cold restore reproduces the cached test exactly
    cached = state._cache[canary.pk][1]
    state.forget_cache()
    restored = state._restore(canary, st)
    assert restored.same_state(cached)
    assert restored.p_value == cached.p_value


def test_count_metric_is_tested_through_waiting_times(committed: Any) -> None:
    canary = _canary(count=True, bad="lower")  # play starts: fewer is bad
    rng = np.random.default_rng(5)
    t_a = np.cumsum(rng.exponential(1.0, 4000))
    t_b = np.cumsum(rng.exponential(1.6, 4000))  # B starts fewer plays: longer waits
    for i in range(8):
        part = slice(i * 500, (i + 1) * 500)
        committed(services.receive_batch, canary.pk, f"a{i}", "A", None, t_a[part].tolist())
        committed(services.receive_batch, canary.pk, f"b{i}", "B", None, t_b[part].tolist())
        if _state(canary).decision != "continue":
            break
    sent = (i + 1) * 500
    waits = np.concatenate([unpack(v) for v in CanaryBatch.objects.filter(
        canary=canary, arm="A").order_by("seq").values_list("values", flat=True)])
    np.testing.assert_allclose(waits, inter_arrival_times(t_a[:sent]))
    st = _state(canary)
    assert st.n_a == sent - 1  # the first event only starts the clock
    assert st.decision == "reject"
    assert st.headline == "regression"
    services.continue_canary(canary)
    with pytest.raises(UserError, match="precedes the last event"):
        services.receive_batch(canary.pk, "late", "A", None, [1.0])
    with pytest.raises(UserError, match="timestamps"):
        services.receive_batch(canary.pk, "vals", "A", [1.0])


@pytest.mark.parametrize(("bad", "count", "b_larger", "headline"), [
    ("higher", False, True, "regression"),
    ("higher", False, False, "improvement"),
    ("lower", False, True, "improvement"),
    ("lower", False, False, "regression"),
    ("any", False, False, "regression"),
    ("lower", True, True, "regression"),  # longer waits: fewer events
    ("higher", True, True, "improvement"),
])
def test_headline_follows_the_bad_direction(bad: str, count: bool, b_larger: bool,
                                            headline: str) -> None:
    canary = Canary(bad=bad, count=count)
    assert state.headline_for(canary, "reject", b_larger) == headline
    assert state.headline_for(canary, "accept", b_larger) == "no_difference"
    assert state.headline_for(canary, "continue", b_larger) == "keep_going"


def test_decided_canary_takes_no_more_until_continued(committed: Any) -> None:
    canary = _canary(bad="lower")
    rng = np.random.default_rng(6)
    committed(services.receive_batch, canary.pk, "a", "A", rng.normal(10, 1, 3000).tolist())
    committed(services.receive_batch, canary.pk, "b", "B", rng.normal(9, 1, 3000).tolist())
    st = _state(canary)
    assert (st.decision, st.headline) == ("reject", "regression")
    assert (st.decided_n_a, st.decided_n_b) == (3000, 3000)
    with pytest.raises(services.DecidedError, match="continue it first"):
        services.receive_batch(canary.pk, "c", "A", [10.0])
    services.continue_canary(canary)
    committed(services.receive_batch, canary.pk, "c", "A", [10.0])
    st = _state(canary)
    assert st.n_a == 3001
    assert (st.decision, st.decided_n_a) == ("reject", 3000)  # the decision stays


def test_tolerance_accepts_no_difference(committed: Any) -> None:
    canary = _canary(tau=0.3)
    rng = np.random.default_rng(7)
    n = selectors.samples_bound(canary)
    assert n is not None
    committed(services.receive_batch, canary.pk, "a", "A", rng.normal(0, 1, n).tolist())
    committed(services.receive_batch, canary.pk, "b", "B", rng.normal(0, 1, n).tolist())
    st = _state(canary)
    assert (st.decision, st.headline) == ("accept", "no_difference")


def _feed_until_decided(canary: Canary, a: np.ndarray, b: np.ndarray, committed: Any
                        ) -> None:
    """Batches of 100 of each arm (``a``, ``b`` in order) until the canary decides."""
    for i in range(len(a) // 100):
        part = slice(i * 100, (i + 1) * 100)
        committed(services.receive_batch, canary.pk, f"a{i}", "A", a[part].tolist())
        committed(services.receive_batch, canary.pk, f"b{i}", "B", b[part].tolist())
        if _state(canary).decision != "continue":
            break


def _a_cold_worker_continues_the_rank_test(canary: Canary, rng: np.random.Generator,
                                          committed: Any) -> RankBettingTest:
    """A cold worker rebuilds a decided canary's rank test from its stored wealth and the
    DKW test's data, and after two more batches holds what the warm one would have: that
    test (Gamma(10, 10) against Gamma(10, 11) values)."""
    services.continue_canary(canary)
    warm = state._cache[canary.pk][2]
    assert warm is not None
    warm_state = warm.to_state()
    state.forget_cache()
    more_a, more_b = rng.gamma(10, 10, 30), rng.gamma(10, 11, 20)
    committed(services.receive_batch, canary.pk, "more-a", "A", more_a.tolist())
    committed(services.receive_batch, canary.pk, "more-b", "B", more_b.tolist())
    rebuilt = state._cache[canary.pk][2]
    assert isinstance(rebuilt, RankBettingTest)
    reference = RankBettingTest.from_state(warm_state)
    reference.update(to_grid(more_a, canary.resolution), [])
    reference.update([], to_grid(more_b, canary.resolution))
    assert rebuilt.to_state() == reference.to_state()
    return rebuilt


def test_sign_and_rank_methods_decide_sooner_on_a_shift(committed: Any) -> None:
    """The same Gamma(10, 10) against Gamma(10, 11) batches to a canary of each method."""
    rng = np.random.default_rng(15)
    a, b = rng.gamma(10, 10, 5000), rng.gamma(10, 11, 5000)
    decided = {}
    for method in ("dkw", "signs", "ranks"):
        canary = _canary(name=method, method=method)
        _feed_until_decided(canary, a, b, committed)
        st = _state(canary)
        assert (st.decision, st.headline) == ("reject", "regression")
        decided[method] = st.decided_n_a
        points = list(CanaryPoint.objects.filter(canary=canary).values_list(
            "p_value", flat=True))
        assert points == sorted(points, reverse=True)  # running minimum
    assert decided["ranks"] <= decided["signs"] < decided["dkw"]
    ranks = Canary.objects.get(name="ranks")
    view = selectors.canary_view(ranks)
    assert view["words"][0].startswith("B's values are larger than A's: a B value exceeds "
                                       "an A value with probability 0.")
    assert "rank betting test" in view["words"][0]
    assert view["method_text"].startswith("rank betting test")
    # a cold worker rebuilds the rank test from its stored wealth and the DKW test's data,
    # and continues as the warm one would have
    reference = _a_cold_worker_continues_the_rank_test(ranks, rng, committed)
    assert _state(ranks).summary["ranks"] == reference.to_state(data=False)
    view = selectors.canary_view(Canary.objects.get(name="signs"))
    assert view["words"][0].startswith("B's values are larger than A's in ")
    assert "sign test" in view["words"][0]
    # a cold worker restores both tests (the sign test from the stored state)
    canary = Canary.objects.get(name="signs")
    services.continue_canary(canary)
    state.forget_cache()
    committed(services.receive_batch, canary.pk, "more", "A", a[:100].tolist())
    assert _state(canary).n_a == decided["signs"] + 100
    with pytest.raises(UserError, match="tau"):
        _canary(method="signs", tau=0.1)


def test_a_burst_of_batches_is_one_message_and_one_update_in_order(
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Batches received while an update is queued send no message of their own; the one
    queued applies them all at once, in ``seq`` order, each exactly once."""
    canary = _canary(name="burst", method="signs")
    rng = np.random.default_rng(16)
    batches = [("AB"[i % 2], f"x{i}", rng.gamma(10, 10, 50 + 10 * i)) for i in range(7)]
    with django_capture_on_commit_callbacks(execute=False) as queued:
        for arm, batch_id, values in batches:
            services.receive_batch(canary.pk, batch_id, arm, values.tolist())
        # a batch sent again while pending is a duplicate: stored once, no message
        again = services.receive_batch(canary.pk, "x3", "B", batches[3][2].tolist())
    assert again.duplicate
    assert len(queued) == 1  # the first batch's message; the others saw it queued
    assert Canary.objects.get(pk=canary.pk).update_queued
    assert CanaryBatch.objects.filter(canary=canary).count() == 7
    queued[0]()  # the message arrives: the task
    st = _state(canary)
    assert (st.applied_seq, st.n_a) == (7, sum(v.size for arm, _, v in batches if arm == "A"))
    assert list(CanaryPoint.objects.filter(canary=canary).values_list("seq", flat=True)) == [7]
    # in seq order: the sign test pairs A's and B's observations in arrival order
    reference = SequentialSignTest(canary.alpha, seed=canary.pk)
    r = canary.resolution
    reference.update(to_grid(np.concatenate([v for arm, _, v in batches if arm == "A"]), r),
                     to_grid(np.concatenate([v for arm, _, v in batches if arm == "B"]), r))
    assert st.summary["signs"] == reference.to_state()
    reordered = SequentialSignTest(canary.alpha, seed=canary.pk)
    reordered.update(to_grid(np.concatenate([v for arm, _, v in batches[::-1] if arm == "A"]), r),
                     to_grid(np.concatenate([v for arm, _, v in batches[::-1] if arm == "B"]), r))
    assert st.summary["signs"] != reordered.to_state()
    # the message again (a redelivery) or the sweeper's: nothing to apply, nothing changes
    assert not Canary.objects.get(pk=canary.pk).update_queued
    assert tasks.update_canary(canary.pk) == 0
    assert _state(canary).updated == st.updated
    # the next batch finds nothing queued and sends a message again
    with django_capture_on_commit_callbacks(execute=False) as sent:
        services.receive_batch(canary.pk, "y", "A", [100.0])
    assert len(sent) == 1
    sent[0]()
    assert _state(canary).applied_seq == 8


def test_a_batch_committed_while_the_task_runs_is_not_left_behind(
    django_capture_on_commit_callbacks: Any, monkeypatch: Any,
) -> None:
    """The task clears the flag before it reads the batches: a batch that arrives after
    the read queues its own message (none is lost between the two)."""
    canary = _canary(name="race")
    with django_capture_on_commit_callbacks(execute=False) as queued:
        services.receive_batch(canary.pk, "first", "A", [1.0, 2.0])
    apply = state.apply_pending
    late: list[Any] = []

    def apply_then_receive(canary_id: int) -> state.Applied:
        applied = apply(canary_id)  # read and applied "first"
        with django_capture_on_commit_callbacks(execute=False) as sent:
            services.receive_batch(canary_id, "late", "B", [3.0])
        late.extend(sent)
        return applied

    monkeypatch.setattr(state, "apply_pending", apply_then_receive)
    queued[0]()
    assert len(late) == 1  # "late" sent a message: the flag was clear
    monkeypatch.setattr(state, "apply_pending", apply)
    late[0]()
    assert (_state(canary).applied_seq, _state(canary).n_b) == (2, 1)


def test_a_refused_batch_stores_nothing_and_queues_nothing(
    django_capture_on_commit_callbacks: Any,
) -> None:
    canary = _canary()
    services.receive_batch(canary.pk, "ok", "A", [1.0])
    with django_capture_on_commit_callbacks(execute=False) as queued:
        for values in ([2.0, float("inf")], [2.0, None], np.array([True, False]),
                       np.array(["1.0"]), [[1.0]]):
            with pytest.raises(UserError):
                services.receive_batch(canary.pk, "bad", "A", values)
    assert queued == []
    assert list(CanaryBatch.objects.values_list("batch_id", flat=True)) == ["ok"]
    assert Canary.objects.get(pk=canary.pk).batches_received == 1
    # numbers of any numeric type are taken, whole
    assert services.receive_batch(canary.pk, "ints", "A", np.arange(3)).n == 3
    assert services.receive_batch(canary.pk, "mixed", "A", [1, 2.5, 3]).n == 3


def test_the_p_value_axis_reads_in_powers_of_ten() -> None:
    """Issue 23: the axis labelled a p-value of 1e-4 "100µ" (Plotly's SI prefixes)."""
    from deviations.experiments.canaries import charts

    figure = charts.pvalue_figure([(1, 100, 0.5, 0.01), (2, 200, 0.001, 0.0001)], 0.05)
    assert figure["layout"]["yaxis"]["exponentformat"] == "power"
    assert figure["layout"]["yaxis"]["type"] == "log"


def test_resolution_bounds_the_checkpoint_and_widens_the_bands(
        committed: Any, monkeypatch: Any) -> None:
    """At r = 1e-3, 6,000 continuous latencies per arm between ~200 and ~3,000 ms hold at
    most ln(15)/ln(1.001) + 1 ≈ 2,710 grid points (6,000 exact); the bands shown are those
    of the gridded values with each upper end one grid step higher; r = 0 keeps the exact
    values (the canaries created before the resolution existed)."""
    monkeypatch.setattr(state, "CHECKPOINT_MIN", 1000)
    monkeypatch.setattr(state, "CHECKPOINT_MAX_REPLAY", 2000)
    rng = np.random.default_rng(24)
    a = np.clip(rng.lognormal(np.log(800), 0.4, 6000), 200, 3000)
    b = np.clip(rng.lognormal(np.log(800), 0.4, 6000), 200, 3000)
    sizes = {}
    for r in (1e-3, 0.0):
        canary = _canary(name=f"r{r}", resolution=r)
        for i in range(6):
            part = slice(i * 1000, (i + 1) * 1000)
            committed(services.receive_batch, canary.pk, f"a{i}", "A", a[part].tolist())
            committed(services.receive_batch, canary.pk, f"b{i}", "B", b[part].tolist())
        checkpoint = CanaryCheckpoint.objects.get(canary=canary)
        support = unpack(checkpoint.support)
        sizes[r] = support.size
        # exact: at 1,000, 2,000, 4,000, 8,000 observations; on the grid also every 2,000
        assert checkpoint.n_a + checkpoint.n_b == (12_000 if r else 8_000)
        held = np.concatenate((a[:checkpoint.n_a], b[:checkpoint.n_b]))
        np.testing.assert_array_equal(to_grid(support, r), support)
        st = _state(canary)
        reference = SequentialTest("equal")
        reference.update(to_grid(a, r), to_grid(b, r))
        bands = reference.quantile_bands(state.grid_for(canary))
        hi = np.array([np.inf if x is None else x for x in st.summary["a"]["hi"]])
        np.testing.assert_array_equal(hi, grid_up(bands.a.hi, r))
        finite = np.isfinite(bands.a.hi)
        assert finite.sum() > 100
        if r:
            assert np.all(hi[finite] > bands.a.hi[finite])
        else:
            np.testing.assert_array_equal(hi, bands.a.hi)
        lo = np.array([-np.inf if x is None else x for x in st.summary["diff"]["lo"]])
        assert np.all(lo <= bands.diff.lo)
        assert sizes[r] == np.unique(to_grid(held, r)).size
    assert sizes[0.0] > 7_900  # all distinct but the clipped ends
    assert sizes[1e-3] <= math.log(15) / math.log(1.001) + 1


def test_a_long_backlog_is_applied_in_pieces_of_bounded_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker back from an outage found every batch received meanwhile and read them all
    at once (issue 24): now at most ``MAX_APPLY_VALUES`` observations per update, one look
    each, the task going on until none is left; a batch larger than the bound alone."""
    canary = _canary(name="backlog")
    rng = np.random.default_rng(8)
    for i in range(10):  # not committed: received, not applied (the worker was away)
        services.receive_batch(canary.pk, f"a{i}", "A", rng.gamma(10, 10, 30).tolist())
        services.receive_batch(canary.pk, f"b{i}", "B", rng.gamma(10, 10, 30).tolist())
    services.receive_batch(canary.pk, "big", "A", rng.gamma(10, 10, 250).tolist())
    assert _state(canary).applied_seq == 0
    monkeypatch.setattr(state, "MAX_APPLY_VALUES", 100)
    pieces: list[tuple[int, int]] = []
    real = state._upto

    def spy(canary_id: int, after: int) -> tuple[int, bool]:
        upto, more = real(canary_id, after)
        pieces.append((after, upto))
        return upto, more

    monkeypatch.setattr(state, "_upto", spy)
    assert tasks.update_canary(canary.pk) == 21
    st = _state(canary)
    assert (st.applied_seq, st.n_a, st.n_b) == (21, 550, 300)
    assert pieces == [(0, 3), (3, 6), (6, 9), (9, 12), (12, 15), (15, 18), (18, 20), (20, 21)]
    sizes = [sum(CanaryBatch.objects.filter(canary=canary, seq__gt=a, seq__lte=b)
                 .values_list("n", flat=True)) for a, b in pieces]
    assert sizes == [90] * 6 + [60, 250]  # the bound, but one batch is never split
    assert CanaryPoint.objects.filter(canary=canary).count() == len(pieces)
    assert state.apply_pending(canary.pk) == state.NOTHING


def test_a_canary_with_a_smallest_change_tunes_its_rank_test(committed: Any) -> None:
    """min_effect with the rank test: bets tuned to it from the first 20 A values (held
    out, not scored), on the bad side only; the page says so; a cold worker continues it;
    a canary whose bad side is the other one does not reject on this change."""
    rng = np.random.default_rng(16)
    a, b = rng.gamma(10, 10, 5000), rng.gamma(10, 11, 5000)  # median +10 %: ~10 ms
    tuned = _canary(name="tuned", method="ranks", min_effect=10.0, unit="ms")
    other = _canary(name="other", method="ranks", min_effect=10.0, bad="lower")
    assert tuned.rank_tuning() == (10.0, 1)
    assert other.rank_tuning() == (10.0, -1)
    text = selectors.method_text(tuned)
    assert text.startswith("rank betting test tuned to a change of 10 ms (its bets set by "
                           "the first 20 A values, which it does not score)")
    assert text.endswith("looks for B larger only")
    for canary in (tuned, other):
        _feed_until_decided(canary, a, b, committed)
    st = _state(tuned)
    assert (st.decision, st.headline) == ("reject", "regression")
    ranks = st.summary["ranks"]
    assert (ranks["format"], ranks["tuned"], len(ranks["held"])) == (3, [10.0, 1], 20)
    assert set(ranks["held"]) <= set(to_grid(a[:100], tuned.resolution).tolist())
    assert _state(other).decision == "continue"  # B larger is not the bad side there
    # a canary without min_effect keeps the default grid, two-sided
    plain = _canary(name="plain", method="ranks")
    assert plain.rank_tuning() is None
    assert selectors.method_text(plain) == plain.get_method_display()
    # a cold worker rebuilds the tuned test from its stored state and continues as the warm
    # one would have
    assert _a_cold_worker_continues_the_rank_test(tuned, rng, committed).tuned == (10.0, 1)
