"""The analysis pipeline: stored matrices, exports of stats and deviations, idempotence."""

from __future__ import annotations

import inspect
import io
import itertools
import json
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count
from django.utils import timezone

from deviations.stats.intervals import mean_ci, median_ci
from deviations.stats.releases import (
    IMPROVEMENT,
    REGRESSION,
    compare,
    compare_matrix,
    practical_verdicts,
    shift_verdicts,
    shift_windows,
)
from deviations.stats.releases.rules import MAX_AFTER, MAX_BEFORE
from deviations.traces import analysis, demo, selectors
from deviations.traces.models import (
    AnalysisBlock,
    Function,
    Release,
    Run,
    RunTimes,
    Series,
    SeriesAnalysis,
)
from tests.conftest import renderer_events

pytestmark = pytest.mark.django_db


# The whole series as one array, the input of a full compare_matrix: the oracle the stored,
# incrementally updated analysis is checked against.
@dataclass(frozen=True)
class SeriesSamples:
    """Run times of the analysable releases: arrays of shape (functions, releases, runs)."""

    release_ids: np.ndarray
    function_ids: np.ndarray
    self_us: np.ndarray
    total_us: np.ndarray

    def metric(self, name: str) -> np.ndarray:
        return self.self_us if name == "self" else self.total_us


def load_samples(series: Series) -> SeriesSamples:
    """The done runs of releases with at least two of them, NaN-padded."""
    columns = analysis.current_columns(series)
    loaded = analysis.load_columns(columns, range(len(columns.release_ids)))
    function_ids = analysis._union_ids(loaded.values())
    blocks = [analysis._scatter(function_ids, loaded[c]) for c in range(len(columns.release_ids))]
    return SeriesSamples(
        columns.release_ids,
        function_ids,
        analysis._padded([b[0] for b in blocks]),
        analysis._padded([b[1] for b in blocks]),
    )


