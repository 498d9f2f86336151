"""Shared fixtures. Trace files are written by ``write_trace``; services by tests/services.py."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
REAL_SERVICES = bool(os.environ.get("CELERY_BROKER_URL"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(
        reason="needs CELERY_BROKER_URL and a PostgreSQL DATABASE_URL (second pass of make test)"
    )
    for item in items:
        if "services" in item.keywords and not REAL_SERVICES:
            item.add_marker(skip)


def renderer_events(
    functions: list[tuple[str, float, float]], pid: int = 7, tid: int = 1
) -> list[dict[str, Any]]:
    """Metadata for a Renderer's CrRendererMain plus X events (name, ts, dur) on it."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "Renderer"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
         "args": {"name": "CrRendererMain"}},
    ]
    events += [
        {"ph": "X", "name": n, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "cat": "t"}
        for n, ts, dur in functions
    ]
    return events


@pytest.fixture
def write_trace(tmp_path: Path) -> Callable[..., Path]:
    """write_trace(name, events=None, raw=None, gz=False) -> path of a trace file."""

    def write(name: str, events: Any = None, raw: bytes | None = None, gz: bool = False) -> Path:
        path = tmp_path / name
        data = raw if raw is not None else json.dumps({"traceEvents": events}).encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        return path

    return write


@pytest.fixture
def simple_events() -> list[dict[str, Any]]:
    """Paint (1000 µs) containing Layout (300 µs) containing Paint (100 µs), then Layout 50."""
    return renderer_events(
        [("Paint", 0, 1000), ("Layout", 100, 300), ("Paint", 150, 100), ("Layout", 2000, 50)]
    )
