"""The call tree aggregated by (caller, callee): ingest.traces' "Call tree".

Checked against an independent reference that applies the definition one slice at a time
(each slice's self time given to the child, on the stack, of the deepest frame of every
other name above it), on hand-made recursion and on random traces, JSON and Perfetto.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import traces
from ingest.traces import FunctionTimes
from tests.ingest.test_traces import (
    B,
    E,
    X,
    _messy_events,
    _random_forest,
    parse,
    renderer,
    single_sweep,
)
from tests.ingest.twins import chrome_like, to_json, to_perfetto

ROOT = "(root)"


def edges(result: FunctionTimes) -> dict[tuple[str, str], float]:
    names = result.names
    return {
        (names[a] if a >= 0 else ROOT, names[b]): float(t)
        for a, b, t in zip(result.caller, result.callee, result.edge_us, strict=True)
    }


def reference_edges(events: list[dict], selected: set[tuple]) -> dict[tuple[str, str], float]:
    """The definition, slice by slice: the slices rebuilt as the parser's documented rules
    say (stable sort by ts, B/E by stack, unfinished closed at the thread's last time,
    pre-order by (start, longest, seq), children clipped to their parent)."""
    per_thread: dict[tuple, list[dict]] = defaultdict(list)
    for e in events:
        if e.get("ph") in ("B", "E", "X") and (e.get("pid"), e.get("tid")) in selected:
            per_thread[(e["pid"], e["tid"])].append(e)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for items in per_thread.values():
        items.sort(key=lambda e: e["ts"])
        last = max(e["ts"] + (e["dur"] if e["ph"] == "X" and e.get("dur", -1) >= 0 else 0)
                   for e in items)
        slices, stack = [], []
        for seq, e in enumerate(items):
            if e["ph"] == "B":
                stack.append((e["ts"], seq, e["name"]))
            elif e["ph"] == "E":
                if stack:
                    ts, s, nm = stack.pop()
                    slices.append((ts, e["ts"], s, nm))
            else:
                dur = e.get("dur", -1)
                slices.append((e["ts"], e["ts"] + dur if dur >= 0 else last, seq, e["name"]))
        slices.extend((ts, last, s, nm) for ts, s, nm in stack)
        slices.sort(key=lambda x: (x[0], -x[1], x[2]))
        open_: list[list] = []  # [start, end, name, children, path of names]
        done = []
        for start, end, _, nm in slices:
            if end <= start:
                continue  # no time, no edge
            while open_ and open_[-1][1] <= start:
                done.append(open_.pop())
            path = open_[-1][4] if open_ else []
            if open_:
                end = min(end, open_[-1][1])
                open_[-1][3] += end - start
            node = [start, end, nm, 0.0, [*path, nm]]
            open_.append(node)
        done.extend(open_)
        for start, end, nm, children, path in done:
            own = (end - start) - children
            for depth, f in enumerate(path[:-1]):
                deepest = max(i for i, g in enumerate(path) if g == f)
                if depth == deepest and f != nm:
                    out[(f, path[deepest + 1])] += own
            if len(path) == 1:
                out[(ROOT, nm)] += end - start
    return dict(out)


def assert_edges_close(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for pair, t in want.items():
        assert got[pair] == pytest.approx(t, abs=1e-6), pair


def assert_totals_add_up(result: FunctionTimes) -> None:
    """total(f) = self(f) + sum of f's edges, for every function."""
    mine = result.caller >= 0
    below = np.bincount(result.caller[mine], weights=result.edge_us[mine],
                        minlength=len(result.names))
    np.testing.assert_allclose(result.self_us + below, result.total_us, rtol=1e-12, atol=1e-6)


def test_hand_derived_recursion_f_c_f_c() -> None:
    # f [0,100] > c [10,90] > f [20,70] > c [30,50] > g [40,45]; f [200,210] > f [202,207]
    result = parse(renderer(X("f", 0, 100), X("c", 10, 80), X("f", 20, 50), X("c", 30, 20),
                            X("g", 40, 5), X("f", 200, 10), X("f", 202, 5)))
    assert edges(result) == {
        (ROOT, "f"): 110.0,  # the outermost slices
        # c [10,90] less f [20,70] (f's own again) = 30, plus c [30,50] = 20
        ("f", "c"): 50.0,
        # f [20,70] less c [30,50] (deepest c above it is [10,90], so that is c's own) = 30
        ("c", "f"): 30.0,
        ("c", "g"): 5.0,  # the deepest c above g is [30,50]
    }
    table = dict(zip(result.names, zip(result.self_us, result.total_us, strict=True),
                     strict=True))
    assert table["f"] == (60.0, 110.0)  # 60 + 50
    assert table["c"] == (45.0, 80.0)  # 45 + 30 + 5
    assert_totals_add_up(result)


