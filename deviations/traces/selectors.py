"""Reads for pages, API and exports (no writes here)."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from django.db.models import Count, Exists, OuterRef, Q, Value
from django.shortcuts import get_object_or_404

from deviations.alerts.selectors import CulpritRange, range_columns, series_ranges
from deviations.core import memo
from deviations.core.db import batches
from deviations.core.errors import UserError
from deviations.stats.intervals import MIN_RUNS, median_ci
from deviations.stats.paired import precision_relative_two_sample
from deviations.stats.releases import (
    DIGRESSION_SPAN,
    IMPROVEMENT,
    NO_VERDICT,
    REGRESSION,
    digressions,
    level_digressions,
    oriented,
    practical_verdicts,
    verdict_name,
)
from deviations.traces.models import (
    Function,
    Metric,
    Release,
    Run,
    RunTimes,
    Series,
    SeriesAnalysis,
)
from deviations.traces.store import (
    PER_PAIR_KEYS,
    PER_RELEASE_KEYS,
    Deviations,
    binary_values,
    finality,
    generation,
    read_analysis,
    read_deviations,
    replicates,
    view_keys,
)


def function_names(series: Series, ids: Any = None) -> dict[int, str]:
    """Names by id of the series' functions, or of those ``ids`` only (batched queries)."""
    functions = Function.objects.filter(series=series)
    if ids is None:
        return dict(functions.values_list("id", "name"))
    names: dict[int, str] = {}
    for chunk in batches([int(i) for i in ids]):
        names.update(functions.filter(id__in=chunk).values_list("id", "name"))
    return names


def done_runs(series: Series, release: Release | None = None) -> Any:
    """Done runs with their packed times, in release order."""
    runs = Run.objects.filter(series=series, status=Run.DONE)
    if release is not None:
        runs = runs.filter(release=release)
    return runs.select_related("release", "times").order_by(
        "release__sort_key", "release__id", "created", "id"
    )


def selftime_rows(series: Series) -> Iterator[dict[str, Any]]:
    """One row per (run, function) of the series' done runs, in release order."""
    names = function_names(series)
    for run in done_runs(series).iterator(chunk_size=50):
        ids, self_us, total_us, calls = run.times.arrays()
        for j in range(len(ids)):
            yield {
                "release": run.release.version,
                "run": run.file_name,
                "function": names[int(ids[j])],
                "self_us": float(self_us[j]),
                "total_us": float(total_us[j]),
                "calls": int(calls[j]),
            }


def releases_with_counts(series: Series, versions: Iterable[str] | None = None
                         ) -> list[Release]:
    """The series' releases (those ``versions`` only, when given) with their runs done,
    failed and pending, in series order."""
    releases = series.releases.all()
    if versions is not None:
        releases = releases.filter(version__in=list(versions))
    return list(
        releases.annotate(
            runs_done=Count("runs", filter=Q(runs__status=Run.DONE)),
            runs_failed=Count("runs", filter=Q(runs__status=Run.FAILED)),
            runs_pending=Count("runs", filter=Q(runs__status=Run.PENDING)),
        ).order_by("sort_key", "id")
    )


def releases_lacking_runs(series: Series,
                          releases: list[Release] | None = None) -> list[dict[str, Any]]:
    """Releases with no done run yet, in series order: nothing measured, so they are not
    columns of the analysis (their neighbours are compared with each other). A release
    with one run is a column: the shift rule judges it (the paper rule needs two runs a
    side). ``releases``: ``releases_with_counts(series)`` when the caller has it already.
    """
    if releases is None:  # those without a done run only (an anti-join: a long history)
        releases = list(series.releases.filter(
            ~Exists(Run.objects.filter(release=OuterRef("pk"), status=Run.DONE))
        ).annotate(runs_done=Value(0)).order_by("sort_key", "id"))
    return [{"version": r.version, "runs_done": r.runs_done, "url": r.get_absolute_url()}
            for r in releases if r.runs_done < 1]


def one_run_releases(series: Series) -> int:
    """How many of the series' releases have exactly one done run."""
    return (Run.objects.filter(series=series, status=Run.DONE).order_by()
            .values("release").annotate(n=Count("*")).filter(n=1).count())


def lacking_runs_by_series() -> dict[int, list[str]]:
    """Per series id, the versions with no done run (one query: an anti-join, not a count
    of every release's runs)."""
    found = (
        Release.objects.filter(
            ~Exists(Run.objects.filter(release=OuterRef("pk"), status=Run.DONE))
        ).order_by("series_id", "sort_key", "id")
        .values_list("series_id", "version")
    )
    out: dict[int, list[str]] = {}
    for series_id, version in found:
        out.setdefault(series_id, []).append(version)
    return out


def release_times(release: Release) -> tuple[list[int], Any, Any, Any, list[Run]]:
    """Function ids and (functions × runs) matrices of self time, total time and calls.

    A function absent from a run was not called in it: its times are 0 there, not missing.
    In a metric series the columns are replicates (a run listed once per replicate it
    holds) and a value a run does not give is NaN.
    Runs are scattered into the matrices by a sorted search, not a dictionary per function
    (a release of a million functions: seconds otherwise).
    """
    ids, (self_us, total_us, calls), runs = _release_arrays(
        release, ("self_us", "total_us", "calls"))
    return ids.tolist(), self_us, total_us, calls, runs


