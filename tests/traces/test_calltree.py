"""Call-tree attribution end to end (deviations.traces.calltree): generated traces with a
planted callee change ingested as runs, the function page's "why", the compare view's
diff (icicle and table), the API and the CLI, runs stored before call trees were."""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from deviations.traces import calltree
from deviations.traces.analysis import analyse_series
from deviations.traces.models import Function, Run, RunCalls, RunTimes, Series
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

SERIES = "calltree.example"
RELEASES = ["1.0", "1.1", "1.2", "1.3"]
#: Callees of RunTask (µs per task) and what they call; V8.Execute is 1.4x slower from 1.2.
CALLEES = {"V8.Execute": 900.0, "Layout": 400.0, "Paint": 300.0}
PLANTED = {"V8.Execute": 1.4}
TASKS = 20


def run_events(rng: random.Random, factor: dict[str, float]) -> list[dict[str, Any]]:
    """TASKS RunTask slices, each: a little self time, then each callee (V8.Execute calls
    V8.Compile inside it), with 3% lognormal noise per run and per slice."""
    level = rng.lognormvariate(0, 0.03)
    spans: list[tuple[str, float, float]] = []
    t = 0.0
    for _ in range(TASKS):
        start = t
        t += 50 * level * rng.lognormvariate(0, 0.03)
        for name, us in CALLEES.items():
            dur = us * factor.get(name, 1.0) * level * rng.lognormvariate(0, 0.03)
            spans.append((name, t, dur))
            if name == "V8.Execute":
                spans.append(("V8.Compile", t + 1, dur / 3))
            t += dur
        spans.append(("RunTask", start, t - start))
        t += 100
    return renderer_events(spans)


def make_series(tmp_path: Path, runs: int = 10) -> Series:
    rng = random.Random(20261126)
    for k, version in enumerate(RELEASES):
        release = get_release(SERIES, version)
        for j in range(runs):
            path = tmp_path / f"{version}-{j}.json"
            path.write_text(json.dumps(run_events(rng, PLANTED if k >= 2 else {})))
            ingest_local_file(release, path, ThreadOptions())
    series = Series.objects.get(name=SERIES)
    # Four releases are too few for the shift rule's release test (it needs p <= 0.001
    # between levels of several releases); the paper rule judges the pair's runs.
    series.default_rule = "paper"
    series.save(update_fields=["default_rule"])
    analyse_series(series.pk)
    return series


@pytest.fixture
def series(tmp_path: Path) -> Series:
    return make_series(tmp_path)


def test_every_run_stores_its_call_tree_with_totals_adding_up(series: Series) -> None:
    run = Run.objects.filter(series=series, status=Run.DONE).first()
    assert run is not None
    caller, callee, us = RunCalls.objects.get(run=run).arrays()
    fids, self_us, total_us, _ = RunTimes.objects.get(run=run).arrays()
    names = dict(Function.objects.filter(series=series).values_list("id", "name"))
    edges = {(names.get(int(a), "ROOT"), names[int(b)]): float(t)
             for a, b, t in zip(caller, callee, us, strict=True)}
    assert set(edges) == {("ROOT", "RunTask"), ("RunTask", "V8.Execute"), ("RunTask", "Layout"),
                          ("RunTask", "Paint"), ("V8.Execute", "V8.Compile")}
    for k, fid in enumerate(fids.tolist()):
        below = us[caller == fid].sum()
        assert self_us[k] + below == pytest.approx(total_us[k], rel=1e-12)


