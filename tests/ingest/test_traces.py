"""Tests of the trace parser ``ingest.traces`` (pure: no Django, no database).

Three kinds: every real trace in ../shared/data/traces parses (checked against the
MANIFEST's figures), hand-derived self/total times of a real trace, and synthetic traces
for each rule and each error; plus property tests against an independent, deliberately
naive implementation (``_reference``: one event at a time, with a stack).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import random
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import traces
from ingest.traces import FunctionTimes, ParseSummary, TraceError, parse_trace
from tests.conftest import renderer_events

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TRACES = DATA / "traces"
requires_data = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"the shared real traces are not present at {TRACES}"
)


# --------------------------------------------------------------------------- helpers


def meta(pid: int, tid: int, thread: str | None, process: str | None = None) -> list[dict]:
    out = []
    if process is not None:
        out.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "ts": 0,
                "name": "process_name",
                "args": {"name": process},
            }
        )
    if thread is not None:
        out.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "ts": 0,
                "name": "thread_name",
                "args": {"name": thread},
            }
        )
    return out


def renderer(*events: dict, pid: int = 1, tid: int = 1) -> list[dict]:
    """Events on the CrRendererMain thread of a Renderer process, with the metadata."""
    return meta(pid, tid, "CrRendererMain", "Renderer") + [
        {"pid": pid, "tid": tid, **e} for e in events
    ]


def X(name: str, ts: float, dur: float | None = None, **extra) -> dict:  # noqa: N802
    e = {"ph": "X", "name": name, "ts": ts, **extra}
    if dur is not None:
        e["dur"] = dur
    return e


def B(name: str, ts: float, **extra) -> dict:  # noqa: N802
    return {"ph": "B", "name": name, "ts": ts, **extra}


def E(ts: float, name: str = "", **extra) -> dict:  # noqa: N802
    return {"ph": "E", "name": name, "ts": ts, **extra}


def parse(events: list[dict] | dict, **kw) -> FunctionTimes:
    return parse_trace(json.dumps(events).encode(), display_name="t.json", **kw)


def table(result: FunctionTimes) -> dict[str, tuple[float, float, int]]:
    """{name: (self_us, total_us, calls)}."""
    return {
        n: (float(s), float(t), int(c))
        for n, s, t, c in zip(
            result.names, result.self_us, result.total_us, result.calls, strict=True
        )
    }


def raises(data: bytes, *fragments: str, **kw) -> str:
    with pytest.raises(TraceError) as info:
        parse_trace(data, display_name="run3.json.gz", **kw)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("run3.json.gz: ")
    for fragment in fragments:
        assert fragment in message, message
    return message


# --------------------------------------------------------------------------- reference


def _reference(events: list[dict], selected: set[tuple]) -> dict[str, tuple[float, float, int]]:
    """Independent implementation of the documented rules, one event at a time."""
    per_thread: dict[tuple, list[tuple[int, dict]]] = defaultdict(list)
    for pos, e in enumerate(events):
        key = (e.get("pid"), e.get("tid"))
        if e.get("ph") in ("B", "E", "X") and key in selected:
            per_thread[key].append((pos, e))
    out: dict[str, list] = defaultdict(lambda: [0.0, 0.0, 0])
    for items in per_thread.values():
        items.sort(key=lambda pe: pe[1]["ts"])  # stable
        last = max(
            e["ts"] + (e["dur"] if e["ph"] == "X" and e.get("dur", -1) >= 0 else 0)
            for _, e in items
        )
        slices = []  # (start, end, seq, name)
        stack: list[tuple[float, int, str]] = []
        for seq, (_, e) in enumerate(items):
            if e["ph"] == "B":
                stack.append((e["ts"], seq, e["name"]))
            elif e["ph"] == "E":
                if stack:
                    ts, s, nm = stack.pop()
                    slices.append((ts, e["ts"], s, nm))
            else:
                dur = e.get("dur", -1)
                end = e["ts"] + dur if dur >= 0 else last
                slices.append((e["ts"], end, seq, e["name"]))
        slices.extend((ts, last, s, nm) for ts, s, nm in stack)
        slices.sort(key=lambda x: (x[0], -x[1], x[2]))
        open_: list[list] = []  # [start, end, name, children_time]
        done = []
        for start, end, _, nm in slices:
            while open_ and open_[-1][1] <= start:
                done.append(open_.pop())
            ancestors = {o[2] for o in open_}
            if open_:
                end = min(end, open_[-1][1])
                open_[-1][3] += end - start
            node = [start, end, nm, 0.0]
            out[nm][2] += 1
            if nm not in ancestors:
                out[nm][1] += end - start
            open_.append(node)
        done.extend(open_)
        for start, end, nm, children in done:
            out[nm][0] += (end - start) - children
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def assert_tables_close(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name, (s, t, c) in want.items():
        gs, gt, gc = got[name]
        assert gc == c, name
        assert gs == pytest.approx(s, abs=1e-6), name
        assert gt == pytest.approx(t, abs=1e-6), name


# --------------------------------------------------------------------------- real traces


def _manifest() -> dict[str, dict[str, str]]:
    with open(DATA / "MANIFEST_traces.csv", newline="", encoding="utf-8") as f:
        return {row["file"]: row for row in csv.DictReader(f)}


def _oddities(row: dict[str, str]) -> dict[str, int]:
    pairs = (kv.split("=", 1) for kv in row["oddities"].split("; ") if "=" in kv)
    return {k: int(v) for k, v in pairs if v.isdigit()}


REAL_FILES = sorted(p for p in TRACES.glob("*/*") if p.is_file()) if TRACES.is_dir() else []
NOT_TRACES = {
    "catapult__fuchsia_trace.json.gz": "no thread named CrRendererMain in a process named Renderer",
    "lighthouse__lr.devtoolslog.json": "not a Chrome trace",
}


@requires_data
def test_every_shared_trace_is_listed_in_the_manifest() -> None:
    listed = set(_manifest())
    on_disk = {str(p.relative_to(DATA)) for p in REAL_FILES}
    assert on_disk == listed
    assert len(on_disk) == 6 + 17 + 46


@requires_data
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_real_trace_parses_with_manifest_figures(path: Path) -> None:
    row = _manifest()[str(path.relative_to(DATA))]
    if path.name in NOT_TRACES:
        with pytest.raises(TraceError) as info:
            parse_trace(path)
        assert str(info.value).startswith(f"{path.name}: {NOT_TRACES[path.name]}")
        return
    crm_threads = int(row["crrenderermain_threads"])
    if crm_threads == 0:
        with pytest.raises(TraceError, match="no thread named CrRendererMain"):
            parse_trace(path)
    else:
        result = parse_trace(path)
        summary = result.summary
        assert len(summary.selected_threads) == crm_threads
        assert {t.thread_name for t in summary.selected_threads} == {"CrRendererMain"}
        unnamed = crm_threads - int(row["crm_in_renderer"])
        assert sum("has no process_name" in note for note in summary.notes) == unnamed
        # The manifest counts B/E pairs and X events (unclosed B are not slices there).
        assert summary.slices - summary.unclosed_begin == int(row["crm_slices"])
        assert summary.clipped_overlaps == int(row["crm_partial_overlaps"]) == 0
        assert summary.events == int(row["n_events"])
        assert result.calls.sum() == summary.slices
        assert len(set(result.names)) == len(result.names)
        assert np.all(result.self_us >= -1e-6)
        assert np.all(result.self_us <= result.total_us + 1e-6)
        json.dumps(summary.to_dict())
    # The MANIFEST's oddities are counted over all threads.
    everything = parse_trace(path, all_threads=True).summary
    odd = _oddities(row)
    assert everything.unclosed_begin == odd.get("unclosed_B", 0)
    assert everything.unmatched_end == odd.get("unmatched_E", 0)
    assert everything.x_without_dur == odd.get("X_without_dur", 0)
    assert everything.x_unfinished == odd.get("negative_dur", 0)  # all are Chrome's dur=-1
    assert everything.end_name_mismatches == odd.get("E_name_differs_from_B", 0)
    phases = dict(kv.split(":") for kv in row["phases"].split())
    ignored = {ph: int(c) for ph, c in phases.items() if ph not in ("B", "E", "X", "M")}
    assert everything.ignored_phases == ignored
    assert everything.events == int(row["n_events"])


@requires_data
def test_hand_derived_times_of_catapult_simple_trace() -> None:
    """catapult__simple_trace.json, thread threadA (pid 22630, tid 22630; its process has
    no process_name). Derived by reading the 37 events by hand (ts and dur in us):

    X "X1" 818+2 and X "X same ts and dur as X1" 818+2: equal extent, file order makes X1
    the parent: X1 self 0, the other self 2. X "Long X type" 820+15 starts where X1 ends,
    so it is a root; inside it B "A long name..." 826 / E "" 833 (7 us) holds
    B "Asub with a name that wont fit" 827 / E "Asub" 828 (1 us, closed by position
    although the E's name differs) and B "Asub" 829 / E "Asub" 832 (3 us):
    A long name self 7 - 1 - 3 = 3, Long X self 15 - 7 = 8.
    B "A not as long a name" 840-848 (8), B "B" 850-854 (4).
    At 860-870: B "B/E over X", X "X" (dur 10), B "B/E under X" in that file order, all
    ending at 870: nested over > X > under, so self 0, 0, 10; each total 10.
    """
    result = parse_trace(
        TRACES / "fixtures" / "catapult__simple_trace.json",
        thread_name="threadA",
        process_name="any",
    )
    assert table(result) == {
        "X1": (0.0, 2.0, 1),
        "X same ts and dur as X1": (2.0, 2.0, 1),
        "Long X type": (8.0, 15.0, 1),
        "A long name that doesnt fit but is exceedingly informative": (3.0, 7.0, 1),
        "Asub with a name that wont fit": (1.0, 1.0, 1),
        "Asub": (3.0, 3.0, 1),
        "A not as long a name": (8.0, 8.0, 1),
        "B": (4.0, 4.0, 1),
        "B/E over X": (0.0, 10.0, 1),
        "X": (0.0, 10.0, 1),
        "B/E under X": (10.0, 10.0, 1),
    }
    summary = result.summary
    assert summary.end_name_mismatches == 1
    assert summary.selected_threads == (
        traces.ThreadRef(pid=22630, tid=22630, process_name=None, thread_name="threadA"),
    )
    assert any("process 22630 has no process_name" in n for n in summary.notes)
    assert summary.ignored_phases == {"C": 5, "I": 6, "P": 3}
    # threadB: a single B "A" 827 / E "A" 854.
    b = parse_trace(
        TRACES / "fixtures" / "catapult__simple_trace.json",
        thread_name="threadB",
        process_name="any",
    )
    assert table(b) == {"A": (27.0, 27.0, 1)}


@requires_data
def test_gzip_is_recognised_by_its_magic_not_its_name() -> None:
    result = parse_trace(
        TRACES / "fixtures" / "catapult__simple_trace_gz.gz",
        thread_name="threadB",
        process_name="any",
    )
    assert table(result) == {"A": (27.0, 27.0, 1)}


@requires_data
def test_nanosecond_display_unit_does_not_scale_timestamps() -> None:
    """catapult__nanoseconds.json: displayTimeUnit "ns", fractional microsecond ts; eight
    back-to-back B/E pairs on one unnamed thread (us1 0-1.1, us2 1.1-1.3, us3 1.3-1.6,
    us4 1.7-2.1, ns1 3.000-3.011, ns2 3.011-3.013, ns3 3.013-3.016, ns4 3.017-3.021)."""
    result = parse_trace(TRACES / "fixtures" / "catapult__nanoseconds.json", all_threads=True)
    expected = {
        "us1": 1.1,
        "us2": 0.2,
        "us3": 0.3,
        "us4": 0.4,
        "ns1": 0.011,
        "ns2": 0.002,
        "ns3": 0.003,
        "ns4": 0.004,
    }
    got = table(result)
    assert got.keys() == expected.keys()
    for name, us in expected.items():
        assert got[name][0] == pytest.approx(us, abs=1e-9)
        assert got[name][1] == pytest.approx(us, abs=1e-9)
        assert got[name][2] == 1


@requires_data
def test_several_renderers_are_aggregated() -> None:
    path = TRACES / "fixtures" / "lighthouse__progressive-app.json"
    together = table(parse_trace(path))
    threads = parse_trace(path).summary.selected_threads
    assert len(threads) == 4
    assert {t.process_name for t in threads} == {"Renderer"}
    assert sum(c for _, _, c in together.values()) == parse_trace(path).summary.slices


# --------------------------------------------------------------------------- nesting rules


def test_self_time_subtracts_direct_children_only() -> None:
    result = parse(
        renderer(
            X("task", 0, 100),
            X("layout", 10, 50),
            X("style", 20, 10),
            X("paint", 70, 20),
        )
    )
    assert table(result) == {
        "task": (100 - 50 - 20, 100, 1),
        "layout": (50 - 10, 50, 1),
        "style": (10, 10, 1),
        "paint": (20, 20, 1),
    }
    assert result.summary.slices == 4


def test_recursion_counts_total_once_per_outermost_call() -> None:
    result = parse(
        renderer(
            X("f", 0, 100),
            X("g", 10, 80),
            X("f", 20, 50),
            X("f", 30, 10),
            X("f", 200, 5),
        )
    )
    got = table(result)
    assert got["f"] == (100 - 80 + 50 - 10 + 10 + 5, 100 + 5, 4)
    assert got["g"] == (80 - 50, 80, 1)


def test_zero_duration_slices_count_as_calls_without_children() -> None:
    result = parse(renderer(X("a", 0, 10), X("z", 10, 0), X("z", 10, 0), X("b", 10, 5)))
    got = table(result)
    assert got["z"] == (0.0, 0.0, 2)
    assert got["a"] == (10, 10, 1)  # b starts where a ends: a sibling
    assert got["b"] == (5, 5, 1)


def test_unsorted_events_within_and_across_threads() -> None:
    main = [X("task", 0, 100), B("outer", 10), B("inner", 20), E(30), E(60), X("paint", 70, 20)]
    other = [X("task", 5, 50), X("sub", 10, 5)]
    events = (
        meta(1, 1, "CrRendererMain", "Renderer")
        + meta(2, 7, "CrRendererMain", "Renderer")
        + [{"pid": 1, "tid": 1, **e} for e in main]
        + [{"pid": 2, "tid": 7, **e} for e in other]
    )
    expected = table(parse(events))
    assert expected["task"] == (100 - 50 - 20 + 50 - 5, 150, 2)
    assert expected["outer"] == (40.0, 50.0, 1)
    rng = random.Random(3)
    for _ in range(20):
        shuffled = events[:]
        rng.shuffle(shuffled)
        # B and E at equal timestamps must keep their file order, the rest can move.
        assert table(parse(shuffled)) == expected


def test_equal_timestamp_begin_end_keep_file_order() -> None:
    # B a @10, E @10, B b @10, E @20: a is [10, 10], b is [10, 20]; they are siblings.
    got = table(parse(renderer(B("a", 10), E(10), B("b", 10), E(20))))
    assert got == {"a": (0.0, 0.0, 1), "b": (10.0, 10.0, 1)}


def test_same_start_complete_events_nest_longest_first() -> None:
    got = table(parse(renderer(X("short", 0, 10), X("long", 0, 30), X("mid", 0, 20))))
    assert got == {"long": (10.0, 30.0, 1), "mid": (10.0, 20.0, 1), "short": (10.0, 10.0, 1)}


def test_begin_end_mixed_with_complete_events() -> None:
    got = table(
        parse(
            renderer(
                B("RunTask", 0),
                X("v8.run", 5, 20),
                B("GC", 10),
                E(15, "GC"),
                E(40, "RunTask"),
            )
        )
    )
    assert got == {"RunTask": (20.0, 40.0, 1), "v8.run": (15.0, 20.0, 1), "GC": (5.0, 5.0, 1)}


def test_unmatched_end_is_ignored_and_counted() -> None:
    result = parse(renderer(E(5), B("a", 10), E(20), E(25), B("b", 30), E(35)))
    assert table(result) == {"a": (10.0, 10.0, 1), "b": (5.0, 5.0, 1)}
    assert result.summary.unmatched_end == 2
    assert any("without an open B" in n for n in result.summary.notes)


def test_unclosed_begin_is_closed_at_the_threads_last_timestamp() -> None:
    result = parse(renderer(B("never", 10), X("x", 20, 30), B("ends", 60), E(70)))
    assert table(result) == {
        "never": (60 - 30 - 10, 60, 1),  # closed at 70, the thread's last timestamp
        "x": (30.0, 30.0, 1),
        "ends": (10.0, 10.0, 1),
    }
    assert result.summary.unclosed_begin == 1


def test_partial_overlap_is_clipped_to_the_parent() -> None:
    result = parse(renderer(X("a", 0, 10), X("b", 5, 10), X("c", 12, 3)))
    assert table(result) == {"a": (5.0, 10.0, 1), "b": (5.0, 5.0, 1), "c": (3.0, 3.0, 1)}
    assert result.summary.clipped_overlaps == 1
    assert any("clipped" in n for n in result.summary.notes)


def test_clipping_cascades_to_grandchildren() -> None:
    result = parse(renderer(X("a", 0, 10), X("b", 2, 20), X("c", 4, 30), X("d", 50, 1)))
    assert table(result) == {
        "a": (2.0, 10.0, 1),
        "b": (2.0, 8.0, 1),
        "c": (6.0, 6.0, 1),
        "d": (1.0, 1.0, 1),
    }
    assert result.summary.clipped_overlaps == 2


def test_complete_event_without_dur_is_closed_with_its_thread() -> None:
    result = parse(renderer(X("task", 0, 100), X("open", 110), X("late", 115, 20)))
    # the thread's last timestamp is 135 (end of "late"): "open" runs 110..135
    assert table(result) == {
        "task": (100.0, 100.0, 1),
        "open": (5.0, 25.0, 1),
        "late": (20.0, 20.0, 1),
    }
    assert result.summary.x_without_dur == 1


def test_chrome_minus_one_duration_means_unfinished() -> None:
    result = parse(renderer(X("RunTask", 100, -1), X("TimerFire", 110, -1), X("done", 0, 50)))
    assert table(result) == {
        "RunTask": (10.0, 10.0, 1),
        "TimerFire": (0.0, 0.0, 1),
        "done": (50.0, 50.0, 1),
    }
    assert result.summary.x_unfinished == 2


def test_negative_duration_is_an_error() -> None:
    data = json.dumps(renderer(X("a", 0, 10), X("b", 20, -5))).encode()
    raises(data, "negative duration", "dur=-5")


def test_end_with_another_name_closes_the_innermost_begin() -> None:
    result = parse(renderer(B("outer", 0), B("inner", 10), E(20, "outer"), E(30, "inner")))
    assert table(result) == {"outer": (20.0, 30.0, 1), "inner": (10.0, 10.0, 1)}
    assert result.summary.end_name_mismatches == 2


def test_fractional_timestamps() -> None:
    got = table(parse(renderer(X("a", 0.5, 1.25), X("b", 0.75, 0.5))))
    assert got == {"a": (0.75, 1.25, 1), "b": (0.5, 0.5, 1)}


# --------------------------------------------------------------------------- selection


def test_default_selection_and_process_rules() -> None:
    events = (
        meta(1, 1, "CrRendererMain", "Renderer")
        + [{"pid": 1, "tid": 1, **X("a", 0, 10)}]
        + meta(2, 2, "CrRendererMain", "Renderer")
        + [{"pid": 2, "tid": 2, **X("a", 0, 5)}]
        + meta(3, 3, "CrRendererMain", None)
        + [{"pid": 3, "tid": 3, **X("a", 0, 1)}]
        + meta(4, 4, "CrRendererMain", "Extension")
        + [{"pid": 4, "tid": 4, **X("a", 0, 100)}]
        + meta(1, 9, "Compositor", None)
        + [{"pid": 1, "tid": 9, **X("c", 0, 1000)}]
    )
    result = parse(events)
    assert table(result) == {"a": (16.0, 16.0, 3)}
    assert [(t.pid, t.tid, t.process_name) for t in result.summary.selected_threads] == [
        (1, 1, "Renderer"),
        (2, 2, "Renderer"),
        (3, 3, None),
    ]
    assert result.summary.notes == (
        "process 3 has no process_name; its CrRendererMain thread 3 was taken",
    )
    everything = parse(events, all_threads=True)
    assert table(everything) == {"a": (116.0, 116.0, 4), "c": (1000.0, 1000.0, 1)}
    other = parse(events, thread_name="CrRendererMain", process_name="Extension")
    assert table(other) == {"a": (101.0, 101.0, 2)}  # pid 3 has no process name: taken


def test_many_unnamed_processes_make_one_note() -> None:
    events = []
    for pid in range(1, 13):
        events += meta(pid, 1, "CrRendererMain") + [{"pid": pid, "tid": 1, **X("a", 0, 1)}]
    result = parse(events)
    assert table(result) == {"a": (12.0, 12.0, 12)}
    assert result.summary.notes == (
        "12 processes have no process_name (1, 2, 3, 4, 5, 6, 7, 8, ...); their "
        "CrRendererMain threads were taken",
    )


def test_missing_thread_lists_the_threads_seen() -> None:
    data = json.dumps(
        meta(1, 2, "CrBrowserMain", "Browser")
        + meta(1, 3, "Chrome_IOThread")
        + [{"pid": 1, "tid": 2, **X("a", 0, 1)}]
    ).encode()
    raises(
        data,
        "no thread named CrRendererMain in a process named Renderer",
        "threads seen: ",
        "CrBrowserMain (Browser)",
        "Chrome_IOThread (Browser)",
    )


def test_all_threads_of_a_trace_without_duration_events_is_empty() -> None:
    result = parse(
        [{"ph": "b", "name": "a", "id": 1, "pid": 1, "tid": 1, "ts": 0, "cat": "c"}],
        all_threads=True,
    )
    assert result.names == []
    assert result.summary.slices == 0
    assert result.summary.ignored_phases == {"b": 1}
    assert result.summary.notes == ("no duration events (B/E/X) on any thread",)


def test_string_pids_and_tids() -> None:
    events = meta("p", "t", "CrRendererMain", "Renderer") + [  # type: ignore[arg-type]
        {"pid": "p", "tid": "t", **X("a", 0, 10)},
        {"pid": 5, "tid": 5, **X("b", 0, 10)},
    ]
    result = parse(events)
    assert table(result) == {"a": (10.0, 10.0, 1)}
    assert result.summary.selected_threads[0].pid == "p"


def test_large_and_negative_ids() -> None:
    big = 2**40 + 3
    events = meta(big, -1, "CrRendererMain", "Renderer") + [
        {"pid": big, "tid": -1, **X("a", 0, 10)},
        {"pid": big, "tid": 7, **X("b", 0, 10)},
    ]
    result = parse(events)
    assert table(result) == {"a": (10.0, 10.0, 1)}
    assert result.summary.selected_threads[0].pid == big


# --------------------------------------------------------------------------- inputs


def test_sources_path_bytes_stream_and_default_display_name(tmp_path: Path) -> None:
    data = json.dumps({"traceEvents": renderer(X("a", 0, 10)), "displayTimeUnit": "ns"}).encode()
    plain = tmp_path / "run1.json"
    plain.write_bytes(data)
    packed = tmp_path / "run2.trace"  # gzip without a .gz name
    packed.write_bytes(gzip.compress(data))
    expected = {"a": (10.0, 10.0, 1)}
    assert table(parse_trace(plain)) == expected
    assert table(parse_trace(str(packed))) == expected
    assert table(parse_trace(data)) == expected
    assert table(parse_trace(bytearray(gzip.compress(data)))) == expected
    with open(packed, "rb") as f:
        assert table(parse_trace(f)) == expected
    assert table(parse_trace(io.BytesIO(data))) == expected
    bad = tmp_path / "run3.json"
    bad.write_bytes(b"")
    with pytest.raises(TraceError, match=r"^run3\.json: empty file$"):
        parse_trace(bad)
    with pytest.raises(TraceError, match=r"^custom: empty file$"):
        parse_trace(bad, display_name="custom")
    with pytest.raises(TraceError, match=r"^nope\.json: cannot read the file"):
        parse_trace(tmp_path / "nope.json")


def test_multi_member_gzip() -> None:
    text = json.dumps(renderer(X("a", 0, 10), X("b", 20, 5))).encode()
    data = gzip.compress(text[:50]) + gzip.compress(text[50:])
    assert table(parse_trace(data)) == {"a": (10.0, 10.0, 1), "b": (5.0, 5.0, 1)}


def test_array_and_object_forms_agree() -> None:
    events = renderer(X("a", 0, 10), B("b", 2), E(4))
    assert table(parse(events)) == table(
        parse({"traceEvents": events, "metadata": {"x": 1}, "stackFrames": {}, "samples": []})
    )


def test_utf8_bom_and_surrounding_whitespace() -> None:
    data = b"\xef\xbb\xbf \n" + json.dumps(renderer(X("a", 0, 10))).encode() + b"\n\n"
    assert table(parse_trace(data)) == {"a": (10.0, 10.0, 1)}


@pytest.mark.parametrize("ending", [b",", b",\n", b"", b"\n  "])
def test_unterminated_array_is_accepted(ending: bytes) -> None:
    """Chrome killed during --trace-startup leaves '[{...},{...},': its viewer reads it."""
    events = renderer(X("a", 0, 10), X("b", 2, 3))
    data = b"[" + b",\n".join(json.dumps(e).encode() for e in events) + ending
    result = parse_trace(data)
    assert table(result) == {"a": (7.0, 10.0, 1), "b": (3.0, 3.0, 1)}
    assert any("no closing ']'" in n for n in result.summary.notes)


def test_event_cut_in_the_middle_is_truncated_json() -> None:
    data = json.dumps(renderer(X("a", 0, 10), X("b", 2, 3))).encode()
    raises(data[:-20], "truncated JSON")
    raises(json.dumps({"traceEvents": renderer(X("a", 0, 1))}).encode()[:-3], "truncated JSON")


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (b"", ("empty file",)),
        (b" \n\t ", ("empty file",)),
        (b"hello", ("not a JSON or Perfetto trace", "'h' at byte 0")),
        (b"  42", ("not a JSON or Perfetto trace", "' ' at byte 0")),
        (b'[{"ph": "X"} oops]', ("not valid JSON", "byte 13")),
        (b'{"traceEvents": [], "x": }', ("not valid JSON", "byte")),
        (b'{"events": []}', ("not a trace", "no 'traceEvents'")),
        (b'{"traceEvents": {"ph": "X"}}', ("not a trace", "Expected `array`, got `object`")),
        (b"[1, 2]", ("not a trace", "Expected `object`, got `int`", "$[0]")),
        (
            b'[{"ph": "X", "name": "a", "ts": "12", "dur": 1}]',
            ("not a trace", "Expected `float`, got `str`", "$[0].ts"),
        ),
        (b'[{"ph": "X", "name": 7, "ts": 1}]', ("not a trace", "$[0].name")),
        (b'[{"ph": "X", "name": "a", "ts": 1, "dur": true}]', ("not a trace", "$[0].dur")),
        (b'[{"ph": "X", "name": "a", "ts": 1, "pid": 1.5}]', ("not a trace", "$[0].pid")),
        (b"[]", ("no events",)),
        (b'[{"method": "Page.loadEventFired", "params": {}}]', ("not a Chrome trace",)),
    ],
)
def test_errors_are_one_line_naming_file_and_reason(data: bytes, fragments: tuple) -> None:
    raises(data, *fragments)


def test_duration_event_without_timestamp() -> None:
    raises(json.dumps(renderer({"ph": "B", "name": "a"})).encode(), "has no 'ts'")


def test_truncated_and_corrupt_gzip() -> None:
    packed = gzip.compress(json.dumps(renderer(X("a", 0, 10))).encode() * 1)
    raises(packed[:-10], "truncated gzip stream")
    raises(packed[:12], "truncated gzip stream")
    corrupt = bytearray(packed)
    corrupt[15:25] = b"\xff" * 10
    raises(bytes(corrupt), "gzip")


def test_size_limits_compressed_and_decompressed() -> None:
    data = json.dumps(renderer(X("a", 0, 10))).encode()
    raises(data, "larger than the limit of 100 bytes", max_bytes=100)
    raises(gzip.compress(data), "decompresses to more than the limit of 200 bytes", max_bytes=200)


def test_gzip_bomb_stops_at_the_limit() -> None:
    """64 MB of whitespace in ~64 kB of gzip: refused after inflating at most one piece
    (1 MiB) more than the limit, never the whole of it."""
    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=9) as f:
        f.write(b"[")
        chunk = b" " * (1 << 20)
        for _ in range(64):
            f.write(chunk)
        f.write(b"]")
    packed = bomb.getvalue()
    assert len(packed) < 1_000_000
    import tracemalloc

    tracemalloc.start()
    try:
        raises(
            packed, "decompresses to more than the limit of 4,000,000 bytes", max_bytes=4_000_000
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4_000_000 + 8 * (1 << 20)


# --------------------------------------------------------------------------- names


def test_hostile_names_are_kept_as_given() -> None:
    names = [
        '<img src=x onerror="alert(1)">',
        "a\nb\tc\x00d",
        "函数调用 🚀",
        "  ",
        "\\",
        '"quoted"',
        "x" * 1000,
    ]
    result = parse(renderer(*(X(n, 10 * i, 5) for i, n in enumerate(names))))
    assert result.names == names
    assert result.summary.shortened_names == 0


def test_long_names_are_shortened_and_stay_distinct() -> None:
    a, b = "f" * 5000 + "a", "f" * 5000 + "b"
    result = parse(renderer(X(a, 0, 10), X(b, 20, 5), X(a, 30, 1)))
    short_a = "f" * 1000 + "…" + hashlib.sha1(a.encode(), usedforsecurity=False).hexdigest()[:8]
    short_b = "f" * 1000 + "…" + hashlib.sha1(b.encode(), usedforsecurity=False).hexdigest()[:8]
    assert short_a != short_b
    assert table(result) == {short_a: (11.0, 11.0, 2), short_b: (5.0, 5.0, 1)}
    assert result.summary.shortened_names == 2
    assert len(result.names[0]) == 1009


def test_empty_name_is_a_function_too() -> None:
    assert table(parse(renderer(X("", 0, 10)))) == {"": (10.0, 10.0, 1)}


def test_summary_to_dict_is_json() -> None:
    result = parse(
        renderer(
            X("a", 0, 10),
            {"ph": "I", "name": "i", "ts": 3},
            {"ph": "C", "name": "c", "ts": 3, "args": {"v": 1}},
            {"ph": "weird", "name": "w", "ts": 1},
        )
    )
    d = result.summary.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["ignored_phases"] == {"C": 1, "I": 1, "weird": 1}
    assert d["selected_threads"] == [
        {"pid": 1, "tid": 1, "process_name": "Renderer", "thread_name": "CrRendererMain"}
    ]
    assert isinstance(result.summary, ParseSummary)
    assert result.self_us.dtype == np.float64
    assert result.calls.dtype == np.int64


# --------------------------------------------------------------------------- properties


def _random_forest(rng: random.Random, n_roots: int, recursive: bool) -> list[dict]:
    """Well-nested X slices with integer times (children inside their parent)."""
    events: list[dict] = []

    def grow(start: int, end: int, depth: int) -> None:
        name = rng.choice("abc") if recursive else f"{rng.choice('abc')}{depth}"
        events.append(X(name, start, end - start))
        cursor = start
        while depth < 6 and cursor < end and rng.random() < 0.7:
            a = rng.randint(cursor, end)
            b = rng.randint(a, end)
            grow(a, b, depth + 1)
            cursor = b if b > a else b + 1

    t = 0
    for _ in range(n_roots):
        length = rng.randint(0, 200)
        grow(t, t + length, 0)
        t += length + rng.randint(0, 5)
    return events


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(1, 12))
def test_property_self_times_sum_to_the_top_level_durations(rng: random.Random, roots: int) -> None:
    """Random well-nested X trees (names never repeat along a path, so no recursion)."""
    events = _random_forest(rng, roots, recursive=False)
    top: list[tuple[int, int]] = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        if not top or e["ts"] >= top[-1][1]:
            top.append((e["ts"], e["ts"] + e["dur"]))
    rng.shuffle(events)
    result = parse(renderer(*events))
    assert result.self_us.sum() == pytest.approx(sum(b - a for a, b in top))
    assert result.calls.sum() == len(events)
    assert np.all(result.self_us <= result.total_us + 1e-9)
    assert result.summary.clipped_overlaps == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(1, 12))
def test_property_recursive_trees_match_the_reference(rng: random.Random, roots: int) -> None:
    events = _random_forest(rng, roots, recursive=True)
    rng.shuffle(events)
    result = parse(renderer(*events))
    assert_tables_close(table(result), _reference(renderer(*events), {(1, 1)}))
    assert result.summary.clipped_overlaps == 0


def _messy_events(rng: random.Random) -> list[dict]:
    """B/E and X on two threads, with overlaps, unmatched E, unclosed B, X without dur,
    dur = -1, zero durations, equal timestamps; in random file order."""
    out = []
    for tid in (1, 2):
        for _ in range(rng.randint(1, 25)):
            ts = rng.randint(0, 60)
            kind = rng.random()
            name = rng.choice("fghk")
            if kind < 0.45:
                out.append({"pid": 1, "tid": tid, **X(name, ts, rng.choice([0, 1, 5, 20, 40]))})
            elif kind < 0.5:
                out.append({"pid": 1, "tid": tid, **X(name, ts, rng.choice([None, -1]))})
            elif kind < 0.8:
                out.append({"pid": 1, "tid": tid, **B(name, ts)})
            else:
                out.append({"pid": 1, "tid": tid, **E(ts)})
    rng.shuffle(out)
    # the reference relies on a stable sort by ts, so equal-ts B/E keep this file order
    return meta(1, 1, "CrRendererMain", "Renderer") + meta(1, 2, "CrRendererMain") + out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_property_matches_the_reference_on_messy_traces(rng: random.Random) -> None:
    events = _messy_events(rng)
    result = parse(events)
    assert_tables_close(table(result), _reference(events, {(1, 1), (1, 2)}))
    assert result.self_us.sum() <= result.total_us.sum() + 1e-9


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_property_single_sweep_equals_per_thread_sweep(rng: random.Random) -> None:
    events = _messy_events(rng)
    looped = table(parse(events))
    with single_sweep():
        assert table(parse(events)) == looped


@contextmanager
def single_sweep() -> Iterator[None]:
    """The parser's one sweep over every thread at once, which it takes past
    ``_MAX_LOOPED_THREADS`` threads (a hypothesis test cannot take monkeypatch)."""
    saved = traces._MAX_LOOPED_THREADS
    traces._MAX_LOOPED_THREADS = 0
    try:
        yield
    finally:
        traces._MAX_LOOPED_THREADS = saved


def test_the_parser_imports_no_django() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ingest.traces; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'scipy')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        check=True,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("ts", "dur"),
    [(1e308, 1e308), (1.0, 1e308), (-1e308, 10.0), (2.0**53 + 2, 1.0), (1.0, float(2**54))],
)
def test_times_out_of_range_are_refused(ts: float, dur: float) -> None:
    events = renderer_events([("Paint", 0, 10), ("Huge", ts, dur)])
    with pytest.raises(TraceError, match=r"^t\.json: event #3 has a time out of range"):
        parse_trace(json.dumps(events).encode(), display_name="t.json")


def test_infinity_written_as_a_huge_literal_is_refused() -> None:
    raw = json.dumps(renderer_events([("Paint", 0, 10)])).replace('"dur": 10', '"dur": 1e999')
    with pytest.raises(TraceError, match=r"^t\.json: .*(out of range)"):
        parse_trace(raw.encode(), display_name="t.json")


def test_the_largest_accepted_time_gives_finite_times() -> None:
    top = float(2**53)
    result = parse_trace(json.dumps(renderer_events([("A", top - 10, 10)])).encode())
    assert np.isfinite(result.total_us).all()
    assert result.total_us.tolist() == [10.0]


# --------------------------------------------------------------------------- in pieces


def _piece_trace(rng: random.Random, n: int) -> list[dict]:
    """Nested B/E and X slices on two threads, with "},{" inside args and inside names."""
    events = renderer_events([]) + meta(7, 2, "Compositor")
    now = 0
    for k in range(n):
        name = rng.choice(["Paint", "Layout", 'x"},{"ph":"X', "ünï"])
        tid = rng.choice([1, 1, 2])
        dur = rng.randint(0, 50)
        event = {"ph": "X", "name": name, "pid": 7, "tid": tid, "ts": now, "dur": dur}
        if k % 3 == 0:
            event["args"] = {"data": {"frames": [{"a": 1}, {"b": [{}, {}]}]}}
        events.append(event)
        if k % 5 == 0:
            events += [{"ph": "B", "name": "Outer", "pid": 7, "tid": 1, "ts": now},
                       {"ph": "E", "pid": 7, "tid": 1, "ts": now + dur + 1}]
        if k % 7 == 0:
            events.append({"ph": "C", "name": "counter", "pid": 7, "tid": 1, "ts": now})
        now += dur + rng.randint(0, 3)
    return events


@pytest.mark.parametrize(
    "form", ["array", "object", "object-metadata-after", "indented", "bom", "compact-x"]
)
def test_pieces_give_what_the_whole_file_gives(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _piece_trace(random.Random(form), 300)
    if form == "array":
        text = json.dumps(events)
    elif form == "object":
        text = json.dumps({"traceEvents": events})
    elif form == "object-metadata-after":
        text = json.dumps({"traceEvents": events, "metadata": {"l": [{"a": 1}, {"b": 2}]}})
    elif form == "indented":
        text = json.dumps(events, indent=1)
    elif form == "bom":
        text = "\ufeff" + json.dumps(events)
    else:
        text = json.dumps(events, separators=(",", ":"))
    data = text.encode()
    whole = parse_trace(data, all_threads=True)
    monkeypatch.setattr(traces, "_PIECE_BYTES", 200)
    assert traces._decode_in_pieces(data) is not None  # it did go in pieces
    pieces = parse_trace(data, all_threads=True)
    assert pieces.names == whole.names
    for key in ("self_us", "total_us", "calls"):
        np.testing.assert_array_equal(getattr(pieces, key), getattr(whole, key))
    assert pieces.summary == whole.summary


@pytest.mark.parametrize(
    "text",
    [
        # the union refuses a string pid: the slow path, whole
        json.dumps([*renderer_events([("A", 0, 5)] * 30), {"ph": "X", "pid": "p", "tid": 1,
                                                           "name": "B", "ts": 1, "dur": 1}]),
        # Chrome killed while writing: no closing bracket (repaired by the whole path)
        json.dumps(renderer_events([("A", 0, 5)] * 30))[:-1] + ",",
        # an object whose first key is not traceEvents
        json.dumps({"metadata": {}, "traceEvents": renderer_events([("A", 0, 5)] * 30)}),
        # not JSON after a few events
        json.dumps(renderer_events([("A", 0, 5)] * 30))[:-40] + "}, {oops]",
    ],
)
def test_traces_the_pieces_do_not_take_go_whole(text: str, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    data = text.encode()
    try:
        whole: FunctionTimes | str = parse_trace(data, display_name="t.json")
    except TraceError as exc:
        whole = str(exc)
    monkeypatch.setattr(traces, "_PIECE_BYTES", 200)
    assert traces._decode_in_pieces(data) is None
    try:
        pieces: FunctionTimes | str = parse_trace(data, display_name="t.json")
    except TraceError as exc:
        pieces = str(exc)
    if isinstance(whole, str):
        assert pieces == whole
    else:
        assert isinstance(pieces, FunctionTimes)
        assert pieces.names == whole.names
        assert pieces.summary == whole.summary


def _same_to_the_bit(a: FunctionTimes, b: FunctionTimes) -> None:
    assert a.names == b.names
    for key in ("self_us", "total_us", "calls", "caller", "callee", "edge_us"):
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype
        assert x.tobytes() == y.tobytes(), key
    assert a.summary == b.summary


def _many_threads(rng: random.Random) -> list[dict]:
    """Messy events on several threads, with fractional times (float sums round)."""
    out = []
    for tid in range(1, 7):
        out += meta(1, tid, f"T{tid}")
        for _ in range(rng.randint(0, 40)):
            ts = rng.randint(0, 600) + rng.choice([0, 0.1, 0.25, 1 / 3])
            kind = rng.random()
            name = rng.choice("fghk")
            if kind < 0.55:
                dur = rng.choice([0, 1.7, 5, 20.01, 40, 99.9, None, -1])
                out.append({"pid": 1, "tid": tid, **X(name, ts, dur)})
            elif kind < 0.8:
                out.append({"pid": 1, "tid": tid, **B(name, ts)})
            else:
                out.append({"pid": 1, "tid": tid, **E(ts)})
    rng.shuffle(out)
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_property_batches_of_threads_give_the_same_floats(rng: random.Random) -> None:
    """The nesting in batches of threads (a thread per batch here) adds the same floats in
    the same order as one batch of every thread: equal to the bit, notes and counts too."""
    events = _many_threads(rng)
    saved = traces._BATCH_EVENTS
    try:
        traces._BATCH_EVENTS = 1 << 40
        whole = parse(events, all_threads=True)
        traces._BATCH_EVENTS = 1
        _same_to_the_bit(parse(events, all_threads=True), whole)
    finally:
        traces._BATCH_EVENTS = saved


@pytest.mark.parametrize("how", ["path", "gzip path", "stream", "gzip stream"])
def test_a_file_is_read_in_pieces_without_holding_it(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _piece_trace(random.Random(how), 300)
    data = json.dumps({"traceEvents": events, "metadata": {"l": [{"a": 1}]}}).encode()
    whole = parse_trace(data, all_threads=True)
    path = tmp_path / "t.json"
    path.write_bytes(gzip.compress(data) if "gzip" in how else data)
    monkeypatch.setattr(traces, "_PIECE_BYTES", 200)
    monkeypatch.setattr(traces.reading, "CHUNK", 97)
    with path.open("rb") as f:
        chunks = traces.reading.iter_chunks(f, 97)
        assert isinstance(traces._decode_chunks(chunks, 1 << 30), traces._Columns)
    if how.endswith("path"):
        _same_to_the_bit(parse_trace(path, all_threads=True), whole)
    else:
        with path.open("rb") as f:
            _same_to_the_bit(parse_trace(f, all_threads=True), whole)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (lambda d: gzip.compress(d)[:-30], "truncated gzip stream"),
        (lambda d: d[:-300], "truncated JSON"),
        (lambda d: d.replace(b'"ph": "X"', b'"ph": "Q"', 1), None),  # the union refuses
        (lambda d: d, "larger than the limit"),
    ],
)
def test_what_the_pieces_of_a_file_do_not_take_goes_whole(
    raw, reason: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.dumps(_piece_trace(random.Random(3), 300)).encode()
    path = tmp_path / "t.json"
    path.write_bytes(raw(data))
    limit = len(data) - 1 if reason == "larger than the limit" else 1 << 30
    with monkeypatch.context() as before:  # the whole-file path alone, as before pieces
        before.setattr(traces, "_decode_stream", lambda *_: None)
        try:
            whole: FunctionTimes | str = parse_trace(path, all_threads=True, max_bytes=limit)
        except TraceError as exc:
            whole = str(exc)
    monkeypatch.setattr(traces, "_PIECE_BYTES", 200)
    with path.open("rb") as f:
        assert traces._decode_stream(f, limit) is None
        assert f.tell() == 0  # put back for the whole-file path
    try:
        pieces: FunctionTimes | str = parse_trace(path, all_threads=True, max_bytes=limit)
    except TraceError as exc:
        pieces = str(exc)
    if reason is None:
        assert isinstance(pieces, FunctionTimes)
        assert isinstance(whole, FunctionTimes)
        _same_to_the_bit(pieces, whole)
    else:
        assert pieces == whole
        assert isinstance(pieces, str)
        assert reason in pieces
        assert pieces.startswith("t.json: ")