def release_metric_times(release: Release, metric: str) -> tuple[np.ndarray, Any, list[Run]]:
    """``release_times`` of one metric (``self`` or ``total``): the function ids, the
    (functions × runs) matrix of that time, and the runs. Only the function ids and that
    metric's packed array are read: the compare page read the other time and the calls
    too, twice the bytes (20 runs × 20,000 functions: 12.8 MB instead of 6.4 MB)."""
    ids, (values,), runs = _release_arrays(release, (f"{metric}_us",))
    return ids, values, runs


_PACKED_DTYPES = {"self_us": RunTimes.FLOAT, "total_us": RunTimes.FLOAT, "calls": RunTimes.INT}


def _release_arrays(release: Release, fields: tuple[str, ...]
                    ) -> tuple[np.ndarray, list[np.ndarray], list[Run]]:
    """The sorted function ids of the release's done runs and, per packed ``fields`` of
    their ``RunTimes``, a (functions × runs) matrix (``release_times``' rules)."""
    runs = list(done_runs(release.series, release).defer("times__function_ids",
                                                          "times__self_us", "times__total_us",
                                                          "times__calls"))
    # The packed arrays, with the binary protocol on PostgreSQL (Django reads bytea as hex
    # text: a release of a million functions is 32 MB a run).
    found = {run_id: arrays for run_id, *arrays in binary_values(
        RunTimes.objects.filter(run__in=[r.pk for r in runs]),
        ("run_id", "function_ids", *fields),
    )}
    dtypes = (RunTimes.INT, *(_PACKED_DTYPES[f] for f in fields))
    packed: list[tuple[np.ndarray, ...]] = [
        tuple(np.frombuffer(bytes(a), dtype=t) for a, t in zip(found[run.pk], dtypes,
                                                               strict=True))
        for run in runs
    ]
    missing = 0.0
    if release.series.is_metrics:  # one sample per replicate; a value not given is missing
        packed = [p for p, run in zip(packed, runs, strict=True) for _ in range(run.samples)]
        runs = [run for run in runs for _ in range(run.samples)]
        packed = replicates(packed, [run.pk for run in runs])
        missing = np.nan
    ids = _distinct_ids([a[0] for a in packed])
    shape = (len(ids), len(runs))
    out = [np.zeros(shape, dtype=np.int64) if f == "calls" else np.full(shape, missing)
           for f in fields]
    for j, (fids, *values) in enumerate(packed):
        rows: Any = slice(None) if np.array_equal(fids, ids) else np.searchsorted(ids, fids)
        for matrix, v in zip(out, values, strict=True):
            matrix[rows, j] = v
    return ids, out, runs


def _distinct_ids(per_run: list[np.ndarray]) -> np.ndarray:
    """The sorted distinct function ids of runs: usually every run has the same increasing
    ids (checked in one pass); otherwise by a sort (np.unique's hash path took 8 s for
    2 M ids on the shared machine)."""
    if not per_run:
        return np.empty(0, dtype=np.int64)
    first = per_run[0]
    if np.all(first[1:] > first[:-1]) and all(np.array_equal(a, first) for a in per_run[1:]):
        return first
    ids = np.sort(np.concatenate(per_run))
    return ids[np.r_[True, ids[1:] != ids[:-1]]] if len(ids) else ids


def release_function_table(release: Release, limit: int = 100) -> list[dict[str, Any]]:
    """The release's functions by median self time over its done runs (largest first)."""
    ids, self_us, total_us, calls, runs = release_times(release)
    if not runs:
        return []
    key = -np.nanmedian(self_us, axis=1) if len(self_us) else np.empty(0)
    if len(key) > limit:  # the candidates for the top only: a full sort of 1 M is ~0.1 s
        key_at_limit = np.partition(key, limit - 1)[limit - 1]
        candidates = np.flatnonzero(key <= key_at_limit)
    else:
        candidates = np.arange(len(key))
    order = candidates[np.argsort(key[candidates], kind="stable")][:limit]
    med_self = -key
    names = dict(Function.objects.filter(id__in=[ids[k] for k in order])
                 .values_list("id", "name"))  # the shown ones only
    return [
        {
            "id": ids[k],
            "name": names[ids[k]],
            "self_ms": med_self[k] / 1000,
            "total_ms": float(np.nanmedian(total_us[k])) / 1000,
            "calls": float(np.median(calls[k])),
            "runs": len(runs),
        }
        for k in order
    ]


def release_metric_table(release: Release) -> list[dict[str, Any]]:
    """A metric series' release: every metric's median over its values, unit and count,
    by name (their units differ: no order by size)."""
    ids, values, _, _, runs = release_times(release)
    if not runs:
        return []
    names = function_names(release.series, ids)
    units = metric_units(release.series, ids)
    given = ~np.isnan(values)
    rows = []
    for k, fid in enumerate(ids):
        row = values[k][given[k]]
        rows.append({"id": fid, "name": names[fid], "unit": units.get(fid, ""),
                     "median": float(np.median(row)) if len(row) else None,
                     "values": int(len(row))})
    return sorted(rows, key=lambda r: r["name"].casefold())


def analysed_release_ids(series: Series) -> np.ndarray | None:
    """The releases (ids, in order) of the stored analysis' columns; None before any
    analysis. One small read: pages choose their window of columns with it."""
    head = binary_values(SeriesAnalysis.objects.filter(series=series), ("release_ids",))
    return np.frombuffer(bytes(head[0][0]), dtype="<i8") if head else None


