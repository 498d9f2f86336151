"""Detection after ingest: the demo's planted changes are found once, with their kind and
before/after histograms; rule parameters per probe or global; the export command."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command

from deviations.core.packing import unpack
from deviations.histograms import demo as histogram_demo
from deviations.histograms import detection as histogram_analysis
from deviations.histograms.models import (
    HistogramChange,
    HistogramRuleDefaults,
    HistogramSnapshot,
    Probe,
)
from deviations.histograms.store import store_histogram_file
from deviations.histograms.tasks import detect_histogram_changes
from deviations.stats.histograms import detect_changes_adaptive, hellinger
from tests.conftest import plain_histogram

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(committed) -> str:
    return committed(histogram_demo.ingest_demo_histograms)


def export(*args: str) -> str:
    out = io.StringIO()
    call_command("export_histogram_changes", *args, stdout=out)
    return out.getvalue()


def test_demo_changes_are_detected_once_with_kind(demo) -> None:
    assert demo.count("ok histograms-") == histogram_demo.BUILDS
    found = {(c.probe.name, c.build_id, c.kind) for c in HistogramChange.objects.all()}
    builds = histogram_demo.build_ids()
    assert found == {("GC_MS", builds[35], "shift"), ("TAB_SWITCH_MS", builds[40], "shape")}
    assert detect_histogram_changes.delay().get() == 0  # a second pass stores nothing new
    assert HistogramChange.objects.count() == 2


def test_stored_change_matches_the_statistics_module(demo) -> None:
    counts = histogram_demo.demo_counts()["GC_MS"]
    expected = detect_changes_adaptive(counts).changes()[0]
    change = HistogramChange.objects.get(probe__name="GC_MS")
    assert change.distance == pytest.approx(expected.distance)
    assert change.distance == pytest.approx(float(hellinger(counts[35], counts[34])))
    assert change.previous_build_id == histogram_demo.build_ids()[34]
    assert change.rule == "adaptive"
    assert change.shift_buckets == pytest.approx(expected.shift_buckets)
    before, after = unpack(change.before), unpack(change.after)
    share = counts / counts.sum(axis=1, keepdims=True)
    assert before == pytest.approx(share[28:35].mean(axis=0))
    assert after == pytest.approx(share[35:38].mean(axis=0))
    assert len(unpack(change.edges)) == histogram_demo.BUCKETS + 1


def test_scan_is_stored_for_the_chart(demo) -> None:
    probe = Probe.objects.get(name="PAGE_LOAD_MS")
    assert probe.scan["builds"] == histogram_demo.build_ids()
    assert probe.scan["rule"] == "adaptive"
    assert probe.scan["distance"][0] is None
    assert probe.scan["distance"][30] > probe.scan["cutoff"][30]  # the spike...
    assert probe.scan["reason"][30] == "not persistent"  # ...is not reported


def test_mozilla_rule_per_probe_and_global_parameters(demo) -> None:
    Probe.objects.filter(name="GC_MS").update(rule="mozilla", cutoff=0.5)
    HistogramChange.objects.all().delete()
    histogram_analysis.detect()
    assert set(HistogramChange.objects.values_list("probe__name", "rule")) == {
        ("TAB_SWITCH_MS", "adaptive")
    }
    assert Probe.objects.get(name="GC_MS").scan["cutoff"][40] == 0.5
    HistogramRuleDefaults(floor=0.9).save()
    HistogramChange.objects.all().delete()
    histogram_analysis.detect()
    assert not HistogramChange.objects.exists()


def test_rule_of_falls_back_probe_then_global_then_module() -> None:
    probe = Probe(name="p", k=3.0)
    defaults = HistogramRuleDefaults(k=4.0, floor=0.07, past_builds=5, cutoff=0.3)
    assert histogram_analysis.rule_of(probe, defaults) == (
        "adaptive", {"past_builds": 5, "k": 3.0, "floor": 0.07}
    )
    probe.rule = "mozilla"
    assert histogram_analysis.rule_of(probe, defaults) == (
        "mozilla", {"past_builds": 5, "cutoff": 0.3}
    )
    assert histogram_analysis.rule_of(Probe(name="q"), HistogramRuleDefaults()) == (
        "adaptive", {}
    )


def test_glam_proportions_are_scaled_by_their_clients() -> None:
    rng = np.random.default_rng(1)
    records = []
    for b in range(20):
        p = rng.dirichlet(np.full(5, 50.0))
        records.append({**plain_histogram("G", f"{b + 1}", [0] * 5), "counts": p.tolist(),
                        "normalised": True, "total": 50_000})
    store_histogram_file(json.dumps(records).encode(), display_name="g.json")
    (series,) = histogram_analysis.load_series(Probe.objects.values_list("pk", flat=True))
    assert series.counts.sum(axis=1) == pytest.approx(50_000)


def test_builds_on_another_layout_are_left_out() -> None:
    records = [plain_histogram("P", "1", [5, 5, 5])]
    records += [plain_histogram("P", str(b), [5, 5]) for b in range(2, 5)]
    store_histogram_file(json.dumps(records).encode(), display_name="p.json")
    (series,) = histogram_analysis.load_series(Probe.objects.values_list("pk", flat=True))
    assert series.build_ids == ["2", "3", "4"]
    assert series.other_layout == ["1"]
    histogram_analysis.detect()
    assert Probe.objects.get().scan["other_layout"] == ["1"]


def test_replacing_a_build_keeps_a_stored_change(demo) -> None:
    change = HistogramChange.objects.get(probe__name="GC_MS")
    counts = histogram_demo.demo_counts()["STARTUP_MS"][35]  # make build 35 look normal
    record = histogram_demo.mozilla_record("GC_MS", change.build_id, counts)
    stored = store_histogram_file(json.dumps(record).encode(), display_name="fix.json")
    assert stored.replaced == 1
    histogram_analysis.detect()
    assert HistogramChange.objects.get(pk=change.pk).distance == change.distance
    assert HistogramSnapshot.objects.filter(probe__name="GC_MS").count() == 60


def test_export_json_and_csv(demo) -> None:
    rows = json.loads(export())
    builds = histogram_demo.build_ids()
    assert [(r["probe"], r["build_id"], r["kind"]) for r in rows] == [
        ("GC_MS", builds[35], "shift"), ("TAB_SWITCH_MS", builds[40], "shape")
    ]
    assert set(rows[0]) == {"probe", "build_id", "distance", "kind", "change"}
    assert rows[0]["distance"] == pytest.approx(
        HistogramChange.objects.get(probe__name="GC_MS").distance
    )
    lines = export("--probe", "TAB_SWITCH_MS", "--format", "csv").splitlines()
    assert lines[0] == "probe,build_id,distance,kind,change"
    assert lines[1].startswith(f"TAB_SWITCH_MS,{builds[40]},0.")
    assert len(lines) == 2


def test_export_unknown_probe_fails() -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no probe named 'nope'"):
        export("--probe", "nope")
    assert json.loads(export()) == []
