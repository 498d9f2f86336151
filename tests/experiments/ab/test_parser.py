"""ingest.ab: the A/B run formats (docs/formats.md, "A/B runs")."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from ingest.ab import ABFormatError, parse_ab_file

CSV = b"""slice,build,metric,value,unit,direction
0,A,p99,12.4,ms,
0,B,p99,11.3,ms,
1,A,p99,12.3,,
1,B,p99,11.2,,
0,A,rps,4000,,higher_is_better
0,B,rps,4010,,
1,A,rps,3990,,
1,B,rps,3985,,
"""


def test_csv_per_slice_statistics():
    data = parse_ab_file(CSV, name="run.csv")
    assert data.baseline == "A"
    assert data.builds == ("B",)
    assert [m.name for m in data.metrics] == ["p99", "rps"]
    assert data.metrics[0].unit == "ms"
    assert data.metrics[1].direction == "higher_is_better"
    assert data.values[("p99", "B")].tolist() == [11.3, 11.2]
    assert data.slices["p99"] == ("0", "1")
    assert len(data.sha256) == 64
    assert parse_ab_file(gzip.compress(CSV), name="run.csv").to_dict() == data.to_dict()


def test_raw_values_give_a_per_slice_percentile():
    rng = np.random.default_rng(1)
    records = []
    raw = {}
    for s in range(3):
        for b in ("A", "B"):
            v = rng.exponential(10, 200)
            raw[(s, b)] = v
            records.append({"slice": s, "build": b, "metric": "latency", "values": v.tolist()})
    doc = {"metrics": {"latency": {"unit": "ms", "percentile": 95}}, "slices": records}
    data = parse_ab_file(json.dumps(doc).encode(), name="raw.json")
    assert data.metrics[0].raw
    assert data.metrics[0].percentile == 95
    expected = [np.percentile(raw[(s, "B")], 95) for s in range(3)]
    assert data.values[("latency", "B")] == pytest.approx(expected, rel=1e-12)


def test_several_candidates_and_named_baseline():
    rows = [{"slice": s, "build": b, "metric": "p99", "value": 10 + s + i}
            for s in range(3) for i, b in enumerate(["main", "pr-1", "pr-2"])]
    data = parse_ab_file(json.dumps(rows).encode(), name="x.json")
    assert data.baseline == "main"  # no build "A": the first build
    assert data.builds == ("pr-1", "pr-2")
    assert len(data.comparisons()) == 2
    named = parse_ab_file(json.dumps({"baseline": "pr-1", "slices": rows}).encode(), name="x")
    assert named.baseline == "pr-1"


@pytest.mark.parametrize(("raw", "message"), [
    (b"", "run.csv: the file is empty"),
    (b"slice,build,value\n0,A,1\n", "run.csv: line 1: the header needs the columns"),
    (b"slice,build,metric,value\n0,A,p99,abc\n", "run.csv: line 2: value 'abc' is not a number"),
    (b"slice,build,metric,value\n0,A,p99,nan\n", "not a finite number"),
    (b"slice,build,metric,value\n0,A,p99,1e300\n", "is beyond ±1e+12"),
    (b"slice,build,metric,value\n0,A,p99,1\n1,A,p99,2\n", "only build 'A'"),
    (b"slice,build,metric,value\n0,A,p99,1\n0,B,p99,2\n1,A,p99,2\n",
     "metric 'p99', slice '1': build 'B' is missing (have: A)"),
    (b"slice,build,metric,value\n0,A,p99,1\n0,B,p99,2\n", "1 slice pair: at least 2"),
    (b"slice,build,metric,value,direction\n0,A,p,1,up\n", "direction 'up' is not one of"),
    (b"slice,build,metric,value\n0,A,p99\n", "line 2: 3 fields where the header has 4"),
    (b'{"slices": [{"slice": 0, "build": "A", "metric": "p"}]}', "slices[0]: needs slice"),
    (b'{"slices": 3}', "must be a list"),
    (b'{"slices": [], "x": 1}', "unknown key(s) x"),
    (b"{", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_bad_files_are_refused_with_the_file_and_the_reason(raw, message):
    with pytest.raises(ABFormatError) as exc:
        parse_ab_file(raw, name="run.csv")
    assert message in str(exc.value)
    assert str(exc.value).startswith("run.csv: ")


def test_size_limit():
    with pytest.raises(ABFormatError, match="larger than the limit"):
        parse_ab_file(CSV, name="run.csv", max_bytes=10)
