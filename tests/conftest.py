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
# The shared third-party files beside the clone (CI has them); DEVIATIONS_SHARED_DATA points
# elsewhere (tests/core/test_clone_alone.py runs the tests that read them without them).
SHARED_DATA = Path(os.environ.get("DEVIATIONS_SHARED_DATA", ROOT.parent / "shared" / "data"))
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


@pytest.fixture(scope="session", autouse=True)
def media_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The trace files the suite keeps go to a folder of the session, not the project's
    media folder (a test that counts files uses a folder of its own, ``tmp_path``)."""
    from django.test.utils import override_settings

    folder = tmp_path_factory.mktemp("media")
    with override_settings(MEDIA_ROOT=folder):
        yield folder


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


# --- S3-compatible object storage: a real server on loopback (moto's, from PyPI) ----------
S3_KEYS = {"AWS_ACCESS_KEY_ID": "deviations-test", "AWS_SECRET_ACCESS_KEY": "deviations-test"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of an S3-compatible HTTP server in a process of its own (``moto_server``),
    for the session."""
    import socket
    import subprocess
    import sys
    import time

    port = _free_port()
    log = (tmp_path_factory.mktemp("s3") / "moto.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert server.poll() is None, "the S3 server (moto_server) exited"
            assert time.monotonic() < deadline, "the S3 server (moto_server) did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)
    log.close()


class S3Bucket:
    """A bucket of its own on the test's S3 server, which ``storages["traces"]`` uses."""

    def __init__(self, url: str, name: str) -> None:
        import boto3

        self.url, self.name = url, name
        self.client = boto3.client(
            "s3", endpoint_url=url, region_name="us-east-1",
            aws_access_key_id=S3_KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
        )

    def storage_setting(self, prefix: str = "") -> dict[str, Any]:
        return {"BACKEND": "deviations.core.storage.s3.S3Storage", "OPTIONS": {
            "bucket_name": self.name, "endpoint_url": self.url, "region_name": "us-east-1",
            "access_key": S3_KEYS["AWS_ACCESS_KEY_ID"],
            "secret_key": S3_KEYS["AWS_SECRET_ACCESS_KEY"],
            "location": prefix, "signature_version": "s3v4", "file_overwrite": True,
            "default_acl": None, "addressing_style": "path",
        }}

    def env(self) -> dict[str, str]:
        """What another process (a worker) needs to use the same bucket."""
        return {**S3_KEYS, "DEVIATIONS_S3_BUCKET": self.name, "DEVIATIONS_S3_ENDPOINT_URL":
                self.url, "DEVIATIONS_S3_REGION": "us-east-1",
                "DEVIATIONS_S3_ADDRESSING_STYLE": "path"}

    def keys(self) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", ()))

    def read(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=self.name, Key=key)["Body"].read())


@pytest.fixture
def s3(s3_server: str, settings: Any) -> S3Bucket:
    """A new bucket on the test's S3 server, made the trace storage for this test."""
    import uuid

    bucket = S3Bucket(s3_server, f"t-{uuid.uuid4().hex[:20]}")
    bucket.client.create_bucket(Bucket=bucket.name)
    settings.STORAGES = {**settings.STORAGES, "traces": bucket.storage_setting()}
    return bucket


class LocalFolder:
    """The trace storage's local folder for one test."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def keys(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                      if p.is_file())

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()


@pytest.fixture(params=["local", "s3"])
def trace_storage(request: pytest.FixtureRequest, settings: Any, tmp_path: Path) -> Any:
    """The trace storage of this test, empty: a local folder, then S3 on loopback."""
    if request.param == "s3":
        return request.getfixturevalue("s3")
    settings.MEDIA_ROOT = tmp_path / "media"
    return LocalFolder(tmp_path / "media")
