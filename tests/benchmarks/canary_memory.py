"""Worker memory and checkpoint size of a canary's tests by stream length and resolution
(issue 24, part 3; docs/statistics.md, "Canaries: state in bounded memory").

Each configuration runs in its own process (its peak RSS is ``ru_maxrss``, the process
alone): lognormal latencies (median 800 ms, log-sd 0.4) in batches of 100,000 per arm,
mapped by ``stats.resolution.to_grid`` and applied as the worker does
(``canaries.state.apply_pending``): one ``SequentialTest.update`` and, with quantiles,
one ``QuantileSequentialTest.update`` (p50, p90, p99) per pair of batches. At the end
the checkpoint is packed as ``canaries.state._checkpoint`` packs it (support float64,
two int64 count columns). Configurations run interleaved, exact and gridded at the same
size one after the other.

    python -m tests.benchmarks.canary_memory [--sizes 10000000,100000000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np

BATCH = 100_000
MEDIAN = 800.0
LOG_SD = 0.4


def child(n: int, resolution: float, quantiles: bool) -> dict[str, float]:
    from deviations.core.packing import INT, pack
    from deviations.stats.quantiles import QuantileSequentialTest
    from deviations.stats.resolution import to_grid
    from deviations.stats.sequential import SequentialTest

    rng = np.random.default_rng(24)
    test = SequentialTest("equal", 0.05)
    qtest = QuantileSequentialTest((0.5, 0.9, 0.99), 0.05) if quantiles else None
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    for _ in range(n // BATCH):
        a = to_grid(rng.lognormal(math.log(MEDIAN), LOG_SD, BATCH), resolution)
        b = to_grid(rng.lognormal(math.log(MEDIAN), LOG_SD, BATCH), resolution)
        test.update(a, b)
        if qtest is not None:
            qtest.update(a, b)
    cpu = time.process_time() - started
    saved = test.to_state()
    checkpoint = (len(pack(saved["support"])) + len(pack(saved["counts_a"], INT))
                  + len(pack(saved["counts_b"], INT)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"n": n, "resolution": resolution, "quantiles": quantiles,
            "support": int(np.asarray(saved["support"]).size),
            "checkpoint_bytes": checkpoint, "peak_rss_bytes": peak * 1024,
            "start_rss_bytes": base * 1024, "cpu_ms_per_batch_pair": 1000 * cpu / (n // BATCH)}


def run(n: int, resolution: float, quantiles: bool) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.canary_memory", "--child",
         f"{n},{resolution},{int(quantiles)}"], capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000000,100000000")
    parser.add_argument("--exact-max", type=int, default=10_000_000,
                        help="largest size run exactly (about 225 bytes per observation)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        n, r, q = args.child.split(",")
        print(json.dumps(child(int(n), float(r), bool(int(q)))))
        return
    print(f"load average before: {os.getloadavg()}")
    print("| observations per arm | resolution | quantile test | support points | "
          "checkpoint | worker peak RSS | CPU per pair of batches |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for quantiles in (False, True):
            for r in (0.0, 1e-4, 1e-3):
                if r == 0.0 and n > args.exact_max:
                    continue
                got = run(n, r, quantiles)
                print(f"| {n:,} | {r:g} | {'yes' if quantiles else 'no'} | "
                      f"{got['support']:,} | {got['checkpoint_bytes'] / 2**20:,.1f} MiB | "
                      f"{got['peak_rss_bytes'] / 2**20:,.0f} MiB | "
                      f"{got['cpu_ms_per_batch_pair']:.0f} ms |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
