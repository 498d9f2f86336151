"""Reads of canaries: the list, one canary's stored state in words and numbers (page, API,
CLI and email say the same), the p-value over time. Nothing statistical is recomputed
here: the bands were stored by the task; "how many more samples?" is arithmetic on them.
"""

from __future__ import annotations

import math
from typing import Any

from django.db.models import QuerySet

from deviations.experiments.canaries.models import Canary, CanaryPoint, CanaryState
from deviations.stats.betting import HELD_OUT
from deviations.stats.sequential import sample_size, samples_for_width

HEADLINES = dict(CanaryState.HEADLINES)
#: Points of the p-value chart at most (thinned evenly beyond).
MAX_POINTS = 2000


def canaries() -> QuerySet[Canary]:
    return Canary.objects.select_related("state").order_by("-created", "-pk")


def _num(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"


def percentile_label(q: float) -> str:
    pct = f"{q * 100:.4g}"
    whole = pct.split(".")[0]
    suffix = "th"
    if "." not in pct and not whole.endswith(("11", "12", "13")):
        suffix = {"1": "st", "2": "nd", "3": "rd"}.get(whole[-1], "th")
    return f"the {pct}{suffix} percentile"


def effect_words(label: str, lo: float | None, hi: float | None, unit: str) -> str:
    """The band on ``Q_B - Q_A`` at one quantile in words, as in Lindon et al. 2022 Fig. 8
    ("the median rose by at least 11 and at most 255 ms"). ``None`` ends are unbounded."""
    u = f" {unit}" if unit else ""
    if lo is None and hi is None:
        return f"{label}: too few observations to bound its change yet"
    if lo is not None and lo > 0:
        most = f"at most {_num(hi)}{u}" if hi is not None else "no upper bound yet"
        return f"{label} rose by at least {_num(lo)}{u} and {most}"
    if hi is not None and hi < 0:
        most = f"at most {_num(-lo)}{u}" if lo is not None else "no bound on how much yet"
        return f"{label} fell by at least {_num(-hi)}{u} and {most}"
    low = _num(lo) if lo is not None else "−∞"
    high = _num(hi) if hi is not None else "+∞"
    return f"{label} changed by between {low} and {high}{u}: no direction known yet"


def _per_arm(at: list[int]) -> str:
    n_a, n_b = at
    if n_a == n_b:
        return f"{n_a:,} observations per arm"
    return f"{n_a:,} observations in A and {n_b:,} in B"


def quantile_words(canary: Canary, rows: list[dict[str, Any]]) -> list[str]:
    """One line per quantile the canary is judged on (``Canary.quantiles``), decided ones
    first in the order they were decided: "p99 rose: B's p99 above A's with 95 %
    anytime-valid confidence after 12,340 observations per arm"; undecided ones word the
    band on ``Q_B - Q_A`` from the joint confidence sequence (as ``effect_words``)."""
    subject = " wait between events" if canary.count else ""
    confidence = f"{100 * (1 - canary.alpha):g}%"
    decided, open_ = [], []
    for row in rows:
        label = f"{row['label']}{subject}"
        if row["decision"] == "continue":
            lo, hi = row["diff"]
            open_.append(f"{effect_words(label, lo, hi, canary.unit)} (no decision yet)")
            continue
        above = row["decision"] == "b_above"
        decided.append((row["decided_at"], (
            f"{label} {'rose' if above else 'fell'}: B's {row['label']} "
            f"{'above' if above else 'below'} A's with {confidence} anytime-valid confidence "
            f"after {_per_arm(row['decided_at'])}"
        )))
    decided.sort(key=lambda pair: sum(pair[0]))
    return [text for _, text in decided] + open_


def method_text(canary: Canary) -> str:
    """Which test decides the canary, in words (the page's "Test" row)."""
    if canary.quantiles:
        labels = ", ".join(f"p{100 * q:g}" for q in canary.quantiles)
        return (f"quantiles {labels}: an anytime-valid decision each (Bonferroni over "
                "them); the first to decide decides the canary")
    tuned = rank_tuning_used(canary)
    if tuned is not None:
        change, sides = tuned
        side = {1: "B larger only", -1: "B smaller only"}.get(sides, "either side")
        unit = f" {canary.unit}" if canary.unit else ""
        return (f"rank betting test tuned to a change of {change:g}{unit} (its bets set "
                f"by the first {HELD_OUT} A values, which it does not score); looks for "
                f"{side}")
    return str(canary.get_method_display())


def rank_tuning_used(canary: Canary) -> tuple[float, int] | None:
    """What the canary's rank test is tuned to: as stored once it has run (a canary whose
    run began before tuning keeps its untuned test), else as a new run would be."""
    if canary.method != Canary.RANKS:
        return None
    state = CanaryState.objects.filter(canary=canary).values_list("summary", flat=True).first()
    ranks = (state or {}).get("ranks")
    if ranks is not None:
        tuned = ranks.get("tuned")
        return None if tuned is None else (float(tuned[0]), int(tuned[1]))
    return canary.rank_tuning()


def samples_bound(canary: Canary) -> int | None:
    """Observations per arm by which the test has decided, whatever the data (needs tau):
    ``sample_size(tau / 2)`` (docs/statistics.md, "Sample-size bound")."""
    if canary.tau is None:
        return None
    return sample_size(canary.tau / 2 * (1 - 1e-9), alpha=canary.alpha)


def _at(summary: dict[str, Any], p: float) -> int:
    grid = summary["p"]
    return min(range(len(grid)), key=lambda i: abs(grid[i] - p))


def canary_view(canary: Canary, change: float | None = None) -> dict[str, Any]:
    """Everything the page, the API's status, the CLI and the email show about a canary.

    ``change`` is the smallest change of the median worth knowing (default the canary's
    ``min_effect``): the answer says whether the band on the median's change is already
    narrower than it and estimates the observations per arm it needs
    (``stats.sequential.samples_for_width``; anytime-valid, so looking again is allowed).
    """
    st = canary.state
    summary = st.summary or {}
    subject = "wait between events" if canary.count else ""
    words: list[str] = []
    median_band: tuple[float | None, float | None] = (None, None)
    if "p" in summary:
        for q in (0.5, canary.quantile):
            i = _at(summary, q)
            lo, hi = summary["diff"]["lo"][i], summary["diff"]["hi"][i]
            label = "the median" if q == 0.5 else percentile_label(q)
            if subject:
                label = f"{label} {subject}"
            words.append(effect_words(label, lo, hi, canary.unit))
            if q == 0.5:
                median_band = (lo, hi)
    judged = (summary.get("quantiles") or {}).get("verdicts") or []
    if canary.quantiles:
        # The quantiles' own bands (joint confidence sequences at alpha / K) replace the
        # DKW bands' words: two different bands on the same median would read as a
        # contradiction. The DKW band on the median still answers "how many more?".
        words = quantile_words(canary, judged)
    elif st.decision == "reject" and "signs" in summary:
        signs = summary["signs"]
        signed = signs["pairs"] - signs["ties"]
        larger = 2 * signs["positive"] > signed
        share = (signs["positive"] if larger else signed - signs["positive"]) / max(signed, 1)
        words.insert(0, (
            f"B's {'waits between events' if canary.count else 'values'} are "
            f"{'larger' if larger else 'smaller'} than A's in {share:.1%} of {signed} pairs "
            f"(sign test, sequential p-value {_num(st.p_value)} ≤ α = {canary.alpha:g})"
        ))
    elif "ranks" in summary and "rank_effect" in summary:
        larger = summary["ranks"]["b_larger"]
        what = "waits between events" if canary.count else "values"
        effect = summary["rank_effect"]
        if st.decision == "reject":
            words.insert(0, (
                f"B's {what} are {'larger' if larger else 'smaller'} than A's: a B value "
                f"exceeds an A value with probability {effect:.3f} (estimate; 0.5 = no "
                f"difference; rank betting test, sequential p-value {_num(st.p_value)} "
                f"≤ α = {canary.alpha:g})"
            ))
        else:
            words.append(
                f"a B value exceeds an A value with probability {effect:.3f} so far "
                f"(estimate; 0.5 = no difference; rank betting test: no decision yet)")
    elif st.decision == "reject" and "sup_diff" in summary:
        larger = -summary["inf_diff"] >= summary["sup_diff"]
        what = "waits between events" if canary.count else "values"
        gap = max(-summary["inf_diff"], summary["sup_diff"])
        words.insert(0, (
            f"B's {what} are {'larger' if larger else 'smaller'} than A's in part of the "
            f"distribution: the distribution functions differ by up to {_num(gap)} "
            f"(sequential p-value {_num(st.p_value)} ≤ α = {canary.alpha:g})"
        ))
    n_min = min(st.n_a, st.n_b)
    bound = samples_bound(canary)
    change = canary.min_effect if change is None else change
    width = None
    if median_band[0] is not None and median_band[1] is not None:
        width = median_band[1] - median_band[0]
    needed = None
    if change is not None and change > 0 and width is not None and width > 0 and n_min > 0:
        needed = samples_for_width(width, change, st.n_a, st.n_b, alpha=canary.alpha)
    accepting = st.decision == "continue" or canary.continued
    return {
        "id": canary.pk,
        "name": canary.name,
        "metric": canary.metric,
        "unit": canary.unit,
        "bad": canary.bad,
        "count": canary.count,
        "method": canary.method,
        "method_text": method_text(canary),
        "alpha": canary.alpha,
        "tau": canary.tau,
        "resolution": canary.resolution,
        "quantile": canary.quantile,
        "quantiles": list(canary.quantiles),
        "quantile_verdicts": [
            {k: row[k] for k in ("label", "q", "decision", "decided_at", "p_above",
                                 "p_below", "diff")} for row in judged],
        "decision": st.decision,
        "headline": st.headline,
        "headline_text": HEADLINES.get(st.headline, st.headline),
        "words": words,
        "p_value": st.p_value,
        "p_value_text": _num(st.p_value),
        "statistic": st.statistic,
        "n_a": st.n_a,
        "n_b": st.n_b,
        "decided_n_a": st.decided_n_a,
        "decided_n_b": st.decided_n_b,
        "decided_at": st.decided_at.isoformat() if st.decided_at else None,
        "continued": canary.continued,
        "accepting": accepting,
        "batches_received": canary.batches_received,
        "batches_applied": st.applied_seq,
        "samples_bound": bound,
        "samples_bound_more": None if bound is None else max(0, bound - n_min),
        "change": change,
        "median_band": list(median_band),
        "median_width": width,
        "narrow_enough": None if change is None or width is None else width <= change,
        "samples_needed": needed,
        "samples_needed_more": None if needed is None else max(0, needed - n_min),
        "updated": st.updated.isoformat(),
    }


def p_value_points(canary: Canary) -> list[tuple[int, int, float, float]]:
    """(n_a, n_b, running-minimum p, p at that look) per stored update, oldest first."""
    rows = list(
        CanaryPoint.objects.filter(canary=canary).order_by("seq")
        .values_list("n_a", "n_b", "p_value", "p_value_now")
    )
    if len(rows) > MAX_POINTS:
        step = math.ceil(len(rows) / MAX_POINTS)
        rows = rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])
    return rows
