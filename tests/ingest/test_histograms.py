"""Tests of the Telemetry histogram parser ``ingest.histograms`` (pure: no Django, no DB).

Real Mozilla data in ../shared/data/histograms (two raw Firefox main pings, GLAM
aggregates) must all parse; Firefox's bucket algorithms are checked against bounds worked
out by hand and against the bucket keys of the real files; every format and every error
has a synthetic case.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingest.histograms import (
    MAX_BUCKETS,
    MAX_PROBE_CHARS,
    HistogramError,
    HistogramRecord,
    bucket_lower_bounds,
    parse_histogram_file,
)

HISTOGRAMS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "histograms"
REAL_FILES = sorted(HISTOGRAMS.glob("*.json")) if HISTOGRAMS.is_dir() else []
requires_data = pytest.mark.skipif(
    not REAL_FILES, reason=f"the shared real histograms are not present at {HISTOGRAMS}"
)
PINGS = {
    "moztelemetry__test_telemetry_gzip.heka.json": 485,
    "moztelemetry__test_telemetry_snappy.heka.json": 416,
}
PING_BUILD_ID = "20170130030205"
GLAM_BUILD_FILES = [
    "glam__boolean_histogram_build_id.json",
    "glam__enumerated_histogram_build_id.json",
    "glam__exponential_histogram_build_id.json",
]
INF = math.inf


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def parse(obj: Any, **kwargs: Any) -> list[HistogramRecord]:
    data = obj if isinstance(obj, bytes) else dumps(obj)
    return parse_histogram_file(data, display_name="h.json", **kwargs)


def mozilla(values: dict[str, float], **extra: Any) -> dict[str, Any]:
    """GC_MS's definition (exponential, 1..10000, 50 buckets) with the given values."""
    return {
        "bucket_count": 50,
        "histogram_type": 0,
        "range": [1, 10000],
        "sum": 1234,
        "values": values,
        **extra,
    }


def wrapped(probe: str = "GC_MS", build_id: str = "20170130030205", **extra: Any) -> dict:
    return {"probe": probe, "build_id": build_id, "histogram": mozilla({"81": 2}), **extra}


def plain(probe: str = "A", build_id: str = "1.0", **extra: Any) -> dict[str, Any]:
    return {"probe": probe, "build_id": build_id, "edges": [0, 1, 2], "counts": [3, 4], **extra}


def glam_row(build_id: str, os: str = "*", users: int = 100, **extra: Any) -> dict[str, Any]:
    return {
        "version": "70",
        "os": os,
        "build_id": build_id,
        "process": "parent",
        "metric": "GC_MS",
        "metric_key": "",
        "metric_type": "histogram-exponential",
        "total_users": users,
        "histogram": {"0": 0.25, "1": 0.75},
        "client_agg_type": "summed_histogram",
        **extra,
    }


