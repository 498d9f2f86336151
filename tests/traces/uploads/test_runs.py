"""Ingest through the CLI and the shared service: good files, bad files, duplicates, atomicity."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.traces.models import Function, Release, Run, RunTimes, Series
from deviations.traces.uploads import runs
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


def ingest(*files: Path, series: str = "s1", release: str = "1.0", **extra: Any) -> str:
    out = io.StringIO()
    args = ["--series", series, "--release", release]
    for key, value in extra.items():
        flag = "--" + key.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    call_command("ingest_traces", *args, *map(str, files), stdout=out)
    return out.getvalue()


def export(what: str = "selftimes", fmt: str = "json", series: str = "s1") -> Any:
    out = io.StringIO()
    call_command("export", "--series", series, "--what", what, "--format", fmt, stdout=out)
    if fmt == "json":
        return json.loads(out.getvalue())
    return list(csv.DictReader(io.StringIO(out.getvalue())))


def test_cli_ingests_and_exports_self_times(write_trace, simple_events) -> None:
    path = write_trace("run1.json", simple_events)
    out = ingest(path)
    assert "ok run1.json" in out
    rows = {r["function"]: r for r in export()}
    # Paint 0-1000 holds Layout 100-400 which holds Paint 150-250; Layout 2000-2050.
    assert rows["Paint"]["self_us"] == pytest.approx(700 + 100)
    assert rows["Paint"]["total_us"] == pytest.approx(1000)  # recursive: outermost call once
    assert rows["Paint"]["calls"] == 2
    assert rows["Layout"]["self_us"] == pytest.approx(200 + 50)
    assert rows["Layout"]["total_us"] == pytest.approx(300 + 50)
    assert {r["release"] for r in rows.values()} == {"1.0"}
    assert {r["run"] for r in rows.values()} == {"run1.json"}
    header = export(fmt="csv")[0].keys()
    assert header == {"release", "run", "function", "self_us", "total_us", "calls"}


def test_gzip_and_array_form(write_trace, simple_events) -> None:
    a = write_trace("a.json.gz", raw=json.dumps(simple_events).encode(), gz=True)
    ingest(a)
    run = Run.objects.get()
    assert run.status == Run.DONE
    assert run.summary["slices"] == 4


def test_same_file_twice_is_one_run(write_trace, simple_events) -> None:
    path = write_trace("run1.json", simple_events)
    ingest(path)
    out = ingest(path, release="2.0")
    assert "skipped run1.json: already ingested as run" in out
    assert Run.objects.count() == 1
    assert len(export()) == 2


BAD_INPUTS = {
    "empty.json": (b"", "empty"),
    "notjson.json": (b"this is not json", ""),
    "truncated.json": (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', ""),
    "noevents.json": (b'{"hello": "world"}', ""),
    "nothread.json": (
        json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0,
                                     "dur": 1}]}).encode(),
        "CrRendererMain",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_file_fails_alone_with_its_reason(name: str, write_trace, simple_events) -> None:
    raw, reason = BAD_INPUTS[name]
    good = write_trace("good.json", simple_events)
    bad = write_trace(name, raw=raw)
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 2 file"):
        call_command("ingest_traces", "--series", "s1", "--release", "1", str(bad), str(good),
                     stdout=out)
    lines = out.getvalue().splitlines()
    failed = [line for line in lines if line.startswith("FAILED")]
    assert len(failed) == 1
    assert failed[0].startswith(f"FAILED {name}: ")
    assert reason in failed[0]
    bad_run = Run.objects.get(file_name=name)
    assert bad_run.status == Run.FAILED
    assert bad_run.error.startswith(f"{name}: ")
    assert "\n" not in bad_run.error
    assert not RunTimes.objects.filter(run=bad_run).exists()
    assert Run.objects.get(file_name="good.json").status == Run.DONE


def test_truncated_gzip_fails(write_trace, simple_events) -> None:
    whole = write_trace("whole.json.gz", simple_events, gz=True).read_bytes()
    cut = write_trace("cut.json.gz", raw=whole[: len(whole) // 2])
    with pytest.raises(CommandError):
        ingest(cut)
    run = Run.objects.get()
    assert run.status == Run.FAILED
    assert run.error.startswith("cut.json.gz: ")


def test_file_over_the_size_limit_fails_without_parsing(
    write_trace, simple_events, settings
) -> None:
    path = write_trace("big.json", simple_events)
    settings.DEVIATIONS_MAX_TRACE_BYTES = 100
    with pytest.raises(CommandError):
        ingest(path)
    run = Run.objects.get()
    assert run.status == Run.FAILED
    assert "over the limit of 100 bytes" in run.error


def test_missing_file_is_reported(tmp_path) -> None:
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("ingest_traces", "--series", "s1", "--release", "1",
                     str(tmp_path / "nope.json"), stdout=out)
    assert "FAILED nope.json: cannot open" in out.getvalue()


def test_failed_file_sent_again_is_retried(write_trace, simple_events, settings) -> None:
    path = write_trace("r.json", simple_events)
    settings.DEVIATIONS_MAX_TRACE_BYTES = 10
    with pytest.raises(CommandError):
        ingest(path)
    settings.DEVIATIONS_MAX_TRACE_BYTES = 10**9
    ingest(path)
    run = Run.objects.get()
    assert run.status == Run.DONE
    assert run.error == ""


def test_a_failure_while_storing_leaves_nothing_half_written(
    write_trace, simple_events, monkeypatch, fail_times_write
) -> None:
    ingest(write_trace("first.json", renderer_events_with("Keep")))
    before = (Function.objects.count(), RunTimes.objects.count())
    fail_times_write()
    path = write_trace("second.json", simple_events)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest(path)
    assert (Function.objects.count(), RunTimes.objects.count()) == before
    assert Run.objects.get(file_name="second.json").status == Run.PENDING
    assert Run.objects.get(file_name="first.json").status == Run.DONE
    monkeypatch.undo()
    assert "ok second.json" in ingest(path)  # the abandoned run is taken up again
    assert Run.objects.get(file_name="second.json").status == Run.DONE


def renderer_events_with(name: str) -> list[dict[str, Any]]:
    from tests.conftest import renderer_events

    return renderer_events([(name, 0, 10)])


def test_thread_options(write_trace) -> None:
    from tests.conftest import renderer_events

    events = renderer_events([("Main", 0, 10)]) + [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "Compositor"}},
        {"ph": "X", "name": "Composite", "pid": 7, "tid": 2, "ts": 0, "dur": 5},
    ]
    ingest(write_trace("a.json", events), release="1")
    ingest(write_trace("b.json", events + [{"ph": "I", "name": "i", "pid": 7, "tid": 2, "ts": 1}]),
           release="2", thread_name="Compositor")
    ingest(write_trace("c.json", events + [{"ph": "I", "name": "j", "pid": 7, "tid": 2, "ts": 2}]),
           release="3", all_threads=True)
    by_release: dict[str, set[str]] = {}
    for row in export():
        by_release.setdefault(row["release"], set()).add(row["function"])
    assert by_release == {"1": {"Main"}, "2": {"Composite"}, "3": {"Main", "Composite"}}


def test_bad_series_or_release_name_is_refused(write_trace, simple_events) -> None:
    path = write_trace("a.json", simple_events)
    with pytest.raises(CommandError, match="release version"):
        ingest(path, release="../../etc")
    with pytest.raises(CommandError, match="series name"):
        ingest(path, series="a b")
    assert not Series.objects.exists()


def test_release_order_option(write_trace, simple_events) -> None:
    ingest(write_trace("a.json", simple_events), release="zeta", order=1)
    ingest(write_trace("b.json", renderer_events_with("X")), release="alpha", order=2)
    assert list(Release.objects.values_list("version", flat=True)) == ["zeta", "alpha"]
    # A series placed by order takes no release without one (its version's text would
    # be compared with the orders' digits; issue 23), and the reverse.
    with pytest.raises(CommandError, match="places its releases by their order .2 releases"):
        ingest(write_trace("c.json", renderer_events_with("Y")), release="beta")
    ingest(write_trace("d.json", renderer_events_with("Z")), release="zeta")  # known: fine
    ingest(write_trace("e.json", renderer_events_with("W")), series="v", release="1.0")
    with pytest.raises(CommandError, match="places its releases by version .1 release"):
        ingest(write_trace("f.json", renderer_events_with("V")), series="v", release="2.0",
               order=5)
    assert list(Release.objects.values_list("version", flat=True)) == ["zeta", "alpha", "1.0"]


def test_hostile_function_names_are_stored_as_given(write_trace) -> None:
    from tests.conftest import renderer_events

    hostile = '<img src=x onerror=alert(1)>'
    ingest(write_trace("h.json", renderer_events([(hostile, 0, 10), ("a" * 5000, 20, 5)])))
    names = set(Function.objects.values_list("name", flat=True))
    assert hostile in names
    assert max(len(n) for n in names) < 1100


def test_nul_in_a_name_is_stored_on_every_database(write_trace) -> None:
    # PostgreSQL text cannot hold NUL: it is stored as U+FFFD, and identity stays with the
    # name as traced, so a name that already had U+FFFD there stays another function.
    from tests.conftest import renderer_events

    events = renderer_events([("a\x00b", 0, 10), ("a\ufffdb", 20, 5), ("c", 30, 1)])
    ingest(write_trace("nul.json", events))
    ingest(write_trace("nul2.json", events + renderer_events([("d", 40, 1)])))
    assert sorted(Function.objects.values_list("name", flat=True)) == [
        "a\ufffdb", "a\ufffdb", "c", "d"
    ]
    assert Function.objects.count() == 4  # the second run found the first run's functions
    assert Run.objects.filter(status=Run.DONE).count() == 2


def test_processing_twice_is_harmless(write_trace, simple_events) -> None:
    from deviations.traces.uploads.tasks import ingest_run

    path = write_trace("a.json", simple_events)
    release = runs.get_release("s1", "1")
    with path.open("rb") as f:
        entry = runs.register_run(release, f, "a.json", runs.ThreadOptions())
    assert ingest_run(entry.run.pk) == Run.DONE
    assert ingest_run(entry.run.pk) == Run.DONE
    assert RunTimes.objects.count() == 1
    run = Run.objects.get()
    assert run.file_stored  # kept after its ingest (DEVIATIONS_KEEP_TRACE_DAYS unset)


def test_export_unknown_series() -> None:
    with pytest.raises(CommandError, match="no series named"):
        export(series="nope")


def test_csv_exports_never_hold_a_formula(write_trace) -> None:
    """Hardening #10: names starting with = + - @ opened as formulas in a spreadsheet."""
    names = ["=HYPERLINK(\"http://evil\")", "+cmd", "-2+3", "@SUM(A1)", "Paint"]
    events = renderer_events([(n, 100 * i, 10) for i, n in enumerate(names)])
    ingest(write_trace("r.json", events))
    rows = export("selftimes", "csv")
    assert sorted(r["function"] for r in rows) == sorted(
        ["'=HYPERLINK(\"http://evil\")", "'+cmd", "'-2+3", "'@SUM(A1)", "Paint"]
    )
    assert {float(r["self_us"]) for r in rows} == {10.0}


