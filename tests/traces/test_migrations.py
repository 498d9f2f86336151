"""Migrations of trace series: 0013 makes the segments rule the default."""

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
    rules = dict(Series.objects.values_list("name", "default_rule"))
    assert rules == {"never-chose": "segments", "chose-paper": "paper"}
    assert not SeriesAnalysis.objects.exists()
    assert Series.objects.create(name="new").default_rule == "segments"
    from deviations.alerts.models import Alert

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
