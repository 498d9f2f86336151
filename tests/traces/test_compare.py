"""Any two releases compared (deviations.traces.compare): the page, its exports, the API and
the CLI, on the demo series (planted changes: deviations.traces.demo)."""

from __future__ import annotations

import csv
import html
import io
import itertools
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from deviations.management.commands.demo import SERIES
from deviations.stats.twosample import TWO_SAMPLE_VERDICTS, compare_two
from deviations.traces import compare, demo, selectors
from deviations.traces.models import Release, Run, Series
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db

URL = f"/series/{SERIES}/compare/"
# Paint doubles at release 8; V8.ScriptCompiler is doubled over releases 4-7 only, Layout
# improves at release 12: 3 → 9 holds the Paint regression and nothing else.
BASE, NEW = demo.RELEASES[3], demo.RELEASES[9]


@pytest.fixture
def demo_series(django_db_blocker: Any) -> Series:
    call_command("demo", "--runs", "5", stdout=io.StringIO(), stderr=io.StringIO())
    return Series.objects.get(name=SERIES)


def changed(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    return {r["function"]: r["verdict"] for r in rows
            if r["verdict"] not in ("unchanged", "below_threshold")}


def test_demo_range_finds_the_planted_regression_and_nothing_else(demo_series: Series) -> None:
    result = compare.compare_releases(demo_series, BASE, NEW)
    assert changed(result.rows) == {"Paint": "regression"}
    paint = next(r for r in result.rows if r["function"] == "Paint")
    assert paint["change_pct"] == pytest.approx(100, abs=25)  # ~2x
    assert paint["diff"] == pytest.approx(paint["new_median"] - paint["base_median"])
    assert paint["diff_lo"] > 0
    assert result.rows[0]["function"] == "Paint"  # regressions first
    assert result.test == "welch"  # 5 runs a side: too few for the rank test
    assert result.counts["regression"] == 1


def test_demo_boundary_finds_paint_and_the_end_of_the_digression(demo_series: Series) -> None:
    result = compare.compare_releases(demo_series, demo.RELEASES[7], demo.RELEASES[8])
    assert changed(result.rows) == {"Paint": "regression", "V8.ScriptCompiler": "improvement"}
    layout = compare.compare_releases(demo_series, demo.RELEASES[10], demo.RELEASES[14])
    assert changed(layout.rows) == {"Layout": "improvement"}


def functions_part(response: Any) -> str:
    """The page up to its call-tree diff (which lists every caller and callee whatever
    the functions' filter: tests/traces/test_calltree.py)."""
    return str(response.content.decode().split('id="calltree"')[0])


def test_compare_page_sorts_filters_and_exports(client: Client, demo_series: Series) -> None:
    response = client.get(URL, {"base": BASE, "new": NEW})
    assert response.status_code == 200
    body = response.content.decode()
    assert "1 regression" in body
    assert 'class="verdict-regression"' in body
    only = functions_part(client.get(URL, {"base": BASE, "new": NEW, "show": "regression"}))
    assert "Paint" in only
    assert "Layout" not in only
    named = functions_part(client.get(URL, {"base": BASE, "new": NEW, "q": "lay",
                                            "sort": "name"}))
    assert "Layout" in named
    assert "Paint<" not in named
    data = client.get(URL, {"base": BASE, "new": NEW, "format": "json"}).json()
    assert changed(data) == {"Paint": "regression"}
    assert {r["base"] for r in data} == {BASE}
    text = client.get(URL, {"base": BASE, "new": NEW, "format": "csv",
                            "show": "changed"}).content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["function"] for r in rows] == ["Paint"]
    assert list(rows[0]) == compare.FIELDS
    by_name = client.get(URL, {"base": BASE, "new": NEW, "format": "json", "sort": "name"})
    names = [r["function"] for r in by_name.json()]
    assert names == sorted(names)
    # Issue 23: durations' intervals stop at 0; the page reads in the unit of the other
    # pages (the demo's medians are milliseconds); q-values are never "0.0000"; a change
    # that is not significant is not called "unchanged".
    assert all(r["base_lo"] >= 0 and r["new_lo"] >= 0 for r in data
               if r["base_lo"] is not None and r["new_lo"] is not None)
    assert "Diff (ms)</a> [95% CI]" in body
    assert "(µs)" not in body
    assert "0.0000" not in body
    # The smallest q-value is printed in two significant digits (a fixed 4 decimals read
    # "0.0001" for 7.3e-05, "0.0000" for anything below 5e-05).
    smallest = min(r["q_value"] for r in data if r["q_value"] is not None)
    assert smallest < 5e-4
    assert f">{smallest:.1e}" in body
    assert "<td>unchanged</td>" not in body
    assert "<td>not significant</td>" in body


def test_compare_page_without_releases_shows_the_form(client: Client, demo_series) -> None:
    response = client.get(URL)
    assert response.status_code == 200
    assert b'id="compare-form"' in response.content


