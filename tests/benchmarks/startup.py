"""Benchmark of the CLI's start-up: ``manage.py ingest_traces --help`` against Python itself.

Run from the project root::

    python -m tests.benchmarks.startup [--repeat 9] [--other DIR]

Each command runs ``--repeat`` times, the commands alternating so that all see the same
machine; a run is the wall time of a fresh process (``subprocess.run``). Printed: the
median (and min, max) of each, then ``ingest_help_s=<median>`` with its ratios to
``python -c pass`` and to ``python -c "import django"``. The target (issue 14) is
``ingest_help_s <= 0.35``. ``-X importtime`` of the command shows where the rest goes.
``--other DIR`` also times ``DIR/manage.py ingest_traces --help`` in the same run (e.g. a
``git archive`` of an earlier commit: before and after side by side).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import django'": [sys.executable, "-c", "import django"],
    "manage.py ingest_traces --help": [sys.executable, "manage.py", "ingest_traces", "--help"],
    "manage.py ingest_histograms --help": [
        sys.executable, "manage.py", "ingest_histograms", "--help"
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--other", type=Path, help="another checkout to time beside this one")
    args = parser.parse_args()
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="deviations.settings")
    # Bytecode is cached as on any installation (a shell may set PYTHONDONTWRITEBYTECODE:
    # every module of the project would then be compiled at every start, ~0.1 s here).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    commands = {name: (command, PROJECT_ROOT) for name, command in COMMANDS.items()}
    if args.other:
        commands[f"{args.other}: ingest_traces --help"] = (
            [sys.executable, "manage.py", "ingest_traces", "--help"], args.other.resolve()
        )
    samples: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for command, cwd in commands.values():  # warm-up: writes the bytecode caches
        subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)  # noqa: S603
    for _ in range(args.repeat):
        for name, (command, cwd) in commands.items():
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, cwd=cwd, env=env, check=True,  # noqa: S603
                           stdout=subprocess.DEVNULL)
            samples[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    # CPU time (user + system) moves less than wall time when others load the machine.
    for name, values in samples.items():
        print(f"  {name}: median of {args.repeat} {medians[name]:.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f}; "
              f"CPU {statistics.median(cpu[name]):.3f} s)")
    help_s = medians["manage.py ingest_traces --help"]
    python_s, django_s = medians["python -c pass"], medians["python -c 'import django'"]
    print(f"ingest_help_s={help_s:.3f} vs_python={help_s / python_s:.1f}x "
          f"vs_import_django={help_s / django_s:.1f}x")


if __name__ == "__main__":
    main()
