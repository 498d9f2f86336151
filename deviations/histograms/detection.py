"""Histogram change detection: load probes' build series, run the rule, store changes once.

The only glue between the histogram models and ``deviations.stats.histograms``. Probes that
share a rule, its parameters and a series shape are scanned in one vectorised call. Every
pass stores, per probe, the distance series and the cutoffs (``Probe.scan``, for the chart)
and inserts the changes not stored yet (unique per (probe, build id)); a stored change is
never modified by a later pass. docs/histograms.md describes the defaults.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.utils import timezone

from deviations.core.db import batches
from deviations.core.packing import pack, unpack
from deviations.core.versions import sort_key
from deviations.histograms.models import (
    HistogramChange,
    HistogramRuleDefaults,
    HistogramSnapshot,
    Probe,
)
from deviations.histograms.rules import count_scan, judged_on_counts, rule_of, scan
from deviations.stats.histograms import ChangeScan, hellinger
from deviations.stats.proportions import CountChange

# Defaults of deviations.stats.histograms, repeated here only to locate a change's past
# builds when neither the probe nor the global row sets them.
_PAST_BUILDS, _FUTURE_BUILDS, _MIN_COUNT = 7, 2, 1000.0
#: Probes loaded and scanned at a time (bounds the memory of one pass).
_BATCH = 500


@dataclass(frozen=True)
class ProbeSeries:
    """A probe's builds on one bucket layout, in build order; raw counts per build."""

    probe: Probe
    build_ids: list[str]
    edges: np.ndarray
    counts: np.ndarray  # (builds, buckets)
    # Builds left out because their bucket layout differs from the latest build's.
    other_layout: list[str]


def load_series(probe_ids: Iterable[int]) -> list[ProbeSeries]:
    """The build series of these probes (probes without snapshots are left out)."""
    ids = list(probe_ids)
    probes = {p.pk: p for p in Probe.objects.filter(pk__in=ids)}
    rows: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for chunk in batches(ids, _BATCH):
        query = (
            HistogramSnapshot.objects.filter(probe_id__in=chunk)
            .order_by("probe_id", "sort_key", "id")
            .values_list("probe_id", "build_id", "edges", "counts", "normalised", "total")
        )
        for row in query.iterator(chunk_size=2000):
            rows[row[0]].append(row[1:])
    out = []
    for probe_id, snapshots in rows.items():
        latest = bytes(snapshots[-1][1])
        builds, counts, other = [], [], []
        for build_id, edges, data, normalised, total in snapshots:
            if bytes(edges) != latest:  # the same packed float64 edges, or another layout
                other.append(build_id)
                continue
            c = unpack(data)
            # Proportions (GLAM) become counts with their number of clients; without it
            # they stay proportions, which the rule's data filter then leaves out.
            counts.append(c * total if normalised and total else c)
            builds.append(build_id)
        out.append(
            ProbeSeries(probes[probe_id], builds, unpack(latest), np.stack(counts), other)
        )
    return out


def detect(probe_ids: Iterable[int] | None = None) -> list[int]:
    """Run the change rule on these probes (all when None); returns the ids of the changes
    stored by this pass (changes found earlier are not returned again)."""
    ids = list(Probe.objects.values_list("pk", flat=True)) if probe_ids is None else list(
        probe_ids
    )
    defaults = HistogramRuleDefaults.current()
    groups: dict[tuple[Any, ...], list[tuple[ProbeSeries, str, dict[str, Any]]]] = {}
    for chunk in batches(ids, _BATCH):
        for series in load_series(chunk):
            rule, params = rule_of(series.probe, defaults)
            key = (rule, tuple(sorted(params.items())), series.counts.shape)
            groups.setdefault(key, []).append((series, rule, params))
    candidates: list[HistogramChange] = []
    probes: list[Probe] = []
    now = timezone.now()
    for members in groups.values():
        rule, params = members[0][1], members[0][2]
        result = scan(rule, np.stack([m[0].counts for m in members]), params)
        for j, (series, _, _) in enumerate(members):
            series.probe.scan = _scan_record(rule, series, result, j)
            series.probe.detected_at = now
            probes.append(series.probe)
        found: dict[tuple[int, int], HistogramChange] = {}
        for change in result.changes():
            series = members[change.index[0]][0]
            found[change.index[0], change.build] = _change(
                series, change.index[0], change.build, rule, params, result
            )
        # Boolean and enumerated probes are judged on their counts too: a share change
        # replaces the shape rule's words at its build, a volume change only adds.
        counted = [j for j, m in enumerate(members) if judged_on_counts(m[0].probe)]
        if counted:
            counts = count_scan(np.stack([members[j][0].counts for j in counted]), params)
            for cc in counts.changes():
                j = counted[cc.index[0]]
                if cc.kind == "volume" and (j, cc.build) in found:
                    continue
                found[j, cc.build] = _count_change(
                    members[j][0], j, cc, rule, params, result
                )
        candidates.extend(found[key] for key in sorted(found))
    with transaction.atomic():
        _store_scans(probes, now)
        return _insert_new(candidates)


