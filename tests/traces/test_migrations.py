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
    series_model.objects.create(name="chose-paper", default_rule="paper")
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
    # Back to 0012: its choices have no "segments".
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(BEFORE)
    back = executor.loader.project_state(BEFORE).apps.get_model("deviations", "Series")
    assert dict(back.objects.values_list("name", "default_rule")) == {
        "never-chose": "recommended", "chose-paper": "paper", "new": "recommended"}
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
