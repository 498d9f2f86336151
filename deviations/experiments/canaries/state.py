"""The canary's stored sequential state, updated incrementally (the only glue to the
statistics, ``deviations.stats.sequential`` and, for ``method="signs"``,
``deviations.stats.signs``, whose small state is stored whole in ``CanaryState.summary``;
for ``method="ranks"``, ``deviations.stats.betting``, whose wealth is stored in the
summary and whose data are the distribution-function test's;
with ``Canary.quantiles`` set, ``deviations.stats.quantiles`` decides: its evidence and
decisions are stored in the summary, its data are the distribution-function test's).

``apply_pending`` locks the ``CanaryState`` row, takes the test as it stood after batch
``applied_seq`` and adds the batches received since, in one update (looking after a group
of batches instead of after each keeps the test valid: the running minimum of the p-value
is taken over fewer looks, eq. 21), at most ``MAX_APPLY_VALUES`` observations at a time: a
worker back from a long outage reads its backlog in pieces, one update (and look) each,
not all at once (``Applied.more`` says that some are left; the task goes on). The test as
it stood comes from this process's memory when nobody wrote since (the usual case: one
worker keeps applying the batches of its canaries), otherwise from the
``CanaryCheckpoint`` plus the few batches after it; it is never rebuilt from all
observations. Checkpoints are written when the observations since the last one reach the
number it held (and at least ``CHECKPOINT_MIN``): the bytes written stay about twice the
final state, and a cold start replays at most half the data; with a resolution (bounded
state) also every ``CHECKPOINT_MAX_REPLAY`` observations, so a cold start replays at most
that many.

With ``Canary.resolution`` r > 0 the tests hold the observations rounded down to the
grid ``{0, ±(1+r)^k}`` (``stats.resolution.to_grid``; the stored batches stay exact): the
tests' type I error is unchanged, their state and the checkpoint are bounded by the grid
points the values reach, and every quantile band shown is widened by one grid step above
(``widen_band``, ``widen_difference``) so that it holds for the exact values.

A batch applied twice changes nothing: batches are applied by ``seq`` after
``applied_seq``, under the row lock, and ``applied_seq`` moves in the same transaction.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from deviations.core.packing import INT, pack, unpack
from deviations.experiments.canaries.models import (
    Canary,
    CanaryBatch,
    CanaryCheckpoint,
    CanaryPoint,
    CanaryState,
)
from deviations.stats.betting import RankBettingTest
from deviations.stats.quantiles import QuantileSequentialTest, QuantileVerdict
from deviations.stats.resolution import to_grid, widen_band, widen_difference
from deviations.stats.sequential import SequentialTest
from deviations.stats.signs import SequentialSignTest

#: The quantile grid the page draws (and the headline reads the median and the chosen
#: quantile from): steps of 0.005, enough for a smooth quantile function.
GRID = np.round(np.arange(1, 200) * 0.005, 3)
#: A checkpoint is written once this many observations (at least) arrived since the last.
CHECKPOINT_MIN = 50_000
#: With a resolution the checkpoint is bounded by the grid (a few MiB at most), so it is
#: written at least every this many observations: a cold worker replays at most these
#: (16 MB of float64) instead of half the run.
CHECKPOINT_MAX_REPLAY = 2_000_000
#: Tests kept in this process's memory (one per canary, the most recently updated).
CACHE_SIZE = 8
#: The most observations one update reads (its batches' values and their grid copies are
#: held at once); a backlog larger than this is applied in several updates.
MAX_APPLY_VALUES = 1_000_000

REGRESSION, IMPROVEMENT, NO_DIFFERENCE, KEEP_GOING = (
    "regression", "improvement", "no_difference", "keep_going",
)

#: The test that decides instead of the DKW test (``method`` signs or ranks).
Other = SequentialSignTest | RankBettingTest

#: canary id -> (applied_seq, the test, the sign or rank test, observations its checkpoint
#: holds, the quantile test).
_cache: OrderedDict[int, tuple[int, SequentialTest, Other | None, int,
                               QuantileSequentialTest | None]] = OrderedDict()


def grid_for(canary: Canary) -> np.ndarray:
    return np.unique(np.concatenate((GRID, [0.5, round(canary.quantile, 6)])))


def headline_for(canary: Canary, decision: str, b_values_larger: bool) -> str:
    """regression / improvement / no_difference / keep_going.

    The test is two-sided (``"equal"``: the same boundary as a one-sided test, so no power
    is lost on the bad side); which side rejected says regression or improvement. For a
    count metric the tested values are waiting times: longer waits mean fewer events.
    """
    if decision == "accept":
        return NO_DIFFERENCE
    if decision != "reject":
        return KEEP_GOING
    if canary.bad == Canary.ANY:
        return REGRESSION
    metric_higher = b_values_larger != canary.count
    bad_higher = canary.bad == Canary.HIGHER
    return REGRESSION if metric_higher == bad_higher else IMPROVEMENT


def _finite(values: np.ndarray) -> list[float | None]:
    """The values as a JSON list, ``None`` where infinite (a band past the data)."""
    out: list[float | None] = values.tolist()
    for i in np.flatnonzero(~np.isfinite(values)).tolist():
        out[i] = None
    return out


def summarise(canary: Canary, test: SequentialTest) -> dict[str, Any]:
    """What the page draws: both arms' quantile bands and the band on Q_B - Q_A on the grid
    (``None`` where a band still reaches past the data)."""
    out: dict[str, Any] = {}
    if test.n_a == 0 or test.n_b == 0:
        return out
    # sup and inf of F_B - F_A: which way the distributions differ (B larger: inf < 0).
    out["sup_diff"], out["inf_diff"] = test.sup_difference, test.inf_difference
    bands = test.quantile_bands(grid_for(canary))
    out["p"] = bands.a.p.tolist()
    r = canary.resolution
    # Bands for the quantiles of the gridded values, made bands for the exact ones.
    ends = {"a": widen_band(bands.a.lo, bands.a.hi, r), "b": widen_band(bands.b.lo, bands.b.hi, r),
            "diff": widen_difference(bands.diff.lo, bands.diff.hi, (bands.a.lo, bands.a.hi),
                                     (bands.b.lo, bands.b.hi), r)}
    for key, band in (("a", bands.a), ("b", bands.b), ("diff", bands.diff)):
        lo, hi = ends[key]
        out[key] = {"estimate": _finite(band.estimate), "lo": _finite(lo), "hi": _finite(hi)}
    return out


def _empty_state(canary: Canary, state: CanaryState) -> dict[str, Any]:
    return {
        "format": 1, "hypothesis": "equal", "alpha": canary.alpha, "tau": canary.tau,
        "n_a": 0, "n_b": 0, "p_value": state.p_value, "decision": state.decision,
        "decided_at": None if state.decided_n_a is None
        else [state.decided_n_a, state.decided_n_b],
        "support": np.empty(0), "counts_a": np.empty(0, dtype=np.int64),
        "counts_b": np.empty(0, dtype=np.int64),
    }


def _batches(canary: Canary, after: int, upto: int | None = None) -> tuple[
        int, np.ndarray, np.ndarray]:
    """The batches after seq ``after`` (to ``upto``), each arm's values on the canary's grid."""
    canary_id = canary.pk
    rows = CanaryBatch.objects.filter(canary_id=canary_id, seq__gt=after)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    last, a, b = after, [], []
    for seq, arm, data in rows.order_by("seq").values_list("seq", "arm", "values"):
        (a if arm == "A" else b).append(unpack(data))
        last = seq
    empty = np.empty(0)
    return (last, to_grid(np.concatenate(a) if a else empty, canary.resolution),
            to_grid(np.concatenate(b) if b else empty, canary.resolution))


def _restore(canary: Canary, state: CanaryState) -> SequentialTest:
    """The test after batch ``state.applied_seq``: checkpoint plus the batches after it,
    with the stored running minimum and decision (the checkpoint's data alone do not
    remember the looks in between)."""
    payload = _empty_state(canary, state)
    own = (state.summary or {}).get("dkw")
    if own is not None:  # with the sign test deciding, the state's fields are its own
        payload.update(p_value=own["p_value"], decision=own["decision"],
                       decided_at=own["decided_at"])
    start = 0
    checkpoint = CanaryCheckpoint.objects.filter(canary=canary).first()
    if checkpoint is not None and checkpoint.seq <= state.applied_seq:
        start = checkpoint.seq
        payload.update(
            n_a=checkpoint.n_a, n_b=checkpoint.n_b, support=unpack(checkpoint.support),
            counts_a=unpack(checkpoint.counts_a, INT), counts_b=unpack(checkpoint.counts_b, INT),
        )
    test = SequentialTest.from_state(payload)
    if state.applied_seq > start:
        _, a, b = _batches(canary, start, state.applied_seq)
        # The same data as at the last stored look: the p-value and the rules evaluate as
        # they did then, so the stored minimum and decision stand.
        test.update(a, b)
    return test


def _quantile_test(canary: Canary, state: CanaryState,
                   test: SequentialTest) -> QuantileSequentialTest:
    """The quantile test after batch ``state.applied_seq``: the stored evidence and
    decisions (summary) with the distribution-function test's data, which are the same
    observations."""
    saved = ((state.summary or {}).get("quantiles") or {}).get("state")
    if saved is None:
        saved = QuantileSequentialTest(canary.quantiles, canary.alpha).to_state(data=False)
    data = test.to_state()
    return QuantileSequentialTest.from_state({
        **saved, "support": data["support"], "counts_a": data["counts_a"],
        "counts_b": data["counts_b"],
    })


def _rank_test(canary: Canary, state: CanaryState, test: SequentialTest) -> RankBettingTest:
    """The rank betting test after batch ``state.applied_seq``: its stored wealth and
    decision (summary) with the distribution-function test's data (the same observations,
    on the same grid)."""
    saved = (state.summary or {}).get("ranks")
    if saved is None:  # a new run: tuned to the canary's smallest change, if it has one
        return RankBettingTest(canary.alpha, seed=canary.pk, tuned=canary.rank_tuning())
    data = test.to_state()
    return RankBettingTest.from_state({
        **saved, "support": data["support"], "counts_a": data["counts_a"],
        "counts_b": data["counts_b"],
    })


def _verdict_row(verdict: QuantileVerdict, band: Any, resolution: float) -> dict[str, Any]:
    diff = widen_difference(band.diff_lo, band.diff_hi, (band.lo_a, band.hi_a),
                            (band.lo_b, band.hi_b), resolution)
    return {
        "q": verdict.q, "label": verdict.label, "decision": verdict.decision,
        "decided_at": None if verdict.decided_at is None else list(verdict.decided_at),
        "p_above": verdict.p_above, "p_below": verdict.p_below,
        "estimate_a": verdict.estimate_a, "estimate_b": verdict.estimate_b,
        "diff": _finite(np.array([float(diff[0]), float(diff[1])])),
    }


def summarise_quantiles(qtest: QuantileSequentialTest, resolution: float) -> dict[str, Any]:
    """The quantile test's small state (no data) and one row per quantile for the page."""
    out: dict[str, Any] = {"state": qtest.to_state(data=False), "verdicts": []}
    if qtest.n_a and qtest.n_b:
        result = qtest.result()
        out["verdicts"] = [_verdict_row(v, band, resolution) for v, band in
                           zip(result.verdicts, qtest.intervals(), strict=True)]
    return out


