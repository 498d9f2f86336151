"""Readers of CI benchmark result files (``ingest.results``), on files the real tools wrote
(``results_fixtures/``, README.md there says which versions) and on hand-made documents."""

from __future__ import annotations

import gzip
import io
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from deviations.core.errors import TooLargeError, UserError
from ingest.results import (
    DEFAULT_MAX_BYTES,
    FORMATS,
    MetricValues,
    ResultsError,
    ResultSet,
    convert_values,
    detect_format,
    direction_from_unit,
    parse_results,
)

FIXTURES = Path(__file__).resolve().parent / "results_fixtures"
LOWER, HIGHER = "lower_is_better", "higher_is_better"
#: Releases each tool's history holds, and the first with the planted change (README there).
RELEASES, PLANTED_FROM = 16, 9


def _releases(tool: str) -> list[Path]:
    files = sorted(p for p in (FIXTURES / tool).iterdir() if p.name[:1] == "r"
                   and p.name[1:3].isdigit())
    assert len(files) == RELEASES
    return files


def _by_name(result: ResultSet) -> dict[str, MetricValues]:
    return {m.name: m for m in result.metrics}


# --- each reader on its tool's real output --------------------------------------------------

#: Per tool: {metric: (unit, direction, replicates per release)}, the planted metric, notes.
EXPECTED: dict[str, tuple[dict[str, tuple[str, str | None, int]], str, list[str]]] = {
    "google-benchmark": ({
        "BM_wait_1ms/real_time": ("ns", LOWER, 6),
        "BM_wait_1ms/real_time items_per_second": ("items/s", HIGHER, 6),
        "BM_wait_2ms/real_time": ("us", LOWER, 6),
        "BM_planted/real_time": ("us", LOWER, 6),
    }, "BM_planted/real_time", ["aggregates skipped (cv, mean, median, stddev)"]),
    "pytest-benchmark": ({
        "test_bench.py::test_steady[1]": ("s", LOWER, 8),
        "test_bench.py::test_steady[2]": ("s", LOWER, 8),
        "test_bench.py::test_planted": ("s", LOWER, 8),
    }, "test_bench.py::test_planted", []),
    "hyperfine": ({
        "sleep 0.02": ("s", LOWER, 8),
        "sleep 0.05": ("s", LOWER, 8),
        "planted": ("s", LOWER, 8),
    }, "planted", []),
    "asv": ({
        "bench.Params.time_wait(1, 'a')": ("s", LOWER, 6),
        "bench.Params.time_wait(1, 'b')": ("s", LOWER, 6),
        "bench.Params.time_wait(2, 'a')": ("s", LOWER, 6),
        "bench.Params.time_wait(2, 'b')": ("s", LOWER, 6),
        "bench.Suite.mem_list": ("bytes", LOWER, 1),
        "bench.Suite.time_planted": ("s", LOWER, 7),
        "bench.Suite.time_wait_1ms": ("s", LOWER, 7),
        "bench.Suite.track_answer": ("", None, 1),
    }, "bench.Suite.time_planted", ["2 result(s) without samples"]),
    "perfherder": ({
        "workloads [python]": ("ms", LOWER, 1),
        "workloads [python]/wait_1ms": ("ms", LOWER, 7),
        "workloads [python]/wait_2ms": ("ms", LOWER, 7),
        "workloads [python]/planted": ("ms", LOWER, 7),
        "wait-throughput": ("ops/s", HIGHER, 7),
    }, "workloads [python]/planted", ["without replicates"]),
    "bmf": ({
        "wait_1ms": ("ns", LOWER, 1),
        "wait_1ms throughput": ("ops/s", HIGHER, 1),
        "wait_2ms": ("ns", LOWER, 1),
        "planted": ("ns", LOWER, 1),
    }, "planted", ["one value per measure"]),
    "csv": ({
        "wait_1ms": ("us", LOWER, 7),
        "wait_2ms": ("us", None, 7),
        "planted": ("us", LOWER, 7),
    }, "planted", []),
}
#: The Perfherder suite's value is the geometric mean of its three subtests: the planted
#: change moves it by 1.3 ** (1/3) = 1.09.
SUMMARY = "workloads [python]"


