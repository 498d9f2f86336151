"""docker-compose.yml is checked here: no Docker engine runs on the test machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
APP = ("web", "worker", "beat", "migrate")


def test_every_service_it_waits_for_has_a_health_check() -> None:
    for name, service in SERVICES.items():
        for needed, how in (service.get("depends_on") or {}).items():
            assert needed in SERVICES, (name, needed)
            if how["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[needed], (name, needed)
            else:
                assert (name, needed, how["condition"]) == (
                    name, "migrate", "service_completed_successfully"
                )


def test_app_processes_share_one_configuration() -> None:
    env = [SERVICES[s]["environment"] for s in APP]
    assert all(e == env[0] for e in env)
    assert env[0]["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")


def test_web_and_workers_share_no_filesystem() -> None:
    """Issue 24: they may run on different hosts. The trace files (uploads waiting for a
    worker, then kept) are in the S3-compatible service of the file, which every app
    process reaches over the network with one key."""
    assert all("volumes" not in SERVICES[s] for s in APP)
    env = SERVICES["web"]["environment"]
    assert env["DEVIATIONS_S3_BUCKET"]
    host, port = env["DEVIATIONS_S3_ENDPOINT_URL"].removeprefix("http://").split(":")
    assert host in SERVICES
    assert f"-s3.port={port}" in SERVICES[host]["command"]
    assert SERVICES[host]["healthcheck"]["test"][-1] == f"http://127.0.0.1:{port}/healthz"
    assert all(SERVICES[s]["depends_on"][host]["condition"] == "service_healthy" for s in APP)
    identities = json.loads(COMPOSE["configs"]["s3-identities"]["content"])["identities"]
    [credentials] = identities[0]["credentials"]
    assert credentials["accessKey"] == env["AWS_ACCESS_KEY_ID"]
    secret = env["AWS_SECRET_ACCESS_KEY"]
    assert secret.startswith("${DEVIATIONS_S3_SECRET_KEY:?")
    assert credentials["secretKey"] == "${DEVIATIONS_S3_SECRET_KEY}"
    assert "-e '.[s3]'" in SERVICES["web"]["build"]["dockerfile_inline"]


def test_state_lives_in_volumes() -> None:
    assert "pgdata:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "redisdata:/data" in SERVICES["redis"]["volumes"]
    assert "s3data:/data" in SERVICES["s3"]["volumes"]
    assert set(COMPOSE["volumes"]) == {"pgdata", "redisdata", "s3data"}


def test_migrations_run_once_before_web_worker_and_beat() -> None:
    """Then the object store's bucket is made (and checked) before anything uses it."""
    assert SERVICES["migrate"]["command"] == [
        "sh", "-c", "python manage.py migrate --noinput && python manage.py prepare_storage"]
    for name in ("web", "worker", "beat"):
        assert "migrate" not in SERVICES[name]["command"]
        assert SERVICES[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
