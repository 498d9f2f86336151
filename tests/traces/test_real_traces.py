"""Every real trace in ../shared/data/traces goes through the CLI ingest (not only the parser).

The TracerBench runs form a real release series (Chrome canary builds, several runs each):
they are ingested release by release, as a user would, and every run must be stored. The
fixtures each become one run: done when they hold a CrRendererMain thread (MANIFEST), failed
with a reason naming the file otherwise.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.traces.models import Release, Run, Series
from tests.conftest import SHARED_DATA

TRACES = SHARED_DATA / "traces"
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not TRACES.is_dir(), reason=f"{TRACES} is absent (shared data)"),
]


def manifest() -> dict[str, dict[str, str]]:
    with (SHARED_DATA / "MANIFEST_traces.csv").open() as f:
        return {Path(row["file"]).name: row for row in csv.DictReader(f)}


def ingest_tracerbench(series: str) -> dict[str, list[Path]]:
    """Every TracerBench run into ``series``, one release per Chrome version (the CLI,
    as a user would); the files of each version."""
    by_version: dict[str, list[Path]] = defaultdict(list)
    with (TRACES / "tracerbench_runs_INDEX.csv").open() as f:
        for row in csv.DictReader(f):
            by_version[row["chrome"]].append(TRACES / "tracerbench_runs" / row["file"])
    for version, files in by_version.items():
        call_command("ingest_traces", "--series", series, "--release", version,
                     *map(str, files), stdout=io.StringIO())
    return by_version


def test_tracerbench_release_series() -> None:
    by_version = ingest_tracerbench("tracerbench")
    assert Run.objects.filter(status=Run.DONE).count() == sum(map(len, by_version.values()))
    versions = list(Release.objects.values_list("version", flat=True))
    assert versions == sorted(by_version, key=lambda v: tuple(int(p) for p in v.split(".")))
    out = io.StringIO()
    call_command("export", "--series", "tracerbench", "--what", "selftimes", stdout=out)
    rows = json.loads(out.getvalue())
    assert {r["run"] for r in rows} == {p.name for files in by_version.values() for p in files}
    assert all(r["self_us"] >= 0 and r["total_us"] >= r["self_us"] - 1e-6 for r in rows)


def test_fixtures_ingest_or_fail_with_a_reason() -> None:
    info = manifest()
    folders = [TRACES / "fixtures", TRACES / "cross_version"]
    files = sorted(p for folder in folders for p in folder.iterdir())
    out = io.StringIO()
    with pytest.raises(CommandError):  # some fixtures have no renderer main thread
        call_command("ingest_traces", "--series", "fixtures", "--release", "1",
                     *map(str, files), stdout=out)
    for path in files:
        run = Run.objects.get(file_name=path.name)
        has_main = int(info[path.name]["crrenderermain_threads"]) > 0
        assert (run.status == Run.DONE) == has_main, (path.name, run.error)
        if not has_main:
            assert run.error.startswith(f"{path.name}: "), run.error
            assert f"FAILED {path.name}: " in out.getvalue()


def test_tracerbench_verdicts_a_performance_engineer_can_trust(client) -> None:  # noqa: ANN001
    """Issues 12 and 19 on real data: the TracerBench runs as one series (11 of its 20
    releases have one run). Every release is a column and listed; the shift rule judges
    one-run releases; every flag's numbers agree with it (a regression has diff > 0 and an
    interval above 0, an improvement the reverse), no flag is below the series' minimum
    practical change, and no function absent from every run of a release is a regression
    or an improvement there (the 73 → 74 headed/headless switch)."""
    by_version = ingest_tracerbench("tb")
    series = Series.objects.get(name="tb")
    assert series.default_rule == "shifts"
    single = {v for v, files in by_version.items() if len(files) < 2}
    assert len(single) == 11
    html = client.get("/series/tb/").content.decode()
    assert all(v in html for v in by_version)
    assert "releases of this series have one run" not in html  # the shift rule judges them
    home = client.get("/?format=json").json()
    newest = max(by_version, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert (home[0]["latest_to"], home[0]["releases_lacking_runs"]) == (newest, "")
    out = io.StringIO()
    call_command("export", "--series", "tb", "--what", "selftimes", stdout=out)
    present = {(r["release"], r["function"]) for r in json.loads(out.getvalue())
               if r["self_us"] > 0}
    kinds: set[str] = set()
    crossing_one_run = 0
    for rule, metric in (("shifts", "self"), ("shifts", "total"), ("paper", "self")):
        out = io.StringIO()
        call_command("export", "--series", "tb", "--what", "deviations", "--rule", rule,
                     "--metric", metric, stdout=out)
        rows = json.loads(out.getvalue())
        kinds |= {r["verdict"] for r in rows}
        flags = [r for r in rows if r["verdict"] in ("regression", "improvement")]
        assert flags, rule  # real changes remain
        for r in flags:
            up = r["verdict"] == "regression"
            assert (r["diff"] > 0) == up, r
            assert (r["diff_lo"] > 0) if up else (r["diff_hi"] < 0), r
            assert r["p_value"] is not None, r
            assert r["p_value"] <= 0.05, r
            assert abs(r["diff"]) >= series.min_absolute_change_us, r
            assert r["relative"] is None or abs(r["relative"]) >= series.min_relative_change, r
            assert (r["from_release"], r["function"]) in present, r
            assert (r["to_release"], r["function"]) in present, r
            crossing_one_run += rule == "shifts" and bool(
                {r["from_release"], r["to_release"]} & single)
        for r in rows:
            if r["verdict"] == "appeared":
                assert (r["from_release"], r["function"]) not in present, r
            if r["verdict"] == "vanished":
                assert (r["to_release"], r["function"]) not in present, r
    assert {"appeared", "vanished"} <= kinds
    assert crossing_one_run > 0  # one-run releases are judged
