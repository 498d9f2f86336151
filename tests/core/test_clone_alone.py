"""The suite passes on a clone of the repository alone (issue 23): every test that reads
the shared third-party files (``../shared/data``, which CI has) runs here again with them
pointed at an empty folder, and must pass or skip with a reason, never fail."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

_MENTIONS = re.compile(r"SHARED_DATA|shared/data")
_IMPORTS = re.compile(r"^\s*(?:from|import)\s+(tests(?:\.\w+)+)", re.MULTILINE)


def readers() -> list[str]:
    """The test files that read ../shared/data: those that name it (``SHARED_DATA``,
    ``shared/data``) and those importing, at any depth, a module of tests/ that does
    (e.g. the simulations' TracerBench noise). Found, not listed by hand, so a new reader
    is checked the day it is written."""
    sources = {path: path.read_text() for path in (ROOT / "tests").rglob("*.py")}
    module = {".".join(path.relative_to(ROOT).with_suffix("").parts): path
              for path in sources}
    own = {ROOT / "tests" / "conftest.py", Path(__file__).resolve()}
    reading = {path for path, text in sources.items()
               if path not in own and _MENTIONS.search(text)}
    while True:
        more = {path for path, text in sources.items() if path not in reading | own
                and any(module.get(name) in reading for name in _IMPORTS.findall(text))}
        if not more:
            break
        reading |= more
    return sorted(str(p.relative_to(ROOT)) for p in reading if p.name.startswith("test_"))


def test_the_readers_are_found() -> None:
    found = readers()
    for known in ("tests/ingest/test_fuzz.py", "tests/traces/test_real_traces.py",
                  "tests/traces/test_calltree_real.py", "tests/stats/test_verdict_harness.py"):
        assert known in found


@pytest.mark.skipif(bool(os.environ.get("DEVIATIONS_SHARED_DATA")),
                    reason="already running without the shared files")
def test_the_tests_of_shared_files_pass_or_skip_without_them(tmp_path) -> None:
    env = {**os.environ, "DEVIATIONS_SHARED_DATA": str(tmp_path / "absent")}
    env.pop("DATABASE_URL", None)  # the embedded default: this checks files, not services
    env.pop("CELERY_BROKER_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not browser",
         "-rs", *readers()],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "passed" in done.stdout
    assert "are not present at" in done.stdout or "is absent" in done.stdout  # the reasons
