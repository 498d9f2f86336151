"""The CI gate: ``manage.py check_release`` (exit codes, Markdown) and its API."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone

from deviations.alerts.models import Alert
from deviations.traces.gate import md_text
from deviations.traces.models import Release, Run, Series
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

GITHUB = "https://github.com/o/r/compare/{from}...{to}"
PAINT = {
    "1.0": [100, 104, 98, 101, 99],
    "1.1": [102, 99, 103, 100, 101],
    "1.2": [300, 310, 295, 305, 302],  # regression
    "1.3": [301, 299, 306, 297, 303],
}


def ingest(tmp_path: Path, versions: dict[str, list[float]], series: str = "s") -> None:
    """One run per value: Paint with that duration, Layout steady; revision "c<version>"."""
    for version, durations in versions.items():
        files = []
        for k, dur in enumerate(durations):
            path = tmp_path / f"{version}-{k}.json"
            path.write_text(json.dumps(renderer_events(
                [("Paint", 0, dur), ("Layout", 10_000, 100 + k)])))
            files.append(str(path))
        call_command("ingest_traces", "--series", series, "--release", version,
                     "--revision", f"c{version}", *files, stdout=io.StringIO())


def gate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("check_release", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def series(tmp_path: Path) -> Series:
    s = Series.objects.create(name="s", default_rule="paper", log_url_template=GITHUB)
    ingest(tmp_path, PAINT)
    return s


def test_an_untriaged_regression_fails_the_gate_with_its_markdown(series) -> None:
    code, out, err = gate("--series", "s", "--release", "1.2")
    assert code == 1
    assert "fail: 1 untriaged regression from 1.1 to 1.2: Paint" in err
    paint = Alert.objects.get(subject="Paint", to_label="1.2")
    assert out.startswith("### ❌ deviations: s 1.2\n")
    assert "Compared with 1.1 (rule: seed 003 paper rule); commits " \
        "[c1.1..c1.2](https://github.com/o/r/compare/c1.1...c1.2)." in out
    assert "Release page: http://127.0.0.1:8000/series/s/releases/1.2/" in out
    # The regression with its interval (µs and %), p-value and status, linked to its alert.
    row = next(line for line in out.splitlines() if line.startswith("| ❌"))
    assert row.startswith(f"| ❌ | [Paint (self and total time)](http://127.0.0.1:8000"
                          f"/alerts/{paint.pk}/) | +201 µs [+180 µs, +222 µs] | +199.0% [")
    assert row.endswith("| 3.9e-06 | new |")
    assert "#### Improvements (0)" in out


def test_a_triaged_regression_no_longer_fails_the_gate(series) -> None:
    Alert.objects.filter(subject="Paint", to_label="1.2").update(status=Alert.ACKNOWLEDGED)
    code, out, err = gate("--series", "s", "--release", "1.2")
    assert (code, err) == (0, "")
    assert out.startswith("### ✅ deviations: s 1.2\n\nno untriaged regression from 1.1 "
                          "to 1.2\n")
    assert "| acknowledged |" in out  # still listed, as triaged


def test_a_regression_downstream_of_another_group_no_longer_fails_the_gate(series) -> None:
    """A sheriff linked its group to the group that causes it (alerts.downstream): it is
    triaged with that one, here as on the alerts pages and in emails."""
    from deviations.alerts.models import AlertGroup

    paint = Alert.objects.get(subject="Paint", to_label="1.2")
    cause = AlertGroup.objects.create(detector="trace", family="other", from_label="a",
                                      to_label="b", from_key="a", to_key="b")
    AlertGroup.objects.filter(pk=paint.group_id).update(upstream=cause)
    code, out, err = gate("--series", "s", "--release", "1.2")
    assert (code, err) == (0, "")
    assert f"| new · downstream of group {cause.pk} |" in out


def test_a_release_without_regression_passes_and_markdown_goes_to_a_file(series, tmp_path
                                                                         ) -> None:
    target = tmp_path / "gate.md"
    code, out, _ = gate("--series", "s", "--release", "1.3", "--markdown", str(target))
    assert code == 0
    assert out == "pass: no untriaged regression from 1.2 to 1.3\n"
    text = target.read_text()
    assert "#### Regressions (0)" in text
    assert "[c1.2..c1.3](" in text
    # The first release has nothing before it.
    code, out, _ = gate("--series", "s", "--release", "1.0")
    assert code == 0
    assert "nothing to compare it with" in out


@pytest.mark.parametrize("args", [("--series", "nope", "--release", "1.2"),
                                  ("--series", "s", "--release", "9.9")])
def test_unknown_series_or_release_exits_2(series, args) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as exc:
        call_command("check_release", *args, stdout=io.StringIO())
    assert exc.value.returncode == 2
    assert "no series 'nope'" in str(exc.value) or "has no release '9.9'" in str(exc.value)


def test_an_ingest_in_progress_or_a_stale_analysis_exits_3(series) -> None:
    release = Release.objects.get(series=series, version="1.3")
    pending = Run.objects.create(series=series, release=release, sha256="0" * 64,
                                 file_name="late.json", size_bytes=1)
    code, out, err = gate("--series", "s", "--release", "1.3")
    assert code == 3
    assert "not_ready: 1 run of 1.3 still being ingested" in err
    assert out.startswith("### ⏳ deviations: s 1.3")
    assert "Regressions" not in out
    pending.delete()
    # A run finished after the stored analysis: its verdicts are not judged yet.
    Run.objects.filter(release=release).update(finished=timezone.now() + timedelta(hours=1))
    code, _, err = gate("--series", "s", "--release", "1.2")
    assert code == 3
    assert "analysis has not seen every finished run" in err


def test_provisional_regressions_count_only_when_asked(tmp_path) -> None:
    """Level-shift rule: the step at 1.5 has one release after it, too few to be final."""
    Series.objects.create(name="t")
    rng = np.random.default_rng(1)
    ingest(tmp_path, {f"1.{i}": list(100 + rng.normal(0, 2, 12) + 100 * (i >= 5))
                      for i in range(7)}, "t")
    assert Alert.objects.get(subject="Paint").provisional
    code, out, _ = gate("--series", "t", "--release", "1.5")
    assert code == 0
    assert "(1 provisional one not counted: --include-provisional counts them)" in out
    assert "| ⏳ | [Paint" in out
    assert "[c1.4..c1.5]" not in out
    assert "commits c1.4..c1.5." in out
    code, out, _ = gate("--series", "t", "--release", "1.5", "--include-provisional")
    assert code == 1
    assert "| ❌ | [Paint" in out


def test_names_are_escaped_in_the_markdown() -> None:
    assert md_text("<img src=x>|`a`*_[b](c)\nx") == \
        "\\<img src=x\\>\\|\\`a\\`\\*\\_\\[b\\](c) x"


def test_the_api_gives_the_same_verdict(client, series) -> None:
    got = client.get("/api/series/s/releases/1.2/check").json()
    assert (got["verdict"], got["exit_code"], got["previous"]) == ("fail", 1, "1.1")
    assert [f["subject"] for f in got["blocking"]] == ["Paint"]
    assert got["range"]["log_url"] == "https://github.com/o/r/compare/c1.1...c1.2"
    assert got["markdown"].startswith("### ❌ deviations: s 1.2")
    Alert.objects.filter(subject="Paint").update(status=Alert.INVALID)
    got = client.get("/api/series/s/releases/1.2/check").json()
    assert (got["verdict"], got["blocking"]) == ("pass", [])
    assert client.get("/api/series/s/releases/9.9/check").status_code == 404