@pytest.mark.parametrize("tool", sorted(EXPECTED))
def test_each_reader_reads_its_tools_history_and_sees_the_planted_change(tool: str) -> None:
    metrics, planted, notes = EXPECTED[tool]
    sets = [parse_results(p) for p in _releases(tool)]
    medians: dict[str, list[float]] = {name: [] for name in metrics}
    for i, result in enumerate(sets, start=1):
        assert result.format == tool
        got = _by_name(result)
        assert list(got) == list(metrics), (i, list(got))  # file order
        for name, (unit, direction, n) in metrics.items():
            m = got[name]
            assert (m.unit, m.direction, len(m.values)) == (unit, direction, n), (i, name)
            assert m.release == (f"1.{i}" if tool == "csv" else None)
            medians[name].append(statistics.median(m.values))
        for note in notes:
            assert any(note in text for text in result.notes), result.notes
    assert all(len(v) == RELEASES for v in medians.values())
    k = PLANTED_FROM - 1
    for name, meds in medians.items():
        step = meds[k] / meds[k - 1]  # r09 against r08
        before, after = statistics.median(meds[:k]), statistics.median(meds[k:])
        if name == planted:
            # 30% more work from r09 on; real runs on a shared machine: ±10 points.
            assert 1.18 < step < 1.45, (name, meds)
            assert 1.18 < after / before < 1.45, (name, meds)
        elif name == SUMMARY:
            assert 1.03 < after / before < 1.16, (name, meds)
        else:
            assert 0.9 < after / before < 1.1, (name, meds)
            assert 0.85 < step < 1.15, (name, meds)


def test_perfherder_threshold_and_direction_from_the_suite() -> None:
    got = _by_name(parse_results(_releases("perfherder")[0]))
    assert got["workloads [python]"].threshold_percent == 2.0
    assert got["workloads [python]/planted"].threshold_percent is None  # the subtest's own
    assert got["wait-throughput"].direction == HIGHER


def test_csv_history_in_one_file_keeps_its_releases() -> None:
    result = parse_results(FIXTURES / "csv" / "all.csv")
    assert [(m.release, m.name) for m in result.metrics] == [
        (f"1.{r}", name) for r in range(1, RELEASES + 1)
        for name in ("wait_1ms", "wait_2ms", "planted")
    ]
    assert all(len(m.values) == 7 for m in result.metrics)


def test_gzip_streams_and_bytes_read_the_same() -> None:
    path = _releases("google-benchmark")[0]
    plain = parse_results(path)
    assert parse_results(gzip.compress(path.read_bytes())) == plain
    assert parse_results(io.BytesIO(path.read_bytes()), display_name="x.json") == plain
    assert parse_results(str(path), format="google-benchmark") == plain


# --- detection ----------------------------------------------------------------------------

MINIMAL: dict[str, str] = {
    "google-benchmark": json.dumps({"benchmarks": [
        {"name": "BM_x", "run_type": "iteration", "real_time": 12.5, "cpu_time": 12,
         "time_unit": "ns", "iterations": 100}]}),
    "pytest-benchmark": json.dumps({"benchmarks": [
        {"name": "test_x", "fullname": "t.py::test_x", "stats": {"median": 0.5, "data": [0.5]}}
    ]}),
    "hyperfine": json.dumps({"results": [{"command": "sleep 0.1", "times": [0.1, 0.11]}]}),
    "asv": json.dumps({"commit_hash": "abc", "version": 2, "result_columns": ["result"],
                       "results": {"b.time_x": [[0.25]]}}),
    "perfherder": json.dumps({"suites": [{"name": "s", "value": 3}]}),
    "bmf": json.dumps({"bench": {"latency": {"value": 88.0}}}),
    "csv": "release,metric,value\n1.0,m,3\n",
}


def test_minimal_documents_cover_every_format() -> None:
    assert sorted(MINIMAL) == sorted(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_detect_format_on_minimal_documents(fmt: str) -> None:
    data = MINIMAL[fmt].encode()
    assert detect_format(data, "f") == fmt
    assert detect_format(gzip.compress(data), "f.gz") == fmt
    result = parse_results(data)
    assert result.format == fmt
    assert len(result.metrics) == 1


@pytest.mark.parametrize("tool", sorted(EXPECTED))
def test_detect_format_on_every_fixture(tool: str) -> None:
    for path in sorted((FIXTURES / tool).glob("*.*")):
        assert detect_format(path.read_bytes(), path.name) == tool, path


def test_perfherder_log_is_detected_and_lines_merged() -> None:
    log = ("[task 1] INFO - start\n"
           '[task 1] INFO - PERFHERDER_DATA: {"suites": [{"name": "a", "value": 1}]}\n'
           '[task 1] INFO - PERFHERDER_DATA: {"suites": [{"name": "b", "replicates": [2, 3],'
           ' "unit": "ms", "lowerIsBetter": false}]} trailing words\n')
    assert detect_format(log.encode(), "log") == "perfherder"
    result = parse_results(log.encode())
    assert [(m.name, m.values, m.direction) for m in result.metrics] == [
        ("a", (1.0,), None), ("b", (2.0, 3.0), HIGHER)]


def test_a_wrong_explicit_format_says_what_the_file_looks_like() -> None:
    with pytest.raises(ResultsError, match=r"^h\.json: .*looks like hyperfine, not asv"):
        parse_results(MINIMAL["hyperfine"].encode(), display_name="h.json", format="asv")
    with pytest.raises(ResultsError, match=r"^h\.json: unknown format 'nope': one of "):
        parse_results(MINIMAL["hyperfine"].encode(), display_name="h.json", format="nope")


def test_unknown_content_names_the_formats() -> None:
    with pytest.raises(ResultsError) as info:
        detect_format(b'{"something": 1}', "x.json")
    message = str(info.value)
    assert message.startswith("x.json: ")
    assert all(fmt in message for fmt in FORMATS)


# --- format details -----------------------------------------------------------------------


def _gb(*entries: dict[str, Any]) -> bytes:
    return json.dumps({"benchmarks": list(entries)}).encode()


def _it(name: str, t: float, **more: Any) -> dict[str, Any]:
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": t,
            "cpu_time": t, "time_unit": "ms", **more}


