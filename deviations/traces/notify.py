"""A trace series' stored verdicts as alerts (``deviations.alerts``), and telling people.

After every analysis (``after_analysis``: in-process in the embedded default, a task
otherwise) the series' deviations become alerts under the series' rule
(``Series.default_rule``: what its pages and exports show by default), median estimator
(the matrix's default view), after its minimum practical change: **one alert per change**
of a function at a release boundary, naming both metrics when self time and total time
moved together (a leaf function's are the same change). ``appeared`` / ``vanished``
functions are not alerts: they were not measured on one side.

A verdict that is not final yet is a *provisional* alert, shown but not emailed, and says
within how many releases it will be final; one with overwhelming evidence
(``stats.releases.EARLY_ALPHA``) is sent *early*. Verdicts that disappeared (a
provisional flag the next releases did not confirm) withdraw their untriaged alerts.
Alerts of one series whose boundaries overlap form one group; groups are emailed by
``deviations.alerts.notify`` (one email per group, once, to the series' subscribers and
owners, when confirmed).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from deviations.alerts import notify as alert_notify
from deviations.alerts.models import Alert
from deviations.alerts.recording import AlertData, sync
from deviations.alerts.selectors import quantity
from deviations.stats.releases import IMPROVEMENT, REGRESSION, get_rule
from deviations.traces import selectors
from deviations.traces.analysis import CONFIDENCE
from deviations.traces.models import Release, Series

METRICS = ("self", "total")
ESTIMATOR = "median"
#: Verdict codes that are alerts, and their direction for run times (lower is better).
ALERT_CODES = {REGRESSION: Alert.REGRESSION, IMPROVEMENT: Alert.IMPROVEMENT}
_KEYS = ("verdict", "estimate", "diff", "diff_lo", "diff_hi", "p_value", "before",
         "relative", "n_before", "n_after", "first", "last", "early", "provisional",
         "final_within")


@dataclass(frozen=True)
class _Change:
    """One metric's comparison behind a deviation, as the alert words it."""

    metric: str
    code: int
    diff: float | None
    lo: float | None
    hi: float | None
    before: float | None
    pct: float | None
    pct_lo: float | None
    pct_hi: float | None
    p_value: float | None
    n_before: int
    n_after: int
    compared_from: str
    compared_to: str
    early: bool
    #: The values' unit: µs for trace times, the metric's own in a metric series (whose
    #: one metric is its value: ``metric`` is then "").
    unit: str = "µs"


def _num(value: Any) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _interval(lo: float | None, hi: float | None, unit: str = "µs") -> str:
    """``+2.24 to +3.08 ms`` (µs below a millisecond)."""
    if lo is None or hi is None:
        return "no interval"
    return f"{quantity(lo, unit)} to {quantity(hi, unit)}"


def _sentence(function: str, c: _Change) -> str:
    moved = "rose" if (c.diff or 0) > 0 else "fell"
    size = f" {abs(c.pct):.0f}%" if c.pct is not None else ""
    level = int(round(CONFIDENCE * 100))
    p = f", p = {c.p_value:.2g}" if c.p_value is not None else ""
    what = f"{c.metric} time " if c.metric else ""
    samples = "runs" if c.unit == "µs" else "values"
    return (f"{function}: {what}{moved}{size} ({quantity(c.diff, c.unit)}, "
            f"{level}% interval {_interval(c.lo, c.hi, c.unit)}; {samples} of "
            f"{c.compared_from} to {c.compared_to} compared: {c.n_before} before, "
            f"{c.n_after} after{p})")


def _same_numbers(a: _Change, b: _Change) -> bool:
    fields = ("diff", "lo", "hi", "p_value", "n_before", "n_after", "compared_from",
              "compared_to")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def explain(function: str, rule: str, changes: list[_Change], from_label: str,
            to_label: str, provisional: bool, early: bool, final_within: int) -> str:
    """The alert in words: "Paint: self time rose 28% (+2.66 ms, 95% interval +2.24 to
    +3.08 ms; …); total time rose 25% (…) between 56.0.2905.0 and 56.0.2906.0.
    level-shift rule: …. Final.\""""
    the_rule = get_rule(rule)
    if len(changes) == 2 and _same_numbers(*changes):
        # A function that calls nothing measured: its self and total time are one change.
        changes = [dataclasses.replace(changes[0], metric="self and total")]
    parts = [_sentence(function, changes[0])]
    parts += [_sentence(function, c).split(": ", 1)[1] for c in changes[1:]]
    text = "; ".join(parts) + f" between {from_label} and {to_label}. {the_rule.method}."
    if early:
        text += (" Sent early, before the verdict is final (overwhelming evidence); final "
                 f"after {final_within} more release{'s' * (final_within != 1)} like the "
                 "newest.")
    elif provisional:
        text += (f" Provisional: final after {final_within} more "
                 f"release{'s' * (final_within != 1)} like the newest; not emailed until "
                 "then.")
    return text


