"""Emails to series subscribers about the regressions of the matrix's verdicts, once each."""

from __future__ import annotations

from deviations.alerts import services as alerts
from deviations.alerts.models import SentAlert, Subscription
from deviations.traces import selectors
from deviations.traces.models import Function, Release, Series


def notify_series_regressions() -> int:
    """Tell series subscribers about regressions (self time, median, the paper rule: the
    matrix's default view) of releases created after they subscribed, once each."""
    subs = list(Subscription.objects.filter(target=Subscription.SERIES, active=True))
    sent = 0
    for series in Series.objects.filter(name__in={s.pattern for s in subs}):
        try:
            rows = [
                r for r in selectors.deviation_rows(series, "self", "median", "paper")
                if r["verdict"] == "regression"
            ]
        except selectors.NotAnalysedError:
            continue
        created = dict(
            Release.objects.filter(series=series).values_list("version", "created")
        )
        url = alerts.site_url(series.get_absolute_url())
        for sub in (s for s in subs if s.pattern == series.name):
            for row in rows:
                if created.get(row["to_release"], sub.created) <= sub.created:
                    continue
                subject = (
                    f"series:{series.pk}:{Function.digest(row['function'])}:{row['to_release']}"
                )
                summary = (
                    f"{series.name}: {row['function']} regressed from {row['from_release']} "
                    f"to {row['to_release']}"
                    + (f" (median self time +{row['diff']:.0f} µs)" if row["diff"] else "")
                )
                status = SentAlert.QUEUED if sub.digest else SentAlert.SENDING
                alert = alerts.claim(subject, sub.email, status, summary=summary, url=url)
                if alert is None or sub.digest:
                    continue
                alerts.send(
                    alert,
                    f"[deviations] {summary}",
                    f"{summary}.\n\nDeviation matrix: {url}\n\n"
                    f"You receive this because you subscribed to the series {series.name}.",
                    alerts.unsubscribe_url(sub.email, Subscription.SERIES, series.name),
                )
                sent += 1
    return sent
