"""``manage.py ingest_traces`` parses its files before Django's set-up (``preparse``): the
results, messages and digests are those of the command's own path."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.core import packing
from deviations.management import preparse
from deviations.traces.models import Function, Run, RunCalls, RunTimes
from deviations.traces.uploads import runs
from ingest import traces
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

ROOT = Path(runs.__file__).parents[3]


@pytest.fixture(autouse=True)
def _nothing_prepared() -> Iterator[None]:
    preparse.forget()
    yield
    preparse.forget()


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The streamed path in pieces of 200 bytes, so that small files take it."""
    monkeypatch.setattr(traces, "_PIECE_BYTES", 200)


def nested_events(n: int = 60) -> list[dict[str, Any]]:
    """A Renderer's main thread with nested slices of several names: a call tree."""
    spans: list[tuple[str, float, float]] = []
    for i in range(n):
        t = i * 1000
        spans += [(f"Task{i % 3}", t, 900), (f"Layout{i % 4}", t + 10, 500),
                  (f"Paint{i % 5}", t + 20, 100)]
    return renderer_events(spans)


def ingest(*files: Path, series: str, prepare: bool, extra: tuple[str, ...] = ()) -> str:
    args = ["--series", series, "--release", "1", *extra, *map(str, files)]
    if prepare:
        assert preparse.prepare(args) == len(set(files))
    out = io.StringIO()
    try:
        call_command("ingest_traces", *args, stdout=out)
    except CommandError as exc:  # a file failed: its line is printed all the same
        out.write(f"error: {exc}\n")
    return out.getvalue()


def same(out: str) -> list[str]:
    """The lines of an ingest's output, run ids and the series' name aside."""
    return re.sub(r"run \d+", "run N", out.replace("new", "old")).splitlines()


def stored(run: Run) -> tuple[Any, ...]:
    """The run's times and call tree by function name, and what else it holds."""
    names = dict(Function.objects.filter(series=run.release.series).values_list("id", "name"))
    names[RunCalls.ROOT] = "(root)"
    ids, self_us, total_us, calls = run.times.arrays()
    tree = run.call_tree
    return (
        [names[i] for i in ids.tolist()], self_us.tolist(), total_us.tolist(), calls.tolist(),
        [names[i] for i in packing.unpack(tree.caller_ids, RunCalls.INT).tolist()],
        [names[i] for i in packing.unpack(tree.callee_ids, RunCalls.INT).tolist()],
        packing.unpack(tree.time_us, RunCalls.FLOAT).tolist(),
        run.summary, run.sha256, run.size_bytes, run.status, run.file_stored, run.options,
    )


