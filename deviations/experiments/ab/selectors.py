"""Reads of A/B runs and hosts (pages, API)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from deviations.experiments.ab.models import AAFloorRecord, ABHost, ABRun


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
