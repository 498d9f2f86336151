"""The glue between stored runs and ``deviations.stats``: load, compute, store.

``analyse_series`` builds, for each metric (self time, total time), the samples array
functions × releases × runs of a series, runs ``compare_matrix`` for every (estimator,
rule) and stores the results as packed matrices (``SeriesAnalysis``). Pages and exports
only read them.

Which releases are columns: those with at least two done runs (an interval needs two), in
series order; "consecutive" means consecutive among them. A function absent from a run
was not called in it: 0 µs there, not a missing value.

Idempotence: an analysis records the instant of its snapshot. A request is skipped when a
stored analysis already saw every run that finished (``Run.finished``); two analyses
racing on one series serialise on the series row and the older snapshot never overwrites
the newer (docs/architecture.md, "Analysis").
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import product

import numpy as np
from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from deviations.models import Run, RunTimes, Series, SeriesAnalysis
from deviations.stats.compare import ComparisonMatrix, compare_matrix
from deviations.stats.intervals import MIN_RUNS

METRICS = ("self", "total")
ESTIMATORS = ("median", "mean")
RULES = ("paper", "recommended")
PER_RELEASE = ("estimate", "lo", "hi", "n")
PER_PAIR = ("verdict", "gap", "diff", "diff_lo", "diff_hi", "p_value", "q_value", "digression")


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
    """The done runs of releases with at least ``MIN_RUNS`` of them, NaN-padded."""
    runs = (
        Run.objects.filter(series=series, status=Run.DONE)
        .order_by("release__sort_key", "release_id", "created", "id")
        .values_list("release_id", "id")
    )
    by_release: dict[int, list[int]] = {}
    for release_id, run_id in runs:
        by_release.setdefault(release_id, []).append(run_id)
    columns = [(rid, ids) for rid, ids in by_release.items() if len(ids) >= MIN_RUNS]
    wanted = [run_id for _, ids in columns for run_id in ids]
    packed = {t.run_id: t.arrays() for t in RunTimes.objects.filter(run_id__in=wanted)}
    function_ids = np.unique(
        np.concatenate([packed[r][0] for r in wanted]) if wanted else np.empty(0, np.int64)
    )
    width = max((len(ids) for _, ids in columns), default=0)
    shape = (len(function_ids), len(columns), width)
    self_us, total_us = np.full(shape, np.nan), np.full(shape, np.nan)
    for col, (_, ids) in enumerate(columns):
        self_us[:, col, : len(ids)] = 0.0
        total_us[:, col, : len(ids)] = 0.0
        for k, run_id in enumerate(ids):
            fids, s, t, _ = packed[run_id]
            rows = np.searchsorted(function_ids, fids)
            self_us[rows, col, k] = s
            total_us[rows, col, k] = t
    return SeriesSamples(
        np.array([rid for rid, _ in columns], dtype=np.int64), function_ids, self_us, total_us
    )


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpack(analysis: SeriesAnalysis) -> dict[str, np.ndarray]:
    """The stored arrays of an analysis, plus ``release_ids`` and ``function_ids``."""
    with np.load(io.BytesIO(bytes(analysis.arrays)), allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    arrays["release_ids"] = np.frombuffer(bytes(analysis.release_ids), dtype="<i8")
    arrays["function_ids"] = np.frombuffer(bytes(analysis.function_ids), dtype="<i8")
    return arrays


def _pack(matrix: ComparisonMatrix, estimator: str) -> bytes:
    stats = matrix.median if estimator == "median" else matrix.mean
    return _npz(
        estimate=stats.estimate, lo=stats.lo, hi=stats.hi, n=matrix.n,
        verdict=matrix.verdict, gap=matrix.gap, diff=matrix.diff, diff_lo=matrix.diff_lo,
        diff_hi=matrix.diff_hi, p_value=matrix.p_value, q_value=matrix.q_value,
        digression=matrix.digression,
    )


def is_up_to_date(series: Series) -> bool:
    latest = Run.objects.filter(series=series, status=Run.DONE).aggregate(t=Max("finished"))["t"]
    seen = SeriesAnalysis.objects.filter(series=series).aggregate(t=Min("snapshot_at"))["t"]
    if latest is None:
        return not SeriesAnalysis.objects.filter(series=series).exists()
    return seen is not None and seen >= latest


def analyse_series(series_id: int, *, force: bool = False) -> str:
    """(Re)compute and store a series' matrices. Returns what happened, in a few words."""
    series = Series.objects.get(pk=series_id)
    if not force and is_up_to_date(series):
        return "up to date"
    snapshot = timezone.now()
    samples = load_samples(series)
    rows = []
    if len(samples.release_ids) >= 2:
        for metric, estimator, rule in product(METRICS, ESTIMATORS, RULES):
            matrix = compare_matrix(samples.metric(metric), rule=rule, estimator=estimator)
            rows.append(SeriesAnalysis(
                series=series, metric=metric, estimator=estimator, rule=rule,
                release_ids=samples.release_ids.astype("<i8").tobytes(),
                function_ids=samples.function_ids.astype("<i8").tobytes(),
                arrays=_pack(matrix, estimator), snapshot_at=snapshot,
            ))
    with transaction.atomic():
        Series.objects.select_for_update().get(pk=series.pk)
        stored = SeriesAnalysis.objects.filter(series=series)
        newest = stored.aggregate(t=Max("snapshot_at"))["t"]
        if newest is not None and newest > snapshot:
            return "a newer analysis is stored"
        stored.delete()
        SeriesAnalysis.objects.bulk_create(rows)
    if not rows:
        return "fewer than two releases with two or more done runs: nothing to compare"
    return (
        f"{len(samples.function_ids)} functions × {len(samples.release_ids)} releases analysed"
    )