def no_parse_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command must take the prepared results: parsing or hashing again fails."""

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("parsed or hashed again")

    monkeypatch.setattr(runs, "parse_file", fail)
    monkeypatch.setattr(runs, "file_sha256", fail)


@pytest.mark.parametrize("gz", [False, True])
def test_a_prepared_ingest_stores_what_the_command_stores(
    write_trace, small_pieces, monkeypatch, gz
) -> None:
    path = write_trace("run1.json" + (".gz" if gz else ""), nested_events(), gz=gz)
    before = ingest(path, series="old", prepare=False, extra=("--all-threads",))
    no_parse_here(monkeypatch)
    after = ingest(path, series="new", prepare=True, extra=("--all-threads",))
    assert same(after) == same(before)
    assert after.startswith(f"ok {path.name}: run ")
    old, new = (Run.objects.get(release__series__name=s) for s in ("old", "new"))
    assert stored(new) == stored(old)
    assert len(stored(new)[4]) > 3  # a call tree with edges under the thread root
    assert new.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_bad_file_gets_its_named_error(write_trace, monkeypatch) -> None:
    bad = write_trace("bad.json", raw=b'{"traceEvents": [{"ph": "X", "name": "a", "pid"')
    good = write_trace("good.json", nested_events(5))
    before = ingest(bad, good, series="old", prepare=False)
    no_parse_here(monkeypatch)
    after = ingest(bad, good, series="new", prepare=True)
    assert same(after) == same(before)
    assert after.splitlines()[-1] == "error: 1 of 2 file(s) failed"
    assert after.startswith("FAILED bad.json: ")
    assert Run.objects.get(release__series__name="new", file_name="bad.json").error == (
        Run.objects.get(release__series__name="old", file_name="bad.json").error)


def test_a_file_given_twice_is_ingested_once(write_trace) -> None:
    path = write_trace("run1.json", nested_events(5))
    out = ingest(path, path, series="s1", prepare=True)
    assert out.splitlines()[0].startswith("ok run1.json")
    assert out.splitlines()[1].startswith("skipped run1.json: already ingested as run")
    assert Run.objects.count() == 1


def test_a_file_changed_since_is_parsed_again(write_trace) -> None:
    path = write_trace("run1.json", nested_events(5))
    args = ["--series", "s1", "--release", "1", str(path)]
    assert preparse.prepare(args) == 1
    write_trace("run1.json", renderer_events([("Other", 0, 10)]))
    os.utime(path, ns=(1, 1))  # a new mtime even on a coarse clock
    call_command("ingest_traces", *args, stdout=io.StringIO())
    run = Run.objects.get()
    assert run.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert stored(run)[0] == ["Other"]


def test_results_made_with_other_settings_are_not_used(write_trace, monkeypatch) -> None:
    path = write_trace("run1.json", nested_events(5))
    args = ["--series", "s1", "--release", "1", str(path)]
    monkeypatch.setenv("DEVIATIONS_MAX_TRACE_BYTES", "100")  # not the settings' limit
    assert preparse.prepare(args) == 1
    assert preparse.take(path, "run1.json", runs.ThreadOptions().as_dict(),
                         settings.DEVIATIONS_MAX_TRACE_BYTES) is None
    assert preparse.prepare(args) == 1
    assert preparse.take(path, "run1.json", runs.ThreadOptions(all_threads=True).as_dict(),
                         100) is None  # other thread options
    assert preparse.prepare(args) == 1
    prepared = preparse.take(path, "run1.json", runs.ThreadOptions().as_dict(), 100)
    assert prepared is not None
    assert isinstance(prepared[1], traces.TraceError)
    assert "larger than the limit of 100 bytes" in str(prepared[1])


@pytest.mark.parametrize("args", [
    ["--help"], ["--series", "s1", "--release", "1", "-h", "f.json"], ["--version"],
    ["--series", "s1", "--manifest", "runs.csv"], ["--series", "s1", "--release", "1"],
    ["--series", "s1", "--release", "1", "--serie", "x", "f.json"],  # no abbreviations
    ["--series", "s1", "--release", "1", "--manifest", "m.csv", "f.json"],
    ["--release", "1", "f.json"],  # --series is required
    ["--series", "s1", "--release", "1", "--skip-checks", "f.json"],
])
def test_anything_but_release_and_files_is_left_to_the_command(args, tmp_path) -> None:
    (tmp_path / "f.json").write_text("[]")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert preparse.prepare(args) == 0
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("kind", ["missing", "folder", "pipe"])
def test_a_file_it_cannot_read_is_left_to_the_command(tmp_path, kind) -> None:
    path = tmp_path / "t.json"
    if kind == "folder":
        path.mkdir()
    elif kind == "pipe":
        os.mkfifo(path)
    assert preparse.prepare(["--series", "s1", "--release", "1", str(path)]) == 0
    if kind == "pipe":
        return  # the command would wait for a writer
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 1 file"):
        call_command("ingest_traces", "--series", "s1", "--release", "1", str(path),
                     stdout=out)
    assert out.getvalue().startswith("FAILED t.json: cannot open")


@pytest.mark.parametrize("case", ["streamed", "gzip", "one piece", "repaired", "too large",
                                  "not json"])
def test_the_digest_is_the_sha256_of_the_file(write_trace, small_pieces, monkeypatch,
                                              case) -> None:
    data = json.dumps({"traceEvents": nested_events(20)}).encode()
    if case == "gzip":
        data = gzip.compress(data)
    elif case == "one piece":
        data = json.dumps(nested_events(1)).encode()
    elif case == "repaired":  # an array cut after an event: read whole a second time
        data = json.dumps(nested_events(20)).encode()[:-1] + b","
    elif case == "not json":
        data = b"\x0a\x05hello" * 100
    path = write_trace("t.json", raw=data)
    limit = 1000 if case == "too large" else settings.DEVIATIONS_MAX_TRACE_BYTES
    monkeypatch.setenv("DEVIATIONS_MAX_TRACE_BYTES", str(limit))
    if case in ("streamed", "gzip", "one piece", "repaired"):
        # the parser read every byte: the file is not read again for its digest
        monkeypatch.setattr(preparse, "file_sha256", None)
    assert preparse.prepare(["--series", "s", "--release", "1", str(path)]) == 1
    prepared = preparse.take(path, "t.json", runs.ThreadOptions().as_dict(), limit)
    assert prepared is not None
    assert prepared[0] == (hashlib.sha256(data).hexdigest(), len(data))
    assert prepared[0] == runs.file_sha256(path)
    if case in ("too large", "not json"):
        assert isinstance(prepared[1], traces.TraceError)
    else:
        assert isinstance(prepared[1], traces.FunctionTimes)


def test_arrays_written_as_blobs_are_the_packed_arrays(write_trace) -> None:
    path = write_trace("run1.json", nested_events(10) + renderer_events([("Zero", 99e6, 0)]))
    call_command("ingest_traces", "--series", "s1", "--release", "1", str(path),
                 stdout=io.StringIO())
    run = Run.objects.get()
    result = traces.parse_trace(path)
    names = dict(Function.objects.values_list("name", "id"))
    ids = np.array([names[n] for n in result.names])
    times, tree = RunTimes.objects.get(run=run), RunCalls.objects.get(run=run)
    assert bytes(times.function_ids) == packing.pack(ids, RunTimes.INT)
    assert bytes(times.self_us) == packing.pack(result.self_us)
    assert bytes(times.total_us) == packing.pack(result.total_us)
    assert bytes(times.calls) == packing.pack(result.calls, RunTimes.INT)
    callers = np.where(result.caller >= 0, ids[np.maximum(result.caller, 0)], RunCalls.ROOT)
    assert bytes(tree.caller_ids) == packing.pack(callers, RunCalls.INT)
    assert bytes(tree.callee_ids) == packing.pack(ids[result.callee], RunCalls.INT)
    assert bytes(tree.time_us) == packing.pack(result.edge_us)
    assert len(result.edge_us) > 3


def test_a_run_without_call_tree_edges(write_trace) -> None:
    path = write_trace("run1.json", renderer_events([("Zero", 0, 0)]))
    call_command("ingest_traces", "--series", "s1", "--release", "1", str(path),
                 stdout=io.StringIO())
    tree = RunCalls.objects.get()
    assert (bytes(tree.caller_ids), bytes(tree.callee_ids), bytes(tree.time_us)) == (
        b"", b"", b"")
    assert RunTimes.objects.get().arrays()[3].tolist() == [1]


_LEAN = r"""
import sys
from deviations.management import preparse
print(preparse.prepare(sys.argv[1:]))
print(sorted(m for m in sys.modules if m.split(".")[0] in ("django", "scipy")))
"""


def test_the_parse_before_the_set_up_loads_no_django(write_trace, tmp_path) -> None:
    path = write_trace("run1.json", nested_events(5))
    done = subprocess.run(  # noqa: S603 (our own interpreter and script)
        [sys.executable, "-c", _LEAN, "--series", "s1", "--release", "1", str(path)],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=120,
    )
    assert done.stdout.splitlines() == ["1", "[]"]


def test_manage_py_ingests_and_helps_as_before(write_trace, tmp_path) -> None:
    path = write_trace("run1.json", nested_events(5))
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               DJANGO_MEDIA_ROOT=str(tmp_path / "media"))
    env.pop("CELERY_BROKER_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True,  # noqa: S603
                   capture_output=True, timeout=300)
    done = subprocess.run(  # noqa: S603
        [*manage, "ingest_traces", "--series", "s1", "--release", "1", "--no-analyse",
         str(path), str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0].startswith("ok run1.json: run 1, ")
    assert lines[1].startswith("skipped run1.json: already ingested as run 1")
    helped = subprocess.run(  # noqa: S603
        [*manage, "ingest_traces", "--help"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300, check=True)
    assert "--no-analyse" in helped.stdout
    assert "FILE" in helped.stdout
    assert "Ingest Chromium trace files" in helped.stdout


def test_results_held_for_the_command_are_bounded(write_trace, monkeypatch) -> None:
    """Many files: results are prepared until they hold ``HELD_BYTES``; the rest are
    parsed by the command one at a time, and every file is stored the same."""
    paths = [write_trace(f"run{i}.json", nested_events(5 + i)) for i in range(4)]
    one = preparse._held_bytes(traces.parse_trace(paths[0], display_name="run0.json"))
    assert one > 0
    monkeypatch.setattr(preparse, "HELD_BYTES", 2 * one)  # room for two results
    args = ["--series", "s1", "--release", "1", *map(str, paths)]
    assert preparse.prepare(args) == 2
    out = io.StringIO()
    call_command("ingest_traces", *args, stdout=out)
    assert [line.split(":")[0] for line in out.getvalue().splitlines()[:4]] == [
        f"ok run{i}.json" for i in range(4)]
    assert Run.objects.filter(release__series__name="s1", status=Run.DONE).count() == 4