def error_of(obj: Any, **kwargs: Any) -> str:
    with pytest.raises(HistogramError) as info:
        parse(obj, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("h.json: ")
    return message


# --------------------------------------------------------------------------- real data


@requires_data
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_every_real_file_parses(path: Path) -> None:
    records = parse_histogram_file(path)
    assert records
    assert len({(r.probe, r.build_id) for r in records}) == len(records)
    for r in records:
        assert r.edges.dtype == np.float64
        assert r.counts.dtype == np.float64
        assert len(r.edges) == len(r.counts) + 1
        assert np.all(np.diff(r.edges) > 0)
        assert r.edges[-1] == INF
        assert np.all(r.counts >= 0)
        assert not r.edges.flags.writeable
        assert not r.counts.flags.writeable


@requires_data
@pytest.mark.parametrize(("name", "parent_histograms"), PINGS.items())
def test_raw_ping_yields_its_histograms_with_the_build_id(
    name: str, parent_histograms: int
) -> None:
    raw = json.loads((HISTOGRAMS / name).read_bytes())
    records = parse_histogram_file(HISTOGRAMS / name)
    by_source = {r.source: r for r in records}
    parent = [r for r in records if r.source.startswith("payload.histograms.")]
    assert len(parent) == len(raw["payload"]["histograms"]) == parent_histograms
    assert {r.build_id for r in records} == {PING_BUILD_ID}
    keyed = [r for r in records if r.source.startswith("payload.keyedHistograms.")]
    assert len(keyed) == sum(len(h) for h in raw["payload"]["keyedHistograms"].values())
    content = raw["payload"]["processes"]["content"]["histograms"]
    assert sum(r.probe.startswith("content:") and "/" not in r.probe for r in records) == len(
        content
    )
    key = next(iter(raw["payload"]["keyedHistograms"]["MAIN_THREAD_RUNNABLE_MS"]))
    assert by_source[f"payload.keyedHistograms.MAIN_THREAD_RUNNABLE_MS[{key!r}]"].probe == (
        f"MAIN_THREAD_RUNNABLE_MS/{key}"
    )


@requires_data
def test_raw_ping_histogram_values_land_in_their_buckets() -> None:
    records = parse_histogram_file(HISTOGRAMS / "moztelemetry__test_telemetry_gzip.heka.json")
    gc = next(r for r in records if r.probe == "GC_MS")
    # The ping: {"bucket_count": 50, "histogram_type": 0, "range": [1, 10000], "sum": 27551,
    # "values": {"268": 7, "318": 15, "378": 18, "449": 17, "533": 5, "752": 2, "81": 0,
    # "894": 0, "96": 1}}
    assert gc.source == "payload.histograms.GC_MS"
    assert gc.histogram_type == "exponential"
    assert gc.sum == 27551
    assert not gc.normalised
    assert len(gc.counts) == 50
    assert gc.edges[0] == 0
    assert gc.edges[-2] == 10000
    stored = {int(e): c for e, c in zip(gc.edges[:-1], gc.counts, strict=True) if c}
    assert stored == {96: 1, 268: 7, 318: 15, 378: 18, 449: 17, 533: 5, 752: 2}
    flag = next(r for r in records if r.probe == "A11Y_IATABLE_USAGE_FLAG")
    assert flag.histogram_type == "flag"
    assert flag.edges.tolist() == [0, 1, 2, INF]
    assert flag.counts.tolist() == [1, 0, 0]


@requires_data
@pytest.mark.parametrize("name", GLAM_BUILD_FILES)
def test_glam_gives_one_normalised_record_per_build(name: str) -> None:
    rows = json.loads((HISTOGRAMS / name).read_bytes())["response"]
    records = parse_histogram_file(HISTOGRAMS / name)
    assert len(records) == len({r.build_id for r in records}) == 134
    assert {r.build_id for r in records} == {row["build_id"] for row in rows}
    assert all(r.normalised for r in records)
    assert all(abs(r.counts.sum() - 1) < 1e-3 for r in records)
    first = records[0]
    assert first.source == "response[0]"
    assert first.total == rows[0]["total_users"]
    assert first.counts.tolist() == list(rows[0]["histogram"].values())


@requires_data
def test_glam_probe_names_carry_process_and_scalar_aggregation() -> None:
    enumerated = parse_histogram_file(HISTOGRAMS / "glam__enumerated_histogram_build_id.json")
    assert {r.probe for r in enumerated} == {"content:Enumerated Histogram (by Build ID)"}
    assert enumerated[0].edges.tolist() == [*range(20), INF]
    scalars = parse_histogram_file(HISTOGRAMS / "glam__scalar_uint_build_id.json")
    assert len(scalars) == 590
    per_aggregation = {
        agg: sum(r.probe == f"Scalar uint (build ID)#{agg}" for r in scalars)
        for agg in ("avg", "count", "max", "min", "sum")
    }
    assert per_aggregation == dict.fromkeys(per_aggregation, 118)
    assert not any(r.normalised for r in scalars)
    assert scalars[0].edges[:3].tolist() == [1.0, 1.3, 1.69]
    # 64 rows of this sample file have a negative total_users: kept, total unknown.
    assert sum(r.total is None for r in scalars) == 64


@requires_data
def test_glam_per_version_rows_use_the_version_as_build_id() -> None:
    records = parse_histogram_file(HISTOGRAMS / "glam__boolean_histogram_version.json")
    assert [r.build_id for r in records] == ["5", "4", "3"]
    assert {r.probe for r in records} == {"Boolean Histogram (version)@version"}


def test_glam_per_version_rows_are_another_probe_than_per_build_rows() -> None:
    rows = [
        glam_row("20191101000000"),
        glam_row("*", version="70"),
        glam_row("*", version="70", client_agg_type="max", metric_key="k"),
    ]
    records = parse({"response": rows})
    assert [(r.probe, r.build_id) for r in records] == [
        ("GC_MS", "20191101000000"), ("GC_MS@version", "70"), ("GC_MS#max@version/k", "70"),
    ]


@requires_data
def test_glam_exponential_buckets_are_firefox_buckets() -> None:
    """GLAM's keys for an exponential histogram of range [1, 5000] with 50 buckets are
    exactly the bounds Firefox's algorithm gives (an independent check of it)."""
    rows = json.loads((HISTOGRAMS / "glam__exponential_histogram_build_id.json").read_bytes())
    keys = [int(k) for k in rows["response"][0]["histogram"]]
    assert keys == list(bucket_lower_bounds("exponential", 1, 5000, 50))


# --------------------------------------------------------------------------- bucket layout


def test_exponential_bounds_by_hand() -> None:
    """range [1, 100], 10 buckets. b[0] = 0, b[1] = 1; then with c = b[i-1],
    b[i] = floor(exp(ln c + (ln 100 - ln c) / (10 - i)) + 0.5), or c + 1 if not above c:
      i=2: c=1   exp(0       + 4.60517/8) = 1.778  -> 2
      i=3: c=2   exp(0.69315 + 3.91202/7) = 3.497  -> 3
      i=4: c=3   exp(1.09861 + 3.50656/6) = 5.382  -> 5
      i=5: c=5   exp(1.60944 + 2.99573/5) = 9.103  -> 9
      i=6: c=9   exp(2.19722 + 2.40795/4) = 16.43  -> 16
      i=7: c=16  exp(2.77259 + 1.83258/3) = 29.47  -> 29
      i=8: c=29  exp(3.36730 + 1.23787/2) = 53.85  -> 54
      i=9: c=54  exp(3.98898 + 0.61619/1) = 100    -> 100
    """
    assert bucket_lower_bounds("exponential", 1, 100, 10) == (0, 1, 2, 3, 5, 9, 16, 29, 54, 100)


def test_exponential_narrow_buckets_step_by_one() -> None:
    # range [1, 5], 8 buckets: the log steps round to the same integer, so +1 each time.
    assert bucket_lower_bounds("exponential", 1, 5, 8) == (0, 1, 2, 3, 4, 5, 6, 7)


def test_linear_bounds_by_hand() -> None:
    """b[i] = floor((1 * (10 - 1 - i) + 100 * (i - 1)) / 8 + 0.5) for range [1, 100]:
    8/8=1, 107/8=13.4, 206/8=25.75, 305/8=38.1, 404/8=50.5, 503/8=62.9, 602/8=75.25,
    701/8=87.6, 800/8=100."""
    assert bucket_lower_bounds("linear", 1, 100, 10) == (0, 1, 13, 26, 38, 51, 63, 75, 88, 100)
    # Enumerated histograms of N values: range [1, N], N + 1 buckets, bounds 0 .. N.
    assert bucket_lower_bounds("enumerated", 1, 20, 21) == tuple(range(21))
    assert bucket_lower_bounds("boolean", 1, 2, 3) == (0, 1, 2)


def test_two_builds_with_different_empty_buckets_share_edges() -> None:
    records = parse(
        [
            {"probe": "GC_MS", "build_id": "20190101000000", "histogram": mozilla({"81": 3})},
            {"probe": "GC_MS", "build_id": "20190102000000", "histogram": mozilla({"8416": 1})},
        ]
    )
    a, b = records
    assert np.array_equal(a.edges, b.edges)
    assert len(a.edges) == 51
    assert a.counts.sum() == 3
    assert b.counts.sum() == 1
    assert a.counts[list(a.edges).index(81)] == 3
    assert b.counts[-2] == 1  # 8416 is the last bound before the overflow bucket at 10000


def test_integral_floats_are_accepted_for_range_and_bucket_count() -> None:
    (r,) = parse(wrapped(histogram=mozilla({"81.0": 2}, range=[1.0, 10000.0], bucket_count=50.0)))
    assert len(r.counts) == 50
    assert r.counts[21] == 2


def test_boolean_without_range_uses_firefox_fixed_layout() -> None:
    histogram = {"histogram_type": "boolean", "values": {"0": 5, "1": 2}}
    (r,) = parse({"probe": "B", "build_id": "1", "histogram": histogram})
    assert r.edges.tolist() == [0, 1, 2, INF]
    assert r.counts.tolist() == [5, 2, 0]
    assert r.sum is None


# --------------------------------------------------------------------------- formats


def test_wrapped_single_object() -> None:
    (r,) = parse(wrapped())
    assert (r.probe, r.build_id, r.source, r.histogram_type) == (
        "GC_MS",
        "20170130030205",
        "record",
        "exponential",
    )
    assert r.sum == 1234
    assert r.alert_emails == ()
    assert r.total is None


def test_wrapped_list_and_string_histogram_types() -> None:
    records = parse(
        [
            wrapped("A"),
            {
                "probe": "E",
                "build_id": "2",
                "histogram": {
                    "histogram_type": "enumerated",
                    "range": [1, 5],
                    "bucket_count": 6,
                    "values": {"3": 4},
                },
            },
        ]
    )
    assert [r.source for r in records] == ["records[0]", "records[1]"]
    assert records[1].edges.tolist() == [0, 1, 2, 3, 4, 5, INF]
    assert records[1].counts.tolist() == [0, 0, 0, 4, 0, 0]


def test_json_lines_mixing_both_record_forms() -> None:
    text = "\n".join([json.dumps(wrapped("A")), "", json.dumps(plain("B")), ""])
    records = parse(text.encode())
    assert [(r.probe, r.source) for r in records] == [("A", "line 1"), ("B", "line 3")]


def test_plain_form() -> None:
    (r,) = parse(plain(edges=[0, 10, None], counts=[0.25, 0.75], normalised=True, total=40))
    assert r.edges.tolist() == [0, 10, INF]
    assert r.counts.tolist() == [0.25, 0.75]
    assert r.normalised
    assert r.total == 40
    assert r.histogram_type is None
    assert r.sum is None


def test_alert_emails_are_carried() -> None:
    histogram = mozilla({"81": 1}, alert_emails=["gc@mozilla.com", "perf@example.org"])
    record = {
        "probe": "GC_MS",
        "build_id": "1",
        "histogram": histogram,
        "alert_emails": ["perf@example.org", "owner@example.org"],
    }
    (r,) = parse(record)
    assert r.alert_emails == ("perf@example.org", "owner@example.org", "gc@mozilla.com")
    (p,) = parse(plain(alert_emails=["a@b.org"]))
    assert p.alert_emails == ("a@b.org",)


def test_gzip_stream_and_path(tmp_path: Path) -> None:
    data = gzip.compress(dumps([wrapped("A"), plain("B")]))
    path = tmp_path / "x.json.gz"
    path.write_bytes(data)
    assert [r.probe for r in parse_histogram_file(path)] == ["A", "B"]
    assert len(parse_histogram_file(io.BytesIO(data))) == 2


def test_bare_histogram_and_histograms_by_name_take_the_arguments() -> None:
    (r,) = parse(mozilla({"81": 1}), probe="GC_MS", build_id="20170130030205")
    assert (r.probe, r.build_id, r.source) == ("GC_MS", "20170130030205", "histogram")
    records = parse({"GC_MS": mozilla({}), "GC_MAX_PAUSE_MS": mozilla({"1": 2})}, build_id="7")
    assert [(r.probe, r.build_id) for r in records] == [("GC_MS", "7"), ("GC_MAX_PAUSE_MS", "7")]


def test_build_id_argument_fills_missing_ones_only() -> None:
    (r,) = parse({"probe": "A", "edges": [0, 1], "counts": [1]}, build_id="20190101000000")
    assert r.build_id == "20190101000000"
    assert "differs from the one given" in error_of(plain(build_id="2"), build_id="3")


def test_ping_build_id_from_environment_when_application_lacks_it() -> None:
    ping = {
        "environment": {"build": {"buildId": "20200101000000"}},
        "payload": {
            "histograms": {"GC_MS": mozilla({"81": 1})},
            "keyedHistograms": {"K": {"a/b": mozilla({"1": 1})}},
            "processes": {"gpu": {"histograms": {"GC_MS": mozilla({})}}},
        },
    }
    records = parse(ping)
    assert [(r.probe, r.build_id) for r in records] == [
        ("GC_MS", "20200101000000"),
        ("K/a/b", "20200101000000"),
        ("gpu:GC_MS", "20200101000000"),
    ]


def test_glam_prefers_the_all_os_row() -> None:
    rows = [
        glam_row("20191101000000", os="Windows_NT"),
        glam_row("20191101000000", os="*", histogram={"0": 0.5, "1": 0.5}),
    ]
    (r,) = parse({"response": rows})
    assert r.counts.tolist() == [0.5, 0.5]
    assert r.source == "response[1]"


def test_glam_merges_per_os_rows_weighted_by_clients() -> None:
    rows = [
        glam_row("20191101000000", os="Windows_NT", users=100, histogram={"0": 1.0, "1": 0.0}),
        glam_row("20191101000000", os="Linux", users=300, histogram={"0": 0.0, "1": 1.0}),
        glam_row("20191102000000"),
    ]
    first, second = parse(rows)
    assert first.counts.tolist() == [0.25, 0.75]
    assert first.total == 400
    assert first.normalised
    assert first.source == "records[0], records[1]"
    assert second.build_id == "20191102000000"


# --------------------------------------------------------------------------- errors

BAD_INPUTS = [
    (b"", "h.json: empty file"),
    (b"  \n ", "h.json: empty file"),
    (b"hello", "h.json: not valid JSON"),
    (b'[{"probe": "A", "build_id": "1", "edges": [0, 1', "h.json: truncated JSON"),
    (b"42", "not an object or a list"),
    (b"[]", "no histograms"),
    (dumps({"foo": 1}), "not a recognised histogram file"),
    (dumps([plain(), 7]), "records[1]: expected a JSON object"),
    (dumps([plain(), {"probe": "A"}]), "records[1]: expected {"),
    (dumps([plain(), plain("B\x07")]), "records[1]: probe name 'B\\x07' is not valid"),
    (dumps([plain(" A")]), "records[0]: probe name"),
    (dumps([plain("x" * (MAX_PROBE_CHARS + 1))]), "records[0]: probe name"),
    (dumps([plain(probe=None)]), "records[0]: no 'probe'"),
    (dumps([plain(build_id="2019/01/01")]), "records[0]: build id '2019/01/01' is not valid"),
    (dumps([plain(build_id=None)]), "records[0]: no build id"),
    (dumps([plain(counts=[1, -1])]), "records[0]: counts[1] is -1"),
    (dumps([plain(counts=[1, True])]), "records[0]: counts[1] is True"),
    # Counts that overflow a histogram's total (every distance was 1.0; issue 23).
    (dumps([plain(counts=[1e308, 1])]), "records[0]: counts[0] is 1e+308: a count must be "
                                        "at most 1e+15"),
    (b'{"probe": "A", "build_id": "1", "edges": [0, 1], "counts": [1]}\n[', "line 2: truncated"),
    (b"[" * 100_000 + b"]" * 100_000, "h.json: not valid JSON"),
    (dumps([plain(counts=[1, "2"])]), "records[0]: counts[1] is '2'"),
    (
        b'[{"probe": "A", "build_id": "1", "edges": [0, 1, 2], "counts": [1, NaN]}]',
        "counts[1] is nan",
    ),
    (
        b'[{"probe": "A", "build_id": "1", "edges": [0, 1, 2], "counts": [1e999, 1]}]',
        "counts[0] is inf",
    ),
    (dumps([plain(edges=[0, 2, 1])]), "records[0]: edges must increase strictly"),
    (dumps([plain(edges=[0, None, 2])]), "records[0]: edges[1] is None"),
    (dumps([plain(edges=[0, 1, 2, 3])]), "records[0]: 4 edges for 2 counts"),
    (dumps([plain(edges=[0], counts=[])]), "records[0]: 'counts' must have 1 to"),
    (
        dumps([plain(), plain()]),
        "records[1]: a second histogram of probe 'A' for build 1.0 (the first is records[0])",
    ),
    (dumps([plain(alert_emails=["not an email"])]), "records[0]: alert_emails[0] = 'not an email'"),
    (dumps([plain(alert_emails="a@b.org")]), "records[0]: 'alert_emails' must be a list"),
    (dumps([plain(normalised="yes")]), "records[0]: 'normalised' must be true or false"),
    (
        dumps([wrapped(histogram=mozilla({"9": 1}))]),
        "records[0]: values key '9' is not a bucket lower bound of this exponential "
        "histogram (range [1, 10000], 50 buckets)",
    ),
    (dumps([wrapped(histogram=mozilla({"x": 1}))]), "records[0]: bucket key 'x' is not a number"),
    (dumps([wrapped(histogram=mozilla({"81": -2}))]), "records[0]: values['81'] is -2"),
    (
        dumps([wrapped(histogram=mozilla({}, histogram_type="weird"))]),
        "histogram_type 'weird' is not one of",
    ),
    (dumps([wrapped(histogram=mozilla({}, histogram_type=9))]), "histogram_type 9 is not one of"),
    (
        dumps([wrapped(histogram=mozilla({}, bucket_count=10**9))]),
        "bucket_count 1000000000 is outside",
    ),
    (dumps([wrapped(histogram=mozilla({}, range=[5]))]), "needs 'range' [min, max]"),
    (dumps([wrapped(histogram=mozilla({}, range=[10, 1]))]), "must have 0 <= min < max"),
    (
        dumps([wrapped(histogram=mozilla({}, histogram_type=1, range=[1, 3]))]),
        "too narrow for 50 linear buckets",
    ),
    (dumps([wrapped(histogram=mozilla({}, sum="big"))]), "records[0]: 'sum' is 'big'"),
    (dumps([wrapped(histogram=[1, 2])]), "records[0]: 'histogram' must be an object"),
    (
        dumps([wrapped(histogram={**mozilla({}), "values": [1]})]),
        "records[0]: 'values' must be an object",
    ),
    (json.dumps(wrapped()).encode() + b"\n{oops}\n", "h.json: line 2: not valid JSON"),
    (json.dumps(wrapped()).encode() + b'\n{"probe": "B", "bu', "h.json: line 2: truncated JSON"),
    (dumps(mozilla({})), "a bare Mozilla histogram has no probe name"),
    (
        dumps({"payload": {"histograms": {"GC_MS": mozilla({})}}, "application": {}}),
        "application.buildId: no build id",
    ),
    (
        dumps({"payload": {}, "application": {"buildId": "1"}}),
        "a Telemetry ping without histograms",
    ),
    (
        dumps({"payload": {"histograms": {"GC_MS": 5}}, "application": {"buildId": "1"}}),
        "payload.histograms.GC_MS: expected a histogram object",
    ),
    (dumps({"response": []}), "an empty GLAM response"),
    (
        dumps([glam_row("1", os="A", histogram={"0": 5, "1": 3}), glam_row("1", os="B")]),
        "records[0]: its per-OS rows mix proportions and counts",
    ),
    (
        dumps({"response": [glam_row("1"), glam_row("1")]}),
        "response[1]: a second row for probe 'GC_MS', build 1, os '*' (the first is response[0])",
    ),
    (dumps({"response": [glam_row("1"), {"x": 1}]}), "response[1]: expected a GLAM row"),
    (
        dumps({"response": [glam_row("1", histogram={"0": -0.5})]}),
        "response[0]: histogram['0'] is -0.5",
    ),
    (
        dumps({"response": [glam_row("*", version=None)]}),
        "response[0]: build_id '*' (a per-version aggregate) without a 'version'",
    ),
    (
        dumps({"response": [glam_row("1", os="A", histogram={"0": 1.0}), glam_row("1", os="B")]}),
        "response[1]: its buckets differ from those of response[0]",
    ),
]


@pytest.mark.parametrize(("data", "expected"), BAD_INPUTS)
def test_bad_input_names_the_record(data: bytes, expected: str) -> None:
    assert expected in error_of(data)


def test_a_bad_key_in_a_locator_stays_on_one_line() -> None:
    message = error_of({"A\nB": mozilla({"9": 1})}, build_id="1")
    assert "A\\nB" in message


def test_too_many_glam_buckets() -> None:
    histogram = {str(i): 0 for i in range(MAX_BUCKETS + 1)}
    assert "response[0]: more than" in error_of({"response": [glam_row("1", histogram=histogram)]})


def test_size_limits_on_input_and_on_inflation(tmp_path: Path) -> None:
    data = dumps([plain(str(i)) for i in range(200)])
    with pytest.raises(HistogramError, match="larger than the limit of 1,000 bytes"):
        parse_histogram_file(data, max_bytes=1_000)
    path = tmp_path / "big.json"
    path.write_bytes(data)
    with pytest.raises(HistogramError, match=r"big.json: .*bytes on disk"):
        parse_histogram_file(path, max_bytes=1_000)
    bomb = gzip.compress(b" " * 5_000_000 + data)
    assert len(bomb) < 100_000
    with pytest.raises(HistogramError, match="decompresses to more than the limit"):
        parse_histogram_file(bomb, max_bytes=1_000_000)


def test_corrupt_and_truncated_gzip() -> None:
    data = gzip.compress(dumps([plain()]))
    with pytest.raises(HistogramError, match="truncated gzip stream"):
        parse_histogram_file(data[: len(data) // 2])
    with pytest.raises(HistogramError, match="corrupt gzip stream"):
        parse_histogram_file(b"\x1f\x8b" + b"\x00" * 30)


def test_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(HistogramError, match="missing.json: cannot read the file"):
        parse_histogram_file(tmp_path / "missing.json")


def test_invalid_arguments() -> None:
    with pytest.raises(HistogramError, match="build id 'a b' is not valid"):
        parse(plain(), build_id="a b")