def test_release_page_and_matrix_link_to_compare(client: Client, demo_series) -> None:
    release = client.get(f"/series/{SERIES}/releases/{NEW}/").content.decode()
    assert f"/series/{SERIES}/compare/" in release
    assert f'name="new" value="{NEW}"' in release
    matrix = client.get(f"/series/{SERIES}/").content.decode()
    assert f"/series/{SERIES}/compare/" in matrix


def _bad_cases(series: Series) -> list[tuple[dict[str, str], int, str]]:
    empty = Release.objects.create(series=series, version="99.0")
    one = series.releases.get(version=demo.RELEASES[0])
    runs = Run.objects.filter(release=one)
    runs.exclude(pk=runs.first().pk).delete()
    return [
        ({"base": "1.2.3", "new": NEW}, 404, "has no release '1.2.3'"),
        ({"base": NEW, "new": NEW}, 400, "the same release"),
        ({"base": BASE, "new": empty.version}, 400, "'99.0' (new) has 0 done runs"),
        ({"base": one.version, "new": NEW}, 400, f"{one.version!r} (base) has 1 done run:"),
        ({"base": BASE}, 400, "choose the new release"),
    ]


def test_bad_input_is_a_clear_4xx(client: Client, demo_series: Series) -> None:
    for params, status, message in _bad_cases(demo_series):
        page = client.get(URL, params)
        assert page.status_code == status, params
        assert message in html.unescape(page.content.decode())
        exported = client.get(URL, {**params, "format": "csv"})
        assert exported.status_code == status
        api = client.get(f"/api/series/{SERIES}/compare", params)
        if "new" in params:
            assert api.status_code == status, params
            assert message in api.json()["detail"]
        else:  # a missing query parameter: ninja's own 422
            assert api.status_code == 422
    assert client.get("/series/nope/compare/", {"base": BASE, "new": NEW}).status_code == 404
    assert client.get(URL, {"format": "csv"}).status_code == 400  # an export needs both


def test_api_compare(client: Client, demo_series: Series) -> None:
    response = client.get(f"/api/series/{SERIES}/compare", {"base": BASE, "new": NEW})
    assert response.status_code == 200
    data = response.json()
    assert data["counts"]["regression"] == 1
    assert data["test"] == "welch"
    assert changed(data["rows"]) == {"Paint": "regression"}


