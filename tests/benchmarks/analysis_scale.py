"""Bounded (chunked) analysis at scale: fill, full analysis, one new release, memory, bytes.

Run from the project root (PostgreSQL on 127.0.0.1:5432, trust auth)::

    python -m tests.benchmarks.analysis_scale fill [--releases 2000] [--functions 20000]
        [--runs 10] [--database bench_chunks] [--series NAME] [--resume]
    python -m tests.benchmarks.analysis_scale measure [--database bench_chunks]
        [--series NAME] [--memory-mb 1024 ...] [--chunks-only K]

``fill`` recreates the database (unless ``--resume`` or another ``--series``: it adds to
it) and fills one series as ``tests.benchmarks.pages`` does (its ``Filler``, bulk inserts;
no trace is parsed), printing its progress.

``measure`` runs each step in a fresh child process, so that each peak RSS
(``resource.getrusage``'s ``ru_maxrss``: the child's whole life, Django, NumPy and SciPy
loaded included) is that step's. For each ``--memory-mb`` (``DEVIATIONS_ANALYSIS_MEMORY_MB``)
in turn: a full analysis (``analyse --full``: chunks one after another in-process, as the
embedded default and ``manage.py analyse`` run them; on a worker pool each chunk is one
task and its process holds one chunk at a time), then one release appended with its runs
and the analysis a task would run (incremental). It prints wall and CPU time
(``time.process_time`` of the child), peak RSS, the chunks, and the stored bytes
(``pg_total_relation_size`` of the analysis tables and of the runs' times).

``--chunks-only K`` (for sizes whose full analysis takes hours) times only the function
ids' pass and the first ``K`` chunks of a full analysis (their blocks are discarded) and
prints the projection: the pass plus the number of chunks × the median chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks import pages
from tests.benchmarks.pages import (
    PG,
    PROJECT_ROOT,
    SERIES,
    Filler,
    recreate_database,
    setup_django,
)


def attach(functions: int, runs: int, releases: int, seed: int, name: str = SERIES
           ) -> tuple[Any, int]:
    """A ``Filler`` for the series a fill left (its functions and levels; new noise), and
    how many releases it holds."""
    from deviations.traces.models import Function, Release, Series

    filler = object.__new__(Filler)
    filler.rng = np.random.default_rng(seed)
    filler.runs = runs
    filler.series = Series.objects.get(name=name)
    filler.fids = np.array(Function.objects.filter(series=filler.series).order_by("id")
                           .values_list("id", flat=True))
    count = len(filler.fids)
    filler.level = filler.rng.lognormal(np.log(200), 1.5, count)
    filler.noise = filler.rng.uniform(0.03, 0.15, count)
    filler.rare = filler.rng.random(count) < 0.1
    filler.step = np.ones((count, releases + 10))
    made = Release.objects.filter(series=filler.series).count()
    filler.made = made * runs + 1_000_000  # distinct file names and hashes
    return filler, made


def fill(args: argparse.Namespace) -> None:
    if not args.resume and args.series == SERIES:
        recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    start = time.perf_counter()
    from deviations.traces.models import Series

    if args.resume and Series.objects.filter(name=args.series).exists():
        filler, first = attach(args.functions, args.runs, args.releases, args.seed, args.series)
    else:
        pages.SERIES = args.series  # the name Filler gives its series
        filler, first = Filler(args.functions, args.runs, args.releases, args.seed), 0
    for k in range(first, args.releases):
        filler.add_release(f"1.{k}", order=10 * k, position=k)
        if (k + 1) % 25 == 0:
            print(f"{k + 1} releases in {time.perf_counter() - start:.0f} s", flush=True)
    print(f"filled {args.releases} releases × {args.functions} functions × {args.runs} runs "
          f"in {time.perf_counter() - start:.1f} s", flush=True)


def _child(argv: list[str]) -> dict[str, Any]:
    """Run ``python -m tests.benchmarks.analysis_scale step ...``; its last line (JSON)."""
    with subprocess.Popen([sys.executable, "-m", "tests.benchmarks.analysis_scale", *argv],
                          cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            print("    " + line.rstrip(), flush=True)
    if proc.returncode:
        raise RuntimeError(f"step {argv[:2]} failed ({proc.returncode})")
    return dict(json.loads(lines[-1]))


_BLOCK_BYTES = ("estimate", "lo", "hi", "order_lo", "order_hi", "n", "gap", "diff", "diff_lo",
                "diff_hi", "paper_p", "paper_verdict", "shift_verdict", "shift_diff",
                "shift_lo", "shift_hi", "shift_p", "shift_before", "shift_reach_before",
                "shift_reach_after", "shift_n_before", "shift_n_after", "shift_flags")


def _sizes(database: str, series: str) -> dict[str, int]:
    """Bytes on disk: each table whole (``pg_total_relation_size``: every series, indexes,
    TOAST), and the series' own rows (``pg_column_size`` of each stored value, after
    compression, plus PostgreSQL's 24-byte row header and the fixed columns)."""
    import psycopg

    blocks = " + ".join(f"pg_column_size({c})" for c in _BLOCK_BYTES)
    with psycopg.connect(PG.format(database)) as conn:
        out = {t: int(conn.execute("SELECT pg_total_relation_size(%s)", [t]).fetchone()[0])
               for t in ("deviations_analysisblock", "deviations_seriesanalysis",
                         "deviations_runtimes")}
        sid = conn.execute("SELECT id FROM deviations_series WHERE name = %s",
                           [series]).fetchone()[0]
        out["series_blocks"], out["series_block_rows"] = (int(x or 0) for x in conn.execute(
            f"SELECT sum({blocks} + 80), count(*) FROM deviations_analysisblock "  # noqa: S608 (column names of this file)
            "WHERE series_id = %s AND stage = 0", [sid]).fetchone())
        out["series_summary"] = int(conn.execute(
            "SELECT coalesce(sum(pg_column_size(release_ids) + pg_column_size(function_ids) "
            "+ pg_column_size(run_ids) + pg_column_size(run_counts) + 80), 0) "
            "FROM deviations_seriesanalysis WHERE series_id = %s", [sid]).fetchone()[0])
        out["series_runtimes"] = int(conn.execute(
            "SELECT coalesce(sum(pg_column_size(t.function_ids) + pg_column_size(t.self_us) "
            "+ pg_column_size(t.total_us) + pg_column_size(t.calls) + 40), 0) "
            "FROM deviations_runtimes t JOIN deviations_run r ON r.id = t.run_id "
            "WHERE r.series_id = %s", [sid]).fetchone()[0])
    return out


