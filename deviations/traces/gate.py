"""The CI gate: may release R of a series ship? (``manage.py check_release``, and
``GET /api/series/NAME/releases/R/check``.)

A selector: it reads the series' stored verdicts at the boundary from the release before
R (the previous release with a done run: the analysis' column before R) to R, under the
series' default rule and median estimator (what its alerts are), and the triage of their
alerts. R **fails** when one of them is a regression whose alert is untriaged (status
``new``; a verdict whose alert is not recorded yet counts as untriaged). Provisional
verdicts (not final yet: under the level-shift rule, every verdict at the newest release
until more releases follow) count only with ``include_provisional``; an *early* one
(overwhelming evidence) always counts, as it is emailed. R is **not ready** while a run of
R is still being ingested, R has no done run, or the stored analysis has not seen every
finished run of the series: a gate must not pass on data it has not judged.

Exit codes of the command: 0 pass, 1 fail, 2 usage (unknown series or release), 3 not
ready (ingest in progress or analysis not up to date: run the gate again later).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from deviations.alerts.models import Alert
from deviations.alerts.recording import AlertData
from deviations.alerts.selectors import CulpritRange, quantity, series_ranges
from deviations.alerts.services import site_url
from deviations.core.errors import UserError
from deviations.stats.releases import get_rule
from deviations.traces import analysis, notify
from deviations.traces.analysis import CONFIDENCE
from deviations.traces.models import Release, Run, Series

PASS, FAIL, NOT_READY = "pass", "fail", "not_ready"
EXIT_CODES = {PASS: 0, FAIL: 1, NOT_READY: 3}
#: The command's exit code for an unknown series or release (argparse's own for usage).
USAGE = 2


@dataclass(frozen=True)
class Flag:
    """One regression or improvement at the checked boundary, with its alert's triage."""

    subject: str
    metric: str
    direction: str
    status: str  # the alert's status; "new" when its alert is not recorded yet
    #: The group this alert's group is downstream of (alerts.downstream): a sheriff said
    #: what causes it, so it is triaged with that group and blocks nothing here.
    upstream: int | None
    provisional: bool
    early: bool
    unit: str
    effect: float | None
    effect_lo: float | None
    effect_hi: float | None
    effect_pct: float | None
    effect_pct_lo: float | None
    effect_pct_hi: float | None
    p_value: float | None
    explanation: str
    alert_id: int | None
    url: str | None  # the alert's page, absolute

    @property
    def untriaged(self) -> bool:
        return self.status == Alert.NEW and self.upstream is None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ReleaseCheck:
    """The gate's verdict on one release, with what it was decided on."""

    series: str
    release: str
    previous: str | None
    verdict: Literal["pass", "fail", "not_ready"]
    reason: str  # one line
    rule: str
    include_provisional: bool
    release_url: str
    range: CulpritRange | None
    regressions: list[Flag] = field(default_factory=list)
    improvements: list[Flag] = field(default_factory=list)
    blocking: list[Flag] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        r = self.range
        return {
            "series": self.series, "release": self.release, "previous": self.previous,
            "verdict": self.verdict, "exit_code": self.exit_code, "reason": self.reason,
            "rule": self.rule, "include_provisional": self.include_provisional,
            "release_url": self.release_url,
            "range": None if r is None else {
                "last_good": r.last_good, "first_bad": r.first_bad,
                "last_good_revision": r.last_good_revision,
                "first_bad_revision": r.first_bad_revision, "text": r.text,
                "log_url": r.log_url},
            "regressions": [f.as_dict() for f in self.regressions],
            "improvements": [f.as_dict() for f in self.improvements],
            "blocking": [f.as_dict() for f in self.blocking],
            "markdown": markdown(self),
        }


def _flag(data: AlertData, stored: Alert | None) -> Flag:
    return Flag(
        subject=data.subject, metric=data.metric, direction=data.direction,
        status=stored.status if stored is not None else Alert.NEW,
        upstream=stored.group.upstream_id if stored is not None else None,
        provisional=data.provisional, early=data.early, unit=data.unit, effect=data.effect,
        effect_lo=data.effect_lo, effect_hi=data.effect_hi, effect_pct=data.effect_pct,
        effect_pct_lo=data.effect_pct_lo, effect_pct_hi=data.effect_pct_hi,
        p_value=data.p_value, explanation=data.explanation,
        alert_id=stored.pk if stored is not None else None,
        url=site_url(stored.get_absolute_url()) if stored is not None else None,
    )


def _not_ready(release: Release) -> str:
    """Why the verdicts at ``release`` cannot be trusted yet, or ""."""
    pending = release.runs.filter(status=Run.PENDING).count()
    if pending:
        return (f"{pending} run{'s' * (pending != 1)} of {release.version} still being "
                "ingested: check again when they are done")
    if not release.runs.filter(status=Run.DONE).exists():
        return f"{release.version} has no done run yet: nothing of it was measured"
    if not analysis.is_up_to_date(release.series):
        return ("the series' analysis has not seen every finished run yet (it is queued "
                "after each ingest): check again in a minute")
    return ""