def test_cli_compare_json_and_csv(demo_series: Series) -> None:
    out = io.StringIO()
    call_command("compare", "--series", SERIES, "--base", BASE, "--new", NEW, stdout=out)
    rows = json.loads(out.getvalue())
    assert changed(rows) == {"Paint": "regression"}
    out = io.StringIO()
    call_command("compare", "--series", SERIES, "--base", BASE, "--new", NEW,
                 "--format", "csv", "--metric", "total", stdout=out)
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert {r["new"] for r in table} == {NEW}
    assert len(table) == len(rows)
    loose = io.StringIO()
    call_command("compare", "--series", SERIES, "--base", BASE, "--new", NEW,
                 "--min-change", "0", "--min-change-us", "0", stdout=loose)
    assert "Paint" in changed(json.loads(loose.getvalue()))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--series", "nope", "--base", "a", "--new", "b"], "no series named 'nope'"),
        (["--series", SERIES, "--base", "1.2.3", "--new", NEW], "has no release '1.2.3'"),
        (["--series", SERIES, "--base", NEW, "--new", NEW], "the same release"),
    ],
)
def test_cli_compare_errors(demo_series: Series, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("compare", *args, stdout=io.StringIO())


def test_appeared_and_vanished_are_never_regressions(write_trace) -> None:
    def add(version: str, names: list[str], k: int) -> None:
        events = renderer_events([(name, 5000 * j, 1000 + 10 * k) for j, name in
                                  enumerate(names)])
        path = write_trace(f"{version}-{k}.json", events)
        ingest_local_file(get_release("s", version), path, ThreadOptions())

    for k in range(3):
        add("1.0", ["Kept", "Gone"], k)
        add("2.0", ["Kept", "New"], k)
    result = compare.compare_releases(Series.objects.get(name="s"), "1.0", "2.0")
    assert changed(result.rows) == {"Gone": "vanished", "New": "appeared"}


# --- the rows made on demand are the rows of before (issue 24) ---------------------------


def _reference_rows(series: Series, base: str, new: str, metric: str) -> list[dict[str, Any]]:
    """Every row as ``compare_releases`` made them before its table (every run's four
    arrays read, every row's dict made, every name read), sorted by verdict."""
    sides = []
    for version in (base, new):
        ids, self_us, total_us, _, runs = selectors.release_times(
            series.releases.get(version=version))
        sides.append((ids, self_us if metric == "self" else total_us, len(runs)))
    function_ids = sorted(set(sides[0][0]) | set(sides[1][0]))
    row = {fid: k for k, fid in enumerate(function_ids)}
    matrices = []
    for ids, values, n_runs in sides:
        m = np.full((len(function_ids), n_runs), np.nan)
        m[[row[i] for i in ids]] = values
        matrices.append(m)
    result = compare_two(matrices[0], matrices[1], fdr=compare.FDR,
                         min_relative_change=series.min_relative_change,
                         min_absolute_change=series.min_absolute_change_us)
    names = selectors.function_names(series)
    columns = {
        "base_median": result.median_a.estimate, "base_lo": np.maximum(result.median_a.lo, 0),
        "base_hi": result.median_a.hi, "new_median": result.median_b.estimate,
        "new_lo": np.maximum(result.median_b.lo, 0), "new_hi": result.median_b.hi,
        "diff": result.diff.estimate, "diff_lo": result.diff.lo, "diff_hi": result.diff.hi,
        "change_pct": 100.0 * result.relative, "p_value": result.p_value,
        "q_value": result.q_value,
    }
    rows = []
    for k, fid in enumerate(function_ids):
        r: dict[str, Any] = {"function": names[fid], "function_id": fid, "base": base,
                             "new": new,
                             "verdict": TWO_SAMPLE_VERDICTS[int(result.verdict[k])]}
        for key, values in columns.items():
            v = float(values[k])
            r[key] = v if math.isfinite(v) else None
        rows.append(r)
    return _reference_sort(rows, "verdict")


def _magnitude(row: dict[str, Any]) -> float:
    return -abs(row["change_pct"]) if row["change_pct"] is not None else 0.0


def _reference_sort(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    rank = {v: k for k, v in enumerate(compare.VERDICT_ORDER)}
    keys: dict[str, Any] = {
        "verdict": lambda r: (rank[r["verdict"]], _magnitude(r), r["function"]),
        "change": lambda r: (_magnitude(r), r["function"]),
        "diff": lambda r: (-abs(r["diff"] or 0.0), r["function"]),
        "name": lambda r: r["function"],
        "p": lambda r: (r["p_value"] if r["p_value"] is not None else 2.0, r["function"]),
    }
    return sorted(rows, key=keys[sort])


def _reference_filter(rows: list[dict[str, Any]], q: str, show: str) -> list[dict[str, Any]]:
    changed = {"regression", "improvement", "appeared", "vanished"}
    return [r for r in rows if q.lower() in r["function"].lower()
            and (show == "all" or r["verdict"] == show
                 or (show == "changed" and r["verdict"] in changed))]


def _same_rows_as_before(series: Series, base: str, new: str) -> None:
    for metric in ("self", "total"):
        reference = _reference_rows(series, base, new, metric)
        result = compare.compare_releases(series, base, new, metric)
        assert list(result.rows) == reference
        assert result.counts == {v: sum(r["verdict"] == v for r in reference)
                                 for v in compare.VERDICT_ORDER}
        for q, show, sort in itertools.product(("", "a", "zz"), compare.SHOW, compare.SORTS):
            rows = result.table.select(q, show, sort)
            expected = _reference_sort(_reference_filter(reference, q, show), sort)
            assert list(rows) == expected, (metric, q, show, sort)
            assert len(rows) == len(expected)
            assert rows[1:4] == expected[1:4]
            if expected:
                assert rows[-1] == expected[-1]


def test_rows_made_on_demand_are_the_rows_of_before(demo_series: Series) -> None:
    _same_rows_as_before(demo_series, BASE, NEW)
    _same_rows_as_before(demo_series, demo.RELEASES[7], demo.RELEASES[8])


def test_rows_tied_on_their_change_are_ordered_by_name_as_before(write_trace: Any) -> None:
    """Appeared and vanished functions have no change: the name orders them (and the
    functions' ids are not in the names' order); their names are read to order them, the
    other rows' names only when a row is made."""
    def add(version: str, names: list[str], k: int) -> None:
        slower = 2 if version == "2.0" else 1  # a different change for each kept function
        events = renderer_events([(name, 5000 * j, 1000 + 10 * k + 3 * j * slower)
                                  for j, name in enumerate(names)])
        path = write_trace(f"{version}-{k}.json", events)
        ingest_local_file(get_release("s", version), path, ThreadOptions())

    common = ["Kept", "Same", "alpha", "Beta"]
    for k in range(3):
        add("1.0", [*common, "Gone", "zeta", "Apple"], k)
        add("2.0", [*common, "New", "aardvark", "Zoo", "middle"], k)
    series = Series.objects.get(name="s")
    result = compare.compare_releases(series, "1.0", "2.0")
    assert result.counts["appeared"] == 4
    assert result.counts["vanished"] == 3
    assert set(result.table.names.values()) == {"Gone", "zeta", "Apple", "New", "aardvark",
                                                "Zoo", "middle"}
    first = result.rows[0:2]
    assert set(result.table.names.values()) == {
        "Gone", "zeta", "Apple", "New", "aardvark", "Zoo", "middle",
        *(r["function"] for r in first)}
    _same_rows_as_before(series, "1.0", "2.0")