def test_google_benchmark_failed_runs_and_aggregates_only() -> None:
    result = parse_results(_gb(
        _it("BM_a", 1), _it("BM_a", 2),
        {"name": "BM_bad", "run_name": "BM_bad", "run_type": "iteration",
         "error_occurred": True, "error_message": "boom"},
        {"name": "BM_c_median", "run_name": "BM_c", "run_type": "aggregate",
         "aggregate_name": "median", "real_time": 7, "time_unit": "us"},
        {"name": "BM_c_stddev", "run_name": "BM_c", "run_type": "aggregate",
         "aggregate_name": "stddev", "real_time": "NaN", "time_unit": "us"},
        _it("BM_d", 3, user_counter=5),
    ))
    assert [(m.name, m.values, m.unit) for m in result.metrics] == [
        ("BM_a", (1.0, 2.0), "ms"), ("BM_d", (3.0,), "ms"), ("BM_d user_counter", (5.0,), ""),
        ("BM_c", (7.0,), "us")]
    assert any("BM_bad" in n for n in result.notes)
    assert any("only aggregates" in n for n in result.notes)


def test_google_benchmark_nan_in_a_skipped_aggregate_is_fine() -> None:
    doc = (b'{"benchmarks": [{"name": "a", "run_type": "iteration", "real_time": 1, '
           b'"time_unit": "ns"}, {"name": "a_cv", "run_name": "a", "run_type": "aggregate",'
           b' "aggregate_name": "cv", "real_time": NaN}]}')
    assert parse_results(doc).metrics[0].values == (1.0,)


def test_google_benchmark_same_name_from_two_benchmarks_is_an_error() -> None:
    with pytest.raises(ResultsError, match="two different benchmarks"):
        parse_results(_gb(_it("BM_a", 1, family_index=0), _it("BM_a", 2, family_index=1)))


def test_pytest_benchmark_without_data_reads_the_median_with_a_note() -> None:
    doc = {"benchmarks": [{"name": "t", "fullname": "f.py::t",
                           "stats": {"median": 0.25, "mean": 0.3, "rounds": 5}}]}
    result = parse_results(json.dumps(doc).encode())
    assert result.metrics[0].values == (0.25,)
    assert "replicates" in result.notes[0]


def test_hyperfine_without_times_reads_the_mean_with_a_note() -> None:
    result = parse_results(json.dumps({"results": [{"command": "x", "mean": 0.5}]}).encode())
    assert result.metrics[0].values == (0.5,)
    assert "mean" in result.notes[0]


def test_hyperfine_failed_runs_are_noted() -> None:
    doc = {"results": [{"command": "x", "times": [0.5, 0.6], "exit_codes": [0, 1]}]}
    assert "non-zero" in parse_results(json.dumps(doc).encode()).notes[0]


def test_asv_old_layout_failed_and_skipped_results() -> None:
    doc = {"commit_hash": "abc", "version": 1, "results": {
        "m.time_a": 0.5,
        "m.time_b": {"result": [0.1, None, float("nan"), 0.4],
                     "params": [["1", "2"], ["'x'", "'y'"]],
                     "samples": [[0.1, 0.11], None, None, [0.4]]},
        "m.peakmem_c": {"result": None},
        "m.track_d": {"result": [3.0], "params": []},
    }}
    result = parse_results(json.dumps(doc).encode())
    assert [(m.name, m.values, m.unit, m.direction) for m in result.metrics] == [
        ("m.time_a", (0.5,), "s", LOWER),
        ("m.time_b(1, 'x')", (0.1, 0.11), "s", LOWER),
        ("m.time_b(2, 'y')", (0.4,), "s", LOWER),
        ("m.track_d", (3.0,), "", None),
    ]
    assert any("3 result(s) failed or skipped" in n for n in result.notes)


