"""Demo data: a generated Chromium-like release series with planted deviations.

Each run is a trace in the Trace Event Format as Chrome writes it (metadata events naming
the Browser and Renderer processes and their threads, nested complete events on
CrRendererMain, some on other threads, instant and counter events), ingested through the
same code as any upload. The planted changes, so a user knows what the analysis should find:

- ``Paint`` gets ~2x slower from the 9th release on (a lasting regression);
- ``Layout`` gets ~1.7x faster from the 13th release on (an improvement);
- ``V8.ScriptCompiler`` is ~2x slower in releases 5-8 only (a digression, seed 003 Fig. 7);
- ``GetRenderStyleForStrike`` is bimodal with outliers throughout (no change);
- every other function is stable.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Chromium release names from seed 003's appendix.
RELEASES = [
    "56.0.2896.0", "56.0.2897.0", "56.0.2898.0", "56.0.2899.0", "56.0.2900.0",
    "56.0.2901.0", "56.0.2904.0", "56.0.2905.0", "56.0.2906.0", "56.0.2907.0",
    "56.0.2909.0", "56.0.2910.0", "56.0.2911.0", "56.0.2912.0", "56.0.2913.0",
    "56.0.2914.0", "56.0.2915.0", "56.0.2916.0", "56.0.2917.0", "56.0.2918.0",
]

# (name, median self time in µs per call, calls per run, lognormal sigma)
FUNCTIONS = [
    ("ParseHTML", 420.0, 6, 0.25),
    ("EvaluateScript", 900.0, 4, 0.20),
    ("V8.ScriptCompiler", 310.0, 4, 0.15),
    ("FunctionCall", 650.0, 12, 0.30),
    ("v8.run", 240.0, 12, 0.25),
    ("UpdateLayoutTree", 180.0, 10, 0.20),
    ("Layout", 520.0, 8, 0.15),
    ("Paint", 250.0, 10, 0.12),
    ("PrePaint", 90.0, 10, 0.20),
    ("CompositeLayers", 140.0, 10, 0.20),
    ("HitTest", 25.0, 6, 0.35),
    ("GetRenderStyleForStrike", 60.0, 8, 0.10),
    ("ResourceReceivedData", 35.0, 14, 0.40),
    ("TimerFire", 70.0, 5, 0.30),
    ("v8.gc", 800.0, 2, 0.50),
]


def planted_factor(function: str, release_index: int) -> float:
    """The multiplier of a function's time in a release (see the module docstring)."""
    if function == "Paint" and release_index >= 8:
        return 2.0
    if function == "Layout" and release_index >= 12:
        return 1 / 1.7
    if function == "V8.ScriptCompiler" and 4 <= release_index <= 7:
        return 2.0
    return 1.0


@dataclass(frozen=True)
class DemoRun:
    release: str
    path: Path


def _durations(rng: np.random.Generator, name: str, median: float, sigma: float, n: int,
               factor: float) -> np.ndarray:
    d = median * factor * rng.lognormal(0.0, sigma, n)
    if name == "GetRenderStyleForStrike":  # two populations and rare outliers
        d = np.where(rng.random(n) < 0.4, d * 2.5, d)
        d = np.where(rng.random(n) < 0.05, d * 8, d)
    return np.round(d)  # Chrome's tracer has microsecond resolution