def export(what: str, **opts: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    args = ["--series", "s", "--what", what]
    for key, value in opts.items():
        args += [f"--{key}", value]
    call_command("export", *args, stdout=out)
    return json.loads(out.getvalue())


def ingest_series(tmp_path: Path, paint: dict[str, list[float]]) -> None:
    """One run per value: Paint with that duration, Layout steady at 100 µs."""
    for version, durations in paint.items():
        files = []
        for k, dur in enumerate(durations):
            path = tmp_path / f"{version}-{k}.json"
            events = renderer_events([("Paint", 0, dur), ("Layout", 10_000, 100 + k)])
            path.write_text(json.dumps(events))
            files.append(str(path))
        call_command("ingest_traces", "--series", "s", "--release", version, *files,
                     stdout=io.StringIO())


PAINT = {
    "1.0": [100, 104, 98, 101, 99],
    "1.1": [102, 99, 103, 100, 101],
    "1.2": [300, 310, 295, 305, 302],  # regression
    "1.3": [301, 299, 306, 297, 303],
}


def test_stats_and_deviations_match_the_statistics_core(tmp_path: Path) -> None:
    ingest_series(tmp_path, PAINT)
    assert SeriesAnalysis.objects.count() == 1
    # One block per (metric, estimator, release): 2 × 2 × 4.
    assert AnalysisBlock.objects.count() == 16
    stats = {(r["release"], r["function"]): r for r in export("stats")}
    for version, values in PAINT.items():
        row = stats[(version, "Paint")]
        expected = median_ci(values)
        assert (row["median"], row["median_lo"], row["median_hi"]) == pytest.approx(
            (expected.estimate, expected.lo, expected.hi)
        )
        assert row["mean"] == pytest.approx(mean_ci(values).estimate)
        assert row["n"] == 5
    deviations = {(r["function"], r["to_release"]): r for r in export("deviations", rule="paper")}
    for before, after in [("1.0", "1.1"), ("1.1", "1.2"), ("1.2", "1.3")]:
        row = deviations[("Paint", after)]
        expected = compare(PAINT[before], PAINT[after])
        assert row["from_release"] == before
        assert row["verdict"] == expected.verdict
        assert row["diff"] == pytest.approx(expected.diff)
        assert row["gap"] == pytest.approx(expected.gap)
    assert deviations[("Paint", "1.2")]["verdict"] == "regression"
    assert deviations[("Layout", "1.2")]["verdict"] == "nonsignificant_overlap"


def test_export_options_and_csv(tmp_path: Path) -> None:
    ingest_series(tmp_path, PAINT)
    total = export("deviations", metric="total", rule="shifts", estimator="mean")
    assert {r["verdict"] for r in total} <= {
        "regression", "improvement", "significant_overlap", "nonsignificant_overlap"
    }
    out = io.StringIO()
    call_command("export", "--series", "s", "--what", "stats", "--format", "csv", stdout=out)
    assert out.getvalue().splitlines()[0] == (
        "release,function,n,median,median_lo,median_hi,mean,mean_lo,mean_hi"
    )


def test_no_analysis_is_a_clear_error(tmp_path: Path) -> None:
    ingest_series(tmp_path, {"1.0": [100, 101]})
    with pytest.raises(CommandError, match="no analysis yet"):
        export("stats")
    out = io.StringIO()
    call_command("analyse", "--series", "s", stdout=out)
    assert "fewer than two releases" in out.getvalue()


def test_analysis_is_idempotent(tmp_path: Path) -> None:
    ingest_series(tmp_path, PAINT)
    series = Series.objects.get(name="s")
    before = stored_bytes()
    assert analysis.analyse_series(series.pk) == "up to date"
    assert stored_bytes() == before  # nothing written
    out = io.StringIO()
    call_command("analyse", "--series", "s", "--full", stdout=out)
    assert "2 functions × 4 releases analysed" in out.getvalue()
    after = stored_bytes()
    assert after[0] != before[0]  # written again (a new generation)...
    assert after[1:] == before[1:]  # ...with the same data


def stored_bytes() -> tuple[object, ...]:
    """The stored analysis: its generation, rows and every block's bytes."""
    head = SeriesAnalysis.objects.get()
    blocks = sorted(
        tuple(bytes(v) if isinstance(v, bytes | memoryview) else v for v in row)
        for row in AnalysisBlock.objects.values_list(
            "release_id", "metric", "estimator", "row_start", *analysis.store.BLOCK_FIELDS
        )
    )
    return head.generation, bytes(head.run_counts), bytes(head.function_ids), blocks


def test_analyse_all_series(tmp_path: Path) -> None:
    ingest_series(tmp_path, PAINT)
    SeriesAnalysis.objects.all().delete()  # as migration 0004 left them
    AnalysisBlock.objects.all().delete()
    Series.objects.create(name="empty")
    out = io.StringIO()
    call_command("analyse", "--all", stdout=out)
    assert out.getvalue().splitlines() == [
        "empty: up to date",
        "s: 2 functions × 4 releases analysed",
    ]
    assert len(export("stats")) == 8
    with pytest.raises(CommandError, match="one of the arguments --series --all"):
        call_command("analyse", stdout=out)


def test_samples_treat_absent_functions_as_zero(tmp_path: Path) -> None:
    ingest_series(tmp_path, {"1": [10, 11], "2": [12, 13]})
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(renderer_events([("Rare", 0, 7)])))
    call_command("ingest_traces", "--series", "s", "--release", "2", str(extra),
                 stdout=io.StringIO())
    samples = load_samples(Series.objects.get(name="s"))
    assert samples.self_us.shape == (3, 2, 3)  # Layout, Paint, Rare × 2 releases × 3 runs
    rare = list(samples.function_ids).index(max(samples.function_ids))
    np.testing.assert_array_equal(samples.self_us[rare, 1], [0, 0, 7])
    assert np.isnan(samples.self_us[rare, 0, 2])  # release 1 has two runs: padding


def test_demo_analysis_finds_the_planted_changes() -> None:
    call_command("demo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("export", "--series", "chromium-demo.example-load", "--what", "deviations",
                 "--rule", "shifts", stdout=out)
    found = {(r["function"], r["to_release"]): r for r in json.loads(out.getvalue())
             if r["verdict"] in ("regression", "improvement")}
    assert found[("Paint", demo.RELEASES[8])]["verdict"] == "regression"
    assert found[("Layout", demo.RELEASES[12])]["verdict"] == "improvement"
    assert found[("V8.ScriptCompiler", demo.RELEASES[4])]["verdict"] == "regression"
    assert found[("V8.ScriptCompiler", demo.RELEASES[8])]["verdict"] == "improvement"
    assert found[("V8.ScriptCompiler", demo.RELEASES[4])]["digression"] is True
    planted = {("Paint", demo.RELEASES[8]), ("Layout", demo.RELEASES[12]),
               ("V8.ScriptCompiler", demo.RELEASES[4]), ("V8.ScriptCompiler", demo.RELEASES[8])}
    # Stable functions may not all be quiet, but false flags must stay rare.
    assert len(set(found) - planted) <= 2, sorted(set(found) - planted)


