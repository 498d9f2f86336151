"""A trace series' stored verdicts as alerts (``deviations.alerts``), and telling people.

After every analysis (``after_analysis``: in-process in the embedded default, a task
otherwise) the series' deviations become alerts, one per (function, release boundary,
metric) with the median estimator (the matrix's default view) and the series' rule
(``Series.default_rule``: what its pages and exports show by default): regressions and
improvements beyond the series' minimum practical change, for self and total time.
``appeared`` / ``vanished`` functions are not alerts: they were not measured on one side.
Verdicts that disappeared (a provisional flag that flipped back, new runs that closed a
gap) withdraw their untriaged alerts. Alerts of one series whose boundaries overlap form
one group; groups are emailed by ``deviations.alerts.notify`` (one email per group, once,
to the series' subscribers and owners, when confirmed).
"""

from __future__ import annotations

import numpy as np

from deviations.alerts import notify as alert_notify
from deviations.alerts.models import Alert
from deviations.alerts.recording import AlertData, sync
from deviations.alerts.selectors import quantity
from deviations.stats.releases import VERDICTS
from deviations.traces import selectors
from deviations.traces.analysis import CONFIDENCE, FDR, MIN_RELATIVE_EFFECT, WINDOW
from deviations.traces.models import Release, Series

METRICS = ("self", "total")
ESTIMATOR = "median"
#: Verdicts that are alerts, and their direction for run times (lower is better).
#: ``appeared`` / ``vanished`` are never alerts (stats.releases: not a measured change).
DIRECTIONS = {"regression": Alert.REGRESSION, "improvement": Alert.IMPROVEMENT}
#: Verdict codes that are alerts, and their direction.
ALERT_CODES = {code: DIRECTIONS[name] for code, name in enumerate(VERDICTS) if name in DIRECTIONS}
# ``provisional``: the stored view's per-cell mark (stats.releases.provisional_pairs), the
# same that pages and exports show.
_KEYS = ("verdict", "estimate", "n", "diff", "diff_lo", "diff_hi", "p_value", "provisional")


def _method(rule: str) -> tuple[str, float]:
    if rule == "paper":
        return ("seed 003 rule: the median intervals do not overlap and the difference's "
                "interval excludes zero", CONFIDENCE)
    if rule == "segments":
        return ("segmentation rule: a change point of the function's optimal segmentation, "
                "Mann–Whitney test of the segments on either side, Benjamini–Hochberg FDR, "
                f"a change of at least {MIN_RELATIVE_EFFECT:.0%}", FDR)
    return (f"recommended rule: Mann–Whitney test of {WINDOW} releases on each side, "
            f"Benjamini–Hochberg FDR, a change of at least {MIN_RELATIVE_EFFECT:.0%}", FDR)


def _runs(n_before: int, n_after: int) -> str:
    if n_before == n_after:
        return f"{n_before} runs each"
    return f"{n_before} and {n_after} runs"


def _interval(lo: float | None, hi: float | None, effect: float | None) -> str:
    """``+2.24 to +3.08 ms`` in the unit the effect is written in."""
    if lo is None or hi is None:
        return "no interval"
    if effect is not None and abs(effect) >= 1000:
        return f"{lo / 1000:+.2f} to {hi / 1000:+.2f} ms"
    return f"{lo:+.0f} to {hi:+.0f} µs"


