"""docker-compose.yml is checked here: no Docker engine runs on the test machines."""

from __future__ import annotations

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
    assert all("media:/media" in SERVICES[s]["volumes"] for s in APP)


def test_state_lives_in_volumes() -> None:
    assert "pgdata:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "redisdata:/data" in SERVICES["redis"]["volumes"]
    assert set(COMPOSE["volumes"]) == {"media", "pgdata", "redisdata"}


def test_migrations_run_once_before_web_worker_and_beat() -> None:
    assert SERVICES["migrate"]["command"] == "python manage.py migrate --noinput"
    for name in ("web", "worker", "beat"):
        assert "migrate" not in SERVICES[name]["command"]
        assert SERVICES[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
