"""``manage.py reingest``: the kept files re-measured with another thread selection, each
run atomically, the analysis recomputed; re-measuring with the first selection gives the
first times back exactly."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.traces.models import Run, RunTimes, SeriesAnalysis
from deviations.traces.uploads import runs
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


def events(k: int, paint: int) -> list[dict[str, Any]]:
    """The renderer's main thread, plus a compositor thread the default selection skips."""
    return renderer_events([("Paint", 0, paint + k), ("Layout", 5000, 40 + k)]) + [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2,
         "args": {"name": "Compositor"}},
        {"ph": "X", "name": "Composite", "pid": 7, "tid": 2, "ts": 0, "dur": 30 + 7 * k},
        {"ph": "X", "name": "Paint", "pid": 7, "tid": 2, "ts": 100, "dur": 11 + k},
    ]


@pytest.fixture
def series(tmp_path: Path) -> str:
    """Series "re": 3 releases x 4 runs (Paint 100 µs, then ~300 µs from release 1.1)."""
    for version, paint in (("1.0", 100), ("1.1", 300), ("1.2", 310)):
        paths = []
        for k in range(4):
            path = tmp_path / f"{version}-{k}.json"
            path.write_text(json.dumps({"traceEvents": events(k, paint)}))
            paths.append(str(path))
        call_command("ingest_traces", "--series", "re", "--release", version, *paths,
                     stdout=io.StringIO())
    return "re"


def export(what: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("export", "--series", "re", "--what", what, stdout=out)
    return sorted(json.loads(out.getvalue()), key=json.dumps)


def reingest(*args: str) -> str:
    out = io.StringIO()
    call_command("reingest", "--series", "re", *args, stdout=out)
    return out.getvalue()


def test_reingest_measures_other_threads_then_reproduces_the_first_times(series: str) -> None:
    first_times, first_stats = export("selftimes"), export("stats")
    out = reingest("--all-threads")
    assert out.count("ok ") == 12
    assert "analysis of re queued" in out
    all_threads = export("selftimes")
    assert {r["function"] for r in all_threads} == {"Paint", "Layout", "Composite"}
    assert all(r.options["all_threads"] for r in Run.objects.all())
    assert export("stats") != first_stats  # recomputed from the new times
    reingest()  # the default selection again
    assert export("selftimes") == first_times  # exactly: the same parse of the same bytes
    assert export("stats") == first_stats
    assert SeriesAnalysis.objects.filter(series__name="re").exists()
    assert not any(r.options["all_threads"] for r in Run.objects.all())


def test_a_selection_a_file_lacks_fails_its_run_and_the_first_one_brings_it_back(
    series: str,
) -> None:
    first_times = export("selftimes")
    with pytest.raises(CommandError, match="12 of 12 run"):
        reingest("--thread-name", "NoSuchThread")
    assert set(Run.objects.values_list("status", flat=True)) == {Run.FAILED}
    assert "NoSuchThread" in Run.objects.first().error  # type: ignore[union-attr]
    assert not RunTimes.objects.exists()
    reingest("--thread-name", "CrRendererMain")
    assert set(Run.objects.values_list("status", flat=True)) == {Run.DONE}
    assert export("selftimes") == first_times


def test_each_run_is_replaced_whole_or_not_at_all(
    series: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while the fifth run is stored: the first four are re-measured, the fifth
    keeps its times and selection, the series' stored analysis is gone (recomputed by the
    next analysis or the beat's sweeper)."""
    before = {r.pk: bytes(r.times.self_us) for r in Run.objects.select_related("times")}
    real, calls = runs.write_times, []

    def fifth_fails(run: Run, result: Any) -> None:
        calls.append(run.pk)
        if len(calls) == 5:
            raise RuntimeError("disk full")
        real(run, result)

    monkeypatch.setattr(runs, "write_times", fifth_fails)
    with pytest.raises(RuntimeError, match="disk full"):
        reingest("--all-threads")
    after = {r.pk: (bytes(r.times.self_us), r.options["all_threads"])
             for r in Run.objects.select_related("times")}
    changed = [pk for pk in calls[:4] if after[pk][0] != before[pk]]
    assert len(changed) == 4
    assert all(after[pk][1] for pk in calls[:4])
    assert after[calls[4]] == (before[calls[4]], False)
    assert not SeriesAnalysis.objects.filter(series__name="re").exists()


def test_runs_whose_file_is_gone_keep_their_times_and_are_named(
    series: str, settings: Any
) -> None:
    from deviations.traces.uploads import files

    run = Run.objects.order_by("pk").first()
    assert run is not None
    times = bytes(run.times.self_us)
    files.forget(run.pk, run.sha256)
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 12 run.*1 skipped"):
        call_command("reingest", "--series", "re", "--all-threads", stdout=out)
    assert f"the file of run {run.pk} was deleted on" in out.getvalue()
    assert "keeps its times measured with CrRendererMain of Renderer" in out.getvalue()
    run.refresh_from_db()
    assert bytes(run.times.self_us) == times
    assert not run.options["all_threads"]


def test_reingest_reads_the_files_from_object_storage(s3: Any, series: str) -> None:
    # The fixture ingested the series into S3 (the fixture order: s3 first).
    assert len(s3.keys()) == 12
    first_times = export("selftimes")
    reingest("--all-threads")
    reingest()
    assert export("selftimes") == first_times


def test_unknown_series_and_bad_names_are_refused() -> None:
    with pytest.raises(CommandError, match="no series named"):
        call_command("reingest", "--series", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="control characters"):
        call_command("reingest", "--series", "nope", "--thread-name", "a\x00b",
                     stdout=io.StringIO())