def test_options_must_be_spelled_out(write_trace, simple_events) -> None:
    """Issue 14: `--serie web` was taken for `--series web`."""
    path = write_trace("r.json", simple_events)
    with pytest.raises(CommandError, match="required: --series"):
        call_command("ingest_traces", "--serie", "web", "--release", "1", str(path),
                     stdout=io.StringIO())
    assert not Series.objects.exists()


def test_upload_check_endpoint(client) -> None:
    from django.contrib.auth import get_user_model

    Series.objects.create(name="web")
    client.force_login(get_user_model().objects.create_user("u"))
    ok = client.get("/upload/check/", {"series": "web", "release": "1.0"}).json()
    assert ok == {"errors": {}, "new_series": False}
    new = client.get("/upload/check/", {"series": "wbe", "release": "1.0"}).json()
    assert new["new_series"] is True
    bad = client.get("/upload/check/", {"series": "a b", "release": "1", "order": "-1"})
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) == {"series", "order"}
    assert not Series.objects.filter(name="wbe").exists()  # asking creates nothing


def test_no_analyse_stores_the_runs_and_leaves_the_analysis(write_trace, simple_events) -> None:
    from deviations.traces.analysis import is_up_to_date

    ingest(write_trace("run1.json", simple_events), no_analyse=True)
    out = ingest(write_trace("run2.json", simple_events[:-1]), release="2.0", no_analyse=True)
    assert "ok run2.json" in out
    assert "analysis: not run (--no-analyse): `manage.py analyse --series s1`" in out
    series = Series.objects.get(name="s1")
    assert {r.status for r in Run.objects.all()} == {Run.DONE}
    assert not is_up_to_date(series)  # the sweeper or `analyse` takes it from here
    call_command("analyse", "--series", "s1", stdout=io.StringIO())
    assert is_up_to_date(series)