def test_the_planted_callee_is_named_with_its_interval(series: Series) -> None:
    runtask = Function.objects.get(series=series, name="RunTask")
    why = calltree.function_flags(series, runtask, series.default_rule)
    assert [(f["previous"], f["release"], f["verdict"]) for f in why["flags"]] == [
        ("1.1", "1.2", "regression")]
    a = why["flags"][0]["attribution"]
    first = a.parts[0]
    assert first["callee"] == "V8.Execute"
    assert first["significant"]
    planted = 0.4 * CALLEES["V8.Execute"] * TASKS
    assert first["diff_lo"] < planted < first["diff_hi"]
    assert first["share_of_caller"] == pytest.approx(1.0, abs=0.15)
    others = {p["callee"] or "self": p["significant"] for p in a.parts[1:]}
    assert others == {"Layout": False, "Paint": False, "self": False}
    assert first["deviation"] == "regression"  # V8.Execute's own total time is flagged too
    assert a.words.startswith("`RunTask` +")
    assert re.search(r"from `V8\.Execute` \(\+(3[6-9]|4[0-4])%, significant, 95% interval",
                     a.words), a.words


def test_function_page_says_why(client: Client, series: Series) -> None:
    runtask = Function.objects.get(series=series, name="RunTask")
    body = client.get(f"/series/{SERIES}/functions/{runtask.pk}/").content.decode()
    assert "Why its total time changed" in body
    assert "from `V8.Execute`" in body


def test_compare_view_draws_the_diff_and_the_table(client: Client, series: Series) -> None:
    response = client.get(f"/series/{SERIES}/compare/", {"base": "1.1", "new": "1.2"})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="calltree-chart"' in body
    assert '"icicle"' in body
    assert 'id="calltree-table"' in body
    diff = calltree.release_calltree(series, "1.1", "1.2")
    significant = {(e["caller"], e["callee"]) for e in diff.edges if e["significant"]}
    assert ("RunTask", "V8.Execute") in significant
    assert ("RunTask", "Layout") not in significant
    assert ("RunTask", "Paint") not in significant
    assert diff.tree["labels"][0] == calltree.ROOT_NAME
    assert "V8.Compile" in diff.tree["labels"]
    # from a function: its callees only
    under = calltree.release_calltree(series, "1.1", "1.2", "RunTask")
    assert {x.removesuffix(" ★") for x in under.tree["labels"][1:]} == {
        "V8.Execute", "Layout", "Paint", "V8.Compile"}


def test_api_and_cli(client: Client, series: Series) -> None:
    url = f"/api/series/{SERIES}/compare/calltree"
    data = client.get(url, {"base": "1.1", "new": "1.2", "function": "RunTask"}).json()
    assert data["function"] == "RunTask"
    row = next(e for e in data["edges"] if e["callee"] == "V8.Execute")
    assert row["significant"]
    assert row["diff_lo"] > 0
    assert "from `V8.Execute`" in data["words"]
    assert client.get(url, {"base": "1.1", "new": "9.9"}).status_code == 404
    assert client.get(url, {"base": "1.1", "new": "1.2", "function": "nope"}).status_code == 404
    assert client.get(url, {"base": "1.1", "new": "1.1"}).status_code == 400
    long = client.get(url, {"base": "1.1", "new": "1.2", "function": "f" * 5000})
    assert long.status_code == 400
    assert "function: a name of 5,000 characters" in long.json()["detail"]
    assert client.get(url, {"base": "1.1", "new": "1.2", "function": "a\x00b"}).status_code == 400
    page = client.get(f"/series/{SERIES}/compare/", {"base": "1.1", "new": "1.2",
                                                       "calls": "f" * 5000})
    assert b"function: a name of 5,000 characters" in page.content
    out = io.StringIO()
    call_command("compare", "--series", SERIES, "--base", "1.1", "--new", "1.2",
                 "--calls", "RunTask", stdout=out)
    text = out.getvalue()
    assert text.splitlines()[0].startswith("`RunTask` +")
    out = io.StringIO()
    call_command("compare", "--series", SERIES, "--base", "1.1", "--new", "1.2",
                 "--calls", "RunTask", "--format", "json", stdout=out)
    rows = json.loads(out.getvalue())
    assert {r["callee"] for r in rows} >= {"V8.Execute", "Layout", "Paint"}


