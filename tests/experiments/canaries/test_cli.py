"""python manage.py canary create|feed|status."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from deviations.experiments.canaries.models import Canary, CanaryBatch

pytestmark = pytest.mark.django_db(transaction=True)  # the CLI commits: tasks run on commit


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("canary", *args, stdout=out)
    return out.getvalue()


def _csv(path: Path, shift: float, n: int = 3000, seed: int = 10, time: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    lines = ["arm,value,timestamp" if time else "arm,value"]
    for i in range(n):
        for arm, loc in (("A", 100.0), ("B", 100.0 + shift)):
            value = rng.normal(loc, 10)
            lines.append(f"{arm},{value:.6f},{i}" if time else f"{arm},{value:.6f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_create_prints_the_id_last() -> None:
    out = run("create", "play", "--bad", "higher", "--tau", "0.1", "--unit", "ms",
              "--owner", "a@example.com")
    canary = Canary.objects.get()
    assert out.strip().splitlines()[-1] == str(canary.pk)
    assert (canary.bad, canary.tau, canary.unit, canary.owners) == (
        "higher", 0.1, "ms", ["a@example.com"])
    as_json = run("create", "other", "--bad", "any", "--format", "json")
    first, last = as_json.strip().splitlines()
    assert json.loads(first)["name"] == "other"
    assert last == str(json.loads(first)["id"])
    with pytest.raises(CommandError, match="alpha"):
        run("create", "x", "--bad", "any", "--alpha", "2")
    exact = run("create", "exact", "--bad", "any", "--resolution", "0")
    assert Canary.objects.get(pk=int(exact.strip().splitlines()[-1])).resolution == 0
    with pytest.raises(CommandError, match="resolution"):
        run("create", "x", "--bad", "any", "--resolution", "0.5")


def test_feed_stops_at_the_decision_and_is_idempotent(tmp_path: Path) -> None:
    cid = run("create", "play", "--bad", "higher").strip().splitlines()[-1]
    path = _csv(tmp_path / "obs.csv", shift=3.0, time=True)
    out = run("feed", cid, str(path), "--batch-size", "1000")
    assert "the canary decided (reject)" in out
    assert "regression" in out
    status = json.loads(run("status", cid, "--format", "json"))
    assert status["decision"] == "reject"
    assert status["headline"] == "regression"
    assert (status["decided_n_a"], status["decided_n_b"]) == (status["n_a"], status["n_b"])
    assert status["n_a"] < 3000
    assert status["p_value"] <= 0.05
    # the default test, named by the status and its words
    assert status["method"] == "ranks"
    text = run("status", cid)
    assert "  test: rank betting test" in text
    assert "a B value exceeds an A value with probability" in text
    dkw = run("create", "seed-000", "--bad", "higher", "--method", "dkw").splitlines()[-1]
    assert json.loads(run("status", dkw, "--format", "json"))["method"] == "dkw"
    batches = CanaryBatch.objects.count()
    again = run("feed", cid, str(path), "--format", "json")
    assert json.loads(again)["batches"] == 0
    assert CanaryBatch.objects.count() == batches


def test_feed_a_and_a_keeps_going(tmp_path: Path) -> None:
    cid = run("create", "aa", "--bad", "any").strip().splitlines()[-1]
    out = run("feed", cid, str(_csv(tmp_path / "aa.csv", shift=0.0, n=2000)))
    assert "keep going" in out
    status = json.loads(run("status", cid, "--format", "json", "--change", "1"))
    assert (status["decision"], status["n_a"], status["n_b"]) == ("continue", 2000, 2000)
    assert status["narrow_enough"] is False
    assert status["samples_needed"] > 2000


def test_bad_files_name_the_line(tmp_path: Path) -> None:
    cid = run("create", "play", "--bad", "higher").strip().splitlines()[-1]
    for text, message in [
        ("arm,val\nA,1\n", r"bad.csv:1: the header must be"),
        ("arm,value\nA,1\nC,2\n", r"bad.csv:3: arm 'C' is not A or B"),
        ("arm,value\nA,1\nB,x\n", r"bad.csv:3: value 'x' is not a number"),
        ("arm,value\nA,1\nB,nan\n", r"bad.csv:3: value 'nan' is not a finite number"),
        ("arm,value\n", r"bad.csv: no observations"),
    ]:
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(CommandError, match=message):
            run("feed", cid, str(tmp_path / "bad.csv"))
    assert not CanaryBatch.objects.exists()
    with pytest.raises(CommandError, match="no canary 999"):
        run("status", "999")
    with pytest.raises(CommandError, match="missing.csv"):
        run("feed", cid, str(tmp_path / "missing.csv"))


def test_count_canary_from_timestamps(tmp_path: Path) -> None:
    cid = run("create", "plays", "--bad", "lower", "--count").strip().splitlines()[-1]
    rng = np.random.default_rng(11)
    t_a, t_b = np.cumsum(rng.exponential(1.0, 3000)), np.cumsum(rng.exponential(1.5, 3000))
    rows = sorted([("A", t) for t in t_a] + [("B", t) for t in t_b], key=lambda r: r[1])
    path = tmp_path / "plays.csv"
    path.write_text("arm,timestamp\n" + "".join(f"{a},{t:.6f}\n" for a, t in rows))
    out = run("feed", cid, str(path), "--batch-size", "500")
    assert "regression" in out
    assert "wait between events" in out
