"""ingest.sniff: a trace or benchmark results, from a file's first bytes."""

from __future__ import annotations

import gzip
import json

import pytest

from ingest.services import looks_like_trace


@pytest.mark.parametrize("head", [
    b'[{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1}]',
    b'  \n[\n  {"ph": "B"',
    b'{"traceEvents": [',
    b'{"metadata": {}, "traceEvents": [',
    b'{"displayTimeUnit":"ns","otherData":{},"events":[{"ph":"X"',
    b"[]",
    b"\x0a\x8c\x01\x12\x04",  # a Perfetto TracePacket: binary
    b"\x0a\x7b\x08\x01\x12",  # one whose length byte reads "{" after a newline
    gzip.compress(b'{"traceEvents": []}'),
    b"",
])
def test_traces(head: bytes) -> None:
    assert looks_like_trace(head)


@pytest.mark.parametrize("head", [
    json.dumps({"context": {}, "benchmarks": [{"name": "BM_a", "run_type": "iteration"}]})
    .encode(),
    json.dumps({"results": [{"command": "sleep 1", "times": [1.0]}]}).encode(),
    json.dumps({"framework": {"name": "talos"}, "suites": []}).encode(),
    b"[task 2026-11-25T10:00:00.000Z] PERFHERDER_DATA: {\"suites\": []}\n",
    b"release,metric,value\n1.0,parse,3.2\n",
    gzip.compress(b"release,metric,value\n1.0,parse,3.2\n"),
    json.dumps({"bench": {"latency": {"value": 1.0}}}).encode(),
])
def test_results(head: bytes) -> None:
    assert not looks_like_trace(head)
