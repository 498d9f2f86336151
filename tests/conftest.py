"""Shared fixtures. Trace files are written by ``write_trace``; services by tests/services.py."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests: no per-example time limit (CI machines are shared and noisy; speed is the
# benchmarks' business) and a fixed seed, so that a run is reproducible.
hypothesis_settings.register_profile("deviations", deadline=None, derandomize=True, database=None)
hypothesis_settings.load_profile("deviations")

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


# Browser tests: Debian's Chromium driven by Playwright (never `playwright install`).
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.fixture
def page(live_server: Any) -> Iterator[Any]:
    """A Chromium page on the live test server; screenshots go to ARTIFACTS."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; the ORM calls the
    # tests make between page actions are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 900}
        )
        pg = context.new_page()
        pg.set_default_timeout(20_000)
        yield pg
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture(autouse=True)
def in_process_tasks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tasks run in-process except in tests marked ``services``, which use the real worker.

    The second pass of ``make test`` configures a broker; the other tests then still check
    the ingest logic on PostgreSQL without waiting for a worker.
    """
    from deviations.celery import app

    if "services" in request.keywords:
        yield
        return
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


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
def committed(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """committed(fn, *args): call fn, then run what it left for on-commit, as a real commit would.

    Non-transactional tests never commit, so tasks queued with transaction.on_commit would
    otherwise never run.
    """

    def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return call


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


@pytest.fixture
def write_histograms(tmp_path: Path) -> Callable[..., Path]:
    """write_histograms(name, records) -> path of a JSON file holding the list of records."""

    def write(name: str, records: list[dict[str, Any]]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(records))
        return path

    return write


def plain_histogram(probe: str, build_id: str, counts: Any, **extra: Any) -> dict[str, Any]:
    """A record of the plain form on buckets [0, 1), [1, 2), ... (docs/formats.md)."""
    counts = [int(c) for c in counts]
    return {"probe": probe, "build_id": build_id, "edges": list(range(len(counts) + 1)),
            "counts": counts, **extra}