def test_demo_flags_exactly_its_planted_changes_under_the_default_rule() -> None:
    call_command("demo", stdout=io.StringIO())
    assert Series.objects.get(name="chromium-demo.example-load").default_rule == "shifts"
    for metric in ("self", "total"):
        out = io.StringIO()
        call_command("export", "--series", "chromium-demo.example-load", "--what",
                     "deviations", "--metric", metric, stdout=out)
        found = {(r["function"], r["to_release"]): r["verdict"]
                 for r in json.loads(out.getvalue())
                 if r["verdict"] in ("regression", "improvement")}
        planted = {
            ("Paint", demo.RELEASES[8]): "regression",
            ("Layout", demo.RELEASES[12]): "improvement",
            ("V8.ScriptCompiler", demo.RELEASES[4]): "regression",
            ("V8.ScriptCompiler", demo.RELEASES[8]): "improvement",
        }
        assert {k: found.get(k) for k in planted} == planted, metric
        # Total time: the task holding a changed function changes with it, at its release.
        others = set(found) - set(planted)
        if metric == "self":
            assert not others
        else:
            assert {f for f, _ in others} <= {"ThreadControllerImpl::RunTask"}, others
            assert {r for _, r in others} <= {r for _, r in planted}, others


# --- incremental updates ---------------------------------------------------------------