def step(args: argparse.Namespace) -> None:
    """One measured step in this (fresh) process; prints a JSON line last."""
    setup_django(args.database)
    from django.conf import settings
    from django.utils import timezone

    from deviations.traces import analysis, store
    from deviations.traces.models import Release, Series

    settings.DEVIATIONS_ANALYSIS_MEMORY_MB = args.memory_mb[0]
    series = Series.objects.get(name=args.series)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out: dict[str, Any] = {"base_rss_mb": base_rss / 1024}
    wall, cpu = time.perf_counter(), time.process_time()
    if args.what == "full":
        out["message"] = analysis.analyse_series(series.pk, force=True)
    elif args.what == "release":
        columns = analysis.current_columns(series)
        filler, made = attach(args.functions, args.runs, args.releases, args.seed, args.series)
        filler.runs = int(columns.run_counts[-1])
        last = Release.objects.filter(series=series).order_by("-order").first()
        order = (last.order if last else 0) + 10
        filler.add_release(f"9.{made}", order=order, position=0)
        wall, cpu = time.perf_counter(), time.process_time()
        out["message"] = analysis.analyse_series(series.pk)
    else:  # the first chunks of a full analysis
        columns = analysis.current_columns(series)
        p = analysis.plan(columns, None)
        job = analysis.prepare(series, columns, None, p, timezone.now())
        out["prepare_s"], out["prepare_cpu_s"] = (time.perf_counter() - wall,
                                                  time.process_time() - cpu)
        out["chunks"] = len(job.chunks)
        out["rows"] = [hi - lo for lo, hi in job.chunks[: args.chunks_only]]
        times = []
        try:
            for lo, hi in job.chunks[: args.chunks_only]:
                w, c = time.perf_counter(), time.process_time()
                analysis.run_chunk(job, lo, hi)
                times.append((time.perf_counter() - w, time.process_time() - c))
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"chunk {lo}..{hi}: {times[-1][0]:.1f} s, CPU {times[-1][1]:.1f} s, "
                      f"peak RSS {peak:.0f} MB", flush=True)
        finally:
            store.discard(series.pk, job.stage)
        out["chunk_s"] = [t[0] for t in times]
        out["chunk_cpu_s"] = [t[1] for t in times]
    out["wall_s"], out["cpu_s"] = time.perf_counter() - wall, time.process_time() - cpu
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _proc_stats(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS (MB, ``VmHWM``) of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    return cpu, int(hwm.split()[1]) / 1024


class _Prefork:
    """One ``celery worker --pool=prefork --concurrency=N`` process and its pool's children,
    watched every 0.2 s: a child replaced after a task (``DEVIATIONS_WORKER_MAX_MEMORY_MB``)
    takes its high-water mark with it, so each child's ``VmHWM`` is recorded while it lives;
    the CPU of children gone is the parent's ``cutime + cstime``."""

    def __init__(self, parent: int) -> None:
        import threading

        self.parent = parent
        self.hwm: dict[int, float] = {}
        self.cpu: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _children(self) -> list[int]:
        try:
            text = Path(f"/proc/{self.parent}/task/{self.parent}/children").read_text()
        except OSError:
            return []
        return [int(x) for x in text.split()]

    def _watch(self) -> None:
        while not self.stop.wait(0.2):
            for pid in self._children():
                try:
                    cpu, hwm = _proc_stats(pid)
                except (OSError, StopIteration):
                    continue
                self.hwm[pid] = max(hwm, self.hwm.get(pid, 0.0))
                self.cpu[pid] = cpu

    def cpu_s(self) -> float:
        """CPU seconds of the worker: the parent, its children gone, its children alive."""
        fields = Path(f"/proc/{self.parent}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        mine = sum(int(fields[k]) for k in (11, 12, 13, 14)) / tick
        alive = set(self._children())
        return mine + sum(c for pid, c in self.cpu.items() if pid in alive)

    def peaks(self, before: dict[int, float]) -> list[float]:
        """High-water marks (MB) of one step: of the children new since ``before`` (the
        marks when it began) and of those whose mark grew during it."""
        return [h for pid, h in sorted(self.hwm.items()) if h > before.get(pid, 0.0)]


def _on_workers(args: argparse.Namespace, memory: float) -> None:
    """A full analysis and one new release through ``--workers`` Celery worker processes
    (``--pool=solo``: each process runs one task at a time, and its RSS is the task's), or
    with ``--prefork`` through one prefork worker of ``--workers`` children, as deployed
    (docker-compose.yml): each child's peak is recorded, and a child whose high-water mark
    passed ``DEVIATIONS_WORKER_MAX_MEMORY_MB`` is replaced after its task."""
    from deviations.core import worker  # noqa: F401  (binds the tasks to the project's app)
    from deviations.traces import analysis, store, tasks
    from deviations.traces.models import AnalysisBlock, Series, SeriesAnalysis

    env = {**os.environ, "DATABASE_URL": PG.format(args.database),
           "DEVIATIONS_ANALYSIS_MEMORY_MB": str(memory)}
    if args.worker_max_memory_mb is not None:
        env["DEVIATIONS_WORKER_MAX_MEMORY_MB"] = str(args.worker_max_memory_mb)
    count = 1 if args.prefork else args.workers
    pool = (["--pool=prefork", f"--concurrency={args.workers}"] if args.prefork
            else ["--pool=solo"])
    logs = [open(f"/tmp/analysis_scale_worker{k}.log", "wb") for k in range(count)]  # noqa: SIM115, S108
    workers = [subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "deviations.celery", "worker", *pool,
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
         "-n", f"bench{k}@%h"], cwd=PROJECT_ROOT, env=env, stdout=log,
        stderr=subprocess.STDOUT) for k, log in enumerate(logs)]
    watch = _Prefork(workers[0].pid) if args.prefork else None
    try:
        time.sleep(8)  # the workers connect
        series = Series.objects.get(name=args.series)

        def cpu_now() -> float:
            if watch is not None:
                return watch.cpu_s()
            return sum(_proc_stats(w.pid)[0] for w in workers)

        def analysed(before: int | None) -> tuple[float, float, list[float], str]:
            start = time.perf_counter()
            cpu0 = cpu_now()
            old = dict(watch.hwm) if watch is not None else {}
            tasks.analyse_series.delay(series.pk)
            while True:
                time.sleep(0.5)
                series.refresh_from_db()
                if store.generation(series.pk) not in (None, before) and (
                        series.analysis_started is None):
                    break
                if series.analysis_failure:
                    raise RuntimeError(series.analysis_failure)
            wall = time.perf_counter() - start
            time.sleep(0.5)  # the watcher's last look
            cpu = cpu_now() - cpu0
            if watch is None:
                peaks = [_proc_stats(w.pid)[1] for w in workers]
            else:  # children new in this step, and those that grew during it
                peaks = watch.peaks(old)
            return wall, cpu, peaks, (
                f"{len(analysis.current_columns(series).release_ids)} releases")

        AnalysisBlock.objects.filter(series=series).delete()
        SeriesAnalysis.objects.filter(series=series).delete()
        wall, cpu, rss, what = analysed(None)
        print(f"  {args.workers} workers, memory {memory} MB, full: {wall:.1f} s, CPU of the "
              f"workers {cpu:.1f} s, peak RSS per worker {[round(r) for r in rss]} MB ({what})",
              flush=True)
        filler, made = attach(args.functions, args.runs, args.releases, args.seed, args.series)
        order = series.releases.order_by("-order").values_list("order", flat=True)[0] + 10
        filler.add_release(f"9.{made}", order=order, position=0)
        before = store.generation(series.pk)
        new_wall, new_cpu, new_rss, what = analysed(before)
        print(f"  {args.workers} workers, one new release: {new_wall:.2f} s, CPU of the "
              f"workers {new_cpu:.2f} s, peak RSS per worker {[round(r) for r in new_rss]} MB "
              f"({what})", flush=True)
        print(f"workers={args.workers} full_s={wall:.1f} full_cpu_s={cpu:.1f} "
              f"incremental_s={new_wall:.2f} incremental_cpu_s={new_cpu:.2f} "
              f"peak_rss_mb={max(rss):.0f} new_release_peak_rss_mb={max(new_rss, default=0):.0f} "
              f"memory_mb={memory} load={os.getloadavg()[0]:.2f}",
              flush=True)
    finally:
        if watch is not None:
            watch.stop.set()
        for w in workers:
            w.terminate()
            w.wait(timeout=60)
        for log in logs:
            log.close()


