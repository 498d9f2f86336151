"""The only glue between A/B runs and the statistics (``deviations.stats.paired``): plain
data in (``ingest.ab.ABData.to_dict()``), plain JSON out. No database: the CLI calls it on
files, services on uploads, and the result is stored (``ABRun.result``).

Per (metric, candidate build): the paired differences ``b_i - a_i`` (B − A), their
Hodges–Lehmann location with its Walsh-average interval (``METHOD``; Holm's step-down
levels across every comparison of the run, so several metrics or builds at once keep the
family-wise error at 5 %), the mean with its robust interval beside it, the pairs beyond
the spike fence (``stats.paired.spike_pairs``), named in a sentence, the sign test and
its disagreement warning, the sign-test interval of the median, the A/A floor, the verdict
and seed 002's four-number line, the relative change, and seed 004's "how many more
samples?" (an anytime-valid interval against the smallest change that matters).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from deviations.stats import Direction
from deviations.stats.multiple import holm
from deviations.stats.paired import (
    PairedMethod,
    PairedResult,
    aa_floor,
    classify,
    floor_change,
    holm_paired,
    paired_ci_from_differences,
    precision_relative_paired,
    relative_scale,
    result_line,
    spike_pairs,
)

CONFIDENCE = 0.95
#: The interval of every comparison and A/A floor: the Hodges–Lehmann location of the
#: differences, whose Walsh-average interval covers >= 93 % at 5, 10 and 30 pairs when one
#: B slice in 10 stalls x10, with no more width than the robust interval of the mean on
#: clean runs (docs/statistics.md, "Rare spikes"); the interval of the mean covered 40-65 %
#: there. ``"robust"`` (the mean, seed 002's statistic) stays selectable: ``ab_result
#: --interval mean``.
METHOD: PairedMethod = "walsh"
#: Bootstrap resamples and seed: seed 002's 10,000, seeded so a stored result can be
#: recomputed exactly.
RESAMPLES = 10_000
SEED = 0
#: Level of each test of ``stats.paired.floor_change`` (spread and centre of the A/A
#: differences): a moved floor is flagged about once in 100 A/A runs of an unchanged host.
FLOOR_MOVE_ALPHA = 0.01
#: Seed 002's advisory threshold: a change below 1 % (of the SLO budget there; of the
#: baseline's mean here) is not worth blocking on.
DEFAULT_MIN_CHANGE_PCT = 1.0


@dataclass(frozen=True)
class Floor:
    """A metric's floor as applied to a run, and where it came from."""

    value: float
    source: str  # "A/A run uploaded with it", "stored A/A run #12 of host bench-1"


def label(metric: dict[str, Any]) -> str:
    """How a metric is named in lines: ``p99 latency`` when its slices' statistic was
    computed from raw values, else its name."""
    if metric.get("raw"):
        return f"p{metric['percentile']:g} {metric['name']}"
    return str(metric["name"])


def differences(data: dict[str, Any], metric: str, build: str) -> np.ndarray:
    values = data["values"][metric]
    return np.asarray(values[build], dtype=np.float64) - np.asarray(
        values[data["baseline"]], dtype=np.float64
    )


