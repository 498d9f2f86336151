"""Regenerate the benchmark result fixtures: 16 releases per tool, written by the tool.

Run by hand, never by the test suite (the files are committed; README.md beside this file
says which versions wrote them)::

    python tests/ingest/results_fixtures/make_fixtures.py [TOOL ...]

TOOL is one of google-benchmark, pytest-benchmark, hyperfine, asv, perfherder, bmf, csv
(all by default). Needs the ``google-benchmark``, ``pytest-benchmark`` and ``asv`` packages
in this interpreter's environment and ``hyperfine`` on PATH (Debian: ``apt-get install
hyperfine``). Each release runs the same few small workloads; one of them, "planted",
does 30% more work from release 9 on (``PLANT_SCALE=1.3``), the others are unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASES = 16
#: From this release on the planted benchmark does SCALE times the work.
PLANTED_FROM = 9
SCALE = 1.3


def scale_of(release: int) -> float:
    return SCALE if release >= PLANTED_FROM else 1.0


def version_of(release: int) -> str:
    """The release name the CSV fixtures carry (r01 -> 1.1)."""
    return f"1.{release}"


# --- the workloads (shared by the tools that run Python code) ----------------------------

WORKLOADS = textwrap.dedent('''
    import os
    import time

    PLANT_SCALE = float(os.environ.get("PLANT_SCALE", "1"))


    def wait_1ms():
        time.sleep(0.001)


    def wait_2ms():
        time.sleep(0.002)


    def planted():
        """The benchmark made 30% slower from release 5 on: it waits 1.95 ms, not 1.5 ms."""
        time.sleep(0.0015 * PLANT_SCALE)
''')


def _load_workloads(scale: float) -> dict[str, Callable[[], object]]:
    namespace: dict[str, object] = {}
    os.environ["PLANT_SCALE"] = str(scale)
    exec(compile(WORKLOADS, "workloads", "exec"), namespace)  # noqa: S102 - our own source
    return {k: namespace[k] for k in ("wait_1ms", "wait_2ms", "planted")}  # type: ignore[misc]


def _measure(fn: Callable[[], object], repeats: int, loops: int) -> list[float]:
    """``repeats`` replicates of the time of one call (seconds), each the mean of ``loops``."""
    fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        out.append((time.perf_counter() - start) / loops)
    return out


def _out(tool: str) -> Path:
    folder = HERE / tool
    folder.mkdir(exist_ok=True)
    return folder


# --- Google Benchmark (its Python bindings, the same JSON reporter as the C++ library) ---

GBENCH = WORKLOADS + textwrap.dedent('''
    import google_benchmark as benchmark


    # use_real_time: the iteration count follows wall time (a wait uses no CPU time).
    @benchmark.register
    @benchmark.option.use_real_time()
    def BM_wait_1ms(state):
        while state:
            wait_1ms()
        state.items_processed = state.iterations * 100


    @benchmark.register
    @benchmark.option.use_real_time()
    @benchmark.option.unit(benchmark.kMicrosecond)
    def BM_wait_2ms(state):
        while state:
            wait_2ms()


    @benchmark.register
    @benchmark.option.use_real_time()
    @benchmark.option.unit(benchmark.kMicrosecond)
    def BM_planted(state):
        while state:
            planted()


    if __name__ == "__main__":
        benchmark.main()
''')


def google_benchmark(tmp: Path) -> None:
    script = tmp / "bench_gb.py"
    script.write_text(GBENCH)
    for r in range(1, RELEASES + 1):
        out = _out("google-benchmark") / f"r{r:02d}.json"
        subprocess.run(
            [sys.executable, str(script), "--benchmark_repetitions=6",
             "--benchmark_min_time=0.1s", f"--benchmark_out={out}",
             "--benchmark_out_format=json"],
            env={**os.environ, "PLANT_SCALE": str(scale_of(r))}, check=True,
            stdout=subprocess.DEVNULL,
        )
        _anonymise_google(out)


def _anonymise_google(path: Path) -> None:
    """The machine's host name and the temporary folder's path are not kept."""
    doc = json.loads(path.read_text())
    doc["context"].update(host_name="ci-runner", executable="bench_gb.py")
    path.write_text(json.dumps(doc, indent=2) + "\n")


# --- pytest-benchmark ---------------------------------------------------------------------

PYTEST = WORKLOADS + textwrap.dedent('''
    import pytest


    @pytest.mark.parametrize("ms", [1, 2])
    def test_steady(benchmark, ms):
        benchmark.pedantic(wait_1ms if ms == 1 else wait_2ms, rounds=8, iterations=10,
                           warmup_rounds=1)


    def test_planted(benchmark):
        benchmark.pedantic(planted, rounds=8, iterations=10, warmup_rounds=1)
''')


def pytest_benchmark(tmp: Path) -> None:
    (tmp / "test_bench.py").write_text(PYTEST)
    (tmp / "pytest.ini").write_text("[pytest]\n")
    for r in range(1, RELEASES + 1):
        out = _out("pytest-benchmark") / f"r{r:02d}.json"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:django", "-p", "no:cacheprovider",
             "test_bench.py", f"--benchmark-json={out}"],
            cwd=tmp, env={**os.environ, "PLANT_SCALE": str(scale_of(r))}, check=True,
            stdout=subprocess.DEVNULL,
        )
        _anonymise_pytest(out)


def _anonymise_pytest(path: Path) -> None:
    """The machine's host name and the temporary folder's path are not kept."""
    doc = json.loads(path.read_text())
    doc["machine_info"]["node"] = "ci-runner"
    doc["commit_info"] = {}
    path.write_text(json.dumps(doc, indent=4) + "\n")


# --- hyperfine ----------------------------------------------------------------------------


def hyperfine(tmp: Path) -> None:
    for r in range(1, RELEASES + 1):
        out = _out("hyperfine") / f"r{r:02d}.json"
        planted = 0.04 * scale_of(r)
        subprocess.run(
            ["hyperfine", "--shell=none", "--runs", "8", "--warmup", "1", "--style", "none",
             "--export-json", str(out),
             "-n", "sleep 0.02", "sleep 0.02",
             "-n", "sleep 0.05", "sleep 0.05",
             "-n", "planted", f"sleep {planted:.3f}"],
            cwd=tmp, check=True, stdout=subprocess.DEVNULL,
        )


# --- asv ----------------------------------------------------------------------------------

ASV_BENCH = textwrap.dedent('''
    import time

    PLANT_SCALE = {scale}


    class Suite:
        repeat = 7
        rounds = 1
        warmup_time = 0.01

        def time_wait_1ms(self):
            time.sleep(0.001)

        def time_planted(self):
            time.sleep(0.0015 * PLANT_SCALE)

        def mem_list(self):
            return [0] * 1000

        def track_answer(self):
            return 42


    class Params:
        repeat = 6
        rounds = 1
        warmup_time = 0.01
        params = ([1, 2], ["a", "b"])
        param_names = ["ms", "kind"]

        def time_wait(self, ms, kind):
            time.sleep(ms / 1000)
''')


def asv(tmp: Path) -> None:
    repo = tmp / "asvproject"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "fixture", "repo": ".", "branches": ["main"],
        "environment_type": "existing", "benchmark_dir": "benchmarks",
        "results_dir": "results", "html_dir": "html",
    }))
    env = {**os.environ, "HOME": str(tmp), "GIT_AUTHOR_NAME": "f", "GIT_AUTHOR_EMAIL": "f@x",
           "GIT_COMMITTER_NAME": "f", "GIT_COMMITTER_EMAIL": "f@x"}
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True, env=env)
    asv_cmd = [sys.executable, "-m", "asv"]
    subprocess.run([*asv_cmd, "machine", "--yes", "--machine", "ci-runner"], cwd=repo,
                   check=True, env=env, stdout=subprocess.DEVNULL)
    for r in range(1, RELEASES + 1):
        (repo / "benchmarks" / "bench.py").write_text(ASV_BENCH.format(scale=scale_of(r)))
        subprocess.run([*git, "add", "-A"], check=True, env=env)
        subprocess.run([*git, "commit", "-q", "-m", f"release {r}"], check=True, env=env)
        commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, env=env,
                                capture_output=True, text=True).stdout.strip()
        subprocess.run(
            [*asv_cmd, "run", "--python=same", "--set-commit-hash", commit, "--record-samples",
             "--machine", "ci-runner"],
            cwd=repo, check=True, env=env, stdout=subprocess.DEVNULL,
        )
        written = [p for p in (repo / "results" / "ci-runner").glob(f"{commit[:8]}-*.json")]
        assert len(written) == 1, written
        shutil.copy(written[0], _out("asv") / f"r{r:02d}.json")


# --- formats whose tools do not install here: real measurements, written by this script ---


def _measured_release(r: int) -> dict[str, list[float]]:
    """Seconds per call of each workload, 7 replicates."""
    fns = _load_workloads(scale_of(r))
    return {name: _measure(fn, repeats=7, loops=20) for name, fn in fns.items()}


def perfherder(_tmp: Path) -> None:
    """PERFHERDER_DATA lines as a Firefox CI task log holds them (two suites, two lines)."""
    for r in range(1, RELEASES + 1):
        times = _measured_release(r)
        ms = {k: [round(v * 1e3, 6) for v in vs] for k, vs in times.items()}
        workloads = {
            "framework": {"name": "mozperftest"},
            "suites": [{
                "name": "workloads", "unit": "ms", "lowerIsBetter": True, "alertThreshold": 2.0,
                "extraOptions": ["python"],
                "value": round(statistics.geometric_mean(
                    [statistics.median(v) for v in ms.values()]), 6),
                "subtests": [
                    {"name": name, "value": round(statistics.median(vs), 6), "replicates": vs,
                     "unit": "ms", "lowerIsBetter": True}
                    for name, vs in ms.items()
                ],
            }],
        }
        ops = [round(1.0 / v, 3) for v in times["wait_1ms"]]
        throughput = {
            "framework": {"name": "mozperftest"},
            "suites": [{"name": "wait-throughput", "unit": "ops/s", "lowerIsBetter": False,
                        "value": round(statistics.median(ops), 3), "replicates": ops}],
        }
        stamp = f"[task 2026-01-0{min(r, 9)}T10:00:00.000Z]"
        lines = [
            f"{stamp} 10:00:00     INFO -  Running the workloads",
            f"{stamp} 10:00:01     INFO -  PERFHERDER_DATA: {json.dumps(workloads)}",
            f"{stamp} 10:00:02     INFO -  PERFHERDER_DATA: {json.dumps(throughput)}",
            f"{stamp} 10:00:02     INFO -  Done",
        ]
        (_out("perfherder") / f"r{r:02d}.log").write_text("\n".join(lines) + "\n")


def bmf(_tmp: Path) -> None:
    """Bencher Metric Format: per benchmark, the median latency (ns) of 7 replicates with
    their minimum and maximum as bounds; throughput (calls per second) for wait_1ms."""
    for r in range(1, RELEASES + 1):
        times = _measured_release(r)
        doc: dict[str, dict[str, dict[str, float]]] = {}
        for name, vs in times.items():
            ns = [v * 1e9 for v in vs]
            doc[name] = {"latency": {"value": round(statistics.median(ns), 1),
                                     "lower_value": round(min(ns), 1),
                                     "upper_value": round(max(ns), 1)}}
        ops = [1.0 / v for v in times["wait_1ms"]]
        doc["wait_1ms"]["throughput"] = {"value": round(statistics.median(ops), 3),
                                            "lower_value": round(min(ops), 3),
                                            "upper_value": round(max(ops), 3)}
        (_out("bmf") / f"r{r:02d}.json").write_text(json.dumps(doc, indent=2) + "\n")


def csv(_tmp: Path) -> None:
    """One CSV per release (7 rows per metric: its replicates) and ``all.csv`` with every
    release, the way a team's own harness would write them."""
    header = "release,metric,value,unit,direction\n"
    every = [header]
    for r in range(1, RELEASES + 1):
        times = _measured_release(r)
        rows = []
        for name, vs in times.items():
            direction = "lower_is_better" if name != "wait_2ms" else ""
            rows += [f"{version_of(r)},{name},{v * 1e6:.4f},us,{direction}\n" for v in vs]
        (_out("csv") / f"r{r:02d}.csv").write_text(header + "".join(rows))
        every += rows
    (_out("csv") / "all.csv").write_text("".join(every))


TOOLS = {"google-benchmark": google_benchmark, "pytest-benchmark": pytest_benchmark,
         "hyperfine": hyperfine, "asv": asv, "perfherder": perfherder, "bmf": bmf, "csv": csv}


def main(argv: list[str]) -> None:
    for tool in argv or list(TOOLS):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            TOOLS[tool](Path(tmp))
            print(f"{tool}: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