def check_release(series_name: str, version: str, *, include_provisional: bool = False
                  ) -> ReleaseCheck:
    """The gate's verdict on release ``version`` of the series. ``UserError`` (404) for an
    unknown series or release."""
    series = Series.objects.filter(name=series_name).first()
    if series is None:
        raise UserError(f"no series {series_name!r}", code="not_found", status=404)
    release = Release.objects.filter(series=series, version=version).first()
    if release is None:
        raise UserError(f"series {series_name!r} has no release {version!r}",
                        code="not_found", status=404)
    previous = (Release.objects.filter(series=series, sort_key__lt=release.sort_key,
                                       runs__status=Run.DONE)
                .order_by("-sort_key", "-id").values_list("version", flat=True).first())
    culprit = (series_ranges(series, [(previous, version)])[(previous, version)]
               if previous is not None else None)
    base: dict[str, Any] = {"series": series.name, "release": version, "previous": previous,
            "rule": series.default_rule, "include_provisional": include_provisional,
            "release_url": site_url(release.get_absolute_url()), "range": culprit}
    waiting = _not_ready(release)
    if waiting:
        return ReleaseCheck(verdict=NOT_READY, reason=waiting, **base)
    if previous is None:
        return ReleaseCheck(verdict=PASS, reason=f"{version} is the series' first measured "
                            "release: nothing to compare it with", **base)
    found = [d for d in notify.series_alerts(series)
             if d.from_label == previous and d.to_label == version]
    stored = {a.key: a for a in Alert.objects.filter(
        key__in=[d.key for d in found]).select_related("group")}
    flags = sorted((_flag(d, stored.get(d.key)) for d in found),
                   key=lambda f: (-abs(f.effect_pct or 0.0), f.subject))
    regressions = [f for f in flags if f.direction == Alert.REGRESSION]
    improvements = [f for f in flags if f.direction == Alert.IMPROVEMENT]
    blocking = [f for f in regressions if f.untriaged and (include_provisional
                                                           or not f.provisional)]
    if blocking:
        n = len(blocking)
        names = ", ".join(f.subject for f in blocking[:5]) + (", …" if n > 5 else "")
        reason = (f"{n} untriaged regression{'s' * (n != 1)} from {previous} to {version}: "
                  f"{names}")
        verdict = FAIL
    else:
        waiting_flags = sum(f.untriaged and f.provisional for f in regressions)
        reason = f"no untriaged regression from {previous} to {version}" + (
            f" ({waiting_flags} provisional one{'s' * (waiting_flags != 1)} not counted: "
            "--include-provisional counts them)" if waiting_flags else "")
        verdict = PASS
    return ReleaseCheck(verdict=verdict, reason=reason, regressions=regressions,
                        improvements=improvements, blocking=blocking, **base)


# --- Markdown for a pull request comment --------------------------------------------------

_MARKDOWN_SPECIAL = set("\\`*_[]<>#|~&")


def md_text(text: str) -> str:
    """Untrusted text (function names) as literal Markdown: every character Markdown or
    HTML could read as syntax is escaped, line breaks become spaces."""
    flat = " ".join(text.split())
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in flat)


def _effect(f: Flag) -> str:
    change = f"{quantity(f.effect, f.unit)}"
    if f.effect_lo is not None and f.effect_hi is not None:
        change += f" [{quantity(f.effect_lo, f.unit)}, {quantity(f.effect_hi, f.unit)}]"
    return change


def _pct(f: Flag) -> str:
    if f.effect_pct is None:
        return "—"
    text = f"{f.effect_pct:+.1f}%"
    if f.effect_pct_lo is not None and f.effect_pct_hi is not None:
        text += f" [{f.effect_pct_lo:+.1f}%, {f.effect_pct_hi:+.1f}%]"
    return text


def _table(flags: list[Flag], blocking: list[Flag]) -> list[str]:
    level = int(round(CONFIDENCE * 100))
    lines = [f"| | What | Change [{level}% interval] | Relative | p | Status |",
             "|---|---|---|---|---|---|"]
    for f in flags:
        mark = "❌" if f in blocking else ("⏳" if f.provisional and f.untriaged else "")
        what = md_text(f.subject) + (f" ({md_text(f.metric)} time)" if f.metric else "")
        if f.url:
            what = f"[{what}]({f.url})"
        p = f"{f.p_value:.2g}" if f.p_value is not None else "—"
        status = f.status + (" · provisional" if f.provisional else "") + (
            " · early" if f.early else "") + (
            f" · downstream of group {f.upstream}" if f.upstream is not None else "")
        lines.append(f"| {mark} | {what} | {_effect(f)} | {_pct(f)} | {p} | {status} |")
    return lines


def markdown(check: ReleaseCheck) -> str:
    """The verdict as Markdown a CI job can post on a pull request."""
    head = {PASS: "✅", FAIL: "❌", NOT_READY: "⏳"}[check.verdict]
    series, release = md_text(check.series), md_text(check.release)
    lines = [f"### {head} deviations: {series} {release}", "", md_text(check.reason), ""]
    if check.previous is not None:
        compared = (f"Compared with {md_text(check.previous)} (rule: "
                    f"{md_text(get_rule(check.rule).label)})")
        if check.range is not None:
            text = md_text(check.range.text)
            commits = f"[{text}]({check.range.log_url})" if check.range.log_url else text
            compared += f"; commits {commits}"
        lines += [compared + ".", ""]
    lines += [f"Release page: {check.release_url}", ""]
    if check.verdict == NOT_READY:
        return "\n".join(lines).rstrip() + "\n"
    for title, flags in (("Regressions", check.regressions),
                         ("Improvements", check.improvements)):
        lines.append(f"#### {title} ({len(flags)})")
        lines.append("")
        lines += _table(flags, check.blocking) if flags else ["None."]
        lines.append("")
    if any(f.provisional for f in check.regressions) and not check.include_provisional:
        lines += ["⏳ provisional: not final yet, not counted by this gate "
                  "(`--include-provisional` counts them).", ""]
    return "\n".join(lines).rstrip() + "\n"
