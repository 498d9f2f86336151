"""Run-to-run noise of the real TracerBench traces, and a parametric fit of it.

Run from the project root::

    .venv/bin/python -m tests.simulations.tracerbench_noise            # the figures of the fit
    .venv/bin/python -m tests.simulations.tracerbench_noise --traces /path/to/traces

The release-verdict harness (``tests.simulations.release_series``) draws each simulated
function's run-to-run noise from one real function of these traces (``Donor``), or, when
``../shared`` is absent (a clone of the repository alone), from the parametric model
:data:`FITTED` fitted here. This command prints the measured figures the fit stands on.

**Residuals.** The 46 TracerBench traces (``../shared/data/traces/tracerbench_runs``,
versions in ``tracerbench_runs_INDEX.csv``) are parsed with ``ingest.traces.parse_trace``
(default thread selection: every ``CrRendererMain`` thread of every ``Renderer`` process).
A *release* is one Chrome version loading one page in one mode (the index's ``chrome``,
``page`` and ``headless`` columns: 75.0.3739.0 holds one load of another page, which is
not a run of the same release). In every release with at least :data:`MIN_RELEASE_RUNS`
runs, each function's self and total time give the log residuals ``log(run / median)``
of the runs where the function was measured (a run without it records 0 µs: not a time,
left out). The median run of a release of odd size has residual 0 by construction, not
by nature, and is dropped (one value per odd release); even releases keep every run.
(Measured on normal samples, the kept residuals then have about the spread of the noise:
root mean square ×1.08 of the noise's at 3 runs, ×0.89 at 4, ×1.03 at 9.)

**Donors.** A (function, metric) with at least :data:`MIN_DONOR_RESIDUALS` residuals from
at least :data:`MIN_DONOR_RELEASES` releases and a median time of at least
:data:`MIN_DONOR_US` is a donor; below 20 µs the residuals are mostly the 1 µs clock's
steps, which the simulation adds itself by rounding to whole microseconds. Self and total
time of a leaf function are the same numbers: a residual set already taken is not taken
twice.

**Fit.** Each donor's robust scale ``s = 1.4826 · median(|r|)`` (the normal-consistent
MAD about the release medians); ``log s`` is normal (:attr:`FittedNoise.log_scale_mean`,
``log_scale_sd``); the pooled standardised residuals ``r / s`` are Student t with
``loc = 0`` (``scipy.stats.t.fit``: :attr:`FittedNoise.df`, ``t_scale``), cut at the
largest ``|r / s|`` measured (:attr:`FittedNoise.clip`). The model is symmetric; the real
tails are not quite (this command prints the share beyond ±3 on each side).
"""

from __future__ import annotations

import argparse
import csv
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from ingest.traces import parse_trace

ROOT = Path(__file__).resolve().parents[2]
#: Where the TracerBench traces are in a checkout next to ``../shared`` (the tests'
#: convention: ``tests.conftest.SHARED_DATA``).
TRACES = Path(os.environ.get("DEVIATIONS_SHARED_DATA", ROOT.parent / "shared" / "data")) / "traces"

MIN_RELEASE_RUNS = 3
MIN_DONOR_RESIDUALS = 12
MIN_DONOR_RELEASES = 3
MIN_DONOR_US = 20.0
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Donor:
    """One real function's noise: its log residuals and its median time."""

    function: str
    metric: str
    median_us: float
    residuals: np.ndarray

    @property
    def scale(self) -> float:
        """Normal-consistent MAD of the residuals (they are centred on release medians)."""
        return float(MAD_TO_SD * np.median(np.abs(self.residuals)))