def test_the_analysis_runs_after_the_ingest_lines(write_trace, simple_events) -> None:
    from deviations.traces.analysis import is_up_to_date

    ingest(write_trace("run1.json", simple_events))
    out = ingest(write_trace("run2.json", simple_events[:-1]), release="2.0")
    lines = out.splitlines()
    assert lines[0].startswith("ok run2.json")
    assert lines[1].startswith("analysis: ")
    assert is_up_to_date(Series.objects.get(name="s1"))


def test_with_a_broker_the_analysis_is_queued(write_trace, simple_events, monkeypatch) -> None:
    from deviations.celery import app
    from deviations.traces.analysis import is_up_to_date
    from deviations.traces.uploads import tasks

    queued: list[int] = []
    reachable = True

    def queue(series_id: int) -> bool:
        queued.append(series_id)
        return reachable

    monkeypatch.setattr(tasks, "queue_analysis", queue)
    ingest(write_trace("run1.json", simple_events), no_analyse=True)
    app.conf.task_always_eager = False  # restored by the autouse in_process_tasks
    out = ingest(write_trace("run2.json", simple_events[:-1]), release="2.0")
    assert "analysis: queued for the worker" in out
    series = Series.objects.get(name="s1")
    assert queued == [series.pk]
    assert not is_up_to_date(series)  # not analysed here
    reachable = False
    out = ingest(write_trace("run3.json", simple_events[1:]), release="3.0")
    assert "analysis: not queued (the broker is unreachable)" in out
    assert queued == [series.pk, series.pk]