def comparisons(data: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    return [(m, b) for m in data["metrics"] for b in data["builds"]
            if b in data["values"][m["name"]]]


def aa_floors(aa: dict[str, Any], method: PairedMethod = METHOD) -> dict[str, dict[str, Any]]:
    """Per metric, the floor of an A/A run (its first candidate arm against the baseline),
    from the same interval as the A/B comparisons it is held against (``method``):
    ``{"floor", "lo", "hi", "estimate", "n", "confidence", "biased", "differences"}``."""
    out = {}
    for m, b in comparisons(aa):
        if m["name"] in out:
            continue
        d = differences(aa, m["name"], b)
        res = paired_ci_from_differences(d, CONFIDENCE, RESAMPLES, SEED, method=method)
        f = aa_floor(res)
        out[m["name"]] = {
            "floor": f.floor, "lo": f.lo, "hi": f.hi, "estimate": f.estimate, "n": f.n,
            "confidence": f.confidence, "biased": f.biased,
            "differences": [float(x) for x in d],
        }
    return {m: json_safe(f) for m, f in out.items()}


def floor_moved(previous: list[float] | None, new: list[float]) -> dict[str, Any] | None:
    """How the A/A differences ``new`` compare with the ``previous`` A/A run's of the same
    host and metric (``stats.paired.floor_change``); None without a previous run."""
    if previous is None or len(previous) < 3 or len(new) < 3:
        return None
    ch = floor_change(previous, new, FLOOR_MOVE_ALPHA)
    return json_safe({"moved": ch.moved, "spread_ratio": ch.spread_ratio,
                      "spread_p": ch.spread_p, "shift": ch.shift, "shift_p": ch.shift_p})


def analyse(
    data: dict[str, Any],
    floors: dict[str, Floor] | None = None,
    *,
    min_change_pct: float = DEFAULT_MIN_CHANGE_PCT,
    method: PairedMethod = METHOD,
) -> dict[str, Any]:
    """The stored result of a run (format: ``experiments.ab.models``)."""
    floors = floors or {}
    pairs = comparisons(data)
    diffs = [differences(data, m["name"], b) for m, b in pairs]
    results = holm_paired(diffs, CONFIDENCE, RESAMPLES, SEED, method=method)
    holm_p = _holm_adjusted([r.p_value for r in results])
    out = []
    for (metric, build), d, res, hp in zip(pairs, diffs, results, holm_p, strict=True):
        name = metric["name"]
        a = np.asarray(data["values"][name][data["baseline"]], dtype=np.float64)
        floor = floors.get(name)
        direction: Direction = (
            "higher_is_better" if metric["direction"] == "higher_is_better" else "lower_is_better"
        )
        base = float(a.mean())
        relative = res.estimate / base if base != 0 else None
        b_values = np.asarray(data["values"][name][build], dtype=np.float64)
        # the smallest change is a percentage: change of the geometric mean when every
        # value is > 0, else the difference of means against that % of the baseline's mean
        # (stats.paired.precision_relative_paired; docs/statistics.md, §3.11)
        precision = (
            precision_relative_paired(a, b_values, min_change_pct, 1.0 - CONFIDENCE)
            if min_change_pct > 0 and (base != 0 or relative_scale(a, b_values) == "log")
            else None
        )
        spikes = _spikes(d, a, b_values, list(data["slices"][name]))
        out.append({
            "metric": name,
            "label": label(metric),
            "build": build,
            "baseline": data["baseline"],
            "unit": metric["unit"],
            "direction": direction,
            "n": res.n,
            "slices": list(data["slices"][name]),
            "a": [float(x) for x in a],
            "b": [float(x) for x in data["values"][name][build]],
            "differences": [float(x) for x in d],
            "estimand": res.estimand,
            "diff": res.estimate,
            "diff_lo": res.lo,
            "diff_hi": res.hi,
            "level": res.confidence,
            "attained": res.attained,
            "mean": res.mean,
            "mean_lo": res.mean_lo,
            "mean_hi": res.mean_hi,
            "spikes": spikes,
            "spike_text": spike_sentence(spikes, res, metric["unit"]),
            "relative": relative,
            "p_value": res.p_value,
            "holm_p": hp,
            "sign_test_p": res.sign_p,
            "n_positive": res.n_positive,
            "n_negative": res.n_negative,
            "median": res.median,
            "median_lo": res.median_lo,
            "median_hi": res.median_hi,
            "median_level": res.median_confidence,
            "aa_floor": None if floor is None else floor.value,
            "floor_source": None if floor is None else floor.source,
            "verdict": classify(res, None if floor is None else floor.value,
                                direction=direction),
            "line": result_line(
                res, metric=label(metric), unit=metric["unit"],
                floor=None if floor is None else floor.value,
                direction=direction, subject=build,
            ),
            "warning": res.disagreement(),
            "precision": None if precision is None else {
                "estimand": precision.estimand, "scale": precision.scale,
                "unit": "%" if precision.scale == "log" else metric["unit"],
                "min_change": precision.min_change, "lo": precision.lo, "hi": precision.hi,
                "width": precision.width, "narrow_enough": precision.narrow_enough,
                "excludes_zero": precision.excludes_zero, "more_needed": precision.more_needed,
                "sentence": precision.sentence(
                    "%" if precision.scale == "log" else metric["unit"], "slice pairs"),
            },
        })
    return json_safe({
        "confidence": CONFIDENCE, "method": method, "resamples": RESAMPLES,
        "min_change_pct": min_change_pct, "comparisons": out,
    })


def _spikes(d: np.ndarray, a: np.ndarray, b: np.ndarray, slices: list[Any]) -> dict[str, Any]:
    sp = spike_pairs(d)
    return {
        "fence_lo": sp.fence_lo, "fence_hi": sp.fence_hi, "median": sp.median,
        "scale": sp.scale, "cutoff": sp.cutoff,
        "pairs": [{"index": i, "slice": str(slices[i]), "a": float(a[i]), "b": float(b[i]),
                   "difference": float(d[i]),
                   "robust_sds": float((d[i] - sp.median) / sp.scale)} for i in sp.indices],
    }


def spike_sentence(spikes: dict[str, Any], res: PairedResult, unit: str) -> str | None:
    """The page's and the CLI's words for the pairs beyond the spike fence, naming each
    slice; None when there is none."""
    pairs = spikes["pairs"]
    if not pairs:
        return None
    sep = "" if unit in ("", "%") else " "
    u = f"{sep}{unit}"
    named = "; ".join(
        f"slice pair {p['slice']}: B − A = {p['difference']:+.4g}{u} (A {p['a']:.4g}, "
        f"B {p['b']:.4g}), {abs(p['robust_sds']):.0f} robust SDs "
        f"{'above' if p['difference'] > spikes['median'] else 'below'} the median difference"
        for p in pairs[:5])
    more = f" and {len(pairs) - 5} more" if len(pairs) > 5 else ""
    which = "a spike" if len(pairs) == 1 else f"{len(pairs)} spikes"
    fence = (f"beyond the fence [{spikes['fence_lo']:+.4g}, {spikes['fence_hi']:+.4g}]{u}, "
             f"the median difference ± {spikes['cutoff']:g} robust SDs")
    effect = (f"the interval above is of the Hodges–Lehmann location, which one spike barely "
              f"moves; the mean difference is {res.mean:+.4g}{u}"
              if res.estimand != "mean" else
              "the mean and its interval include it: read the median's interval too")
    return (f"{which}: {named}{more}, {fence}: one arm stalled in that slice (a GC pause, a "
            f"descheduled process?); {effect}.")


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None: PostgreSQL's jsonb refuses
    NaN and infinities, and a page shows None as "—"."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _holm_adjusted(p: list[float]) -> list[float]:
    return [float(x) for x in holm(np.asarray(p, dtype=np.float64), 1.0 - CONFIDENCE).adjusted]


def cli_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``ab_result --format json`` rows: ``{"metric", "n", "diff", "diff_lo", "diff_hi",
    "relative", "sign_test_p", "aa_floor", "verdict"}`` per metric (with several candidate
    builds, ``metric`` names the build: ``"p99 (C - A)"``)."""
    builds = {c["build"] for c in result["comparisons"]}
    return [
        {
            "metric": c["label"] if len(builds) == 1
            else f"{c['label']} ({c['build']} - {c['baseline']})",
            "n": c["n"], "diff": c["diff"], "diff_lo": c["diff_lo"], "diff_hi": c["diff_hi"],
            "relative": c["relative"], "sign_test_p": c["sign_test_p"],
            "aa_floor": c["aa_floor"], "verdict": c["verdict"],
        }
        for c in result["comparisons"]
    ]