@dataclass(frozen=True)
class FittedNoise:
    """The parametric run-to-run noise (module docstring): ``log(run / level) =
    s · t_scale · T``, ``log s ~ N(log_scale_mean, log_scale_sd²)`` per function,
    ``T ~ Student t(df)`` per run, ``|t_scale · T| <= clip``."""

    log_scale_mean: float
    log_scale_sd: float
    df: float
    t_scale: float
    clip: float

    def scales(self, rng: np.random.Generator, functions: int) -> np.ndarray:
        return np.exp(rng.normal(self.log_scale_mean, self.log_scale_sd, functions))

    def standardised(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        z = self.t_scale * rng.standard_t(self.df, shape)
        return np.clip(z, -self.clip, self.clip)


#: Fitted to the TracerBench residuals by this module's ``main`` (its output is in
#: docs/statistics.md); ``tests/stats/test_verdict_harness.py`` re-fits and compares
#: when the traces are there.
FITTED = FittedNoise(log_scale_mean=-2.70, log_scale_sd=0.65, df=2.36, t_scale=0.85,
                     clip=77.4)


def releases(traces: Path) -> dict[tuple[str, str, str], list[Path]]:
    """The trace files of each release (chrome version, page, headless) of the index."""
    out: dict[tuple[str, str, str], list[Path]] = defaultdict(list)
    with (traces / "tracerbench_runs_INDEX.csv").open() as f:
        for row in csv.DictReader(f):
            key = (row["chrome"], row["page"], row["headless"])
            out[key].append(traces / "tracerbench_runs" / row["file"])
    return dict(out)


def residuals_by_function(traces: Path) -> dict[tuple[str, str], list[np.ndarray]]:
    """Per (function, metric): the log residuals of each release with at least
    :data:`MIN_RELEASE_RUNS` runs (module docstring), one array per release, with the
    release medians."""
    out: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    for files in releases(traces).values():
        if len(files) < MIN_RELEASE_RUNS:
            continue
        runs = []
        for path in files:
            got = parse_trace(path)
            runs.append({n: (float(s), float(t)) for n, s, t in
                         zip(got.names, got.self_us, got.total_us, strict=True)})
        for name in sorted(set().union(*runs)):
            for m, metric in enumerate(("self", "total")):
                x = np.array([run[name][m] for run in runs if name in run])
                x = x[x > 0]
                if len(x) < MIN_RELEASE_RUNS:
                    continue
                med = float(np.median(x))
                r = np.log(x / med)
                if len(x) % 2:
                    r = np.delete(r, int(np.flatnonzero(r == 0.0)[0]))
                out[(name, metric)].append(np.concatenate([[med], r]))
    return dict(out)


def donors(traces: Path = TRACES) -> list[Donor]:
    """The donors of the traces in ``traces`` (module docstring), sorted by name."""
    found: list[Donor] = []
    seen: set[bytes] = set()
    for (name, metric), per_release in sorted(residuals_by_function(traces).items()):
        r = np.concatenate([a[1:] for a in per_release])
        median_us = float(np.median([a[0] for a in per_release]))
        if (len(per_release) < MIN_DONOR_RELEASES or len(r) < MIN_DONOR_RESIDUALS
                or median_us < MIN_DONOR_US):
            continue
        key = np.round(r, 12).tobytes()
        if key in seen:
            continue
        seen.add(key)
        found.append(Donor(name, metric, median_us, r))
    return found


@dataclass(frozen=True)
class Fit:
    """What :func:`fit` measured."""

    noise: FittedNoise
    donors: int
    residuals: int
    scale_quantiles: dict[float, float]
    beyond: dict[str, float]


def fit(found: list[Donor]) -> Fit:
    """The parametric model of the donors' noise (module docstring)."""
    scales = np.array([d.scale for d in found])
    keep = scales > 0
    z = np.concatenate([d.residuals / d.scale for d, k in zip(found, keep, strict=True) if k])
    log_s = np.log(scales[keep])
    df, _, t_scale = stats.t.fit(z, floc=0.0)
    noise = FittedNoise(
        log_scale_mean=float(log_s.mean()), log_scale_sd=float(log_s.std(ddof=1)),
        df=float(df), t_scale=float(t_scale), clip=float(np.abs(z).max()),
    )
    levels = (0.1, 0.25, 0.5, 0.75, 0.9)
    return Fit(
        noise=noise,
        donors=int(keep.sum()),
        residuals=len(z),
        scale_quantiles={q: float(np.quantile(scales[keep], q)) for q in levels},
        beyond={
            "z > 3": float(np.mean(z > 3)), "z < -3": float(np.mean(z < -3)),
            "|z| > 5": float(np.mean(np.abs(z) > 5)),
            "normal |z| > 3": float(2 * stats.norm.sf(3)),
        },
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES,
                        help="the TracerBench traces folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if not (args.traces / "tracerbench_runs_INDEX.csv").is_file():
        parser.error(f"{args.traces} holds no tracerbench_runs_INDEX.csv")
    found = donors(args.traces)
    got = fit(found)
    n = got.noise
    print(f"{got.donors} donors (function × metric), {got.residuals} residuals")
    print("donor scale (normal-consistent MAD of log residuals), quantiles "
          + ", ".join(f"{100 * q:.0f}%: {v:.3f}" for q, v in got.scale_quantiles.items()))
    print(f"log scale ~ N({n.log_scale_mean:.2f}, {n.log_scale_sd:.2f}^2) "
          f"(median scale {np.exp(n.log_scale_mean):.3f})")
    print(f"standardised residuals ~ {n.t_scale:.2f} × Student t(df = {n.df:.2f}), "
          f"|z| <= {n.clip:.1f}")
    print("tails: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in got.beyond.items()))
    print("\n| donor | metric | median µs | residuals | scale |")
    print("|---|---|---|---|---|")
    for d in sorted(found, key=lambda d: -d.median_us):
        print(f"| {d.function} | {d.metric} | {d.median_us:.0f} | {len(d.residuals)} | "
              f"{d.scale:.3f} |")


if __name__ == "__main__":
    main()
