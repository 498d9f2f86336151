"""Alerts of every detector: recording, groups, confirmation before email, triage, ignores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from deviations.alerts import notify, services
from deviations.alerts.models import (
    Alert,
    AlertGroup,
    AlertNote,
    Ignore,
    SentAlert,
    Subscription,
)
from deviations.alerts.recording import AlertData, record, sync
from deviations.core.access import ForbiddenError
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.packing import name_digest
from deviations.traces import notify as trace_notify
from deviations.traces.models import Function, Release, Series

pytestmark = pytest.mark.django_db


@pytest.fixture
def series() -> Series:
    """Series "s" with releases 1..6 created a day ago (before any subscription below)."""
    s = Series.objects.create(name="s")
    for v in range(1, 7):
        Release.objects.create(series=s, version=str(v))
    Release.objects.filter(series=s).update(created=timezone.now() - timedelta(days=1))
    return s


def trace(series: Series, function: str, a: str, b: str, *, pct: float = 50.0,
          provisional: bool = False, direction: str = Alert.REGRESSION,
          rule: str = "paper") -> AlertData:
    ra, rb = (Release.objects.get(series=series, version=v) for v in (a, b))
    fn, _ = Function.objects.get_or_create(series=series, name=function,
                                           defaults={"name_sha1": function})
    return AlertData(
        key=f"trace:{series.pk}:{function}:{rule}:{a}:{b}", detector=Alert.TRACE,
        family=series.name, subject=function, from_label=a, to_label=b,
        from_key=ra.sort_key, to_key=rb.sort_key, direction=direction, method="m",
        explanation=f"{function}: median self time rose {pct:.0f}% between {a} and {b}",
        data_at=timezone.now(), series_id=series.pk, function_id=fn.pk, metric="self",
        rule=rule, unit="µs", before=1000.0, effect=10 * pct, effect_pct=pct,
        provisional=provisional,
    )


def subscribe(email: str = "t@example.org", **kwargs: Any) -> Subscription:
    sub = services.subscribe(email, "s", target=Subscription.SERIES, **kwargs)
    Subscription.objects.filter(pk=sub.pk).update(created=timezone.now() - timedelta(hours=1))
    return sub


# --- Recording and groups ------------------------------------------------------------------


def test_overlapping_ranges_form_one_group_and_a_bridge_merges_two(series) -> None:
    record([trace(series, "Paint", "2", "3"), trace(series, "Layout", "2", "3"),
            trace(series, "Paint", "4", "5")])
    assert AlertGroup.objects.count() == 2
    first = Alert.objects.get(subject="Layout").group
    assert (first.from_label, first.to_label, first.alerts.count()) == ("2", "3", 2)
    # An alert over 2..5 (a release range) overlaps both: they merge into the older one.
    record([trace(series, "HitTest", "2", "5")])
    (group,) = AlertGroup.objects.all()
    assert (group.pk, group.from_label, group.to_label, group.alerts.count()) == (
        first.pk, "2", "5", 4)


def test_recording_again_keeps_the_triage_and_updates_the_numbers(series) -> None:
    (pk,) = record([trace(series, "Paint", "2", "3", provisional=True)])
    Alert.objects.filter(pk=pk).update(status=Alert.ACKNOWLEDGED, bug_url="https://b/1")
    assert record([trace(series, "Paint", "2", "3", pct=60.0)]) == []
    alert = Alert.objects.get(pk=pk)
    assert (alert.status, alert.bug_url, alert.effect_pct, alert.provisional) == (
        Alert.ACKNOWLEDGED, "https://b/1", 60.0, False)


def test_a_verdict_that_disappears_withdraws_its_untriaged_alert(series) -> None:
    sync(Alert.objects.none(), [trace(series, "Paint", "2", "3"),
                                trace(series, "Layout", "4", "5")])
    Alert.objects.filter(subject="Layout").update(status=Alert.FIXED)
    stored = Alert.objects.filter(series=series)
    assert sync(stored, []) == (0, 1)  # Paint deleted, Layout (triaged) kept
    assert list(Alert.objects.values_list("subject", flat=True)) == ["Layout"]
    assert AlertGroup.objects.count() == 1



def test_a_noted_alert_no_longer_reported_is_kept_but_never_emailed(series, client) -> None:
    """Issue 23: a noted alert is kept when its verdict goes away (a release deleted, new
    runs), but it was emailed afterwards about a change that no longer existed. Now it is
    marked no longer reported and never told, until the detector reports it again."""
    subscribe()
    owner = get_user_model().objects.create_user("owner")
    sync(Alert.objects.none(), [trace(series, "Paint", "2", "3", provisional=True)])
    alert = Alert.objects.get(subject="Paint")
    AlertNote.objects.create(alert=alert, author=owner, text="looking")
    assert sync(Alert.objects.filter(series=series), []) == (0, 0)  # kept: it has a note
    alert.refresh_from_db()
    assert not alert.reported
    assert 'id="not-reported"' in client.get(f"/alerts/{alert.pk}/").content.decode()
    # The next analysis reports nothing there; the group is never emailed.
    Alert.objects.filter(pk=alert.pk).update(provisional=False)
    assert notify.notify_due_groups() == 0
    assert notify.notify_due_groups(now=timezone.now() + timedelta(days=3)) == 0
    assert mail.outbox == []
    # Found again (final): reported, and told once.
    sync(Alert.objects.filter(series=series), [trace(series, "Paint", "2", "3")])
    alert.refresh_from_db()
    assert alert.reported
    assert 'id="not-reported"' not in client.get(f"/alerts/{alert.pk}/").content.decode()
    assert notify.notify_due_groups() == 1
    assert len(mail.outbox) == 1


def _change(metric: str, diff: float, lo: float, hi: float, before: float, **kw: Any) -> Any:
    pct = 100 * diff / before
    return trace_notify._Change(
        metric=metric, code=2 if diff > 0 else 3, diff=diff, lo=lo, hi=hi, before=before,
        pct=pct, pct_lo=100 * lo / before, pct_hi=100 * hi / before,
        p_value=kw.get("p", 2.5e-5), n_before=kw.get("n_before", 25),
        n_after=kw.get("n_after", 25), compared_from=kw.get("first", "56.0.2900.0"),
        compared_to=kw.get("last", "56.0.2910.0"), early=kw.get("early", False))


def test_explanation_in_words() -> None:
    """Every number of the sentence is the comparison's that made the verdict: the shift,
    its interval, the runs of the releases compared on each side, the p-value."""
    moved = [_change("self", 2660.0, 2240.0, 3080.0, 3244.0),
             _change("total", 2700.0, 2250.0, 3100.0, 10800.0)]
    text = trace_notify.explain("Paint", "shifts", moved, "56.0.2905.0", "56.0.2906.0",
                                False, False, 0)
    assert text.startswith(
        "Paint: self time rose 82% (+2.66 ms, 95% interval +2.24 ms to +3.08 ms; runs of "
        "56.0.2900.0 to 56.0.2910.0 compared: 25 before, 25 after, p = 2.5e-05); total time "
        "rose 25% (+2.70 ms, 95% interval +2.25 ms to +3.10 ms; runs of 56.0.2900.0 to "
        "56.0.2910.0 compared: 25 before, 25 after, p = 2.5e-05) between 56.0.2905.0 and "
        "56.0.2906.0. ")
    assert "Provisional" not in text
    assert "early" not in text
    # A leaf function: self and total time are one change, said once.
    same = [_change("self", -214.0, -250.0, -180.0, 520.0, n_before=12, n_after=5),
            _change("total", -214.0, -250.0, -180.0, 520.0, n_before=12, n_after=5)]
    text = trace_notify.explain("Layout", "shifts", same, "1", "2", True, False, 3)
    assert text.startswith("Layout: self and total time fell 41% (-214 µs, 95% interval "
                           "-250 µs to -180 µs; runs of 56.0.2900.0 to 56.0.2910.0 compared: "
                           "12 before, 5 after, p = 2.5e-05) between 1 and 2. ")
    assert text.endswith("Provisional: final after 3 more releases like the newest; not "
                         "emailed until then.")
    text = trace_notify.explain("Layout", "shifts", same[:1], "1", "2", True, True, 1)
    assert text.endswith("Sent early, before the verdict is final (overwhelming evidence); "
                         "final after 1 more release like the newest.")


# --- Confirmation before telling anyone ------------------------------------------------------


def test_one_email_per_group_with_its_top_alerts(series) -> None:
    subscribe()
    record([trace(series, f"F{k}", "2", "3", pct=10.0 + k) for k in range(12)]
           + [trace(series, "Late", "5", "6")])
    assert notify.notify_due_groups() == 2
    first, second = sorted(mail.outbox, key=lambda m: m.subject)
    assert first.subject == ("[deviations] s: 12 regressions between 2 and 3 (largest: F11 "
                             "(self time, paper rule): regression +21% (+210 µs) from 2 to 3)")
    body = first.body
    assert body.index("1. F11: median self time rose 21%") < body.index("2. F10:")
    assert "... and 2 more on the group page." in body
    assert "F0:" not in body  # the 10 largest only
    assert "/series/s/compare/?base=2&new=3" in body
    assert notify.notify_due_groups() == 0  # once


def test_a_provisional_trace_flag_is_emailed_when_final_or_early(series, settings) -> None:
    """A trace verdict says when it is final: no delay makes a provisional one due; it is
    emailed once final, or at once when sent early."""
    settings.DEVIATIONS_ALERT_CONFIRM_SECONDS = 3600
    subscribe()
    record([trace(series, "Paint", "5", "6", provisional=True)])
    assert notify.notify_due_groups() == 0
    assert notify.notify_due_groups(now=timezone.now() + timedelta(days=3)) == 0
    assert mail.outbox == []
    record([trace(series, "Paint", "5", "6")])  # the next releases made it final
    assert notify.notify_due_groups() == 1
    assert "Paint" in mail.outbox[0].subject
    early = trace(series, "Layout", "2", "3")
    record([AlertData(**{**early.__dict__, "early": True})])
    assert notify.notify_due_groups() == 1
    assert "Layout" in mail.outbox[1].subject


def test_a_provisional_alert_of_another_detector_waits_for_the_delay(series, settings) -> None:
    settings.DEVIATIONS_ALERT_CONFIRM_SECONDS = 3600
    subscribe()
    record([trace(series, "Paint", "5", "6", provisional=True)])
    Alert.objects.update(detector=Alert.CANARY)  # a detector whose verdicts do not say
    assert notify.due(list(Alert.objects.all()), timezone.now()) == []
    later = timezone.now() + timedelta(hours=2)
    assert [a.subject for a in notify.due(list(Alert.objects.all()), later)] == ["Paint"]


def test_a_provisional_flag_that_flips_back_never_reaches_an_inbox(series) -> None:
    subscribe()
    record([trace(series, "Paint", "5", "6", provisional=True)])
    assert notify.notify_due_groups() == 0
    sync(Alert.objects.filter(series=series), [])  # the next analysis: no verdict any more
    assert notify.notify_due_groups(now=timezone.now() + timedelta(days=3)) == 0
    assert mail.outbox == []
    assert not AlertGroup.objects.exists()


def test_improvements_are_recorded_but_emailed_only_on_request(series) -> None:
    subscribe("plain@example.org")
    subscribe("keen@example.org", improvements=True)
    record([trace(series, "Layout", "3", "4", pct=-40.0, direction=Alert.IMPROVEMENT)])
    assert notify.notify_due_groups() == 1
    (message,) = mail.outbox
    assert message.to == ["keen@example.org"]
    assert "1 improvement between 3 and 4" in message.body
    assert Alert.objects.get().status == Alert.NEW  # shown on the pages either way


def test_owners_are_told_and_only_of_data_after_they_subscribed(series) -> None:
    owner = get_user_model().objects.create_user("o", "o@example.org")
    Ownership.objects.create(kind=Ownership.SERIES, name="s", user=owner)
    old = trace(series, "Old", "2", "3")
    record([AlertData(**{**old.__dict__, "data_at": timezone.now() - timedelta(days=2)})])
    record([trace(series, "Paint", "4", "5")])
    assert notify.notify_due_groups() == 1
    (message,) = mail.outbox
    assert message.to == ["o@example.org"]
    assert "you own the series s" in message.body
    assert "Paint" in message.subject


def test_what_the_former_notifier_sent_is_not_sent_again(series) -> None:
    """Before alert groups, each paper-rule regression was emailed on its own, claimed as
    series:<series>:<function digest>:<release>; an upgrade does not repeat it."""
    subscribe()
    SentAlert.objects.create(subject=f"series:{series.pk}:{name_digest('Paint')}:3",
                             email="t@example.org", status=SentAlert.SENT, summary="old")
    record([trace(series, "Paint", "2", "3"), trace(series, "Layout", "4", "5")])
    assert notify.notify_due_groups() == 1
    assert "Layout" in mail.outbox[0].subject


def test_digest_subscribers_get_one_line_per_group(series) -> None:
    subscribe(digest=True)
    record([trace(series, "Paint", "2", "3"), trace(series, "Layout", "2", "3")])
    assert notify.notify_due_groups() == 0
    assert services.send_digests() == 1
    assert "- s: 2 regressions between 2 and 3" in mail.outbox[0].body


# --- Triage, notes, ignores --------------------------------------------------------------------


def test_bulk_triage_changes_every_selected_alert_and_checks_ownership(series) -> None:
    alice = get_user_model().objects.create_user("alice", "a@example.org")
    bob = get_user_model().objects.create_user("bob", "b@example.org")
    record([trace(series, n, "2", "3") for n in ("Paint", "Layout", "HitTest")])
    chosen = list(Alert.objects.filter(subject__in=["Paint", "Layout"]))
    assert services.triage(chosen, alice, status=Alert.ACKNOWLEDGED, bug_url="https://b/9",
                           assignee="bob", note="one cause") == 2
    rows = Alert.objects.order_by("subject").values_list("subject", "status", "bug_url",
                                                         "assignee__username")
    assert list(rows) == [("HitTest", "new", "", None),
                          ("Layout", "acknowledged", "https://b/9", "bob"),
                          ("Paint", "acknowledged", "https://b/9", "bob")]
    assert AlertNote.objects.filter(author=alice, text="one cause").count() == 2
    with pytest.raises(UserError, match="status must be one of"):
        services.triage(chosen, alice, status="gone")
    with pytest.raises(UserError, match="http"):
        services.triage(chosen, alice, bug_url="javascript:alert(1)")
    with pytest.raises(UserError, match="no user named"):
        services.triage(chosen, alice, assignee="nobody")
    Ownership.objects.create(kind=Ownership.SERIES, name="s", user=alice)
    with pytest.raises(ForbiddenError):
        services.triage(chosen, bob, status=Alert.INVALID)


def test_ignoring_a_function_mutes_it_and_undo_restores(series) -> None:
    alice = get_user_model().objects.create_user("alice", "a@example.org")
    subscribe()
    record([trace(series, "Noisy", "2", "3")])
    paint = Function.objects.get(name="Noisy")
    ignored = services.ignore(Ignore.FUNCTION, "s", "Noisy", alice, function=paint)
    assert Alert.objects.get().status == Alert.IGNORED
    record([trace(series, "Noisy", "4", "5")])  # a later alert is recorded, ignored
    assert set(Alert.objects.values_list("status", flat=True)) == {Alert.IGNORED}
    assert notify.notify_due_groups() == 0
    assert mail.outbox == []
    services.unignore(ignored, alice)
    record([trace(series, "Noisy", "5", "6")])
    assert Alert.objects.get(to_label="6").status == Alert.NEW


def test_series_alerts_from_a_stored_analysis(monkeypatch, series) -> None:
    """The stored matrices' regressions and improvements become alerts, one per (function,
    boundary) whatever the metrics that moved; other verdicts do not."""
    fn = Function.objects.create(series=series, name="Paint", name_sha1="p")
    releases = list(series.releases.order_by("sort_key"))[:3]

    def stored(s: Any, metric: str, estimator: str, rule: str, keys: Any) -> dict[str, Any]:
        total = metric == "total"
        return {
            "release_ids": np.array([r.pk for r in releases]),
            "function_ids": np.array([fn.pk]),
            "verdict": np.array([[2, 0]], dtype=np.int8),  # a regression, then an overlap
            "estimate": np.array([[100.0, 200.0, 210.0]]), "n": np.array([[5, 5, 6]]),
            "diff": np.array([[100.0 + 20 * total, 10.0]]),
            "diff_lo": np.array([[80.0, -5.0]]), "diff_hi": np.array([[120.0, 25.0]]),
            "p_value": np.array([[0.001, 0.3]]), "before": np.array([[100.0, 200.0]]),
            "relative": np.array([[1.0 + 0.2 * total, 0.05]]),
            "n_before": np.array([[5, 5]]), "n_after": np.array([[5, 6]]),
            "first": np.array([[0, 1]]), "last": np.array([[1, 2]]),
            "early": np.array([[False, False]]),
            "provisional": np.array([[rule == "shifts", True]]),
            "final_within": np.array([[2, 3]]),
            "run_counts": np.array([5, 5, 6]),
        }

    monkeypatch.setattr(trace_notify.selectors, "stored_analysis", stored)
    series.default_rule = "paper"
    (item,) = trace_notify.series_alerts(series)  # self and total: one change
    assert (item.rule, item.metric, item.from_label, item.to_label, item.effect,
            item.effect_pct, item.effect_pct_lo, item.n_before, item.provisional) == (
        "paper", "self and total", "1", "2", 100.0, 100.0, 80.0, 5, False)
    assert "total time rose 120%" in item.explanation
    series.default_rule = "shifts"
    (shifted,) = trace_notify.series_alerts(series)
    assert "p = 0.001" in shifted.explanation
    assert shifted.provisional  # 5 releases after it are needed; the series has 1
    assert "Provisional: final after" in shifted.explanation


def test_every_rule_fits_the_alert_columns() -> None:
    """PostgreSQL enforces the column lengths that SQLite ignores: a rule's method text
    longer than Alert.method once made every alert of a trace series fail to record."""
    from deviations.stats.releases import RULES

    for rule in RULES.values():
        assert len(rule.method) <= Alert._meta.get_field("method").max_length, rule.name
        assert len(rule.name) <= Alert._meta.get_field("rule").max_length, rule.name
