"""Migrations of trace series: 0013 made the segments rule the default; 0017 retires it and
the window rule for the shift rule, with new default floors."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from deviations.traces.models import Series, SeriesAnalysis

BEFORE = [("deviations", "0012_canaries")]
AFTER = [("deviations", "0013_segments_rule")]


@pytest.mark.django_db(transaction=True)
def test_0013_makes_segments_the_default_and_drops_stored_analyses() -> None:
    """A series holding "recommended" (0011's default: a choice cannot be told apart from
    it) gets the segments rule; "paper" was always chosen and stays; stored analyses,
    which lack the new rule, are dropped (recomputed by `analyse --all` or the beat)."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    series_model = old.get_model("deviations", "Series")
    never = series_model.objects.create(name="never-chose")
    assert never.default_rule == "recommended"
    paper = series_model.objects.create(name="chose-paper", default_rule="paper")
    # Trace alerts name their rule in their key: those of a series that moves to the
    # segments rule take its key (a change both rules flag stays one alert, its emails
    # and triage kept); the paper series' stay.
    group = old.get_model("deviations", "AlertGroup").objects.create(
        detector="trace", family="never-chose", from_label="1", to_label="2", from_key="1",
        to_key="2")
    alert_model = old.get_model("deviations", "Alert")
    for s, rule in ((never, "recommended"), (paper, "paper")):
        alert_model.objects.create(
            key=f"trace:{s.pk}:5:self:{rule}:1:2", group=group, detector="trace", series=s,
            subject="Paint", metric="self", rule=rule, from_label="1", to_label="2",
            from_key="1", to_key="2", direction="regression", method="m", explanation="e",
            data_at=timezone.now())
    old.get_model("deviations", "SeriesAnalysis").objects.create(
        series=never, generation=1, release_ids=b"", function_ids=b"", run_ids=b"",
        run_counts=b"", params=b"", global_arrays=b"", snapshot_at=timezone.now())
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    at = executor.loader.project_state(AFTER).apps
    series_at = at.get_model("deviations", "Series")
    rules = dict(series_at.objects.values_list("name", "default_rule"))
    assert rules == {"never-chose": "segments", "chose-paper": "paper"}
    assert not at.get_model("deviations", "SeriesAnalysis").objects.exists()
    assert series_at.objects.create(name="new").default_rule == "segments"
    Alert = at.get_model("deviations", "Alert")  # noqa: N806

    assert set(Alert.objects.values_list("key", "rule")) == {
        (f"trace:{never.pk}:5:self:segments:1:2", "segments"),
        (f"trace:{paper.pk}:5:self:paper:1:2", "paper")}
    # Back to 0012: its choices have no "segments".
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(BEFORE)
    back = executor.loader.project_state(BEFORE).apps.get_model("deviations", "Series")
    assert dict(back.objects.values_list("name", "default_rule")) == {
        "never-chose": "recommended", "chose-paper": "paper", "new": "recommended"}
    assert set(Alert.objects.values_list("key", flat=True)) == {
        f"trace:{never.pk}:5:self:recommended:1:2", f"trace:{paper.pk}:5:self:paper:1:2"}
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


BEFORE_SHIFTS = [("deviations", "0016_subscription_canary_target")]
SHIFTS = [("deviations", "0017_shift_rule")]


@pytest.mark.django_db(transaction=True)
def test_0017_moves_retired_rules_and_default_floors_to_the_shift_rule() -> None:
    """Series on a retired rule take "shifts" ("paper" stays); floors still at the old
    defaults (10%, 20 µs) take the new ones, chosen floors stay; stored analyses are
    dropped; trace alerts take the key of one alert per change (self and total folded),
    the first of a pair keeping its triage, and the retired rule's name becomes "shifts"."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE_SHIFTS)
    old = executor.loader.project_state(BEFORE_SHIFTS).apps
    series_model = old.get_model("deviations", "Series")
    seg = series_model.objects.create(name="seg", default_rule="segments")
    series_model.objects.create(name="rec", default_rule="recommended",
                                      min_relative_change=0.05, min_absolute_change_us=20.0)
    paper = series_model.objects.create(name="paper", default_rule="paper")
    assert (seg.min_relative_change, seg.min_absolute_change_us) == (0.10, 20.0)
    group = old.get_model("deviations", "AlertGroup").objects.create(
        detector="trace", family="seg", from_label="1", to_label="2", from_key="1",
        to_key="2")
    alert_model = old.get_model("deviations", "Alert")
    for s, metric, rule, status in ((seg, "self", "segments", "acknowledged"),
                                    (seg, "total", "segments", "new"),
                                    (paper, "self", "paper", "new")):
        alert_model.objects.create(
            key=f"trace:{s.pk}:5:{metric}:{rule}:1:2", group=group, detector="trace",
            series=s, subject="Paint", metric=metric, rule=rule, from_label="1",
            to_label="2", from_key="1", to_key="2", direction="regression", method="m",
            explanation="e", data_at=timezone.now(), status=status)
    old.get_model("deviations", "SeriesAnalysis").objects.create(
        series=seg, generation=1, release_ids=b"", function_ids=b"", run_ids=b"",
        run_counts=b"", params=b"", global_arrays=b"", snapshot_at=timezone.now())
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(SHIFTS)
    new = executor.loader.project_state(SHIFTS).apps
    got = {s.name: (s.default_rule, s.min_relative_change, s.min_absolute_change_us)
           for s in new.get_model("deviations", "Series").objects.all()}
    assert got == {"seg": ("shifts", 0.02, 2.0), "rec": ("shifts", 0.05, 20.0),
                   "paper": ("paper", 0.02, 2.0)}
    assert not new.get_model("deviations", "SeriesAnalysis").objects.exists()
    alerts = new.get_model("deviations", "Alert").objects.order_by("id")
    assert [(a.key, a.rule, a.status) for a in alerts] == [
        (f"trace:{seg.pk}:5:shifts:1:2", "shifts", "acknowledged"),
        (f"trace:{seg.pk}:5:total:segments:1:2", "segments", "new"),  # withdrawn next pass
        (f"trace:{paper.pk}:5:paper:1:2", "paper", "new")]
    assert new.get_model("deviations", "Series").objects.create(name="n").default_rule == \
        "shifts"
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert Series.objects.get(name="seg").default_rule == "shifts"
    assert not SeriesAnalysis.objects.exists()