def stored_analysis(
    series: Series, metric: str, estimator: str, rule: str, keys: Iterable[str] | None = None,
    *, columns: tuple[int, int] | None = None, function_ids: Iterable[int] | None = None,
    kept: bool = False,
) -> dict[str, np.ndarray] | None:
    """The stored matrices of one (metric, estimator, rule), or None before any analysis.

    ``keys`` limits the arrays decoded (``release_ids``, ``function_ids`` and
    ``run_counts`` always come). Verdicts are those left by the series' minimum practical
    change, applied here and nowhere else to the comparison behind each verdict (``diff``
    against ``before``: ``stats.releases.practical_verdicts``); digressions and early
    marks follow. Every page, export and alert reads them here.

    ``columns`` (start, stop) and ``function_ids`` read only those releases (columns of
    ``analysed_release_ids``) and rows (``store.read_analysis``). A digression is marked
    by what follows it: with ``columns``, up to ``DIGRESSION_SPAN`` more releases are read
    to mark them as the whole matrix would, then left out.

    ``kept``: the arrays are kept in the process for the next request of the same analysis
    (``core.memo``, read-only arrays; for small reads: a function's row, a release's pair).
    """
    if kept:
        ids = None if function_ids is None else tuple(int(i) for i in function_ids)
        generation = analysis_generation(series)
        if generation is None:
            return None
        key = ("stored", series.pk, generation, metric, estimator, rule,
               None if keys is None else tuple(keys), columns, ids,
               series.min_relative_change, series.min_absolute_change_us,
               metric_settings_key(series))
        return memo.remembered(key, lambda: _frozen(stored_analysis(
            series, metric, estimator, rule, keys, columns=columns, function_ids=ids)))
    wanted = list(view_keys(rule) if keys is None else keys)
    marks = "digression" in wanted
    if "verdict" in wanted:
        wanted += ["diff", "before"]
        if rule == "paper" and marks:
            wanted += ["lo", "hi"]
        if marks:  # marked once, after the minimum practical change (_practical)
            wanted.remove("digression")
    window = None
    if columns is not None:
        start, stop = columns
        window = slice(start, stop + DIGRESSION_SPAN if marks else stop)
    found = read_analysis(series, metric, estimator, rule, wanted, columns=window,
                          function_ids=function_ids)
    if found is not None and "verdict" in found:
        found = _practical(series, rule, found, marks)
    if found is not None and columns is not None:
        found = _cut(found, columns[1] - columns[0])
    return found


def _frozen(found: dict[str, np.ndarray] | None) -> tuple[dict[str, np.ndarray], int] | None:
    return None if found is None else memo.frozen(found)


def _cut(found: dict[str, np.ndarray], releases: int) -> dict[str, np.ndarray]:
    """The first ``releases`` columns of a window read with a margin (``stored_analysis``)."""
    releases = min(releases, len(found["release_ids"]))
    out = {}
    for key, value in found.items():
        if key in ("release_ids", "run_counts"):
            out[key] = value[:releases]
        elif key in PER_RELEASE_KEYS:
            out[key] = value[:, :releases]
        elif key in PER_PAIR_KEYS:
            out[key] = value[:, : max(releases - 1, 0)]
        else:
            out[key] = value
    return out


def _practical_verdicts(series: Series, function_ids: np.ndarray, verdict: np.ndarray,
                       diff: np.ndarray, before: np.ndarray, rows: np.ndarray | None = None
                       ) -> np.ndarray:
    """The stored verdicts of the rows ``function_ids`` (2-D: rows × pairs) left by the
    series' minimum practical change, or, with ``rows`` (the row of each of ``verdict``'s
    cells, 1-D), those of single cells."""
    min_relative: Any = series.min_relative_change
    min_absolute = series.min_absolute_change_us
    if series.is_metrics:
        # Each metric's own direction and alert threshold; no absolute floor (the rows
        # have different units, the floor is in µs).
        higher, threshold = metric_settings(function_ids)
        per_row = np.where(np.isnan(threshold), min_relative, threshold / 100)
        if rows is None:
            verdict, min_relative = oriented(verdict, higher), per_row[:, None]
        else:
            verdict, min_relative = oriented(verdict, higher[rows]), per_row[rows]
        min_absolute = 0.0
    out: np.ndarray = practical_verdicts(verdict, diff, before, min_relative=min_relative,
                                         min_absolute=min_absolute)
    return out


def window_deviations(series: Series, metric: str, estimator: str, rule: str,
                      columns: tuple[int, int]) -> Deviations | None:
    """The deviations of the releases ``columns`` (start, stop) of every function, as the
    matrix ranks and filters by them: the stored deviation records
    (``store.read_deviations``) whose verdict the series' minimum practical change leaves
    a regression or an improvement (``verdict`` is that one). None before any analysis or
    when the window's blocks have no records (read the window's cells then)."""
    found = read_deviations(series, metric, estimator, rule, slice(*columns))
    if found is None:
        return None
    verdict = _practical_verdicts(series, found.function_ids, found.verdict, found.diff,
                                  found.before, rows=found.rows)
    keep = (verdict == REGRESSION) | (verdict == IMPROVEMENT)
    return Deviations(found.function_ids, found.rows[keep], found.pairs[keep], verdict[keep],
                      found.diff[keep], found.before[keep])


def _practical(series: Series, rule: str, found: dict[str, np.ndarray], marks: bool
               ) -> dict[str, np.ndarray]:
    verdict = _practical_verdicts(series, found["function_ids"], found["verdict"],
                                  found["diff"], found["before"])
    found["verdict"] = verdict
    deviation = (verdict == REGRESSION) | (verdict == IMPROVEMENT)
    if marks:
        found["digression"] = (digressions(verdict, found["lo"], found["hi"])
                               if rule == "paper"
                               else level_digressions(verdict, found["before"], found["diff"]))
    if "early" in found:
        found["early"] = found["early"] & deviation
    return found


