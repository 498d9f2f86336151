"""Reads for pages, API and exports (no writes here)."""

from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db.models import Count, Q

from deviations.analysis import unpack
from deviations.models import Function, Release, Run, Series, SeriesAnalysis
from deviations.stats.compare import NO_VERDICT, verdict_name


def function_names(series: Series) -> dict[int, str]:
    return dict(Function.objects.filter(series=series).values_list("id", "name"))


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


def releases_with_counts(series: Series) -> list[Release]:
    return list(
        series.releases.annotate(
            runs_done=Count("runs", filter=Q(runs__status=Run.DONE)),
            runs_failed=Count("runs", filter=Q(runs__status=Run.FAILED)),
            runs_pending=Count("runs", filter=Q(runs__status=Run.PENDING)),
        ).order_by("sort_key", "id")
    )


def release_times(release: Release) -> tuple[list[int], Any, Any, Any, list[Run]]:
    """Function ids and (functions × runs) matrices of self time, total time and calls.

    A function absent from a run was not called in it: its times are 0 there, not missing.
    """
    runs = list(done_runs(release.series, release))
    packed = [run.times.arrays() for run in runs]
    ids = sorted({int(i) for arrays in packed for i in arrays[0]})
    row = {fid: k for k, fid in enumerate(ids)}
    shape = (len(ids), len(runs))
    self_us, total_us, calls = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64)
    for j, (fids, s, t, c) in enumerate(packed):
        rows = np.fromiter((row[int(f)] for f in fids), dtype=np.int64, count=len(fids))
        self_us[rows, j], total_us[rows, j], calls[rows, j] = s, t, c
    return ids, self_us, total_us, calls, runs


def release_function_table(release: Release, limit: int = 100) -> list[dict[str, Any]]:
    """The release's functions by median self time over its done runs (largest first)."""
    ids, self_us, total_us, calls, runs = release_times(release)
    if not runs:
        return []
    names = dict(Function.objects.filter(id__in=ids).values_list("id", "name"))
    med_self = np.median(self_us, axis=1)
    order = np.argsort(-med_self, kind="stable")[:limit]
    return [
        {
            "id": ids[k],
            "name": names[ids[k]],
            "self_ms": med_self[k] / 1000,
            "total_ms": float(np.median(total_us[k])) / 1000,
            "calls": float(np.median(calls[k])),
            "runs": len(runs),
        }
        for k in order
    ]


def stored_analysis(
    series: Series, metric: str, estimator: str, rule: str
) -> dict[str, np.ndarray] | None:
    """The stored matrices of one (metric, estimator, rule), or None before any analysis."""
    found = SeriesAnalysis.objects.filter(
        series=series, metric=metric, estimator=estimator, rule=rule
    ).first()
    return unpack(found) if found is not None else None


def release_versions(release_ids: np.ndarray) -> list[str]:
    found = Release.objects.filter(id__in=release_ids.tolist()).values_list("id", "version")
    versions = dict(found)
    return [versions[int(r)] for r in release_ids]


class NotAnalysedError(LookupError):
    """The series has no stored analysis (fewer than two releases with two runs, or none yet)."""


def _analysis_or_raise(series: Series, metric: str, estimator: str, rule: str) -> dict[str, Any]:
    found = stored_analysis(series, metric, estimator, rule)
    if found is None:
        raise NotAnalysedError(
            f"series {series.name!r} has no analysis yet: it needs two releases with at least "
            f"two done runs each (then `python manage.py analyse --series {series.name}`)"
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
    return _deviation_rows(found, release_versions(found["release_ids"]), function_names(series))


def _deviation_rows(
    found: dict[str, Any], versions: list[str], names: dict[int, str]
) -> Iterator[dict[str, Any]]:
    verdict = found["verdict"]
    for f, fid in enumerate(found["function_ids"]):
        for p in range(verdict.shape[1]):
            code = int(verdict[f, p])
            if code == NO_VERDICT:
                continue
            yield {
                "function": names[int(fid)],
                "from_release": versions[p],
                "to_release": versions[p + 1],
                "verdict": verdict_name(code),
                "gap": _number(found["gap"][f, p]),
                "diff": _number(found["diff"][f, p]),
                "diff_lo": _number(found["diff_lo"][f, p]),
                "diff_hi": _number(found["diff_hi"][f, p]),
                "digression": bool(found["digression"][f, p]),
            }