_NO_ANALYSIS_IMPORTS = r"""
import io, os, sys
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "deviations.settings"
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("ingest_traces", "--series", "s1", "--release", "1", "--no-analyse", sys.argv[1],
             stdout=io.StringIO())
print(sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "plotly", "celery")
             or m == "deviations.traces.analysis"))
"""


def test_no_analyse_loads_nothing_of_the_analysis(write_trace, simple_events, tmp_path) -> None:
    import os
    import subprocess
    import sys

    path = write_trace("run1.json", simple_events)
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               DJANGO_MEDIA_ROOT=str(tmp_path / "media"))
    env.pop("CELERY_BROKER_URL", None)
    root = Path(runs.__file__).parents[3]
    done = subprocess.run(  # noqa: S603 (our own interpreter and script)
        [sys.executable, "-c", _NO_ANALYSIS_IMPORTS, str(path)], env=env, cwd=root,
        capture_output=True, text=True, check=True, timeout=300,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_release_order_is_checked_on_the_api_and_the_upload_page(
    client: Any, simple_events: Any,
) -> None:
    """The same rule through the REST API (runs and results) and the browser's upload form:
    a release without ``order`` into a series placed by order is refused with the reason,
    and nothing is stored."""
    from django.contrib.auth import get_user_model

    from deviations.core.models import ApiToken

    user = get_user_model().objects.create_user("ci", password="pw")
    auth = {"Authorization": f"Bearer {ApiToken.issue(user, 'CI')[1]}"}

    def trace(name: str, marker: str) -> io.BytesIO:
        data = io.BytesIO(json.dumps({"traceEvents": renderer_events_with(marker)}).encode())
        data.name = name
        return data

    ok = client.post("/api/series/o/releases/zeta/runs", {"file": trace("a.json", "A"),
                                                          "order": "1"}, headers=auth)
    assert ok.status_code == 201, ok.content
    refused = client.post("/api/series/o/releases/beta/runs", {"file": trace("b.json", "B")},
                          headers=auth)
    assert refused.status_code == 400
    assert "places its releases by their order" in refused.json()["detail"]
    results = io.BytesIO(b"release,metric,value\nr1,latency,1.0\n")
    results.name = "r.csv"
    made = client.post("/api/series/m/results", {"file": results, "format": "csv",
                                                 "release": "r1", "order": "3"}, headers=auth)
    assert made.status_code in (200, 201), made.content
    results = io.BytesIO(b"release,metric,value\nr2,latency,2.0\n")
    results.name = "r2.csv"
    refused = client.post("/api/series/m/results", {"file": results, "format": "csv",
                                                    "release": "r2"}, headers=auth)
    assert refused.status_code == 400, refused.content
    assert "order" in refused.content.decode()
    client.force_login(user)
    page = client.post("/upload/", {"series": "o", "release": "gamma",
                                    "thread_name": "CrRendererMain", "process_name": "Renderer",
                                    "files": [trace("c.json", "C")]})
    assert "places its releases by their order" in page.content.decode()
    assert sorted(Release.objects.values_list("version", flat=True)) == ["r1", "zeta"]


def test_function_ids_create_the_missing_names_in_the_traces_order() -> None:
    """Known names keep their ids (one made by another ingest included), new ones are
    created in the trace's order, stored with NUL as U+FFFD, and a second call creates
    nothing."""
    series = Series.objects.create(name="names")
    other = Function.objects.create(series=series, name="b")
    Function.objects.create(series=Series.objects.create(name="elsewhere"), name="c")
    names = ["c", "b", "a\x00z", "d"]
    ids = runs._function_ids(series, names)
    assert ids[1] == other.pk
    assert ids[0] < ids[2] < ids[3]
    stored = dict(Function.objects.filter(series=series).values_list("id", "name"))
    assert [stored[i] for i in ids.tolist()] == ["c", "b", "a\ufffdz", "d"]
    assert runs._function_ids(series, names[::-1]).tolist() == ids.tolist()[::-1]
    assert Function.objects.filter(series=series).count() == 4