def test_asv_benchmarks_json_is_named_for_what_it_is() -> None:
    doc = {"m.time_a": {"code": "def time_a(): pass", "name": "m.time_a"}, "version": 2}
    with pytest.raises(ResultsError, match="benchmarks.json"):
        parse_results(json.dumps(doc).encode(), format="asv")


def test_perfherder_subtests_inherit_unit_and_direction() -> None:
    doc = {"suites": [{"name": "s", "unit": "ms", "lowerIsBetter": False, "alertThreshold": 5,
                       "subtests": [{"name": "a", "value": 1, "alertThreshold": 3},
                                    {"name": "b", "value": 2, "unit": "score",
                                     "lowerIsBetter": True}]}]}
    got = _by_name(parse_results(json.dumps(doc).encode()))
    assert list(got) == ["s/a", "s/b"]  # no suite value: no suite metric
    assert (got["s/a"].unit, got["s/a"].direction, got["s/a"].threshold_percent) == (
        "ms", HIGHER, 3.0)
    assert (got["s/b"].unit, got["s/b"].direction) == ("score", LOWER)


def test_bmf_measures() -> None:
    doc = {"b": {"latency": {"value": 5, "lower_value": 4, "upper_value": 6},
                 "throughput": {"value": 100}, "memory": {"value": 7}}}
    got = _by_name(parse_results(json.dumps(doc).encode()))
    assert [(n, m.unit, m.direction) for n, m in got.items()] == [
        ("b", "ns", LOWER), ("b throughput", "ops/s", HIGHER), ("b memory", "", None)]


def test_csv_columns_in_any_order_and_short_directions() -> None:
    text = "Value,direction,metric,unit,release\n1,higher,m,ops/sec,2.0\n2,,m,,2.0\n3,,m,,1.0\n"
    result = parse_results(text.encode())
    assert [(m.release, m.name, m.values, m.unit, m.direction) for m in result.metrics] == [
        ("2.0", "m", (1.0, 2.0), "ops/s", HIGHER), ("1.0", "m", (3.0,), "ops/s", HIGHER)]


# --- bad input ----------------------------------------------------------------------------

_GB_OK = {"name": "BM_a", "run_type": "iteration", "real_time": 1, "time_unit": "ns"}