def test_direct_recursion_is_no_edge() -> None:
    result = parse(renderer(X("f", 0, 50), X("f", 5, 30), X("g", 10, 10), X("f", 12, 4)))
    # g's 6 µs of self time is under f [5,35]; f [12,16] inside g is f's own time
    assert edges(result) == {(ROOT, "f"): 50.0, ("f", "g"): 6.0, ("g", "f"): 4.0}
    assert_totals_add_up(result)


def test_mutual_recursion_through_three_names() -> None:
    # a > b > c > a > b, each 10 µs shorter at both ends
    result = parse(renderer(X("a", 0, 100), X("b", 10, 80), X("c", 20, 60), X("a", 30, 40),
                            X("b", 40, 20)))
    assert edges(result) == {
        (ROOT, "a"): 100.0,
        ("a", "b"): 40.0 + 20.0,  # b [10,90] less a [30,70] = 40; b [40,60] under a [30,70]
        ("b", "c"): 60.0 - 20.0,  # c [20,80] less b [40,60], b's own (b [40,60] nested in b)
        ("c", "a"): 40.0,  # a [30,70] whole: the b inside it is under the deepest c's child a
    }
    assert_totals_add_up(result)


def test_begin_end_unclosed_and_clipped_slices() -> None:
    result = parse(renderer(B("f", 0), X("g", 5, 50), E(30), B("h", 40)))
    assert_edges_close(edges(result), reference_edges(
        renderer(B("f", 0), X("g", 5, 50), E(30), B("h", 40)), {(1, 1)}))
    assert result.summary.clipped_overlaps == 1
    assert_totals_add_up(result)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(1, 12))
def test_property_recursive_trees_match_the_reference(rng: random.Random, roots: int) -> None:
    events = _random_forest(rng, roots, recursive=True)
    rng.shuffle(events)
    result = parse(renderer(*events))
    assert_edges_close(edges(result), reference_edges(renderer(*events), {(1, 1)}))
    assert_totals_add_up(result)
    # Integer times: the sums are exact in float64, not only close.
    mine = result.caller >= 0
    below = np.bincount(result.caller[mine], weights=result.edge_us[mine],
                        minlength=len(result.names))
    assert np.array_equal(result.self_us + below, result.total_us)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_property_messy_traces_match_the_reference(rng: random.Random) -> None:
    events = _messy_events(rng)
    result = parse(events)
    assert_edges_close(edges(result), reference_edges(events, {(1, 1), (1, 2)}))
    assert_totals_add_up(result)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_property_single_sweep_gives_the_same_edges(rng: random.Random) -> None:
    events = _messy_events(rng)
    looped = edges(parse(events))
    with single_sweep():
        assert edges(parse(events)) == looped


@pytest.mark.parametrize("seed", range(6))
def test_perfetto_gives_the_json_edges(seed: int) -> None:
    rng = random.Random(seed)
    processes = chrome_like(rng, tasks=rng.randrange(1, 40),
                            names=[f"fn{i}" for i in range(rng.randrange(1, 8))])
    from_json = traces.parse_trace(to_json(processes), display_name="t", all_threads=True)
    from_proto = traces.parse_trace(to_perfetto(processes), display_name="t",  # type: ignore[arg-type]
                                    all_threads=True)
    assert_edges_close(edges(from_proto), edges(from_json))
    assert_totals_add_up(from_proto)
    assert len(from_json.edge_us) > 0


def test_a_trace_without_timed_slices_has_no_edges() -> None:
    result = parse(renderer(X("f", 0, 0), X("g", 5, 0)))
    assert len(result.edge_us) == len(result.caller) == len(result.callee) == 0
    assert result.caller.dtype == np.int64
    assert result.edge_us.dtype == np.float64