def explain(function: str, metric: str, rule: str, before: float, diff: float | None,
            lo: float | None, hi: float | None, pct: float | None, from_label: str,
            to_label: str, n_before: int, n_after: int, p_value: float | None,
            provisional: bool) -> str:
    """The verdict in words: "Paint: median self time rose 82% (+2.66 ms, 95% interval
    +2.24 to +3.08 ms) between 56.0.2905.0 and 56.0.2906.0, 5 runs each; seed 003 rule:
    the intervals do not overlap"."""
    moved = "rose" if (diff or 0) > 0 else "fell"
    size = f"{abs(pct):.0f}% " if pct is not None else ""
    if before == 0 and (diff or 0) > 0:
        moved, size = "appeared", ""
    level = int(round(CONFIDENCE * 100))
    text = (
        f"{function}: {ESTIMATOR} {metric} time {moved} {size}({quantity(diff, 'µs')}, "
        f"{level}% interval {_interval(lo, hi, diff)}) between {from_label} and {to_label}, "
        f"{_runs(n_before, n_after)}; "
    )
    if rule == "paper":
        text += "seed 003 rule: the intervals do not overlap"
    elif rule == "segments":
        p = f"p = {p_value:.2g}, " if p_value is not None else ""
        text += (
            "segmentation rule: the level changes here (Mann–Whitney test of the runs "
            f"since the previous change against those until the next, {p}significant at a "
            f"{FDR:.0%} false discovery rate) and a change of at least "
            f"{MIN_RELATIVE_EFFECT:.0%}"
        )
    else:
        p = f"p = {p_value:.2g}, " if p_value is not None else ""
        text += (
            f"recommended rule: Mann–Whitney test of the {WINDOW} releases on each side "
            f"({p}significant at a {FDR:.0%} false discovery rate) and a change of at "
            f"least {MIN_RELATIVE_EFFECT:.0%}"
        )
    if provisional:
        text += " (provisional: the next releases can still change it)"
    return text + "."


def _num(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def series_alerts(series: Series) -> list[AlertData]:
    """Every alert the stored analysis of the series holds now."""
    names = selectors.function_names(series)
    out: list[AlertData] = []
    releases = None
    rule = series.default_rule
    for metric in METRICS:
        found = selectors.stored_analysis(series, metric, ESTIMATOR, rule, _KEYS)
        if found is None or found["verdict"].shape[1] == 0:
            continue
        if releases is None:
            ids = [int(r) for r in found["release_ids"]]
            by_id = {r.pk: r for r in Release.objects.filter(pk__in=ids)}
            releases = [by_id[r] for r in ids]
        verdict = found["verdict"]
        provisional = found["provisional"]
        method, level = _method(rule)
        # Only the cells that are alerts (a few among every function × pair).
        hits = np.isin(verdict, list(ALERT_CODES))
        for f, p in zip(*np.nonzero(hits), strict=True):
            direction = ALERT_CODES[int(verdict[f, p])]
            a, b = releases[p], releases[p + 1]
            fid = int(found["function_ids"][f])
            before = float(found["estimate"][f, p])
            after = float(found["estimate"][f, p + 1])
            diff, lo, hi = (_num(found[k][f, p]) for k in ("diff", "diff_lo", "diff_hi"))
            pct = pct_lo = pct_hi = None
            if before > 0 and diff is not None:
                pct = 100 * diff / before
                pct_lo = 100 * lo / before if lo is not None else None
                pct_hi = 100 * hi / before if hi is not None else None
            n_a, n_b = int(found["n"][f, p]), int(found["n"][f, p + 1])
            p_value = _num(found["p_value"][f, p])
            out.append(AlertData(
                key=f"trace:{series.pk}:{fid}:{metric}:{rule}:{a.pk}:{b.pk}",
                detector=Alert.TRACE, family=series.name, subject=names[fid],
                from_label=a.version, to_label=b.version, from_key=a.sort_key,
                to_key=b.sort_key, direction=direction, method=method, level=level,
                explanation=explain(names[fid], metric, rule, before, diff, lo, hi, pct,
                                    a.version, b.version, n_a, n_b, p_value,
                                    bool(provisional[f, p])),
                data_at=b.created, series_id=series.pk, function_id=fid, metric=metric,
                rule=rule, unit="µs", before=_num(before), after=_num(after),
                effect=diff, effect_lo=lo, effect_hi=hi, effect_pct=pct,
                effect_pct_lo=pct_lo, effect_pct_hi=pct_hi, p_value=p_value,
                n_before=n_a, n_after=n_b, provisional=bool(provisional[f, p]),
            ))
    return out


def record_series_alerts(series_id: int) -> tuple[int, int]:
    """Make the series' alerts match its stored analysis; returns (created, withdrawn)."""
    series = Series.objects.get(pk=series_id)
    stored = Alert.objects.filter(detector=Alert.TRACE, series=series)
    return sync(stored, series_alerts(series))


def after_analysis(series_id: int) -> int:
    """What follows every analysis: record the alerts, then email the groups that are due
    (of every detector); returns the emails sent."""
    if Series.objects.filter(pk=series_id).exists():
        record_series_alerts(series_id)
    return alert_notify.notify_due_groups()
