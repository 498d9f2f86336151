"""Function rows made by ingest: ids in the trace's order, known names reused, one row per
(series, name) when two ingests of a series create the same names at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django import db

from deviations.traces.models import Function, Run, RunTimes
from deviations.traces.uploads import runs
from tests.conftest import renderer_events


def trace(write_trace: Any, file_name: str, names: list[str]) -> Path:
    """One X event per name, one after the other; name ``k`` lasts ``10 + k`` µs."""
    return write_trace(
        file_name, renderer_events([(n, 1000 * k, 10 + k) for k, n in enumerate(names)])
    )


def stored(run: Run) -> dict[str, float]:
    """The run's self times by function name, read back from the packed arrays."""
    ids, self_us, _, _ = RunTimes.objects.get(run=run).arrays()
    names = dict(Function.objects.filter(pk__in=ids.tolist()).values_list("id", "name"))
    return {names[i]: float(t) for i, t in zip(ids.tolist(), self_us.tolist(), strict=True)}


@pytest.mark.django_db
def test_new_names_get_ids_in_the_trace_order_and_known_ones_keep_theirs(write_trace) -> None:
    release = runs.get_release("s1", "1")
    first = ["zeta", "alpha", "<b>mid</b>", "a\x00b"]
    entry = runs.ingest_local_file(release, trace(write_trace, "a.json", first),
                                   runs.ThreadOptions())
    ids_before = dict(Function.objects.values_list("name_sha1", "id"))
    second = ["new2", "alpha", "new1", "zeta"]
    later = runs.ingest_local_file(release, trace(write_trace, "b.json", second),
                                   runs.ThreadOptions())

    by_id = list(Function.objects.order_by("id").values_list("name", flat=True))
    assert by_id == ["zeta", "alpha", "<b>mid</b>", "a\ufffdb", "new2", "new1"]
    assert {d: i for d, i in Function.objects.values_list("name_sha1", "id")
            if d in ids_before} == ids_before
    assert stored(entry.run) == {"zeta": 10, "alpha": 11, "<b>mid</b>": 12, "a\ufffdb": 13}
    assert stored(later.run) == {"new2": 10, "alpha": 11, "new1": 12, "zeta": 13}


@pytest.mark.django_db
def test_a_failure_after_the_names_are_written_leaves_none_behind(
    write_trace, monkeypatch, fail_times_write
) -> None:
    release = runs.get_release("s1", "1")
    runs.ingest_local_file(release, trace(write_trace, "a.json", ["kept"]),
                           runs.ThreadOptions())
    fail_times_write()
    with pytest.raises(RuntimeError, match="disk full"):
        runs.ingest_local_file(release, trace(write_trace, "b.json", ["kept", "n1", "n2"]),
                               runs.ThreadOptions())
    assert list(Function.objects.values_list("name", flat=True)) == ["kept"]
    monkeypatch.undo()
    # The lock on the series' names went with the failed transaction: the retry goes through.
    again = runs.ingest_local_file(release, trace(write_trace, "b.json", ["kept", "n1", "n2"]),
                                   runs.ThreadOptions())
    assert again.run.status == Run.DONE
    assert sorted(Function.objects.values_list("name", flat=True)) == ["kept", "n1", "n2"]


def _waiting_for_the_names_lock() -> bool:
    with db.connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s", [runs._NAMES_LOCK]
        )
        return bool(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_concurrent_ingests_of_the_same_new_names_make_one_row_each(
    write_trace, monkeypatch
) -> None:
    """The second ingest waits for the first one's commit, then finds its names known."""
    if db.connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL (SQLite serialises whole transactions)")
    release = runs.get_release("s1", "1")
    names_a = [f"f{k}" for k in range(0, 300)]
    names_b = [f"f{k}" for k in range(299, 99, -1)] + [f"g{k}" for k in range(50)]
    options = runs.ThreadOptions()
    parsed, run_ids = [], []
    for file_name, names in (("a.json", names_a), ("b.json", names_b)):
        path = trace(write_trace, file_name, names)
        parsed.append(runs.parse_file(path, file_name, options.as_dict()))
        run_ids.append(runs.register_run(release, path, file_name, options,
                                         digest=runs.file_sha256(path)).run.pk)

    # The first ingest stops inside its transaction once its names are written.
    inside, go = threading.Event(), threading.Event()
    pack = RunTimes.pack

    def pausing_pack(run: Run, *args: Any) -> RunTimes:
        if threading.current_thread().name == "ingest-a":
            inside.set()
            assert go.wait(30)
        return pack(run, *args)

    monkeypatch.setattr(RunTimes, "pack", pausing_pack)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            runs.process_run(run_ids[k], parsed=parsed[k])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            db.connection.close()

    first = threading.Thread(target=work, args=(0,), name="ingest-a")
    second = threading.Thread(target=work, args=(1,), name="ingest-b")
    first.start()
    try:
        assert inside.wait(30)
        second.start()
        deadline = time.monotonic() + 30
        while not _waiting_for_the_names_lock():
            assert time.monotonic() < deadline, "the second ingest never waited for the first"
            time.sleep(0.02)
    finally:
        go.set()
        first.join(60)
        if second.ident is not None:
            second.join(60)

    assert not errors
    assert list(Run.objects.order_by("id").values_list("status", flat=True)) == [Run.DONE] * 2
    expected = sorted(set(names_a) | set(names_b))
    assert sorted(Function.objects.values_list("name", flat=True)) == expected
    for k, names in enumerate((names_a, names_b)):
        assert stored(Run.objects.get(pk=run_ids[k])) == {
            n: 10 + j for j, n in enumerate(names)
        }
    # The names only the second trace had were made after the first trace's names.
    f_ids = Function.objects.filter(name__startswith="f").values_list("id", flat=True)
    g_ids = Function.objects.filter(name__startswith="g").values_list("id", flat=True)
    assert min(g_ids) > max(f_ids)