def metric_settings(function_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a metric series' analysis: higher is better (bool), and its alert
    threshold in percent (NaN: the series' floor)."""
    higher = np.zeros(len(function_ids), dtype=np.bool_)
    threshold = np.full(len(function_ids), np.nan)
    position = {int(f): i for i, f in enumerate(function_ids.tolist())}
    for chunk in batches(list(position)):
        for fid, direction, percent in Metric.objects.filter(function_id__in=chunk).filter(
                Q(direction="higher_is_better") | Q(threshold_percent__isnull=False)
        ).values_list("function_id", "direction", "threshold_percent"):
            higher[position[fid]] = direction == "higher_is_better"
            if percent is not None:
                threshold[position[fid]] = percent
    return higher, threshold


def metric_settings_key(series: Series) -> tuple[tuple[int, str, float | None], ...]:
    """What of a metric series' metrics changes its verdicts when read (directions, alert
    thresholds): part of the key of every page kept from its analysis, as its minimum
    practical change is. Empty for a trace series."""
    if not series.is_metrics:
        return ()
    return tuple(Metric.objects.filter(function__series=series).filter(
        Q(direction="higher_is_better") | Q(threshold_percent__isnull=False)
    ).order_by("function_id").values_list("function_id", "direction", "threshold_percent"))


def metric_units(series: Series, ids: Iterable[int]) -> dict[int, str]:
    """Unit by function id of a metric series' rows ("" without one); empty for a trace
    series."""
    if not series.is_metrics:
        return {}
    out: dict[int, str] = {}
    for chunk in batches(list(ids)):
        out.update(Metric.objects.filter(function_id__in=chunk).values_list(
            "function_id", "unit"))
    return out


def with_units(series: Series, rows: list[dict[str, Any]], key: str = "function_id"
               ) -> list[dict[str, Any]]:
    """``rows`` of a metric series, each with its metric's ``unit`` (pages show it beside
    the name); a trace series' rows as they are."""
    if not series.is_metrics:
        return rows
    units = metric_units(series, [r[key] for r in rows])
    return [dict(r, unit=units.get(r[key], "")) for r in rows]


def final_since(series: Series, rule: str, run_counts: np.ndarray, versions: list[str]
                ) -> tuple[list[str | None], list[int]]:
    """Per boundary: the release whose arrival made its verdict final (None while it is
    provisional), and how many more releases like the newest it waits for (0 when final)."""
    final_at, to_final = finality(rule, run_counts)
    return ([versions[int(c)] if c >= 0 else None for c in final_at], to_final.tolist())


def analysis_generation(series: Series) -> int | None:
    """The stored analysis' generation (new with every write), None before any analysis."""
    return generation(series.pk)


def release_versions(release_ids: np.ndarray) -> list[str]:
    found = Release.objects.filter(id__in=release_ids.tolist()).values_list("id", "version")
    versions = dict(found)
    return [versions[int(r)] for r in release_ids]


class NotAnalysedError(LookupError):
    """The series has no stored analysis (fewer than two releases with a done run, or none
    yet)."""


def _analysis_or_raise(series: Series, metric: str, estimator: str, rule: str) -> dict[str, Any]:
    found = stored_analysis(series, metric, estimator, rule)
    if found is None:
        raise NotAnalysedError(
            f"series {series.name!r} has no analysis yet: it needs two releases with a done "
            f"run (then `python manage.py analyse --series {series.name}`)"
        )
    return found


def _number(value: Any) -> float | None:
    return None if np.isnan(value) else float(value)


def stats_rows(series: Series, metric: str) -> Iterator[dict[str, Any]]:
    """Per (release, function): n, median and mean with their intervals (µs).

    Raises NotAnalysedError at once (not when iterated) when there is no analysis.
    """
    med = _analysis_or_raise(series, metric, "median", "paper")
    mean = _analysis_or_raise(series, metric, "mean", "paper")
    return _stats_rows(med, mean, release_versions(med["release_ids"]), function_names(series))


def _stats_rows(
    med: dict[str, Any], mean: dict[str, Any], versions: list[str], names: dict[int, str]
) -> Iterator[dict[str, Any]]:
    for r, version in enumerate(versions):
        for f, fid in enumerate(med["function_ids"]):
            yield {
                "release": version,
                "function": names[int(fid)],
                "n": int(med["n"][f, r]),
                "median": _number(med["estimate"][f, r]),
                "median_lo": _number(med["lo"][f, r]),
                "median_hi": _number(med["hi"][f, r]),
                "mean": _number(mean["estimate"][f, r]),
                "mean_lo": _number(mean["lo"][f, r]),
                "mean_hi": _number(mean["hi"][f, r]),
            }


def deviation_rows(
    series: Series, metric: str, estimator: str, rule: str
) -> Iterator[dict[str, Any]]:
    """Per (function, consecutive release pair) with a verdict: the verdict and its numbers.

    Raises NotAnalysedError at once (not when iterated) when there is no analysis.
    """
    found = _analysis_or_raise(series, metric, estimator, rule)
    versions = release_versions(found["release_ids"])
    names = function_names(series)
    names_by_row = [names[int(fid)] for fid in found["function_ids"]]
    return deviation_cells(names_by_row, versions, found, pair_ranges(series, versions))


def pair_ranges(series: Series, versions: list[str]) -> list[CulpritRange]:
    """The culprit range of each pair of consecutive ``versions`` (a flag between R_i and
    R_i+1: last good R_i, first bad R_i+1), in pair order."""
    pairs = list(zip(versions, versions[1:], strict=False))
    ranges = series_ranges(series, pairs)
    return [ranges[pair] for pair in pairs]


def _numbers(values: np.ndarray) -> list[float | None]:
    """Floats of an array as a list, NaN as None: one conversion for a whole column."""
    return [None if v != v else v for v in values.tolist()]  # v != v: NaN


DEVIATION_FIELDS = ("function", "from_release", "to_release", "verdict", "gap", "diff",
                    "diff_lo", "diff_hi", "relative", "p_value", "runs_before", "runs_after",
                    "digression", "early", "provisional", "final_within",
                    # the culprit range: from_release is the last good, to_release the
                    # first bad release (alerts.selectors.CulpritRange)
                    "last_good_revision", "first_bad_revision", "culprit_range", "log_url")


class DeviationCell(msgspec.Struct):
    """One exported cell (DESIGN's deviations fields, µs), as the JSON encoder takes it.

    ``diff`` (later − earlier) with its interval, ``relative``, ``p_value`` and the runs of
    each side are the comparison behind the verdict; ``provisional``: later releases may
    still change it, for ``final_within`` more releases like the newest (0: final); ``early``: a
    provisional deviation alerted before it is final."""

    function: str
    from_release: str
    to_release: str
    verdict: str | None
    gap: float | None
    diff: float | None
    diff_lo: float | None
    diff_hi: float | None
    relative: float | None
    p_value: float | None
    runs_before: int
    runs_after: int
    digression: bool
    early: bool
    provisional: bool
    final_within: int
    last_good_revision: str | None
    first_bad_revision: str | None
    culprit_range: str
    log_url: str | None


def _cell_columns(functions: list[str], versions: list[str], arrays: dict[str, Any],
                  ranges: list[CulpritRange]) -> tuple[list[Any], ...]:
    """The cells with a verdict, field by field (DEVIATION_FIELDS' order), in row-major
    order (function, then pair): gathered by one numpy selection and one list per field,
    not element by element (the JSON of a page of the matrix at 300 releases: ~10× faster).
    """
    verdict = arrays["verdict"]
    rows, pairs = np.nonzero(verdict != NO_VERDICT)
    codes = verdict[rows, pairs]
    names = {code: verdict_name(code) for code in np.unique(codes).tolist()}
    pair_list = pairs.tolist()
    return (
        [functions[f] for f in rows.tolist()],
        [versions[p] for p in pair_list],
        [versions[p + 1] for p in pair_list],
        [names[code] for code in codes.tolist()],
        *(_numbers(np.asarray(arrays[k][rows, pairs], dtype=np.float64))
          for k in ("gap", "diff", "diff_lo", "diff_hi", "relative", "p_value")),
        np.asarray(arrays["n_before"][rows, pairs], dtype=np.int64).tolist(),
        np.asarray(arrays["n_after"][rows, pairs], dtype=np.int64).tolist(),
        np.asarray(arrays["digression"][rows, pairs], dtype=bool).tolist(),
        np.asarray(arrays["early"][rows, pairs], dtype=bool).tolist(),
        # may still change as later releases arrive (stats.releases.ReleaseRule.final_at)
        np.asarray(arrays["provisional"][rows, pairs], dtype=bool).tolist(),
        np.asarray(arrays["final_within"][rows, pairs], dtype=np.int64).tolist(),
        [ranges[p].last_good_revision for p in pair_list],
        [ranges[p].first_bad_revision for p in pair_list],
        [ranges[p].text for p in pair_list],
        [ranges[p].log_url for p in pair_list],
    )


def deviation_cells(
    functions: list[str], versions: list[str], arrays: dict[str, Any],
    ranges: list[CulpritRange],
) -> Iterator[dict[str, Any]]:
    """Export rows (DESIGN's deviations fields, µs) of every cell with a verdict.

    ``arrays`` holds per-pair matrices whose rows are ``functions`` and whose columns are
    the pairs of consecutive ``versions``; ``ranges``: each pair's culprit range
    (``pair_ranges``).
    """
    columns = _cell_columns(functions, versions, arrays, ranges)
    return (dict(zip(DEVIATION_FIELDS, cell, strict=True)) for cell in zip(*columns, strict=True))


def deviation_cells_json(functions: list[str], versions: list[str], arrays: dict[str, Any],
                         ranges: list[CulpritRange]) -> bytes:
    """``deviation_cells`` as a JSON array, encoded from the columns (no dict per cell)."""
    columns = _cell_columns(functions, versions, arrays, ranges)
    return msgspec.json.encode([DeviationCell(*cell) for cell in zip(*columns, strict=True)])


FUNCTION_FIELDS = ["release", "n", "median", "median_lo", "median_hi", "mean", "mean_lo",
                   "mean_hi", "verdict", "diff", "diff_lo", "diff_hi", "relative", "p_value",
                   "runs_before", "runs_after", "compared_from", "compared_to", "gap",
                   "digression", "early", "provisional", "final_within",
                   # the pair ending at this release: its culprit range
                   "last_good_revision", "first_bad_revision", "culprit_range", "log_url"]


@dataclass(frozen=True)
class FunctionDetail:
    """One function across the analysed releases (µs), as the function page shows it."""

    releases: list[str]
    median: tuple[np.ndarray, np.ndarray, np.ndarray]
    mean: tuple[np.ndarray, np.ndarray, np.ndarray]
    verdict: np.ndarray  # pairs, of the page's estimator and rule
    diff: np.ndarray
    gap: np.ndarray
    digression: np.ndarray
    rows: list[dict[str, Any]]
    samples: list[list[float]] | None  # runs per release, on demand
    sample_runs: list[list[int]] | None  # the run of each of those values
    narrowing: tuple[list[int], list[float], list[float], list[float], str] | None


def latest_deviations(series: Series) -> dict[str, Any] | None:
    """Regressions and improvements of the last analysed release pair (self time, median,
    the series' rule: the one its matrix shows by default)."""
    generation = analysis_generation(series)
    if generation is None:
        return None

    def make() -> tuple[tuple[np.ndarray, list[str]] | None, int]:
        ids = analysed_release_ids(series)
        if ids is None or len(ids) < 2:
            return None, 0
        # The last pair's two columns only (the home page: one read per series).
        found = stored_analysis(series, "self", "median", series.default_rule, ("verdict",),
                                columns=(len(ids) - 2, len(ids)))
        if found is None or found["verdict"].shape[1] == 0:
            return None, 0
        last = found["verdict"][:, -1].copy()
        return (last, release_versions(found["release_ids"][-2:])), last.nbytes

    # Kept per analysis (and the settings verdicts are read through), as the matrix is.
    key = ("latest", series.pk, generation, series.default_rule, series.min_relative_change,
           series.min_absolute_change_us, metric_settings_key(series))
    kept = memo.remembered(key, make)
    if kept is None:
        return None
    last, versions = kept
    # The newest release may have too few runs to be analysed: say so, never skip it.
    newest = (Release.objects.filter(series=series).order_by("-sort_key", "-id")
              .annotate(done=Count("runs", filter=Q(runs__status=Run.DONE)))
              .values_list("version", "done").first())
    return {
        "from": versions[0], "to": versions[1],
        "regressions": int((last == REGRESSION).sum()),
        "improvements": int((last == IMPROVEMENT).sum()),
        "newest": newest[0] if newest and newest[0] != versions[1] else None,
        "newest_runs": newest[1] if newest else None,
    }


def column_versions(found: dict[str, np.ndarray], columns: np.ndarray) -> dict[int, str]:
    """Versions by column of the whole analysis (e.g. a window's ``first``/``last``: the
    releases a comparison reached, which may lie outside the window read)."""
    wanted = np.unique(np.asarray(columns, dtype=np.int64))
    ids = found["all_release_ids"]
    wanted = wanted[(wanted >= 0) & (wanted < len(ids))]
    return dict(zip(wanted.tolist(), release_versions(ids[wanted]), strict=True))


def function_detail(
    series: Series, function: Function, metric: str, estimator: str, rule: str,
    *, with_samples: bool = False, columns: tuple[int, int] | None = None,
) -> FunctionDetail | None:
    """The function's row of the stored analysis, of the releases ``columns`` (start,
    stop; all when None), with its runs' values on demand (``with_samples``): only that
    row and those releases are read."""
    per_release = ("estimate", "lo", "hi", "n")
    per_pair = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "digression", "provisional",
                "relative", "p_value", "n_before", "n_after", "first", "last", "early",
                "final_within")
    med = stored_analysis(series, metric, "median", rule,
                          per_release + per_pair * (estimator == "median"), columns=columns,
                          function_ids=[function.pk], kept=True)
    mean = stored_analysis(series, metric, "mean", rule,
                           per_release + per_pair * (estimator == "mean"), columns=columns,
                           function_ids=[function.pk], kept=True)
    if med is None or mean is None:
        return None
    where = np.flatnonzero(med["function_ids"] == function.pk)
    if len(where) == 0:
        return None
    f = int(where[0])
    chosen = med if estimator == "median" else mean
    versions = release_versions(med["release_ids"])
    reached = column_versions(chosen, np.concatenate([chosen["first"][f], chosen["last"][f]]))
    ranges = pair_ranges(series, versions)
    rows = []
    for r, version in enumerate(versions):
        row: dict[str, Any] = {
            "release": version, "previous": versions[r - 1] if r else None,
            "n": int(med["n"][f, r]),
            "median": _number(med["estimate"][f, r]), "median_lo": _number(med["lo"][f, r]),
            "median_hi": _number(med["hi"][f, r]), "mean": _number(mean["estimate"][f, r]),
            "mean_lo": _number(mean["lo"][f, r]), "mean_hi": _number(mean["hi"][f, r]),
            "verdict": None, "diff": None, "diff_lo": None, "diff_hi": None, "gap": None,
            "relative": None, "p_value": None, "runs_before": None, "runs_after": None,
            "compared_from": None, "compared_to": None, "digression": False, "early": False,
            "provisional": False, "final_within": None, "culprit": None,
            "last_good_revision": None, "first_bad_revision": None, "culprit_range": None,
            "log_url": None,
        }
        p = r - 1
        if r > 0:
            culprit = ranges[p]
            row.update(culprit=culprit, last_good_revision=culprit.last_good_revision,
                       first_bad_revision=culprit.first_bad_revision,
                       culprit_range=culprit.text, log_url=culprit.log_url)
        if r > 0 and chosen["verdict"][f, p] != NO_VERDICT:
            row.update(
                verdict=verdict_name(int(chosen["verdict"][f, p])),
                diff=_number(chosen["diff"][f, p]),
                diff_lo=_number(chosen["diff_lo"][f, p]),
                diff_hi=_number(chosen["diff_hi"][f, p]),
                relative=_number(chosen["relative"][f, p]),
                p_value=_number(chosen["p_value"][f, p]),
                runs_before=int(chosen["n_before"][f, p]),
                runs_after=int(chosen["n_after"][f, p]),
                compared_from=reached[int(chosen["first"][f, p])],
                compared_to=reached[int(chosen["last"][f, p])],
                gap=_number(chosen["gap"][f, p]),
                digression=bool(chosen["digression"][f, p]),
                early=bool(chosen["early"][f, p]),
                provisional=bool(chosen["provisional"][f, p]),
                final_within=int(chosen["final_within"][f, p]),
            )
        rows.append(row)
    samples = sample_runs = narrowing = None
    if with_samples:
        samples, sample_runs = function_samples(series, function.pk, metric,
                                                med["release_ids"])
        narrowing = _narrowing(samples, versions, chosen["relative"][f])
    return FunctionDetail(
        releases=versions,
        median=(med["estimate"][f], med["lo"][f], med["hi"][f]),
        mean=(mean["estimate"][f], mean["lo"][f], mean["hi"][f]),
        verdict=chosen["verdict"][f], diff=chosen["diff"][f], gap=chosen["gap"][f],
        digression=chosen["digression"][f], rows=rows, samples=samples,
        sample_runs=sample_runs, narrowing=narrowing,
    )


def function_samples(
    series: Series, function_id: int, metric: str, release_ids: np.ndarray
) -> tuple[list[list[float]], list[list[int]]]:
    """The function's time in every done run of these releases (0 where it was not called),
    and the id of each run (its page holds its file: the chart's points link there).

    Reads, of each run's packed times, only the function ids and the metric's array, with
    the binary protocol on PostgreSQL (the one read of the pages that grows with the runs).
    """
    column = "self_us" if metric == "self" else "total_us"
    by_release: dict[int, list[float]] = {int(r): [] for r in release_ids}
    runs: dict[int, list[int]] = {int(r): [] for r in release_ids}
    times = RunTimes.objects.filter(
        run__series=series, run__status=Run.DONE, run__release_id__in=list(by_release)
    ).order_by("run__created", "run__id")
    for release_id, run_id, function_ids, values in binary_values(
        times, ("run__release_id", "run_id", "function_ids", column)
    ):
        hit = np.flatnonzero(np.frombuffer(function_ids, dtype=RunTimes.INT) == function_id)
        by_release[release_id].append(
            float(np.frombuffer(values, dtype=RunTimes.FLOAT)[hit[0]]) if len(hit) else 0.0
        )
        runs[release_id].append(int(run_id))
    return ([by_release[int(r)] for r in release_ids], [runs[int(r)] for r in release_ids])


def _narrowing(
    samples: list[list[float]], versions: list[str], relative: np.ndarray
) -> tuple[list[int], list[float], list[float], list[float], str] | None:
    """Seed 003, Figure 10: the median CI of one release from its first k runs, k = 2..n.

    The release is the one after the largest relative change (else the one with most runs).
    """
    if np.any(np.isfinite(relative) & (relative != 0)):
        r = int(np.nanargmax(np.abs(np.where(np.isfinite(relative), relative, 0.0)))) + 1
    else:
        r = int(np.argmax([len(s) for s in samples]))
    runs = samples[r]
    if len(runs) < 3:
        return None
    ks = list(range(MIN_RUNS, len(runs) + 1))
    cis = [median_ci(runs[:k]) for k in ks]
    return (ks, [c.estimate for c in cis], [c.lo for c in cis], [c.hi for c in cis], versions[r])


def release_changes(release: Release, metric: str, estimator: str, rule: str) -> dict[str, Any]:
    """Deviations of this release against the previous analysed one, largest first."""
    empty: dict[str, Any] = {"previous": None, "rows": [], "regressions": [], "improvements": [],
                             "provisional": False, "early": False, "final_within": 0,
                             "range": None}
    ids = analysed_release_ids(release.series)
    where = np.flatnonzero(ids == release.pk) if ids is not None else []
    if len(where) == 0 or where[0] == 0:
        return empty
    # The release and the one before it: the pair's two columns only.
    c = int(where[0])
    found = stored_analysis(release.series, metric, estimator, rule, columns=(c - 1, c + 1),
                            kept=True)
    if found is None or len(found["release_ids"]) < 2:
        return empty
    p = 0
    versions = release_versions(found["release_ids"])
    verdict = found["verdict"][:, p]
    culprit = pair_ranges(release.series, versions)[0]
    columns = range_columns(culprit)
    del columns["last_good"], columns["first_bad"]  # from_release and to_release
    rows = []
    deviating = np.flatnonzero((verdict == REGRESSION) | (verdict == IMPROVEMENT))
    names = function_names(release.series, found["function_ids"][deviating])
    reached = column_versions(found, np.concatenate([found["first"][deviating, p],
                                                     found["last"][deviating, p]]))
    for f in deviating:
        rows.append({
            "function": names[int(found["function_ids"][f])],
            "function_id": int(found["function_ids"][f]),
            "from_release": versions[0], "to_release": versions[1],
            "verdict": verdict_name(int(verdict[f])),
            "gap": _number(found["gap"][f, p]), "diff": _number(found["diff"][f, p]),
            "diff_lo": _number(found["diff_lo"][f, p]), "diff_hi": _number(found["diff_hi"][f, p]),
            "relative": _number(found["relative"][f, p]),
            "p_value": _number(found["p_value"][f, p]),
            "runs_before": int(found["n_before"][f, p]),
            "runs_after": int(found["n_after"][f, p]),
            "compared_from": reached[int(found["first"][f, p])],
            "compared_to": reached[int(found["last"][f, p])],
            "digression": bool(found["digression"][f, p]),
            "early": bool(found["early"][f, p]),
            "provisional": bool(found["provisional"][f, p]),
            "final_within": int(found["final_within"][f, p]),
            **columns,
        })
    rows.sort(key=lambda row: -(abs(row["relative"] or 0.0)))
    return {
        "previous": versions[0], "rows": rows, "range": culprit,
        "regressions": [r for r in rows if r["verdict"] == "regression"][:50],
        "improvements": [r for r in rows if r["verdict"] == "improvement"][:50],
        "provisional": bool(found["provisional"][0, p]) if len(verdict) else False,
        "final_within": int(found["final_within"][0, p]) if len(verdict) else 0,
    }


SUMMARY_LABELS = {
    "events": "Events read",
    "slices": "Slices timed (function calls)",
    "selected_threads": "Threads timed",
    "ignored_phases": "Events of other phases, ignored",
    "unmatched_end": "E events without a B",
    "unclosed_begin": "B events never closed",
    "x_without_dur": "X events without a duration",
    "x_unfinished": "X events still running when tracing stopped",
    "clipped_overlaps": "Overlapping slices, clipped",
    "end_name_mismatches": "E events naming another slice than their B",
    "shortened_names": "Names over 1,000 characters, shortened",
    "notes": "Notes",
}
"""The parse summary's fields (ingest.traces.ParseSummary) as the run page words them."""


def summary_rows(summary: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A run's parse summary as (label, value) lines, in SUMMARY_LABELS' order, then any
    field this version does not know, by its name."""
    if not summary:
        return []

    def text(key: str, value: Any) -> str:
        if key == "selected_threads":
            return "; ".join(
                f"{t.get('thread_name') or '?'} of {t.get('process_name') or '?'} "
                f"(pid {t.get('pid')}, tid {t.get('tid')})" for t in value) or "none"
        if key == "ignored_phases":
            return ", ".join(f"{ph or '(none)'}: {n:,}" for ph, n in sorted(value.items())) or "0"
        if key == "notes":
            return " ".join(str(v) for v in value) or "—"
        return f"{value:,}" if isinstance(value, int) else str(value)

    keys = [k for k in SUMMARY_LABELS if k in summary]
    keys += sorted(k for k in summary if k not in SUMMARY_LABELS)
    return [(SUMMARY_LABELS.get(k, k), text(k, summary[k])) for k in keys]


def release_pair_precision(
    series: str, base: str, new: str, function_id: int, *, metric: str = "self",
    min_change_pct: float = 1.0,
) -> dict[str, Any]:
    """Seed 004's "how many more samples?" for two releases of a trace series: one
    function's per-run times in ``base`` and ``new`` (independent runs, not pairs), an
    anytime-valid interval of the change (new against base) against the smallest change
    that matters (``min_change_pct`` %), and about how many more runs of each release would
    make it narrow enough. The estimand (``stats.paired.precision_relative_two_sample``,
    docs/statistics.md §3.11): the change of the geometric mean in percent when every run's
    time is > 0, else the difference of means in µs against ``min_change_pct`` % of the
    base's mean (a function absent from a run counts 0 µs there). ``estimand`` names it and
    ``unit`` is that of ``diff``/``lo``/``hi``/``width``/``min_change``. Computed on request
    from the runs (like the function page's raw runs); nothing is stored."""
    s = get_object_or_404(Series, name=series)
    releases = {r.version: r for r in Release.objects.filter(series=s, version__in=[base, new])}
    for version in (base, new):
        if version not in releases:
            raise UserError(f"series {series!r} has no release {version!r}")
    if metric not in ("self", "total"):
        raise UserError(f"metric must be self or total, got {metric!r}")
    if not 0 < min_change_pct <= 1000:
        raise UserError(f"min_change must be a percentage in (0, 1000], got {min_change_pct:g}")
    function = get_object_or_404(Function, pk=function_id, series=s)
    samples = []
    for version in (base, new):
        ids, self_us, total_us, _calls, runs = release_times(releases[version])
        if len(runs) < 2:
            raise UserError(f"release {version!r} has {len(runs)} done run(s): at least 2 needed")
        matrix = self_us if metric == "self" else total_us
        row = ids.index(function.pk) if function.pk in ids else None
        samples.append(np.zeros(len(runs)) if row is None else np.asarray(matrix[row]))
    a, b = samples
    if float(a.mean()) == 0:
        raise UserError(f"function {function.pk} takes no time in release {base!r}")
    p = precision_relative_two_sample(a, b, min_change_pct)
    unit = "%" if p.scale == "log" else "µs"
    return {
        "series": s.name, "function": function.name, "base": base, "new": new,
        "metric": metric, "unit": unit, "n_base": int(a.size), "n_new": int(b.size),
        "estimand": p.estimand, "scale": p.scale, "min_change_pct": float(min_change_pct),
        "diff": p.estimate, "lo": p.lo, "hi": p.hi, "width": p.width,
        "min_change": p.min_change, "narrow_enough": p.narrow_enough,
        "excludes_zero": p.excludes_zero, "more_runs_per_release": p.more_needed,
        "sentence": p.sentence(unit, "runs of each release"),
    }
