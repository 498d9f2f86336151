"""Benchmark of what keeping trace files costs: the CLI ingest of one trace, and the copy
into the local trace storage alone.

Run from the project root::

    python -m tests.benchmarks.kept_files [--mb 60] [--repeat 4] [--other DIR]

It writes a synthetic trace (``tests.benchmarks.ingest.write_trace``, the same seed), then
``--repeat`` times: ``LocalStorage.put`` of the file (a copy beside the target, ``fsync``,
rename; timed alone in a fresh process), and the CLI
``manage.py ingest_traces --all-threads FILE`` on a SQLite database and an empty trace
folder of its own (the file is hashed and copied in a second thread while it is parsed).
``--other DIR`` also runs the CLI of ``DIR`` (e.g. a ``git archive`` of the commit before
files were kept) in the same loop, alternating, so both see the same machine. Printed:
each run, then per command the minimum and median seconds and the largest peak RSS, and
the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.benchmarks.ingest import _MEASURE, write_trace

PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: The put alone, timed inside its process (Django's set-up excluded).
PUT = (
    "import os, sys, time, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
    "'deviations.settings'); django.setup(); from pathlib import Path; "
    "from django.core.files.storage import storages; s = storages['traces']; "
    "t = time.perf_counter(); s.put('traces/bench/file', Path(sys.argv[1])); "
    "print(time.perf_counter() - t)"
)


def _run(cmd: list[str], root: Path, env: dict[str, str]) -> tuple[float, float, str]:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], env=env, cwd=root,
                         capture_output=True, text=True, check=True).stdout
    first, _, rest = out.partition("\n")
    code, seconds, kib = first.split()
    if code != "0":
        raise SystemExit(f"failed ({code}): {' '.join(cmd)}\n{rest}")
    return float(seconds), int(kib) / 1024, rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--other", type=Path, default=None,
                        help="another tree whose CLI runs alternately with this one")
    args = parser.parse_args()
    print("load average before:", Path("/proc/loadavg").read_text().split()[:3])
    with tempfile.TemporaryDirectory(prefix="deviations-bench-kept-") as folder:
        tmp = Path(folder)
        trace = tmp / "trace.json"
        n = write_trace(trace, int(args.mb * 2**20 / 134), args.seed)
        print(f"trace: {trace.stat().st_size / 2**20:.1f} MB, {n:,} events")
        trees = {"CLI (files kept)": PROJECT_ROOT}
        if args.other is not None:
            trees["CLI (other tree)"] = args.other.resolve()
        envs = {}
        for label, root in trees.items():
            envs[label] = dict(os.environ, PYTHONPATH=str(root),
                               DATABASE_URL=f"sqlite:///{tmp / (str(len(envs)) + '.sqlite3')}",
                               DJANGO_MEDIA_ROOT=str(tmp / "media"))
            envs[label].pop("CELERY_BROKER_URL", None)
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"],
                           env=envs[label], cwd=root, check=True, capture_output=True)
        results: dict[str, list[tuple[float, float]]] = {"put": [], **{k: [] for k in trees}}
        for i in range(args.repeat):
            shutil.rmtree(tmp / "media", ignore_errors=True)
            _, peak, out = _run([sys.executable, "-c", PUT, str(trace)], PROJECT_ROOT,
                                envs["CLI (files kept)"])
            seconds = float(out.split()[0])
            results["put"].append((seconds, peak))
            print(f"  put (local)        run {i + 1}: {seconds:6.2f} s  peak {peak:7.1f} MB")
            for label, root in trees.items():
                shutil.rmtree(tmp / "media", ignore_errors=True)  # nothing stored yet
                seconds, peak, out = _run(
                    [sys.executable, "manage.py", "ingest_traces", "--series", f"b{i}",
                     "--release", "1", "--all-threads", str(trace)], root, envs[label])
                if not out.startswith("ok "):
                    raise SystemExit(f"{label} did not ingest the trace: {out.strip()}")
                results[label].append((seconds, peak))
                print(f"  {label:18s} run {i + 1}: {seconds:6.2f} s  peak {peak:7.1f} MB")
    for label, runs in results.items():
        times = [s for s, _ in runs]
        print(f"{label:18s} min {min(times):6.2f} s  median {statistics.median(times):6.2f} s"
              f"  peak {max(m for _, m in runs):7.1f} MB")
    print("load average after:", Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