def series_alerts(series: Series) -> list[AlertData]:
    """Every alert the stored analysis of the series holds now, one per (function,
    boundary) whatever the metrics that moved."""
    rule = series.default_rule
    the_rule = get_rule(rule)
    # A metric series stores its values as both metrics: one is its value.
    metrics = ("self",) if series.is_metrics else METRICS
    found = {m: selectors.stored_analysis(series, m, ESTIMATOR, rule, _KEYS) for m in metrics}
    present = [m for m in metrics if found[m] is not None and found[m]["verdict"].shape[1]]
    if not present:
        return []
    first = found[present[0]]
    assert first is not None
    ids = [int(r) for r in first["release_ids"]]
    by_id = {r.pk: r for r in Release.objects.filter(pk__in=ids)}
    releases = [by_id[r] for r in ids]
    versions = [r.version for r in releases]
    names = selectors.function_names(series)
    units = selectors.metric_units(series, first["function_ids"].tolist())
    changes: dict[tuple[int, int], list[_Change]] = {}
    for metric in present:
        got = found[metric]
        assert got is not None
        hits = np.isin(got["verdict"], list(ALERT_CODES))
        for f, p in zip(*np.nonzero(hits), strict=True):
            before = _num(got["before"][f, p])
            diff, lo, hi = (_num(got[k][f, p]) for k in ("diff", "diff_lo", "diff_hi"))
            pct = pct_lo = pct_hi = None
            if before and diff is not None:
                pct = 100 * diff / abs(before)
                pct_lo = 100 * lo / abs(before) if lo is not None else None
                pct_hi = 100 * hi / abs(before) if hi is not None else None
            fid = int(got["function_ids"][f])
            changes.setdefault((fid, int(p)), []).append(_Change(
                metric="" if series.is_metrics else metric,
                unit=units.get(fid, "") if series.is_metrics else "µs",
                code=int(got["verdict"][f, p]), diff=diff, lo=lo, hi=hi,
                before=before, pct=pct, pct_lo=pct_lo, pct_hi=pct_hi,
                p_value=_num(got["p_value"][f, p]), n_before=int(got["n_before"][f, p]),
                n_after=int(got["n_after"][f, p]),
                compared_from=versions[int(got["first"][f, p])],
                compared_to=versions[int(got["last"][f, p])], early=bool(got["early"][f, p]),
            ))
    provisional = the_rule.provisional(first["run_counts"])
    to_final = the_rule.releases_to_final(first["run_counts"])
    out: list[AlertData] = []
    for (fid, p), moved in sorted(changes.items()):
        lead = moved[0]  # self time when it moved (the function's own code), else total
        a, b = releases[p], releases[p + 1]
        early = any(c.early for c in moved)
        late = bool(provisional[p])
        out.append(AlertData(
            key=f"trace:{series.pk}:{fid}:{rule}:{a.pk}:{b.pk}",
            detector=Alert.TRACE, family=series.name, subject=names[fid],
            from_label=a.version, to_label=b.version, from_key=a.sort_key,
            to_key=b.sort_key, direction=ALERT_CODES[lead.code], method=the_rule.method,
            level=CONFIDENCE,
            explanation=explain(names[fid], rule, moved, a.version, b.version, late, early,
                                int(to_final[p])),
            data_at=b.created, series_id=series.pk, function_id=fid,
            metric=" and ".join(c.metric for c in moved if c.metric), rule=rule,
            unit=lead.unit,
            before=lead.before, after=(lead.before + lead.diff
                                       if lead.before is not None and lead.diff is not None
                                       else None),
            effect=lead.diff, effect_lo=lead.lo, effect_hi=lead.hi, effect_pct=lead.pct,
            effect_pct_lo=lead.pct_lo, effect_pct_hi=lead.pct_hi, p_value=lead.p_value,
            n_before=lead.n_before, n_after=lead.n_after,
            provisional=late and not early, early=late and early,
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
