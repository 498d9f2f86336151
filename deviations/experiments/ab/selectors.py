"""Reads of A/B runs and hosts (pages, API), and seed 004's question for two releases of
a trace series."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from deviations.core.errors import UserError
from deviations.experiments.ab.models import AAFloorRecord, ABHost, ABRun
from deviations.stats.paired import precision_two_sample
from deviations.traces.models import Function, Release, Series
from deviations.traces.selectors import release_times


def recent_runs(limit: int = 100) -> QuerySet[ABRun]:
    return ABRun.objects.select_related("host").order_by("-created", "-id")[:limit]


def host_floors(host: ABHost) -> list[AAFloorRecord]:
    """Every floor the host's A/A runs set, newest first per metric."""
    return list(AAFloorRecord.objects.filter(host=host).select_related("run"))


def current_floors(host: ABHost) -> list[AAFloorRecord]:
    seen: set[str] = set()
    out = []
    for rec in host_floors(host):
        if rec.metric not in seen:
            seen.add(rec.metric)
            out.append(rec)
    return out


def by_build(run: ABRun) -> list[tuple[str, list[dict[str, Any]]]]:
    """The run's comparisons grouped by candidate build, metrics side by side (seed 002:
    throughput and latency from every run, together)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in run.result.get("comparisons", []):
        # Runs stored before issue 22 hold the mean only, in "diff", "diff_lo", "diff_hi".
        hl = c.get("estimand", "mean") != "mean"
        attained = c.get("attained")
        shown = {
            **c, "level_pct": f"{100 * c['level']:.4g}",
            "attained_pct": f"{100 * (c['level'] if attained is None else attained):.4g}",
            "mean_shown": c["mean"] if hl else c["diff"],
            "mean_lo_shown": c["mean_lo"] if hl else c["diff_lo"],
            "mean_hi_shown": c["mean_hi"] if hl else c["diff_hi"],
            "spike_pairs": (c.get("spikes") or {}).get("pairs", []),
            "relative_pct": None if c["relative"] is None else f"{100 * c['relative']:+.3g}",
            "sign_p_text": _p(c["sign_test_p"]), "holm_p_text": _p(c["holm_p"]),
        }
        groups.setdefault(c["build"], []).append(shown)
    return list(groups.items())


def uses_hodges_lehmann(run: ABRun) -> bool:
    """Whether the run's verdicts come from the Hodges–Lehmann interval (stored since
    issue 22) rather than the interval of the mean."""
    return bool(run.result.get("method") == "walsh")


def _p(p: float | None) -> str:
    return "—" if p is None else f"{p:.3g}"


def run_out(run: ABRun) -> dict[str, Any]:
    """The API's view of a run."""
    return {
        "id": run.pk, "kind": run.kind, "name": run.name,
        "host": run.host.name if run.host_id else None,
        "aa_run": run.aa_run_id, "baseline": run.baseline, "created": run.created.isoformat(),
        "min_change_pct": run.min_change_pct,
        "comparisons": run.result.get("comparisons", []),
        "floors": run.result.get("floors", {}),
        "moved": run.result.get("moved", []),
        "page_url": f"/ab/runs/{run.pk}/",
    }


def release_pair_precision(
    series: str, base: str, new: str, function_id: int, *, metric: str = "self",
    min_change_pct: float = 1.0,
) -> dict[str, Any]:
    """Seed 004's "how many more samples?" for two releases of a trace series: one
    function's per-run times in ``base`` and ``new`` (independent runs, not pairs), the
    anytime-valid interval of the difference of means (new − base) against the smallest
    change that matters (``min_change_pct`` % of the base's mean), and about how many more
    runs of each release would make it narrow enough. Computed on request from the runs
    (like the function page's raw runs); nothing is stored."""
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
    base_mean = float(a.mean())
    if base_mean == 0:
        raise UserError(f"function {function.pk} takes no time in release {base!r}")
    p = precision_two_sample(a, b, abs(base_mean) * min_change_pct / 100.0)
    return {
        "series": s.name, "function": function.name, "base": base, "new": new,
        "metric": metric, "unit": "µs", "n_base": int(a.size), "n_new": int(b.size),
        "diff": p.estimate, "lo": p.lo, "hi": p.hi, "width": p.width,
        "min_change": p.min_change, "narrow_enough": p.narrow_enough,
        "excludes_zero": p.excludes_zero, "more_runs_per_release": p.more_needed,
        "sentence": p.sentence("µs", "runs of each release"),
    }