def _store_scans(probes: list[Probe], now: Any) -> None:
    """One prepared UPDATE run for every probe: the ORM's bulk_update builds a CASE
    expression per row (about 3 s for 1,000 probes) and one update() per probe costs ~1 ms
    of query building each."""
    meta = Probe._meta
    scan, detected = meta.get_field("scan"), meta.get_field("detected_at")
    q = connection.ops.quote_name
    # Only the model's own quoted table and column names are formatted in; values are
    # parameters.
    sql = (
        f"UPDATE {q(meta.db_table)} SET {q(scan.column)} = %s, {q(detected.column)} = %s "  # noqa: S608
        f"WHERE {q(meta.pk.column)} = %s"
    )
    when = detected.get_db_prep_save(now, connection)
    rows = [(scan.get_db_prep_save(p.scan, connection), when, p.pk) for p in probes]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _insert_new(candidates: list[HistogramChange]) -> list[int]:
    known: set[tuple[int, str]] = set()
    probe_ids = sorted({c.probe_id for c in candidates})
    for chunk in batches(probe_ids, _BATCH):
        known.update(
            HistogramChange.objects.filter(probe_id__in=chunk).values_list("probe_id", "build_id")
        )
    new = [c for c in candidates if (c.probe_id, c.build_id) not in known]
    if not new:
        return []
    # A concurrent pass may insert the same change: the unique key keeps one.
    HistogramChange.objects.bulk_create(new, batch_size=_BATCH, ignore_conflicts=True)
    keys = {(c.probe_id, c.build_id) for c in new}
    found = HistogramChange.objects.filter(
        probe_id__in={p for p, _ in keys}, build_id__in={b for _, b in keys}
    ).values_list("pk", "probe_id", "build_id")
    return sorted(pk for pk, p, b in found if (p, b) in keys)


def _finite(values: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values]


def _scan_record(rule: str, series: ProbeSeries, result: ChangeScan, j: int) -> dict[str, Any]:
    return {
        "rule": rule,
        "builds": series.build_ids,
        "distance": _finite(result.distance[j]),
        "cutoff": _finite(result.cutoff[j]),
        "reason": [str(r) for r in result.reason[j]],
        "other_layout": series.other_layout,
    }


def _usable(counts: np.ndarray, min_count: float) -> np.ndarray:
    """Mozilla's data filter, as the rule applies it: total and largest bucket."""
    return np.logical_and(counts.sum(axis=-1) >= min_count, counts.max(axis=-1) >= min_count)


def _mean_normalised(counts: np.ndarray) -> np.ndarray:
    total = counts.sum(axis=-1, keepdims=True)
    p = np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)
    return p.mean(axis=0) if len(p) else np.zeros(counts.shape[-1])


def _change(
    series: ProbeSeries, j: int, i: int, rule: str, params: dict[str, Any], result: ChangeScan
) -> HistogramChange:
    """The row of a change at build ``i``: before = the usable builds among the past ones
    the rule compared with, after = the build and the later builds that confirmed it."""
    past = int(params.get("past_builds", _PAST_BUILDS))
    future = int(params.get("future_builds", _FUTURE_BUILDS))
    usable = _usable(series.counts, float(params.get("min_count", _MIN_COUNT)))
    refs = [i - m for m in range(1, past + 1) if i - m >= 0 and usable[i - m]]
    hit = result.distance[j, i], result.cutoff[j, i], result.kind[j, i]
    shift = result.shift_buckets[j, i]
    change = HistogramChange(
        probe_id=series.probe.pk,
        build_id=series.build_ids[i],
        previous_build_id=series.build_ids[refs[0]] if refs else "",
        distance=float(hit[0]),
        cutoff=float(hit[1]),
        kind=str(hit[2]),
        shift_buckets=float(shift) if np.isfinite(shift) else None,
        rule=rule,
        edges=pack(series.edges),
        before=pack(_mean_normalised(series.counts[refs])),
        after=pack(_mean_normalised(series.counts[i : i + future + 1])),
    )
    change.sort_key = sort_key(change.build_id)  # bulk_create does not call save()
    return change


def bucket_label(series: ProbeSeries, bucket: int) -> str:
    """``true``/``false`` for a boolean probe, else the bucket's lower edge."""
    low = float(series.edges[bucket])
    if series.probe.histogram_type in ("boolean", "flag") and low in (0.0, 1.0):
        return "true" if low == 1.0 else "false"
    return f"{low:g}"


def _count_change(
    series: ProbeSeries, j: int, cc: CountChange, rule: str, params: dict[str, Any],
    result: ChangeScan,
) -> HistogramChange:
    """The row of a count change: the shape rule's row at the build (before/after
    histograms, distance and cutoff, for the chart) with the count rule's kind and
    figures."""
    change = _change(series, j, cc.build, rule, params, result)
    change.kind = cc.kind
    change.shift_buckets = None
    if not np.isfinite(change.distance):
        change.distance = float(hellinger(unpack(change.before), unpack(change.after)))
    if not np.isfinite(change.cutoff):
        change.cutoff = 0.0
    if cc.kind == "proportion":
        change.bucket = bucket_label(series, cc.bucket)
        change.share_before, change.share_after = cc.before, cc.after
        change.diff_lo, change.diff_hi = cc.diff_lo, cc.diff_hi
    change.clients_before, change.clients_after = cc.clients_before, cc.clients_after
    change.confirm_builds = cc.delay if cc.delay >= 0 else None
    return change