BAD: list[tuple[str, bytes, str]] = [
    ("empty", b"", "the file is empty"),
    ("blank", b"  \n\t\n", "the file is empty"),
    ("malformed JSON", b'{"benchmarks": [', "not valid JSON"),
    ("not UTF-8", b"\xff\xfe{}", "not UTF-8"),
    ("truncated gzip", gzip.compress(MINIMAL["hyperfine"].encode())[:-12], "gzip"),
    ("wrong schema", b'{"benchmarks": 3}', "not a results file of a known format"),
    ("JSON array", b"[1, 2]", "not a results file of a known format"),
    ("unknown text", b"hello\nworld\n", "not a results file of a known format"),
    ("no benchmarks (google)", b'{"context": {"library_build_type": "release"}, '
     b'"benchmarks": []}', "no benchmark results"),
    ("no benchmarks (hyperfine)", b'{"results": [{"command": "x", "times": []}]}',
     "non-empty list"),
    ("NaN value", _gb({**_GB_OK, "real_time": float("nan")}), "not a finite number"),
    ("Infinity literal", b'{"results": [{"command": "x", "times": [Infinity]}]}',
     "not a finite number"),
    ("1e308", json.dumps({"results": [{"command": "x", "times": [1e308]}]}).encode(),
     "beyond"),
    ("huge integer", b'{"results": [{"command": "x", "times": [' + b"9" * 400 + b"]}]}",
     "beyond"),
    ("string value", b'{"results": [{"command": "x", "times": ["1"]}]}', "must be a number"),
    ("NUL in a name", json.dumps({"results": [{"command": "a\u0000b", "times": [1]}]}).encode(),
     "control character"),
    ("line break in a name", json.dumps({"bench\nx": {"latency": {"value": 1}}}).encode(),
     "control character"),
    ("lone surrogate", b'{"results": [{"command": "a\\ud800", "times": [1]}]}', "surrogate"),
    ("empty name", json.dumps({"results": [{"command": "  ", "times": [1]}]}).encode(),
     "is empty"),
    ("long name", json.dumps({"results": [{"command": "x" * 1001, "times": [1]}]}).encode(),
     "longer than 1,000"),
    ("duplicate hyperfine", json.dumps({"results": [{"command": "x", "times": [1]},
                                                    {"command": "x", "times": [2]}]}).encode(),
     "appears twice"),
    ("duplicate pytest", json.dumps({"benchmarks": [
        {"name": "t", "stats": {"data": [1]}}, {"name": "t", "stats": {"data": [2]}}]}).encode(),
     "appears twice"),
    ("duplicate perfherder suite", b'PERFHERDER_DATA: {"suites": [{"name": "s", "value": 1}]}\n'
     b'PERFHERDER_DATA: {"suites": [{"name": "s", "value": 2}]}\n', "appears twice"),
    ("perfherder bad line", b"x PERFHERDER_DATA: {nope\n", "line 1: PERFHERDER_DATA is not valid"),
    ("perfherder suite without data", b'{"suites": [{"name": "s"}]}', "neither a value"),
    ("perfherder bad flag", b'{"suites": [{"name": "s", "value": 1, "lowerIsBetter": 1}]}',
     "true or false"),
    ("deep nesting", b"[" * 100_000, "nested too deeply"),
    ("google bad unit", _gb({**_GB_OK, "time_unit": "days"}), "time_unit"),
    ("asv mismatch", json.dumps({"commit_hash": "a", "results": {"m.time_x": {
        "result": [1, 2], "params": [["1"]]}}}).encode(), "1 parameter combinations"),
    ("csv no header", b"1.0,m,3\n", "not a results file of a known format"),
    ("csv extra column", b"release,metric,value,host\n1.0,m,3,h\n", "unknown column(s) 'host'"),
    ("csv bad release", b"release,metric,value\n../x,m,3\n", "line 2: release version"),
    ("csv unit conflict", b"release,metric,value,unit\n1,m,3,ms\n2,m,3,s\n",
     "line 3: metric 'm' has unit 's'"),
    ("csv bad direction", b"release,metric,value,direction\n1,m,3,up\n", "direction 'up'"),
    ("csv not a number", b"release,metric,value\n1,m,fast\n", "line 2: value 'fast'"),
    ("csv inf", b"release,metric,value\n1,m,inf\n", "line 2: the value inf"),
    ("csv short row", b"release,metric,value\n1,m\n", "line 2: 2 fields"),
    ("csv header only", b"release,metric,value\n", "no rows after the header"),
    ("csv NUL", b"release,metric,value\n1,m\x00x,3\n", "line 2"),
]


@pytest.mark.parametrize(("data", "reason"), [(d, r) for _, d, r in BAD],
                         ids=[name for name, _, _ in BAD])
def test_bad_input_is_one_error_naming_the_file(data: bytes, reason: str) -> None:
    with pytest.raises(ResultsError) as info:
        parse_results(data, display_name="bad.json")
    message = str(info.value)
    assert message.startswith("bad.json: "), message
    assert reason in message, message
    assert "\n" not in message
    assert isinstance(info.value, UserError)


def test_too_large_is_refused_by_the_bounded_reader(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(MINIMAL["hyperfine"].encode())
    with pytest.raises(ResultsError, match=r"^big\.json: larger than the limit") as info:
        parse_results(path, max_bytes=10)
    assert isinstance(info.value, TooLargeError)
    assert DEFAULT_MAX_BYTES == 256 * 1024**2


# --- units --------------------------------------------------------------------------------


@pytest.mark.parametrize(("unit", "direction"), [
    ("ns", LOWER), ("µs", LOWER), ("ms", LOWER), ("s", LOWER), ("bytes", LOWER),
    ("MB", LOWER), ("items/s", HIGHER), ("ops/s", HIGHER), ("bytes/s", HIGHER),
    ("score", HIGHER), ("fps", HIGHER), ("ops", HIGHER), ("widgets", LOWER), ("", LOWER),
])
def test_direction_from_unit(unit: str, direction: str) -> None:
    assert direction_from_unit(unit) == direction


def test_convert_values() -> None:
    assert convert_values([1.5, 2], "ms", "us") == (1500.0, 2000.0)
    assert convert_values([2_000_000], "ns", "s") == pytest.approx((0.002,))
    assert convert_values([1], "µs", "ns") == (1000.0,)
    assert convert_values([3], "KiB", "bytes") == (3072.0,)
    assert convert_values([3], "score", "score") == (3.0,)
    assert convert_values([3], "ms", "bytes") is None
    assert convert_values([3], "score", "fps") is None
