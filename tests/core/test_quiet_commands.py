"""Commands print what they did and nothing else (issue 14: a kombu "No hostname was
supplied" line came out of `demo` and `ingest_histograms` on the embedded default)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import plain_histogram

ROOT = Path(__file__).resolve().parents[2]


def test_ingest_histograms_says_only_what_it_did(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps([plain_histogram("P", str(b), [1, 2, 3]) for b in (1, 2, 3)]))
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               DJANGO_SECRET_KEY_FILE=str(tmp_path / "secret"))

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True)

    manage("migrate", "-v0")
    done = manage("ingest_histograms", str(path))
    assert done.stdout.splitlines() == [
        "ok h.json: 3 histogram(s) of 1 probe(s): 3 new, 0 replaced, 0 unchanged"
    ]
    assert done.stderr == ""
