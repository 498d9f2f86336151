"""Production settings and login throttling (hardening #11)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def _check_deploy(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    clean.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="x" * 50 + "-not-a-real-key-but-long-enough",
                 **env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=clean, capture_output=True, text=True,
    )


def test_check_deploy_is_clean_with_the_documented_variables() -> None:
    result = _check_deploy(DJANGO_HTTPS="1", DJANGO_HSTS_INCLUDE_SUBDOMAINS="1",
                           DJANGO_HSTS_PRELOAD="1")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_names_what_plain_http_lacks() -> None:
    result = _check_deploy()
    assert result.returncode != 0
    for code in ("W004", "W008", "W012", "W016"):
        assert code in result.stderr


@pytest.fixture
def user(db: Any) -> Any:
    cache.clear()
    return get_user_model().objects.create_user("alice", password="right-password")


def test_login_is_throttled_after_failures(client: Any, user: Any, settings: Any) -> None:
    settings.LOGIN_FAILURES_ALLOWED = 5
    for _ in range(5):
        response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200
    locked = client.post("/accounts/login/", {"username": "alice", "password": "right-password"})
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    cache.clear()  # the window has passed
    ok = client.post("/accounts/login/", {"username": "alice", "password": "right-password"})
    assert ok.status_code == 302


def test_admin_login_is_throttled_too(client: Any, user: Any, settings: Any) -> None:
    settings.LOGIN_FAILURES_ALLOWED = 3
    for _ in range(3):
        client.post("/admin/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/admin/login/", {"username": "alice", "password": "y"}).status_code \
        == 429


def test_one_user_mistyping_behind_a_proxy_locks_no_one_else(
    client: Any, user: Any, settings: Any
) -> None:
    """Issue 23: every visitor behind a proxy has its address; the throttle counts the
    account at that address, so bob (and the administrators) still log in."""
    settings.LOGIN_FAILURES_ALLOWED = 3
    get_user_model().objects.create_user("bob", password="bobs-password")
    for _ in range(3):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "right-password"}
                       ).status_code == 429
    assert client.post("/accounts/login/", {"username": "bob", "password": "bobs-password"}
                       ).status_code == 302
    # Guessing one account from many addresses locks it everywhere, at 4 times the limit.
    for k in range(3 * 4):
        client.post("/accounts/login/", {"username": "carol", "password": "x"},
                    REMOTE_ADDR=f"10.0.0.{k}")
    assert client.post("/accounts/login/", {"username": "carol", "password": "x"},
                       REMOTE_ADDR="10.9.9.9").status_code == 429


def test_login_works_while_the_cache_is_down(client: Any, user: Any, monkeypatch: Any) -> None:
    """Issue 23: every login answered 500 while Redis was down; now it logs in,
    unthrottled, with a warning in the log."""
    from django.core.cache.backends.redis import RedisCache

    from deviations.core import login

    monkeypatch.setattr(login, "cache", RedisCache("redis://127.0.0.1:1/0", {}))
    bad = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert bad.status_code == 200
    ok = client.post("/accounts/login/", {"username": "alice", "password": "right-password"})
    assert ok.status_code == 302


@pytest.mark.django_db
def test_demo_user_only_on_the_embedded_default(monkeypatch: Any) -> None:
    from deviations.management.commands import demo as demo_command

    class NotSQLite:
        vendor = "postgresql"

    monkeypatch.setattr(demo_command, "connection", NotSQLite())
    monkeypatch.setattr(demo_command.Command, "_traces", lambda self, runs: None)
    monkeypatch.setattr(demo_command, "ingest_demo_histograms", lambda stdout: None)
    err = io.StringIO()
    call_command("demo", stdout=io.StringIO(), stderr=err)
    assert not get_user_model().objects.filter(username="demo").exists()
    assert "not creating the superuser 'demo'" in err.getvalue()
    call_command("demo", "--demo-user", stdout=io.StringIO(), stderr=err)
    assert get_user_model().objects.get(username="demo").is_superuser
    assert "WARNING: a superuser 'demo'" in err.getvalue()



def _setting(name: str, **env: str) -> str:
    """A setting's value as a fresh process with ``env`` sees it."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATIONS_")}
    code = f"import deviations.settings as s; print(s.{name})"
    return subprocess.run([sys.executable, "-c", code], env={**full, **env}, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_worker_memory_limit_follows_the_analysis_budget() -> None:
    """Celery's worker_max_memory_per_child (KiB) comes from DEVIATIONS_WORKER_MAX_MEMORY_MB,
    by default the analysis budget; 0 turns it off."""
    name = "CELERY_WORKER_MAX_MEMORY_PER_CHILD"
    assert _setting(name) == str(1024 * 1024)
    assert _setting(name, DEVIATIONS_ANALYSIS_MEMORY_MB="512") == str(512 * 1024)
    assert _setting(name, DEVIATIONS_WORKER_MAX_MEMORY_MB="0") == "None"
    assert _setting(name, DEVIATIONS_ANALYSIS_MEMORY_MB="512",
                    DEVIATIONS_WORKER_MAX_MEMORY_MB="1500") == str(1500 * 1024)