class RandomSeries:
    """A series filled directly with packed run times (no traces): steps, ties, new names."""

    def __init__(self, seed: int, functions: int = 14) -> None:
        self.rng = np.random.default_rng(seed)
        self.series = Series.objects.create(name=f"random-{seed}")
        self.fids = [
            Function.objects.create(series=self.series, name=f"f{k}").pk
            for k in range(functions)
        ]
        self.base = self.rng.lognormal(5.0, 1.0, size=functions)
        self.level = {}  # release number -> per-function multiplier
        self.made = 0

    def release(self, number: int) -> Release:
        found = Release.objects.filter(series=self.series, version=str(number)).first()
        if found is None:
            found = Release.objects.create(series=self.series, version=str(number), order=number)
        return found

    def add_runs(self, number: int, runs: int) -> None:
        if number not in self.level:
            # Levels move in steps shared by a few functions, so both rules find deviations.
            self.level[number] = np.where(
                self.rng.random(len(self.fids)) < 0.15, self.rng.choice([0.5, 2.0]), 1.0
            ) * np.where(np.arange(len(self.fids)) < 3, 1 + (number // 5) % 2, 1.0)
        release = self.release(number)
        for _ in range(runs):
            self.made += 1
            # The last functions appear only in some runs (new rows, zeros elsewhere).
            present = np.arange(len(self.fids)) < len(self.fids) - 3
            present |= self.rng.random(len(self.fids)) < 0.1
            times = self.base * self.level[number] * self.rng.lognormal(0, 0.08, len(self.fids))
            times[:2] = np.round(times[:2] / 50) * 50  # coarse clock: ties
            run = Run.objects.create(
                series=self.series, release=release, sha256=f"{self.made:064d}",
                file_name=f"{number}-{self.made}.json", size_bytes=1, status=Run.DONE,
                finished=timezone.now(),
            )
            ids = np.array(self.fids)[present]
            RunTimes.pack(run, ids, times[present], times[present] * 1.5,
                          np.ones(len(ids), dtype=np.int64)).save()


def add_flat_runs(data: RandomSeries, number: int, runs: int, function_ids: list[int]) -> None:
    """``runs`` runs of release ``number`` where every function takes 100 + k µs in run k."""
    release = data.release(number)
    for k in range(runs):
        data.made += 1
        run = Run.objects.create(series=data.series, release=release, sha256=f"{data.made:064d}",
                                 file_name=f"flat-{data.made}.json", size_bytes=1,
                                 status=Run.DONE, finished=timezone.now())
        ids = np.array(function_ids)
        RunTimes.pack(run, ids, np.full(len(ids), 100.0 + k), np.full(len(ids), 150.0 + k),
                      np.ones(len(ids), dtype=np.int64)).save()


def stored_arrays(series: Series) -> dict[tuple[str, str, str], dict[str, np.ndarray]]:
    """Every (metric, estimator, rule) as pages read it (rows sorted by function id)."""
    return {
        kind: analysis.read_analysis(series, *kind)
        for kind in itertools.product(analysis.METRICS, analysis.ESTIMATORS, analysis.RULES)
    }


def assert_same_as_full(series: Series) -> None:
    """The stored (incrementally kept) arrays equal a full recompute, array for array."""
    stored = stored_arrays(series)
    full = analysis.compute(analysis.current_columns(series), None)
    assert full.plan.full
    assert set(stored) == set(full.arrays)
    assert np.all(np.diff(full.function_ids) > 0)  # a full recompute sorts its rows
    for kind, arrays in full.arrays.items():
        got = stored[kind]
        np.testing.assert_array_equal(got["function_ids"], full.function_ids)
        np.testing.assert_array_equal(got["release_ids"], full.columns.release_ids)
        assert set(got) - {"function_ids", "release_ids", "run_counts", "all_release_ids",
                           "start"} == set(arrays), kind
        np.testing.assert_array_equal(got["run_counts"], full.columns.run_counts)
        for key, expected in arrays.items():
            assert got[key].dtype == expected.dtype, (kind, key)
            np.testing.assert_array_equal(got[key], expected, err_msg=f"{kind} {key}")
    assert_records_match_cells(series)
    assert assert_row_records_hold_the_fields(series) > 0


def assert_row_records_hold_the_fields(series: Series) -> int:
    """Every median block's row records (``store.RECORD``, what the matrix's shown rows
    are read from) hold its fields' values (per-pair fields of the first column: their
    fill values); the mean blocks have none. Returns the blocks checked."""
    from deviations.traces import store

    blocks = AnalysisBlock.objects.filter(series=series, stage=0)
    assert not blocks.filter(estimator="mean", records__isnull=False).exists()
    checked = 0
    for block in blocks.filter(estimator="median"):
        assert block.records is not None
        got = np.frombuffer(bytes(block.records), dtype=store.RECORD)
        assert len(got) == block.rows
        for name in store.RECORD_FIELDS:
            value = bytes(getattr(block, name) or b"")
            expected = (np.frombuffer(value, dtype=store.DTYPES[name]) if value
                        else np.full(block.rows, store.fill(name), dtype=store.DTYPES[name]))
            np.testing.assert_array_equal(got[name], expected, err_msg=name)
        checked += 1
    return checked


def assert_records_match_cells(series: Series) -> None:
    """The blocks' deviation records (``store.read_deviations``) are the stored cells
    whose verdict is a regression or an improvement, with the rule's diff and before, for
    the whole series and a window of it."""
    from deviations.stats.releases import IMPROVEMENT, REGRESSION
    from deviations.traces import store

    for kind in itertools.product(analysis.METRICS, analysis.ESTIMATORS, analysis.RULES):
        R = len(store.read_head(series.pk).release_ids)  # noqa: N806
        for columns in (slice(None), slice(max(R - 4, 0), R - 1)):
            cells = analysis.read_analysis(series, *kind, ["verdict", "diff", "before"],
                                           columns=columns)
            records = store.read_deviations(series, *kind, columns)
            assert records is not None, kind
            np.testing.assert_array_equal(records.function_ids, cells["function_ids"])
            rows, pairs = np.nonzero((cells["verdict"] == REGRESSION)
                                     | (cells["verdict"] == IMPROVEMENT))
            order = np.lexsort((records.pairs, records.rows))
            np.testing.assert_array_equal(records.rows[order], rows, err_msg=str(kind))
            np.testing.assert_array_equal(records.pairs[order], pairs, err_msg=str(kind))
            for key in ("verdict", "diff", "before"):
                np.testing.assert_array_equal(getattr(records, key)[order],
                                              cells[key][rows, pairs], err_msg=f"{kind} {key}")


CALLS = itertools.count()


def analysed_incrementally(series: Series) -> int:
    """Analyse; return from how many releases' samples the shift rule's boundaries were
    judged (fails on a full recompute).

    Every other call forgets the state this process remembers, so both ways of getting the
    stored analysis (remembered, read back) are checked.
    """
    if next(CALLS) % 2:
        analysis._last.clear()
    message = analysis.analyse_series(series.pk)
    match = re.search(r"incremental: \d+ releases? changed, \d+ boundaries judged from "
                      r"(\d+) loaded releases", message)
    assert match, message
    return int(match.group(1))


# A change's windows: the longest reach before a boundary and after it, and the change.
MOST_LOADED = MAX_BEFORE + MAX_AFTER + 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_releases_added_in_order_match_a_full_recompute(seed: int) -> None:
    data = RandomSeries(seed)
    for number in range(3):
        data.add_runs(number, int(data.rng.integers(2, 6)))
    assert "incremental" not in analysis.analyse_series(data.series.pk)  # the first: full
    for number in range(3, 18):
        data.add_runs(number, int(data.rng.integers(2, 6)))
        assert analysed_incrementally(data.series) <= MOST_LOADED
        assert_same_as_full(data.series)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_releases_inserted_out_of_order_match_a_full_recompute(seed: int) -> None:
    data = RandomSeries(seed)
    numbers = [int(n) for n in data.rng.permutation(18)]
    for number in numbers[:3]:
        data.add_runs(number, int(data.rng.integers(2, 6)))
    analysis.analyse_series(data.series.pk)
    for number in numbers[3:]:
        data.add_runs(number, int(data.rng.integers(2, 6)))
        loaded = analysed_incrementally(data.series)
        assert loaded <= MOST_LOADED
        assert_same_as_full(data.series)
    columns = analysis.current_columns(data.series)
    assert len(columns.release_ids) == 18


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_runs_added_to_existing_releases_match_a_full_recompute(seed: int) -> None:
    data = RandomSeries(seed)
    for number in range(16):
        # Some releases start with one run: a column judged by the shift rule only.
        data.add_runs(number, 1 if number % 5 == 2 else int(data.rng.integers(2, 5)))
    analysis.analyse_series(data.series.pk)
    for _ in range(12):
        number = int(data.rng.integers(0, 16))
        data.add_runs(number, int(data.rng.integers(1, 4)))
        assert analysed_incrementally(data.series) <= MOST_LOADED
        assert_same_as_full(data.series)


def test_full_recompute_agrees_with_compare_matrix() -> None:
    data = RandomSeries(9)
    for number in range(12):
        data.add_runs(number, int(data.rng.integers(2, 6)))
    analysis.analyse_series(data.series.pk)
    samples = load_samples(data.series)
    stored = stored_arrays(data.series)
    for (metric, estimator, rule), got in stored.items():
        expected = compare_matrix(samples.metric(metric), analysis.CONFIDENCE, rule=rule,
                                  estimator=estimator)
        # Verdict codes exactly; numbers up to summation order (means of padded releases).
        np.testing.assert_array_equal(got["verdict"], expected.verdict)
        np.testing.assert_array_equal(got["digression"], expected.digression)
        np.testing.assert_array_equal(got["provisional"], expected.provisional)
        np.testing.assert_array_equal(got["n"], expected.n)
        chosen = expected.median if estimator == "median" else expected.mean
        for key, value in [("estimate", chosen.estimate), ("lo", chosen.lo), ("hi", chosen.hi),
                           ("gap", expected.gap), ("diff", expected.diff),
                           ("diff_lo", expected.diff_lo), ("diff_hi", expected.diff_hi),
                           ("p_value", expected.p_value), ("relative", expected.relative)]:
            np.testing.assert_allclose(got[key], value, rtol=1e-12, atol=1e-9, err_msg=key)
    assert np.any(stored[("self", "median", "shifts")]["verdict"] >= 2)  # found steps


def test_analysis_parameters_are_compare_matrix_defaults() -> None:
    defaults = inspect.signature(compare_matrix).parameters
    assert analysis.CONFIDENCE == defaults["confidence"].default
    assert analysis.DIRECTION == defaults["direction"].default


def test_a_vanished_run_or_new_parameters_recompute_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = RandomSeries(10)
    for number in range(8):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    Run.objects.filter(series=data.series, release__version="4").first().delete()
    Run.objects.filter(series=data.series, release__version="7").update(finished=timezone.now())
    message = analysis.analyse_series(data.series.pk)
    assert message == "12 functions × 8 releases analysed" or "incremental" not in message
    assert_same_as_full(data.series)
    monkeypatch.setattr(analysis, "PARAMS", analysis.PARAMS + [0, 1])
    data.add_runs(8, 3)
    assert "incremental" not in analysis.analyse_series(data.series.pk)
    assert_same_as_full(data.series)


def test_a_finished_run_already_seen_only_moves_the_snapshot() -> None:
    data = RandomSeries(11)
    for number in range(4):
        data.add_runs(number, 2)
    analysis.analyse_series(data.series.pk)
    before = stored_bytes()
    Run.objects.filter(series=data.series).update(finished=timezone.now())  # seen, restamped
    assert analysis.analyse_series(data.series.pk) == "no new runs since the stored analysis"
    assert stored_bytes() == before
    assert analysis.analyse_series(data.series.pk) == "up to date"


def test_an_older_snapshot_never_overwrites_a_newer_one(monkeypatch: pytest.MonkeyPatch) -> None:
    data = RandomSeries(12)
    for number in range(5):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    data.add_runs(5, 3)
    stamps = itertools.repeat(timezone.now() - timedelta(hours=1))  # every "now", an hour ago
    monkeypatch.setattr(analysis.timezone, "now", lambda: next(stamps))
    assert analysis.analyse_series(data.series.pk) == "a newer analysis is stored"
    monkeypatch.undo()
    analysed_incrementally(data.series)
    assert_same_as_full(data.series)


def test_the_remembered_state_is_used_only_while_it_is_what_is_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = RandomSeries(13)
    for number in range(6):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    reads = []
    read_state = analysis.store.read_state
    monkeypatch.setattr(analysis.store, "read_state",
                        lambda *a: reads.append(a) or read_state(*a))
    data.add_runs(6, 3)
    analysed_incrementally_warm(data.series)
    assert reads == []  # remembered: nothing read back
    # Another process stores a newer analysis: what this one remembers is stale.
    stale = dict(analysis._last)
    analysis.analyse_series(data.series.pk, force=True)
    analysis._last.clear()
    analysis._last.update(stale)
    data.add_runs(7, 3)
    analysed_incrementally_warm(data.series)
    assert len(reads) == 1
    assert_same_as_full(data.series)


def analysed_incrementally_warm(series: Series) -> None:
    assert "incremental" in analysis.analyse_series(series.pk)


def test_new_functions_add_blocks_of_their_rows_only() -> None:
    data = RandomSeries(14, functions=6)
    late = Function.objects.create(series=data.series, name="late").pk
    for number in range(20):
        data.add_runs(number, 5)
    analysis.analyse_series(data.series.pk)
    blocks = AnalysisBlock.objects.count()
    add_flat_runs(data, 20, 5, [*data.fids, late])  # "late" appears in release 20 only
    columns = analysis.current_columns(data.series)
    plan = analysis.plan(columns, analysis.store.read_state(data.series.pk))
    rewritten = int(plan.changed.sum() + (plan.pairs | plan.boundaries)[~plan.changed[1:]].sum())
    assert "incremental" in analysis.analyse_series(data.series.pk)
    # The new release and those whose boundaries were judged again are rewritten; the other
    # releases keep their blocks and gain one for the new row.
    kept = 21 - rewritten
    assert 0 < kept < 21
    tails = AnalysisBlock.objects.filter(row_start__gt=0)
    assert tails.count() == 2 * 2 * kept
    assert set(tails.values_list("rows", flat=True)) == {1}
    assert AnalysisBlock.objects.count() == blocks + 2 * 2 * 1 + tails.count()
    assert_same_as_full(data.series)
    view = analysis.read_analysis(data.series, "self", "median", "paper")
    row = list(view["function_ids"]).index(late)
    np.testing.assert_array_equal(view["estimate"][row], [0] * 20 + [102])


def test_a_new_release_loads_only_the_windows_it_touches() -> None:
    """Issue 19, item 8: adding a release reads the releases of the windows it changes,
    not the history."""
    data = RandomSeries(20, functions=5)
    for number in range(40):
        data.add_runs(number, 5)
    analysis.analyse_series(data.series.pk)
    data.add_runs(40, 5)
    loaded = analysed_incrementally(data.series)
    win = shift_windows(np.full(41, 5))
    provisional_start = int(win.start[~win.final].min())
    assert loaded == 41 - min(provisional_start, int(win.start[np.flatnonzero(win.final)[-1]]))
    assert loaded <= 17
    assert_same_as_full(data.series)


def test_an_update_computed_from_a_replaced_analysis_starts_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = RandomSeries(15)
    for number in range(6):
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    stale = analysis.store.read_state(data.series.pk)
    data.add_runs(6, 3)
    analysis.analyse_series(data.series.pk)  # another worker stores a newer generation
    data.add_runs(7, 3)
    reads = []
    real = analysis._read_stored

    def first_stale(series: Series) -> analysis.Stored | None:
        reads.append(series.pk)
        return stale if len(reads) == 1 else real(series)

    monkeypatch.setattr(analysis, "_read_stored", first_stale)
    assert "incremental" in analysis.analyse_series(data.series.pk)
    assert len(reads) == 2  # the update onto the stale base was refused, then redone
    assert_same_as_full(data.series)


def test_an_update_writes_every_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    # Updates allocate their arrays uninitialised; poison them to prove nothing is left.
    empty = analysis.MetricArrays.empty.__func__

    def poisoned(cls, F: int, R: int, *, filled: bool = True, order="C"):  # noqa: ANN001, ANN202, N803
        arrays = empty(cls, F, R, filled=True, order=order)
        if not filled:
            for part in (*arrays.release.values(), *arrays.pair.values(), arrays.shift):
                for value in part.values():
                    value.fill(77)
            arrays.n.fill(77)
        return arrays

    monkeypatch.setattr(analysis.MetricArrays, "empty", classmethod(poisoned))
    data = RandomSeries(16)
    numbers = [int(n) for n in data.rng.permutation(10)]
    for number in numbers[:3]:
        data.add_runs(number, 3)
    analysis.analyse_series(data.series.pk)
    for number in numbers[3:]:
        data.add_runs(number, int(data.rng.integers(2, 5)))
        analysed_incrementally(data.series)
        assert_same_as_full(data.series)


def test_stale_series_are_analysed_by_the_beat_task() -> None:
    from deviations.traces.tasks import analyse_stale_series

    fresh, stale = RandomSeries(17), RandomSeries(18)
    for data in (fresh, stale):
        for number in range(3):
            data.add_runs(number, 2)
        analysis.analyse_series(data.series.pk)
    stale.add_runs(3, 2)  # its analysis task was lost
    assert analyse_stale_series() == [stale.series.pk]  # eager here: analysed at once
    assert analysis.is_up_to_date(stale.series)
    assert len(analysis.read_analysis(stale.series, "self", "median", "paper")["release_ids"]) == 4
    assert analyse_stale_series() == []


def test_columns_with_many_blocks_are_compacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis.store, "MAX_BLOCKS_PER_COLUMN", 3)
    data = RandomSeries(19, functions=5)
    for number in range(12):
        data.add_runs(number, 10)
    analysis.analyse_series(data.series.pk)
    first = []
    for k in range(5):  # each new release brings a new function
        late = Function.objects.create(series=data.series, name=f"late{k}").pk
        add_flat_runs(data, 12 + k, 10, [*data.fids, late])
        analysed_incrementally(data.series)
        assert_same_as_full(data.series)
        per_column = AnalysisBlock.objects.filter(metric="self", estimator="median").values(
            "release_id").annotate(n=Count("id")).values_list("n", flat=True)
        assert max(per_column) <= 3
        first.append(AnalysisBlock.objects.filter(
            release=data.release(0), metric="self", estimator="median"
        ).count())
    # Release 0 is never in a recomputed window: a block per new function, then compacted.
    assert first == [2, 3, 1, 2, 3]


def test_shift_rule_is_shift_verdicts_of_every_run() -> None:
    data = RandomSeries(12)
    for number in range(14):
        data.add_runs(number, int(data.rng.integers(1, 6)))
    series = data.series
    analysis.analyse_series(series.pk)
    samples = load_samples(series)
    runs = analysis.current_columns(series).run_counts
    expected = {m: shift_verdicts(samples.metric(m), runs=runs) for m in analysis.METRICS}
    # A minimum practical change above the rule's flags (a setting read with the stored
    # verdicts: no new analysis).
    flags = np.concatenate([np.abs(e.relative[(e.verdict == REGRESSION)
                                              | (e.verdict == IMPROVEMENT)])
                            for e in expected.values()])
    assert len(flags)
    series.min_relative_change = 1.5 * float(flags.max())
    series.save()
    demoted = 0
    for metric in analysis.METRICS:
        want = expected[metric]
        for estimator in analysis.ESTIMATORS:
            stored = analysis.read_analysis(series, metric, estimator, "shifts")
            np.testing.assert_array_equal(stored["function_ids"], samples.function_ids)
            np.testing.assert_array_equal(stored["verdict"], want.verdict)
            for key in ("p_value", "diff", "diff_lo", "diff_hi", "before", "n_before",
                        "n_after", "first", "last", "early", "change"):
                np.testing.assert_array_equal(stored[key], getattr(want, key), key)
            # What pages, exports and alerts read: the series' minimum practical change.
            shown = selectors.stored_analysis(series, metric, estimator, "shifts")
            practical = practical_verdicts(
                want.verdict, want.diff, want.before, min_relative=series.min_relative_change,
                min_absolute=series.min_absolute_change_us)
            np.testing.assert_array_equal(shown["verdict"], practical)
            demoted += int(np.sum(practical != want.verdict))
        assert np.any((want.verdict == REGRESSION) | (want.verdict == IMPROVEMENT))
    assert demoted > 0


def _force_out_of_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweeper as it runs beside real workers (time limits apply there)."""
    from deviations.traces import tasks

    monkeypatch.setattr(tasks, "_in_process", lambda: False)


def test_an_analysis_stopped_at_the_time_limit_is_not_sent_again_until_a_run_arrives(
    monkeypatch: pytest.MonkeyPatch, client: Any,
) -> None:
    """Issue 24: a series too large for the task's limit was sent again by the beat every
    2 minutes, for ever. The stopped attempt is recorded with its reason; the sweeper
    leaves the series alone until a new run finishes; the page and the API say why."""
    from celery.exceptions import SoftTimeLimitExceeded

    from deviations.traces import tasks

    _force_out_of_process(monkeypatch)
    data = RandomSeries(19)
    for number in range(3):
        data.add_runs(number, 2)
    real = analysis.analyse_series

    def too_long(series_id: int, **kwargs: Any) -> str:
        analysis.attempts.begin(series_id, analysis.attempts.runs_until(series_id))
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(analysis, "analyse_series", too_long)
    assert tasks.analyse_series(data.series.pk) == "stopped at the time limit"
    data.series.refresh_from_db()
    assert data.series.analysis_failure.startswith("stopped at the task's time limit")
    assert data.series.analysis_started is None
    sent: list[int] = []
    monkeypatch.setattr(tasks, "enqueue", lambda task, series_id: sent.append(series_id))
    for _ in range(3):  # beat minutes: nothing is sent again
        assert tasks.analyse_stale_series() == []
    assert sent == []
    user = get_user_model().objects.create_user("viewer")
    client.force_login(user)
    page = client.get(data.series.get_absolute_url()).content.decode()
    assert "stopped at the task&#x27;s time limit" in page
    assert 'id="analysis-failure"' in page
    # A new run: tried again, and when it finishes the failure is gone.
    data.add_runs(3, 2)
    assert tasks.analyse_stale_series() == [data.series.pk]
    monkeypatch.setattr(analysis, "analyse_series", real)
    tasks.analyse_series(data.series.pk)
    data.series.refresh_from_db()
    assert data.series.analysis_failure == ""
    assert data.series.analysis_failed_at is None
    assert analysis.is_up_to_date(data.series)
    assert 'id="analysis-failure"' not in client.get(
        data.series.get_absolute_url()).content.decode()


def test_an_attempt_running_or_killed_is_not_sent_beside_itself(
    monkeypatch: pytest.MonkeyPatch, settings: Any,
) -> None:
    """A long analysis still running was sent again by the beat every 2 minutes; one
    killed outright (hard limit, the kernel's OOM killer) could record nothing. The sweeper
    now sees the running attempt, and past the hard limit records it as killed."""
    from deviations.traces import attempts, tasks

    _force_out_of_process(monkeypatch)
    sent: list[int] = []
    monkeypatch.setattr(tasks, "enqueue", lambda task, series_id: sent.append(series_id))
    data = RandomSeries(20)
    for number in range(3):
        data.add_runs(number, 2)
    attempts.begin(data.series.pk, attempts.runs_until(data.series.pk))
    assert tasks.analyse_stale_series() == []  # running: not twice
    Series.objects.filter(pk=data.series.pk).update(
        analysis_started=timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 61))
    assert tasks.analyse_stale_series() == []  # past the hard limit: killed, recorded
    data.series.refresh_from_db()
    assert data.series.analysis_failure.startswith("did not finish: its worker was stopped")
    assert tasks.analyse_stale_series() == []
    assert sent == []
    # An attempt that ended on an error (a database gone, retried by the task) is not a
    # failure: the sweeper sends it again, as before.
    attempts.finish(data.series.pk)
    attempts.begin(data.series.pk, attempts.runs_until(data.series.pk))
    attempts.end(data.series.pk)
    assert tasks.analyse_stale_series() == [data.series.pk]


def test_an_analysis_that_fails_on_an_error_is_no_longer_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = RandomSeries(21)
    for number in range(3):
        data.add_runs(number, 2)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk")

    monkeypatch.setattr(analysis, "compute", broken)
    with pytest.raises(OSError, match="disk"):
        analysis.analyse_series(data.series.pk)
    data.series.refresh_from_db()
    assert data.series.analysis_started is None
    assert data.series.analysis_failure == ""


def test_a_message_delivered_again_after_its_worker_was_killed_is_not_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``acks_late`` with ``reject_on_worker_lost``: an analysis whose worker the OOM killer
    stopped comes back from the broker, and would be killed again, for ever. Delivered
    again while its attempt for the same runs never ended, it records the kill instead; a
    redelivery of an attempt that ended (or for other runs) runs as usual."""
    from deviations.traces import attempts, tasks

    data = RandomSeries(20)
    for number in range(3):
        data.add_runs(number, 2)
    series_id = data.series.pk
    ran: list[int] = []
    monkeypatch.setattr(analysis, "analyse_series",
                        lambda pk, **kw: ran.append(pk) or "analysed")
    redelivered = SimpleNamespace(delivery_info={"redelivered": True})
    monkeypatch.setattr(type(tasks.analyse_series), "request", redelivered, raising=False)
    attempts.begin(series_id, attempts.runs_until(series_id))  # then the worker was killed
    assert tasks.analyse_series(series_id) == "killed before: not run again"
    assert ran == []
    data.series.refresh_from_db()
    assert data.series.analysis_failure.startswith("did not finish: its worker was stopped")
    # An attempt that ended: the redelivered message runs.
    attempts.finish(series_id)
    assert tasks.analyse_series(series_id) == "analysed"
    assert ran == [series_id]
    # Not redelivered: runs whatever the attempt says.
    attempts.begin(series_id, attempts.runs_until(series_id))
    monkeypatch.setattr(type(tasks.analyse_series), "request",
                        SimpleNamespace(delivery_info={}), raising=False)
    assert tasks.analyse_series(series_id) == "analysed"