def _checkpoint(canary: Canary, seq: int, test: SequentialTest) -> None:
    saved = test.to_state()
    CanaryCheckpoint.objects.update_or_create(canary=canary, defaults={
        "seq": seq, "n_a": test.n_a, "n_b": test.n_b,
        "support": pack(saved["support"]),
        "counts_a": pack(saved["counts_a"], INT), "counts_b": pack(saved["counts_b"], INT),
    })


@dataclass(frozen=True)
class Applied:
    batches: int
    rejected_now: bool  # this update reached the decision "reject": tell the owners
    more: bool = False  # batches beyond MAX_APPLY_VALUES wait for the next update


NOTHING = Applied(0, False)


def _upto(canary_id: int, after: int) -> tuple[int, bool]:
    """The last seq of the batches after ``after`` that one update applies (at least one
    batch, at most ``MAX_APPLY_VALUES`` observations when it can), and whether more wait."""
    total, upto = 0, after
    pending = CanaryBatch.objects.filter(canary_id=canary_id, seq__gt=after).order_by("seq")
    for seq, n in pending.values_list("seq", "n").iterator(chunk_size=2000):
        if upto > after and total + n > MAX_APPLY_VALUES:
            return upto, True
        total, upto = total + n, seq
    return upto, False


def apply_pending(canary_id: int) -> Applied:
    """Apply the batches received since the last update (committed when it returns)."""
    with transaction.atomic():
        state = (
            CanaryState.objects.select_for_update(of=("self",)).select_related("canary")
            .filter(canary_id=canary_id).first()
        )
        if state is None:
            return NOTHING
        canary = state.canary
        if canary.batches_received <= state.applied_seq:
            return NOTHING
        upto, more = _upto(canary_id, state.applied_seq)
        last, a, b = _batches(canary, state.applied_seq, upto)
        if last == state.applied_seq:
            return NOTHING
        cached = _cache.pop(canary_id, None)  # taken: put back only once committed
        if cached is not None and cached[0] == state.applied_seq:
            # Nobody else wrote since (applied_seq moves with every write): neither the
            # test nor the checkpoint changed.
            _, test, other, held, qtest = cached
        else:
            test = _restore(canary, state)
            checkpoint = CanaryCheckpoint.objects.filter(canary_id=canary_id).values_list(
                "n_a", "n_b").first()
            held = sum(checkpoint) if checkpoint else 0
            other: Other | None = None
            if canary.method == Canary.SIGNS:
                other = (SequentialSignTest.from_state(state.summary["signs"])
                         if "signs" in state.summary
                         else SequentialSignTest(canary.alpha, seed=canary.pk))
            elif canary.method == Canary.RANKS:
                other = _rank_test(canary, state, test)
            qtest = _quantile_test(canary, state, test) if canary.quantiles else None
        applied = last - state.applied_seq
        dkw_before = test.decision
        result = test.update(a, b)
        own = {"p_value": result.p_value, "decision": result.decision,
               "decided_at": None if result.decided_at is None else list(result.decided_at)}
        if qtest is not None:  # the quantiles decide; the DKW test draws the bands
            before = "reject" if qtest.result().decided_by else "continue"
            q_result = qtest.update(a, b)
            decision = "reject" if q_result.decided_by else "continue"
            first = next((v for v in q_result.verdicts if q_result.decided_by
                          and v.q == q_result.decided_by[0]), None)
            decided_at = None if first is None else first.decided_at
            p_value = p_now = min(min(v.p_above, v.p_below) for v in q_result.verdicts)
            b_larger = first is not None and first.decision == "b_above"
        elif other is None:  # the distribution-function test decides
            before, decision = dkw_before, result.decision
            p_value, p_now, decided_at = result.p_value, result.p_value_now, result.decided_at
            b_larger = -test.inf_difference >= test.sup_difference
        else:  # the sign or rank test decides; the bands still come from the DKW test
            before = other.decision
            other_result = other.update(a, b)
            decision, decided_at = other_result.decision, other_result.decided_at
            p_value = p_now = other_result.p_value
            b_larger = other_result.b_larger
        state.applied_seq = last
        state.n_a, state.n_b = result.n_a, result.n_b
        state.statistic = result.statistic
        state.p_value, state.p_value_now = p_value, p_now
        state.decision = decision
        newly = before == "continue" and decision != "continue"
        if newly:
            state.headline = headline_for(canary, decision, b_larger)
            assert decided_at is not None
            state.decided_n_a, state.decided_n_b = decided_at
            state.decided_at = timezone.now()
        state.summary = {**summarise(canary, test), "dkw": own}
        if isinstance(other, SequentialSignTest):
            state.summary["signs"] = other.to_state()
        elif other is not None:
            state.summary["ranks"] = other.to_state(data=False)
            state.summary["rank_effect"] = other.result().effect
        if qtest is not None:
            state.summary["quantiles"] = summarise_quantiles(qtest, canary.resolution)
        state.save()
        CanaryPoint.objects.create(
            canary_id=canary_id, seq=last, n_a=result.n_a, n_b=result.n_b,
            p_value=p_value, p_value_now=p_now,
        )
        # Exact values: every time the data double (the bytes written stay about twice the
        # final state). On a grid the state is bounded: also every CHECKPOINT_MAX_REPLAY.
        due = held if not canary.resolution else min(held, CHECKPOINT_MAX_REPLAY)
        if result.n_a + result.n_b - held >= max(CHECKPOINT_MIN, due):
            _checkpoint(canary, last, test)
            held = result.n_a + result.n_b

        def remember() -> None:
            _cache[canary_id] = (last, test, other, held, qtest)
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)

        transaction.on_commit(remember)
    return Applied(applied, newly and decision == "reject", more)


def forget_cache() -> None:
    """Drop the tests held in memory (tests use it to force a restore)."""
    _cache.clear()
