"""Benchmark of the Perfetto protobuf reader against the JSON reader on the same content.

Run from the project root::

    python -m tests.benchmarks.perfetto_reader [--tasks 1500] [--repeat 3] [--seed 7]

Writes one synthetic trace twice (tests/ingest/twins.py: a Browser and two Renderers, two
threads each, random nesting trees, instants, names interned per sequence, timestamps on
the SDK's incremental clock) as Chrome JSON and as a Perfetto trace, then parses each with
``parse_trace(all_threads=True)`` in its own subprocess, interleaved ``--repeat`` times
(the fastest run counts, the largest peak RSS). Prints µs per event (events: B/E/instant
events of the file) and the peak RSS above the interpreter's baseline (imports included)
over the file size, for both, and the ratios protobuf / JSON. Needs the test extras
(the ``perfetto`` package builds the protobuf side).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.ingest.twins import chrome_like, to_json, to_perfetto

PROJECT_ROOT = Path(__file__).resolve().parents[2]

_MEASURE = r"""
import sys, time
from ingest.traces import parse_trace  # the baseline holds the libraries' imports
def hwm():  # VmHWM (kB): ru_maxrss would carry the parent's peak across fork
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
base = hwm()
t = time.perf_counter()
parse_trace(sys.argv[1], all_threads=True)
print(time.perf_counter() - t, hwm() - base)
"""


def measure(path: Path) -> tuple[float, float]:
    """(seconds, peak RSS growth in MB) of one parse in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1_500,
                        help="top-level tasks per thread (~66 events each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()

    processes = chrome_like(random.Random(options.seed), tasks=options.tasks)
    events = sum(len(t.events) for p in processes for t in p.threads)
    with tempfile.TemporaryDirectory(prefix="deviations-perfetto-") as tmp:
        files = {"json": Path(tmp) / "t.json", "perfetto": Path(tmp) / "t.pftrace"}
        files["json"].write_bytes(to_json(processes))
        files["perfetto"].write_bytes(to_perfetto(processes, incremental_clock=True,
                                                  chunk=2000, seed=options.seed))
        del processes
        sizes = {k: p.stat().st_size / 2**20 for k, p in files.items()}
        print(f"{events:,} events; JSON {sizes['json']:.1f} MB, "
              f"Perfetto {sizes['perfetto']:.1f} MB")
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in files}
        for i in range(options.repeat):
            for kind, path in files.items():
                seconds, peak = measure(path)
                runs[kind].append((seconds, peak))
                print(f"  {kind:8s} run {i + 1}: {seconds:6.2f} s  peak +{peak:7.1f} MB")
    best = {k: (min(s for s, _ in r), max(m for _, m in r)) for k, r in runs.items()}
    for kind, (seconds, peak) in best.items():
        print(f"{kind:8s}: {seconds / events * 1e6:5.2f} µs/event ({seconds:.2f} s), "
              f"peak +{peak:.1f} MB = {peak / sizes[kind]:.2f}x its file")
    speed = best["perfetto"][0] / best["json"][0]
    memory = best["perfetto"][1] / best["json"][1]
    print(f"perfetto_vs_json_time={speed:.3f} perfetto_vs_json_peak={memory:.3f} "
          f"perfetto_peak_vs_file={best['perfetto'][1] / sizes['perfetto']:.3f}")


if __name__ == "__main__":
    main()
