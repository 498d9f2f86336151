"""Demo histograms: four Telemetry-like probes over 60 nightly builds, with planted changes.

Each build is one file of Mozilla's wrapped histogram JSON (exponential, range [1, 10000],
50 buckets), ingested through ``manage.py ingest_histograms`` like any user's files. The
counts are multinomial draws from a discretised normal in bucket units whose centre and
spread jitter a little from build to build, with 20,000-200,000 samples per build (so the
probes' noise varies, as real ones' does). What the detector should report:

- ``GC_MS``: a lasting shift of 2 buckets (about +25 %) from build 35 on: one ``shift``;
- ``TAB_SWITCH_MS``: bimodal, the slow mode's weight goes from 35 % to 60 % at build 40:
  one ``shape`` change;
- ``PAGE_LOAD_MS``: one build (30) shifted by 4 buckets, then back: a spike, no alert;
- ``STARTUP_MS``: stable: nothing.

``GC_MS`` lists an owner in ``alert_emails`` (gc-owner@example.org).
"""

from __future__ import annotations

import io
import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.core.management import call_command

from ingest.services import bucket_lower_bounds

BUILDS = 60
BUCKETS = 50
RANGE = (1, 10000)
PROBES = ["GC_MS", "TAB_SWITCH_MS", "PAGE_LOAD_MS", "STARTUP_MS"]
OWNERS = {"GC_MS": ["gc-owner@example.org"]}


def build_ids(n: int = BUILDS) -> list[str]:
    start = datetime(2026, 9, 1, 3, 2, 5)
    return [(start + timedelta(days=i)).strftime("%Y%m%d%H%M%S") for i in range(n)]


def _normal(centre: float, sd: float) -> np.ndarray:
    x = np.arange(BUCKETS, dtype=np.float64)
    p = np.exp(-0.5 * ((x - centre) / sd) ** 2)
    return p / p.sum()


def probabilities(probe: str, build: int, rng: np.random.Generator) -> np.ndarray:
    """The distribution of a probe at a build (see the module docstring)."""
    centre = 20 + rng.normal(0, 0.08)
    sd = 4 * (1 + rng.normal(0, 0.01))
    if probe == "GC_MS":
        return _normal(centre + (2 if build >= 35 else 0), sd)
    if probe == "TAB_SWITCH_MS":
        slow = 0.60 if build >= 40 else 0.35
        return (1 - slow) * _normal(centre - 6, 3) + slow * _normal(centre + 8, 3)
    if probe == "PAGE_LOAD_MS":
        return _normal(centre + (4 if build == 30 else 0), sd)
    return _normal(centre, sd)


def demo_counts(seed: int = 20260901, builds: int = BUILDS) -> dict[str, np.ndarray]:
    """Counts per probe, shape (builds, 50)."""
    rng = np.random.default_rng(seed)
    out = {}
    for probe in PROBES:
        sizes = np.exp(rng.uniform(np.log(20_000), np.log(200_000), builds)).astype(int)
        out[probe] = np.stack(
            [rng.multinomial(sizes[b], probabilities(probe, b, rng)) for b in range(builds)]
        )
    return out


def mozilla_record(probe: str, build_id: str, counts: np.ndarray) -> dict[str, Any]:
    bounds = bucket_lower_bounds("exponential", RANGE[0], RANGE[1], BUCKETS)
    record: dict[str, Any] = {
        "probe": probe,
        "build_id": build_id,
        "histogram": {
            "bucket_count": BUCKETS,
            "histogram_type": 0,
            "range": list(RANGE),
            "sum": int(np.dot(bounds, counts)),
            "values": {str(b): int(c) for b, c in zip(bounds, counts, strict=True) if c},
        },
    }
    if probe in OWNERS:
        record["alert_emails"] = OWNERS[probe]
    return record


def write_demo_histograms(folder: Path, seed: int = 20260901) -> list[Path]:
    """One file per build holding every probe's histogram; returns the paths in order."""
    counts = demo_counts(seed)
    paths = []
    for b, build_id in enumerate(build_ids()):
        path = folder / f"histograms-{build_id}.json"
        records = [mozilla_record(p, build_id, counts[p][b]) for p in PROBES]
        path.write_text(json.dumps(records))
        paths.append(path)
    return paths


def ingest_demo_histograms(stdout: Any = None) -> str:
    """Generate the demo histograms and ingest them with ``manage.py ingest_histograms``
    (which then detects changes). Returns the command's output."""
    out = stdout if stdout is not None else io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_demo_histograms(Path(tmp))
        call_command("ingest_histograms", *map(str, paths), stdout=out)
    return out.getvalue() if isinstance(out, io.StringIO) else ""