def measure(args: argparse.Namespace) -> None:
    if args.workers:
        os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/1")
    setup_django(args.database)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from deviations.traces import analysis
    from deviations.traces.models import Function, Series

    series = Series.objects.get(name=args.series)
    columns = analysis.current_columns(series)
    functions = Function.objects.filter(series=series).count()
    print(f"{args.series}: {len(columns.release_ids)} releases × {functions} functions × "
          f"{int(columns.run_counts.max())} runs; load average {os.getloadavg()}", flush=True)
    common = ["--database", args.database, "--series", args.series, "--functions",
              str(functions), "--runs", str(args.runs), "--releases", str(args.releases)]
    for memory in args.memory_mb:
        if args.workers:
            _on_workers(args, memory)
            continue
        mem = ["--memory-mb", str(memory)]
        if args.chunks_only:
            got = _child(["step", "chunks", "--chunks-only", str(args.chunks_only), *mem, *common])
            median = statistics.median(got["chunk_cpu_s"])
            wall = statistics.median(got["chunk_s"])
            print(f"  memory {memory} MB: {got['chunks']} chunks (rows {got['rows']}); function "
                  f"ids' pass {got['prepare_s']:.1f} s (CPU {got['prepare_cpu_s']:.1f} s); "
                  f"chunks {[round(x, 1) for x in got['chunk_s']]} s, CPU "
                  f"{[round(x, 1) for x in got['chunk_cpu_s']]} s; peak RSS "
                  f"{got['peak_rss_mb']:.0f} MB (base {got['base_rss_mb']:.0f} MB)")
            cpu = got["prepare_cpu_s"] + got["chunks"] * median
            print(f"  projected full analysis: CPU {cpu:.0f} s, "
                  f"wall on one process {got['prepare_s'] + got['chunks'] * wall:.0f} s; "
                  f"load average {os.getloadavg()}", flush=True)
            continue
        full = _child(["step", "full", *mem, *common])
        print(f"  memory {memory} MB, full: {full['wall_s']:.1f} s, CPU {full['cpu_s']:.1f} s, "
              f"peak RSS {full['peak_rss_mb']:.0f} MB (base {full['base_rss_mb']:.0f} MB): "
              f"{full['message']}", flush=True)
        new = _child(["step", "release", *mem, *common])
        print(f"  memory {memory} MB, one new release: {new['wall_s']:.2f} s, CPU "
              f"{new['cpu_s']:.2f} s, peak RSS {new['peak_rss_mb']:.0f} MB: {new['message']}",
              flush=True)
        sizes = _sizes(args.database, args.series)
        stored = sizes["series_blocks"] + sizes["series_summary"]
        print(f"  stored: this series' analysis {stored:,} bytes ({sizes['series_block_rows']:,} "
              f"blocks, summary {sizes['series_summary']:,}), its runs' times "
              f"{sizes['series_runtimes']:,}; tables whole: {sizes}", flush=True)
        print(f"full_s={full['wall_s']:.1f} full_cpu_s={full['cpu_s']:.1f} "
              f"incremental_s={new['wall_s']:.2f} incremental_cpu_s={new['cpu_s']:.2f} "
              f"peak_rss_mb={max(full['peak_rss_mb'], new['peak_rss_mb']):.0f} "
              f"analysis_bytes={stored} "
              f"runtimes_bytes={sizes['series_runtimes']} memory_mb={memory} "
              f"load={os.getloadavg()[0]:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("fill", "measure", "step"))
    parser.add_argument("what", nargs="?", choices=("full", "release", "chunks"))
    parser.add_argument("--releases", type=int, default=2000)
    parser.add_argument("--functions", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--database", default="bench_chunks")
    parser.add_argument("--series", default=SERIES)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--resume", action="store_true",
                        help="fill: continue the series a fill left in --database")
    parser.add_argument("--memory-mb", type=float, nargs="+", default=[1024.0],
                        help="DEVIATIONS_ANALYSIS_MEMORY_MB values to measure, in turn")
    parser.add_argument("--workers", type=int, default=0,
                        help="measure through this many Celery worker processes (a chord; "
                             "CELERY_BROKER_URL, default redis://127.0.0.1:6379/1)")
    parser.add_argument("--prefork", action="store_true",
                        help="with --workers N: one prefork worker of N children, as "
                             "deployed, instead of N solo workers")
    parser.add_argument("--worker-max-memory-mb", type=float, default=None,
                        help="DEVIATIONS_WORKER_MAX_MEMORY_MB for the workers (default: the "
                             "setting's own default, the analysis budget; 0: off)")
    parser.add_argument("--chunks-only", type=int, default=0,
                        help="measure: time the first K chunks of a full analysis only")
    args = parser.parse_args()
    os.chdir(PROJECT_ROOT)
    if args.command == "fill":
        fill(args)
    elif args.command == "measure":
        measure(args)
    else:
        step(args)


if __name__ == "__main__":
    main()
