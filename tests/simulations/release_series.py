"""Simulated release series with planted changes and their truth (issue 19, item 6).

The scenarios of the release-verdict harness (``python -m tests.simulations.verdict_accuracy``).
:func:`simulate` returns one seeded matrix ``samples`` of shape (functions, releases,
runs), float64 µs, NaN-padded where a release has fewer runs than the widest, with the
truth (:class:`Truth`): every planted change boundary with its direction and size
(boundary ``k`` lies between releases ``k`` and ``k+1``), and what each function is.

Functions (their share of a matrix is the scenario's ``mix``):

``stable``
    No change: every flag on one is a false flag.
``step``
    Level steps ×1.05, ×1.1, ×1.2 or ×1.5 (:data:`STEP_SIZES`, assigned in turn so every
    size has the same number of functions), up or down with equal probability. One per
    function up to 59 releases; on longer series 1 to ``releases // 30`` of them, at
    least :data:`MIN_GAP` releases apart (the level holds that long between two).
``digression``
    A step that comes back after 2–4 releases: both ends are planted boundaries, in
    opposite directions, of the same size (sizes, and how many a function, as steps).
``spread``
    From a release on, the log residuals are ×2–×3 wider around the noise's own median:
    the median time is unchanged, so any flag on the function is false.
``burst``
    One to three consecutive releases in which each run, with probability 1/2 (at least
    one run a release), is multiplied by 3–10 (a descheduled thread, a cold cache). No
    change is planted: flags on boundaries touching the burst are false.
``drift``
    The level grows 0.3–1% a release for 20–40 releases (at most ``releases - 4``):
    reported apart, neither hit nor false flag.

Planted boundaries lie at least :data:`MARGIN` releases from both ends (boundary ``k`` with
``MARGIN - 1 <= k <= releases - 1 - MARGIN``). The ``machine`` scenario shifts every
function of the matrix by ×1.15 or ×0.9 at one boundary (a new machine): planted for all.

Noise, multiplicative on a per-function level drawn log-uniformly in 20 µs – 100 ms
(:data:`LEVEL_US`), times rounded to whole µs (Chrome counts whole microseconds; at least
1 µs: 0 would be an absent function):

``tracerbench``
    each function resamples (with replacement) the log residuals of one real function of
    the TracerBench traces (:mod:`tests.simulations.tracerbench_noise`), drawn uniformly
    among the donors;
``fitted``
    the parametric model fitted to those residuals (:data:`~tests.simulations.
    tracerbench_noise.FITTED`), used when ``../shared`` is absent;
``shapes``
    noise unlike the tuning data: each function draws one of the four shapes of
    ``tests/simulations/compare_rules.py`` (lognormal, bimodal, quantised, contaminated).
    Its quantised shape is its lognormal one on a 1 µs clock, which every simulated time
    gets here (compare_rules draws 3–8 µs levels for it; here levels span 20 µs – 100 ms as
    for every noise).

Release-to-release jitter (``jitter=True``, the default of the ``realistic`` and
``machine`` scenarios): a factor ``exp(N(0, s²))`` common to the runs of a (function,
release), ``s`` uniform in 0.01–0.03 per function: real releases differ by more than
their runs do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np

from tests.simulations import compare_rules, tracerbench_noise

Generator = np.random.Generator
NoiseName = Literal["tracerbench", "fitted", "shapes"]
Runs = int | tuple[int, int]

STEP_SIZES: tuple[float, ...] = (1.05, 1.1, 1.2, 1.5)
LEVEL_US = (20.0, 100_000.0)
MARGIN = 3
"""Releases a planted boundary keeps from each end of the series."""
MIN_GAP = 8
"""Releases between two planted changes of one function."""
MACHINE_FACTORS = (1.15, 0.9)
JITTER_SD = (0.01, 0.03)
SPREAD_FACTOR = (2.0, 3.0)
BURST_FACTOR = (3.0, 10.0)
BURST_SHARE = 0.5
DRIFT_RATE = (0.003, 0.01)
DRIFT_LENGTH = (20, 40)

# Truth.role of a planted boundary
NONE, STEP, DIGRESSION, MACHINE = 0, 1, 2, 3
ROLE_NAMES = {STEP: "step", DIGRESSION: "digression end", MACHINE: "machine change"}

KINDS = ("stable", "step", "digression", "spread", "burst", "drift")
SHAPES = tuple(compare_rules.NOISES)


@dataclass(frozen=True)
class Scenario:
    """Which functions a matrix holds (shares of ``mix``, in :data:`KINDS`), whether every
    function also gets the machine change, and whether releases jitter by default."""

    name: str
    mix: dict[str, float]
    machine: bool = False
    jitter: bool = False


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        # What a dashboard series holds: most functions stable, every kind of change.
        Scenario("realistic", {"stable": 0.5, "step": 0.25, "digression": 0.1, "spread": 0.05,
                               "burst": 0.05, "drift": 0.05}, jitter=True),
        Scenario("machine", {"stable": 1.0}, machine=True, jitter=True),
        Scenario("steps", {"stable": 0.5, "step": 0.5}),
        Scenario("digressions", {"stable": 0.5, "digression": 0.5}),
        Scenario("spread", {"stable": 0.5, "spread": 0.5}),
        Scenario("bursts", {"stable": 0.5, "burst": 0.5}),
        Scenario("drifts", {"stable": 0.5, "drift": 0.5}),
        Scenario("stable", {"stable": 1.0}),
    )
}


@dataclass(frozen=True)
class Truth:
    """What was planted in a matrix of ``F`` functions and ``R`` releases.

    Attributes
    ----------
    change : int8 (F, R - 1)
        +1 a planted step up at the boundary (a regression of a time), -1 down, 0 none.
    size : float (F, R - 1)
        The planted factor's nominal size (1.05 … 1.5; 1.15 or 0.9 for the machine
        change), 0 where nothing is planted.
    role : int8 (F, R - 1)
        :data:`STEP`, :data:`DIGRESSION` (either end), :data:`MACHINE` or :data:`NONE`.
    kind : str (F,)
        One of :data:`KINDS`.
    burst : bool (F, R)
        Releases of an outlier burst.
    drift : bool (F, R - 1)
        Boundaries inside a drift (the level grows across each).
    drift_start : int (F,)
        First boundary of the function's drift, -1 without.
    drift_rate : float (F,)
        Relative growth per release of the drift, 0 without.
    spread_from : int (F,)
        First release with the wider spread, -1 without.
    runs : int (R,)
        Runs of each release (the same for every function, as in a trace series).
    """

    change: np.ndarray
    size: np.ndarray
    role: np.ndarray
    kind: np.ndarray
    burst: np.ndarray
    drift: np.ndarray
    drift_start: np.ndarray
    drift_rate: np.ndarray
    spread_from: np.ndarray
    runs: np.ndarray

    @property
    def stable(self) -> np.ndarray:
        """Stable boundaries (F, R - 1): those of ``stable`` functions where nothing is
        planted (all of them but the machine change's)."""
        out: np.ndarray = (self.kind == "stable")[:, None] & (self.role == NONE)
        return out


@dataclass(frozen=True)
class Series:
    """One simulated matrix, its truth and how it was drawn."""

    samples: np.ndarray
    truth: Truth
    scenario: str
    noise: str
    seed: int
    level: np.ndarray = field(repr=False)
    donor: np.ndarray = field(repr=False)


def run_counts(rng: Generator, runs: Runs, releases: int) -> np.ndarray:
    """Runs of each release: ``runs`` each, or uniform in ``lo..hi`` for ``(lo, hi)``."""
    if isinstance(runs, tuple):
        lo, hi = runs
        if not 1 <= lo <= hi:
            raise ValueError(f"ragged runs need 1 <= lo <= hi, got {runs}")
        return rng.integers(lo, hi + 1, releases)
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    return np.full(releases, runs)


def _place(rng: Generator, releases: int, count: int, span: int) -> list[int]:
    """``count`` first boundaries of changes ``span`` boundaries long (0: a step; L: a
    digression whose way back is at ``k + L``), within the margins and :data:`MIN_GAP`
    apart; fewer when they do not fit."""
    lo, hi = MARGIN - 1, releases - 1 - MARGIN - span
    for n in range(count, 0, -1):
        for _ in range(200):
            ks = np.sort(rng.integers(lo, hi + 1, n))
            if np.all(np.diff(ks) >= MIN_GAP + span):
                return [int(k) for k in ks]
    raise ValueError(f"no room for a change in {releases} releases")


def _events(rng: Generator, releases: int) -> int:
    return int(rng.integers(1, max(1, releases // 30) + 1))


def _kinds(scenario: Scenario, functions: int) -> np.ndarray:
    counts = {k: int(round(share * functions)) for k, share in scenario.mix.items()}
    unknown = set(counts) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds {sorted(unknown)}")
    first = next(iter(counts))
    counts[first] += functions - sum(counts.values())
    return np.array([k for k, c in counts.items() for _ in range(c)], dtype="<U10")


@cache
def _shape_centre(name: str) -> float:
    """Median log residual of a shape of compare_rules (from 200,000 seeded draws)."""
    draw = compare_rules.NOISES["lognormal" if name == "quantised" else name]
    return float(np.median(np.log(draw(np.random.default_rng(0), (200_000,), np.ones(1)))))


def _residuals(rng: Generator, noise: NoiseName, shape: tuple[int, int, int],
               donors: list[tracerbench_noise.Donor] | None) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:
    """Log residuals (F, R, W) of the noise, each function's noise median (the centre a
    spread change keeps) and its donor or shape index."""
    F, R, W = shape
    if noise == "tracerbench":
        if not donors:
            raise ValueError("tracerbench noise needs the TracerBench donors")
        pick = rng.integers(0, len(donors), F)
        lengths = np.array([len(d.residuals) for d in donors])
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        pool = np.concatenate([d.residuals for d in donors])
        idx = offsets[pick][:, None, None] + (
            rng.random(shape) * lengths[pick][:, None, None]).astype(np.int64)
        centre = np.array([np.median(d.residuals) for d in donors])[pick]
        return pool[idx], centre, pick
    if noise == "fitted":
        fitted = tracerbench_noise.FITTED
        scales = fitted.scales(rng, F)
        return scales[:, None, None] * fitted.standardised(rng, shape), np.zeros(F), \
            np.full(F, -1)
    if noise == "shapes":
        pick = rng.integers(0, len(SHAPES), F)
        eps = np.empty(shape)
        centre = np.empty(F)
        for i, name in enumerate(SHAPES):
            rows = pick == i
            # compare_rules' quantised shape is its lognormal one rounded to whole µs, which
            # every simulated time is here (module docstring).
            draw = compare_rules.NOISES["lognormal" if name == "quantised" else name]
            eps[rows] = np.log(draw(rng, (int(rows.sum()), R, W), np.ones(1)))
            centre[rows] = _shape_centre(name)
        return eps, centre, pick
    raise ValueError(f"unknown noise {noise!r}")


def simulate(
    scenario: str | Scenario,
    runs: Runs,
    releases: int,
    *,
    functions: int = 400,
    noise: NoiseName = "tracerbench",
    seed: int = 0,
    jitter: bool | None = None,
    donors: list[tracerbench_noise.Donor] | None = None,
    step_sizes: tuple[float, ...] = STEP_SIZES,
) -> Series:
    """One seeded matrix of ``scenario`` (module docstring).

    ``runs``: runs of every release, or ``(lo, hi)`` for a uniform count in ``lo..hi``
    per release (the same for every function). ``donors``
    (:func:`tests.simulations.tracerbench_noise.donors`) are needed for
    ``noise="tracerbench"``; ``jitter=None`` takes the scenario's default;
    ``step_sizes``: the sizes steps and digressions take in turn.
    """
    sc = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
    if releases < 2 * MARGIN + 2:
        raise ValueError(f"need at least {2 * MARGIN + 2} releases, got {releases}")
    rng = np.random.default_rng(seed)
    F, R, P = functions, releases, releases - 1  # noqa: N806
    n_runs = run_counts(rng, runs, R)
    W = int(n_runs.max())  # noqa: N806
    kind = _kinds(sc, F)
    level = np.exp(rng.uniform(np.log(LEVEL_US[0]), np.log(LEVEL_US[1]), F))
    log_level = np.tile(np.log(level)[:, None], (1, R))
    change = np.zeros((F, P), dtype=np.int8)
    size = np.zeros((F, P))
    role = np.zeros((F, P), dtype=np.int8)
    drift = np.zeros((F, P), dtype=np.bool_)
    drift_start = np.full(F, -1)
    drift_rate = np.zeros(F)
    spread_from = np.full(F, -1)
    burst = np.zeros((F, R), dtype=np.bool_)

    def plant(f: int, k: int, factor: float, nominal: float, what: int) -> None:
        log_level[f, k + 1 :] += np.log(factor)
        change[f, k] = 1 if factor > 1 else -1
        size[f, k] = nominal
        role[f, k] = what

    for kind_name, what in (("step", STEP), ("digression", DIGRESSION)):
        for i, f in enumerate(np.flatnonzero(kind == kind_name)):
            nominal = step_sizes[i % len(step_sizes)]
            lengths = [0] if what == STEP else [int(rng.integers(2, 5))]
            count = _events(rng, R)
            span = max(lengths)
            for k in _place(rng, R, count, span):
                up = nominal if rng.random() < 0.5 else 1.0 / nominal
                plant(f, k, up, nominal, what)
                if what == DIGRESSION:
                    plant(f, k + span, 1.0 / up, nominal, what)

    for f in np.flatnonzero(kind == "drift"):
        length = min(int(rng.integers(DRIFT_LENGTH[0], DRIFT_LENGTH[1] + 1)), R - 4)
        start = int(rng.integers(2, R - 2 - length + 1))
        rate = rng.uniform(*DRIFT_RATE)
        steps = np.clip(np.arange(R) - start, 0, length)
        log_level[f] += steps * np.log1p(rate)
        drift[f, start : start + length] = True
        drift_start[f], drift_rate[f] = start, rate

    if sc.machine:
        k = int(rng.integers(MARGIN - 1, R - MARGIN))
        factor = float(rng.choice(MACHINE_FACTORS))
        for f in range(F):
            plant(f, k, factor, factor, MACHINE)

    eps, centre, donor = _residuals(rng, noise, (F, R, W), donors)
    for f in np.flatnonzero(kind == "spread"):
        start = int(rng.integers(MARGIN, R - MARGIN + 1))
        widen = rng.uniform(*SPREAD_FACTOR)
        eps[f, start:] = centre[f] + widen * (eps[f, start:] - centre[f])
        spread_from[f] = start
    use_jitter = sc.jitter if jitter is None else jitter
    if use_jitter:
        sd = rng.uniform(*JITTER_SD, F)
        log_level = log_level + rng.normal(0.0, 1.0, (F, R)) * sd[:, None]
    times = np.exp(log_level[:, :, None] + eps)
    for f in np.flatnonzero(kind == "burst"):
        length = int(rng.integers(1, 4))
        start = int(rng.integers(1, R - length))
        for r in range(start, start + length):
            hit = rng.random(n_runs[r]) < BURST_SHARE
            if not hit.any():
                hit[rng.integers(0, n_runs[r])] = True
            times[f, r, : n_runs[r]] *= np.where(hit, rng.uniform(*BURST_FACTOR, n_runs[r]), 1.0)
        burst[f, start : start + length] = True
    samples = np.maximum(np.round(times), 1.0)
    samples[:, np.arange(W)[None, :] >= n_runs[:, None]] = np.nan
    truth = Truth(change=change, size=size, role=role, kind=kind, burst=burst, drift=drift,
                  drift_start=drift_start, drift_rate=drift_rate, spread_from=spread_from,
                  runs=n_runs)
    return Series(samples=samples, truth=truth, scenario=sc.name, noise=noise, seed=seed,
                  level=level, donor=donor)


def noise_source(
    noise: NoiseName, traces: Path | None = None
) -> tuple[NoiseName, list[tracerbench_noise.Donor] | None, str]:
    """The noise to simulate with and its donors: ``tracerbench`` falls back to ``fitted``
    (with the reason) when the traces folder ``traces`` (default
    :data:`tests.simulations.tracerbench_noise.TRACES`) is absent."""
    folder = tracerbench_noise.TRACES if traces is None else traces
    if noise != "tracerbench":
        return noise, None, ""
    if not (folder / "tracerbench_runs_INDEX.csv").is_file():
        return "fitted", None, (f"{folder} is absent: run-to-run noise from the parametric "
                                "fit of the TracerBench residuals instead")
    return noise, tracerbench_noise.donors(folder), ""