def test_runs_stored_before_call_trees_are_said_not_failed(client: Client, series: Series) -> None:
    RunCalls.objects.filter(run__release__version__in=["1.1", "1.2"]).delete()
    runtask = Function.objects.get(series=series, name="RunTask")
    why = calltree.function_flags(series, runtask, series.default_rule)
    assert "reingest --series calltree.example" in why["flags"][0]["error"]
    body = client.get(f"/series/{SERIES}/compare/", {"base": "1.1", "new": "1.2"}).content
    assert b"reingest --series calltree.example" in body
    assert client.get(f"/series/{SERIES}/functions/{runtask.pk}/").status_code == 200
    call_command("reingest", "--series", SERIES, stdout=io.StringIO())
    assert RunCalls.objects.filter(run__series=series).count() == 40
    again = calltree.function_flags(series, runtask, series.default_rule)
    assert again["flags"][0]["attribution"].parts[0]["callee"] == "V8.Execute"


def test_names_are_escaped_in_the_figure() -> None:
    from deviations.traces import charts
    row = {"callee": None, "caller": "<b>x</b>", "base_median": 1.0, "new_median": 2.0,
           "diff": 1.0, "diff_lo": 0.5, "diff_hi": 1.5, "change_pct": 100.0,
           "significant": True}
    tree = {"ids": ["0"], "parents": [""], "labels": ["<img src=x>"], "values": [5.0],
            "change": [100.0], "significant": [True], "hover": [row]}
    fig = json.dumps(charts.calltree_icicle(tree, title="<script>"))
    assert "<img" not in fig
    assert "<b>" not in fig
    assert "<script>" not in fig


def test_the_page_table_keeps_the_largest_edges(client: Client, series: Series,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calltree, "MAX_TABLE_ROWS", 2)
    body = client.get(f"/series/{SERIES}/compare/", {"base": "1.1", "new": "1.2"}).content
    assert b'id="calltree-table-cut"' in body
    table = body.split(b'id="calltree-table"')[1]
    assert table.count(b"<tr class=") == 2
    assert b"V8.Execute</a>" in table  # the largest differences: RunTask's and V8.Execute's


def test_a_metric_series_has_no_call_tree(client: Client) -> None:
    for version in ("1.0", "1.1"):
        get_release("bench.metrics", version, kind=Series.METRICS)
    url = "/api/series/bench.metrics/compare/calltree"
    response = client.get(url, {"base": "1.0", "new": "1.1"})
    assert response.status_code == 400
    assert "holds benchmark results: it has no call tree" in response.json()["detail"]
    series = Series.objects.get(name="bench.metrics")
    assert calltree.function_flags(series, None, "shifts") == {"flags": [], "note": ""}


def test_part_words_name_a_callee_that_is_itself_a_deviation() -> None:
    row = {"kind": "edge", "callee": "V8.ScriptCompiler", "change_pct": -38.0,
           "significant": True, "diff": -458.0, "diff_lo": -552.0, "diff_hi": -364.0}
    assert calltree._part_words({**row, "deviation": "improvement"}).endswith(
        "; itself an improvement)")
    assert calltree._part_words({**row, "deviation": "regression"}).endswith(
        "; itself a regression)")
    assert "itself" not in calltree._part_words(row)


def test_runs_disagree_when_their_interval_does_not_show_the_flags_side() -> None:
    regression = {"verdict": "regression"}
    assert not calltree.runs_disagree(regression, {"diff_lo": 1.0, "diff_hi": 5.0})
    assert calltree.runs_disagree(regression, {"diff_lo": -1.0, "diff_hi": 5.0})
    assert calltree.runs_disagree(regression, {"diff_lo": -5.0, "diff_hi": -1.0})
    improvement = {"verdict": "improvement"}
    assert not calltree.runs_disagree(improvement, {"diff_lo": -5.0, "diff_hi": -1.0})
    assert calltree.runs_disagree(improvement, {"diff_lo": -5.0, "diff_hi": 0.0})
    assert calltree.runs_disagree(regression, {"diff_lo": None, "diff_hi": None})
