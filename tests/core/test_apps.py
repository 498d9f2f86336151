"""The admin's deferred autodiscovery (deviations.apps.AdminConfig)."""

import os
import subprocess
import sys
from pathlib import Path

import deviations

_SCRIPT = r"""
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "deviations.settings"
import django
django.setup()
print("deviations.admin" in sys.modules)
from django.contrib import admin
from django.core import checks
from deviations.traces.models import Run
print(checks.run_checks(tags=["admin"]), admin.site.is_registered(Run))
"""


def test_the_admin_modules_wait_for_the_urls_or_the_checks(tmp_path: Path) -> None:
    """Django's set-up (every CLI call) imports no admin module; the admin's system check
    imports them first, so it checks every ModelAdmin even when it runs alone."""
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    done = subprocess.run(  # noqa: S603 (our own interpreter and script)
        [sys.executable, "-c", _SCRIPT], env=env, cwd=Path(deviations.__file__).parents[1],
        capture_output=True, text=True, check=True, timeout=300,
    )
    assert done.stdout.split("\n")[:2] == ["False", "[] True"]


def test_the_admin_site_serves_its_pages(admin_client) -> None:  # noqa: ANN001 (fixture)
    assert admin_client.get("/admin/deviations/run/").status_code == 200
