"""The statistics core imports no Django; settings switch on the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items()
             if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**clean, **env},
        capture_output=True, text=True, check=True,
    )
    return result.stdout


def test_stats_package_imports_without_django() -> None:
    out = run_python(
        "import sys, pkgutil, importlib, deviations.stats as s\n"
        "for m in pkgutil.iter_modules(s.__path__):\n"
        "    importlib.import_module('deviations.stats.' + m.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'celery'}))"
    )
    assert out.strip() == "[]"


SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps([s.DATABASES['default']['ENGINE'], s.DATABASES['default']['NAME'], "
    "s.CELERY_TASK_ALWAYS_EAGER, s.EMAIL_BACKEND]))"
)


def test_embedded_default() -> None:
    engine, name, eager, email = json.loads(
        run_python(SHOW, DJANGO_SETTINGS_MODULE="deviations.settings")
    )
    assert engine == "django.db.backends.sqlite3"
    assert name.endswith("db.sqlite3")
    assert eager is True
    assert email == "django.core.mail.backends.console.EmailBackend"


def test_real_services_from_the_environment() -> None:
    engine, name, eager, _ = json.loads(run_python(
        SHOW, DJANGO_SETTINGS_MODULE="deviations.settings",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
    ))
    assert engine == "django.db.backends.postgresql"
    assert name == "test"
    assert eager is False
    engine, name, _, _ = json.loads(run_python(
        SHOW, DJANGO_SETTINGS_MODULE="deviations.settings", DATABASE_URL="sqlite:////tmp/x.db"
    ))
    assert (engine, name) == ("django.db.backends.sqlite3", "/tmp/x.db")