def trace_events(rng: np.random.Generator, release_index: int) -> list[dict[str, object]]:
    """One run's events: tasks on CrRendererMain, each a nest of the demo functions."""
    pid, main_tid, comp_tid = 4242, 1, 7
    events: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "Browser"}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "CrBrowserMain"}},
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "Renderer"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": main_tid,
         "args": {"name": "CrRendererMain"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": comp_tid,
         "args": {"name": "Compositor"}},
    ]
    # Each function's calls in this run, drawn at once, then spread over tasks.
    pending = {
        name: list(_durations(rng, name, med, sig, calls, planted_factor(name, release_index)))
        for name, med, calls, sig in FUNCTIONS
    }
    ts = 1_000_000.0
    task = 0
    while any(pending.values()):
        children = []
        for name in list(pending):
            if pending[name] and rng.random() < 0.35:
                children.append((name, pending[name].pop()))
        if not children:
            continue
        start = ts
        cursor = start + 5
        for name, self_us in children:
            # FunctionCall wraps a v8.run child: its self time excludes the child's.
            if name == "FunctionCall" and pending["v8.run"]:
                child = pending["v8.run"].pop()
                events.append({"ph": "X", "name": name, "cat": "devtools.timeline", "pid": pid,
                               "tid": main_tid, "ts": cursor, "dur": self_us + child,
                               "args": {"data": {"frame": "F1"}}})
                events.append({"ph": "X", "name": "v8.run", "cat": "v8", "pid": pid,
                               "tid": main_tid, "ts": cursor + self_us / 2, "dur": child})
                cursor += self_us + child + 3
            else:
                events.append({"ph": "B", "name": name, "cat": "devtools.timeline", "pid": pid,
                               "tid": main_tid, "ts": cursor})
                events.append({"ph": "E", "name": name, "cat": "devtools.timeline", "pid": pid,
                               "tid": main_tid, "ts": cursor + self_us})
                cursor += self_us + 3
        events.append({"ph": "X", "name": "ThreadControllerImpl::RunTask", "cat": "toplevel",
                       "pid": pid, "tid": main_tid, "ts": start, "dur": cursor - start + 5,
                       "args": {"src_file": "../../third_party/blink/renderer/core/frame.cc"}})
        events.append({"ph": "X", "name": "ProxyMain::BeginMainFrame", "cat": "cc", "pid": pid,
                       "tid": comp_tid, "ts": start + 2, "dur": 40.0})
        if task % 5 == 0:
            events.append({"ph": "I", "name": "Screenshot", "s": "t", "pid": pid,
                           "tid": main_tid, "ts": start})
            events.append({"ph": "C", "name": "JSHeapSize", "pid": pid, "tid": main_tid,
                           "ts": start, "args": {"value": int(rng.integers(1, 9) * 1e6)}})
        ts = cursor + 50 + float(rng.integers(0, 400))
        task += 1
    # Chrome does not sort its trace buffer: neither do we.
    order = rng.permutation(len(events) - 5) + 5
    return events[:5] + [events[i] for i in order]


def write_demo_traces(folder: Path, runs_per_release: int = 5, seed: int = 56) -> list[DemoRun]:
    """Write the demo series' trace files (every third one gzipped) into ``folder``."""
    rng = np.random.default_rng(seed)
    written = []
    for r, version in enumerate(RELEASES):
        for k in range(runs_per_release):
            body = json.dumps({"traceEvents": trace_events(rng, r),
                               "metadata": {"product-version": f"Chrome/{version}"}})
            if (r * runs_per_release + k) % 3 == 0:
                path = folder / f"{version}-run{k + 1}.json.gz"
                path.write_bytes(gzip.compress(body.encode()))
            else:
                path = folder / f"{version}-run{k + 1}.json"
                path.write_text(body)
            written.append(DemoRun(version, path))
    return written


#: The demo metric series (benchmark results as CI writes them; README, "Getting benchmark
#: results in"): (metric, unit, median, lognormal sigma). Planted: ``BM_ParseJSON/64k``
#: 25% slower from the 12th release on; ``BM_Tokenize items_per_second`` (higher is
#: better) 20% lower from the 16th on; everything else stable.
RESULTS_RELEASES = [f"2.{k}.0" for k in range(20)]
RESULTS_METRICS = [
    ("BM_ParseJSON/64k", "us", 840.0, 0.03),
    ("BM_ParseJSON/1M", "us", 14200.0, 0.04),
    ("BM_Tokenize", "ns", 5300.0, 0.05),
    ("BM_Tokenize items_per_second", "items/s", 1.9e8, 0.05),
    ("test_render_page", "s", 0.0121, 0.06),
    ("peak_memory", "bytes", 48_000_000.0, 0.01),
]


def results_planted_factor(metric: str, release_index: int) -> float:
    if metric == "BM_ParseJSON/64k" and release_index >= 11:
        return 1.25
    if metric == "BM_Tokenize items_per_second" and release_index >= 15:
        return 0.8
    return 1.0


def demo_results_csv(replicates: int = 5, seed: int = 20) -> bytes:
    """The demo metric series' whole history as the CSV ``ingest_results`` reads."""
    rng = np.random.default_rng(seed)
    rows = ["release,metric,value,unit"]
    for k, release in enumerate(RESULTS_RELEASES):
        for metric, unit, median, sigma in RESULTS_METRICS:
            values = median * results_planted_factor(metric, k) * rng.lognormal(
                0, sigma, replicates)
            rows += [f"{release},{metric},{v:.6g},{unit}" for v in values]
    return ("\n".join(rows) + "\n").encode()
