"""Reads for pages, API and exports (no writes here)."""

from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db.models import Count, Q

from deviations.models import Function, Release, Run, Series


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
