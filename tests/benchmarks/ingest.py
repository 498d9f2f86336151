"""Benchmark of trace ingest against ``json.load`` of the same file.

Run from the project root::

    python -m tests.benchmarks.ingest [--sizes 60,250] [--repeat 3] [--other DIR]
                                      [--seed 20261122] [--keep DIR] [--whole-too]

For each size (MiB; ``--events N`` gives one size in events instead) it writes a
synthetic Chrome trace (deterministic seed; ~134 bytes an event: nested ``B``/``E`` and
``X`` slices on several processes and threads including the ``CrRendererMain`` thread of
two ``Renderer`` processes, metadata, instant and counter events, args dictionaries on
some events; threads interleaved in chunks and slightly out of order, as Chrome's buffer
writes them) into a temporary directory, then measures, each in its own subprocess so
that each peak RSS is clean (a wrapper's ``RUSAGE_CHILDREN``), interleaved run by run:

1. ``json.load`` of the file: the yardstick;
2. ``cli``: the end-to-end CLI ingest as a CI job calls it,
   ``python manage.py ingest_traces --series S --release 1 --all-threads --no-analyse
   FILE``: the parse and the sha256 (before Django's set-up: ``management.preparse``),
   Django's start-up, the copy into the trace storage, the database writes (a new series
   each run, so every function name is created), into
   ``DATABASE_URL=sqlite:///<tmpdir>/bench.sqlite3``. This is the measure comparable with
   ``json.load`` (file in, data out); the analysis is the next step
   (``manage.py analyse``, or the worker when a broker is configured);
3. ``cli+analysis``: the same without ``--no-analyse`` (embedded default: the analysis
   runs in the same process after the ingest lines; one release, so it has nothing to
   compare, but loads SciPy and the analysis as before);
4. ``parser``: ``ingest.traces.parse_trace(FILE, all_threads=True)`` alone;
5. with ``--other DIR`` (e.g. ``git archive`` of the commit before, unpacked), that
   checkout's ``cli+analysis`` and ``parser`` in the same run: before and after side by
   side (its database migrated separately).

Each is run ``--repeat`` times (default 3), alternating; the fastest run of each counts
(the machine is shared: the minimum is the least disturbed run) and the largest peak.
Printed per size: each measure's seconds, its ratio to ``json.load``, its peak RSS and
the peak over the file size, then a line
``size=<MiB> cli_vs_json_load=<ratio> parser_vs_json_load=<ratio> cli_peak_vs_file=<ratio>
parser_peak_vs_file=<ratio>`` (issue 24: the CLI <= 0.5x ``json.load`` end to end, peak <=
1.5x the file). ``--whole-too`` also measures ``parse_trace`` with the event array
decoded whole (``ingest.traces._decode_stream`` and ``_PIECE_BYTES`` disabled: the
parser before pieces).

Figures: docs/architecture.md, "Trace parsing: speed and memory".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# (pid, process name, [(tid, thread name, share of the slice events)])
PROCESSES = [
    (4101, "Browser", [(4101, "CrBrowserMain", 0.12), (4117, "Chrome_IOThread", 0.05)]),
    (4155, "GPU Process", [(4155, "CrGpuMain", 0.08), (4170, "VizCompositorThread", 0.05)]),
    (
        5230,
        "Renderer",
        [
            (1, "CrRendererMain", 0.30),
            (5241, "Compositor", 0.06),
            (5250, "ThreadPoolForegroundWorker", 0.04),
        ],
    ),
    (
        5388,
        "Renderer",
        [(1, "CrRendererMain", 0.22), (5390, "Compositor", 0.04), (5402, "Media", 0.04)],
    ),
]
CATEGORIES = ["toplevel", "v8", "blink", "devtools.timeline", "cc", "disabled-by-default-v8.gc"]
URLS = [
    f"https://app.example.com/static/js/chunk-{i:03d}.{i * 7919 % 65536:04x}.js" for i in range(40)
]


def _names(rng: random.Random) -> list[str]:
    """A pool of function names like Chrome's: C++ scopes, V8 phases, JS functions."""
    cxx = [
        "ThreadControllerImpl::RunTask",
        "RunTask",
        "ParseHTML",
        "UpdateLayoutTree",
        "Layout",
        "Paint",
        "CompositeLayers",
        "EvaluateScript",
        "v8.compile",
        "v8.run",
        "v8.callFunction",
        "FunctionCall",
        "TimerFire",
        "EventDispatch",
        "HitTest",
        "MinorGC",
        "MajorGC",
        "V8.GCScavenger",
        "ResourceReceivedData",
        "ParseAuthorStyleSheet",
        "blink::Document::UpdateStyleAndLayout",
        "cc::ProxyMain::BeginMainFrame",
        "viz::Display::DrawAndSwap",
        "IPC::ChannelProxy::Context::OnDispatchMessage",
        '<div class="x">&amp;</div>',
        "Функция::вызов",
        "函数调用",
    ]
    js = [
        f"Function:{w}{i}@chunk-{rng.randrange(40):03d}.js:{rng.randrange(1, 9000)}"
        for i, w in enumerate(["render", "update", "reduce", "map", "fetch"] * 300)
    ]
    return cxx + js


def _thread_events(
    rng: random.Random, pid: int, tid: int, target: int, names: list[str], t0: int
) -> list[str]:
    """Serialised events of one thread: top-level tasks with nested X and B/E slices."""
    out: list[str] = []
    head = f'{{"pid":{pid},"tid":{tid},"ts":'
    now = t0
    top = names[:6]

    def emit(start: int, dur: int, depth: int) -> None:
        name = rng.choice(top) if depth == 0 else rng.choice(names)
        cat = rng.choice(CATEGORIES)
        if rng.random() < 0.06:
            args = (
                f'{{"data":{{"frame":"0x{rng.getrandbits(40):x}","url":"{rng.choice(URLS)}",'
                f'"lineNumber":{rng.randrange(1, 5000)},"columnNumber":{rng.randrange(1, 200)}}}}}'
            )
        else:
            args = "{}"
        use_be = rng.random() < 0.25
        tts = start // 3
        if use_be:
            out.append(
                f'{head}{start},"ph":"B","cat":"{cat}","name":{json.dumps(name)},"args":{args}}}'
            )
        elif rng.random() < 0.2:
            out.append(
                f'{head}{start},"ph":"X","cat":"{cat}","name":{json.dumps(name)},'
                f'"dur":{dur},"tdur":{dur * 9 // 10},"tts":{tts},"args":{args}}}'
            )
        else:
            out.append(
                f'{head}{start},"ph":"X","cat":"{cat}","name":{json.dumps(name)},'
                f'"dur":{dur},"args":{args}}}'
            )
        if depth < 9 and dur > 4 and rng.random() < 0.8:
            n_children = rng.randint(1, 4)
            cursor = start + rng.randrange(0, 2)
            room = start + dur - cursor
            for _ in range(n_children):
                if room <= 2:
                    break
                child = rng.randint(1, max(1, room * 2 // (n_children + 1)))
                emit(cursor, child, depth + 1)
                gap = rng.randrange(0, 3)
                cursor += child + gap
                room -= child + gap
        if rng.random() < 0.03:
            mark = start + dur // 2
            out.append(f'{head}{mark},"ph":"I","cat":"{cat}","name":"Mark","s":"t","args":{{}}}}')
        if use_be:
            out.append(f'{head}{start + dur},"ph":"E","name":{json.dumps(name)},"args":{{}}}}')

    while len(out) < target:
        dur = rng.randint(50, 20_000)
        emit(now, dur, 0)
        if rng.random() < 0.05:
            out.append(
                f'{head}{now},"ph":"C","cat":"v8","name":"JSHeapSize",'
                f'"args":{{"used":{rng.randrange(1, 1 << 30)}}}}}'
            )
        now += dur + rng.randint(1, 500)
    return out


def write_trace(path: Path, n_events: int, seed: int) -> int:
    """Write the synthetic trace (object form); return its number of events."""
    rng = random.Random(seed)
    names = _names(rng)
    per_thread: list[list[str]] = []
    meta: list[str] = []
    for pid, pname, threads in PROCESSES:
        meta.append(
            f'{{"pid":{pid},"tid":0,"ts":0,"ph":"M","cat":"__metadata",'
            f'"name":"process_name","args":{{"name":"{pname}"}}}}'
        )
        for tid, tname, share in threads:
            meta.append(
                f'{{"pid":{pid},"tid":{tid},"ts":0,"ph":"M","cat":"__metadata",'
                f'"name":"thread_name","args":{{"name":"{tname}"}}}}'
            )
            t0 = 100_000_000_000 + rng.randrange(0, 1000)
            per_thread.append(_thread_events(rng, pid, tid, int(n_events * share), names, t0))
    # Chrome flushes per-thread chunks: interleave threads chunk by chunk, and swap a few
    # neighbouring events so that the file is not sorted even within a thread.
    total = len(meta)
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"traceEvents":[\n')
        f.write(",\n".join(meta))
        cursors = [0] * len(per_thread)
        chunk = 2000
        while any(c < len(ev) for c, ev in zip(cursors, per_thread, strict=True)):
            for i, ev in enumerate(per_thread):
                piece = ev[cursors[i] : cursors[i] + chunk]
                if not piece:
                    continue
                cursors[i] += chunk
                for j in range(0, len(piece) - 1, 97):
                    piece[j], piece[j + 1] = piece[j + 1], piece[j]
                f.write(",\n")
                f.write(",\n".join(piece))
                total += len(piece)
        f.write(
            '\n],"displayTimeUnit":"ms","metadata":{"product-version":"Chrome/131.0.6778.0"}}\n'
        )
    return total


_MEASURE = r"""
import resource, subprocess, sys, time
t = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)
elapsed = time.perf_counter() - t
print(done.returncode, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(done.stdout, end="")
"""


#: _MEASURE with the command's CPU time (user + system) as a fourth figure.
_MEASURE_CPU = _MEASURE.replace(
    "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
    "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
    "sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]))",
)


def measure_cpu(cmd: list[str], env: dict[str, str], cwd: Path = PROJECT_ROOT
                ) -> tuple[float, float, float, str]:
    """(seconds, peak RSS in MB, CPU seconds, stdout) of cmd, as :func:`measure`."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE_CPU, *cmd], env=env, cwd=cwd, capture_output=True,
        text=True, check=True,
    )
    first, _, output = out.stdout.partition("\n")
    code, seconds, kib, cpu = first.split()
    if code != "0":
        raise SystemExit(f"failed ({code}): {' '.join(cmd)}\n{output}{out.stderr}")
    return float(seconds), int(kib) / 1024, float(cpu), output


def measure(cmd: list[str], env: dict[str, str], cwd: Path = PROJECT_ROOT
            ) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, stdout) of cmd, run under a fresh wrapper process: the
    wrapper's RUSAGE_CHILDREN then holds that one command's peak RSS."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *cmd],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    first, _, output = out.stdout.partition("\n")
    code, seconds, kib = first.split()
    if code != "0":
        raise SystemExit(f"failed ({code}): {' '.join(cmd)}\n{output}{out.stderr}")
    return float(seconds), int(kib) / 1024, output


_LOAD = "import json, sys; json.load(open(sys.argv[1], 'rb'))"
_PARSE = (
    "import sys; sys.path.insert(0, '.'); from ingest import traces; "
    "whole = sys.argv[2] == 'whole'; "
    "traces._PIECE_BYTES = 2**62 if whole else traces._PIECE_BYTES; "
    "traces._decode_stream = (lambda *_: None) if whole else "
    "getattr(traces, '_decode_stream', None); "
    "traces.parse_trace(sys.argv[1], all_threads=True)"
)


def _has_option(root: Path, option: str) -> bool:
    """Whether that checkout's ``ingest_traces`` has the option (its arguments are defined
    in ``management/preparse.py`` since they are parsed before Django's set-up)."""
    management = root / "deviations" / "management"
    return any(option in path.read_text(encoding="utf-8")
               for path in (management / "commands" / "ingest_traces.py",
                            management / "preparse.py") if path.exists())


def _migrate(root: Path, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], env=env, cwd=root,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,250", help="trace sizes in MiB, comma-separated")
    parser.add_argument("--events", type=int, help="one trace of this many events instead")
    parser.add_argument("--whole-too", action="store_true",
                        help="also parse_trace with the array decoded whole (no pieces)")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--keep", type=Path, help="write the traces here and keep them")
    parser.add_argument("--other", type=Path,
                        help="another checkout (e.g. the commit before) measured beside")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each measurement (the fastest counts)"
    )
    options = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="deviations-bench-"))
    try:
        roots = {"": PROJECT_ROOT}
        if options.other:
            roots["before: "] = options.other.resolve()
        envs: dict[str, dict[str, str]] = {}
        for i, (tag, root) in enumerate(roots.items()):
            env = dict(os.environ)
            env.pop("CELERY_BROKER_URL", None)  # the embedded default: analysis in-process
            env["DATABASE_URL"] = f"sqlite:///{tmp / f'bench{i}.sqlite3'}"
            env["DJANGO_MEDIA_ROOT"] = str(tmp / f"media{i}")
            _migrate(root, env)
            envs[tag] = env
        sizes = [None] if options.events else [float(x) for x in options.sizes.split(",")]
        results = []
        for size in sizes:
            results.append(_measure_size(options, size, tmp, roots, envs))
        with open("/proc/loadavg", encoding="ascii") as f:
            load = " ".join(f.read().split()[:3])
        print(f"load average at the end: {load}")
        for line in results:
            print(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure_size(
    options: argparse.Namespace, size: float | None, tmp: Path, roots: dict[str, Path],
    envs: dict[str, dict[str, str]],
) -> str:
    """Write one trace, measure everything on it interleaved; return the summary line."""
    folder = options.keep or tmp
    trace = folder / f"bench_trace_{size or options.events}.json"
    # ~134 bytes per event in this generator (2,000,729 events: 255.6 MiB)
    events = int(size * 2**20 / 134) if size else options.events
    n = write_trace(trace, events, options.seed)
    file_mb = trace.stat().st_size / 2**20
    print(f"trace: {trace.name}, {n:,} events, {file_mb:.1f} MB")
    commands: dict[str, tuple[list[str], Path, str]] = {
        "json.load": ([sys.executable, "-c", _LOAD, str(trace)], PROJECT_ROOT, ""),
    }
    for tag, root in roots.items():
        cli = [sys.executable, "manage.py", "ingest_traces", "--release", "1", "--all-threads"]
        if _has_option(root, "--no-analyse"):
            commands[f"{tag}cli"] = ([*cli, "--no-analyse", str(trace)], root, tag)
        commands[f"{tag}cli+analysis"] = ([*cli, str(trace)], root, tag)
        commands[f"{tag}parser"] = ([sys.executable, "-c", _PARSE, str(trace), "pieces"],
                                    root, tag)
        if options.whole_too and not tag:
            commands["parser, whole"] = ([sys.executable, "-c", _PARSE, str(trace), "whole"],
                                         root, tag)
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    # Alternate and keep each one's fastest run: the machine is shared, and the minimum is
    # the run least disturbed by others. Peaks are the largest seen.
    for i in range(options.repeat):
        for j, (name, (cmd, root, tag)) in enumerate(commands.items()):
            env = envs.get(tag, envs[""])
            if "cli" in name:  # a new series each run: all its names are created
                cmd = [*cmd[:3], "--series", f"bench-{n}-{i}-{j}", *cmd[3:]]
                # an empty trace storage each run (bytes already there are not copied again)
                shutil.rmtree(env["DJANGO_MEDIA_ROOT"], ignore_errors=True)
            seconds, peak, cpu, output = measure_cpu(cmd, env, root)
            if "cli" in name and not output.startswith("ok "):
                raise SystemExit(f"the CLI did not ingest the trace: {output.strip()}")
            runs[name].append((seconds, peak, cpu))
            print(f"  {name:22s} run {i + 1}: {seconds:6.2f} s  peak {peak:7.1f} MB  "
                  f"CPU {cpu:6.2f} s", flush=True)
    best = {name: (min(r[0] for r in rs), max(r[1] for r in rs), min(r[2] for r in rs))
            for name, rs in runs.items()}
    load_s, load_cpu = best["json.load"][0], best["json.load"][2]
    print(f"file: {file_mb:.1f} MB, {n:,} events (fastest of {options.repeat}, largest peak; "
          "CPU: user + system, which moves less than wall time on a loaded machine)")
    for name, (seconds, peak, cpu) in best.items():
        print(f"  {name + ':':23s} {seconds:6.2f} s = {seconds / load_s:5.3f}x json.load   "
              f"peak {peak:7.1f} MB = {peak / file_mb:5.2f}x file   "
              f"CPU {cpu:6.2f} s = {cpu / load_cpu:5.3f}x")
    trace.unlink() if not options.keep else None
    return (f"size={file_mb:.1f}MB cli_vs_json_load={best['cli'][0] / load_s:.3f} "
            f"parser_vs_json_load={best['parser'][0] / load_s:.3f} "
            f"cli_peak_vs_file={best['cli'][1] / file_mb:.3f} "
            f"parser_peak_vs_file={best['parser'][1] / file_mb:.3f} "
            f"cli_cpu_vs_json_load={best['cli'][2] / load_cpu:.3f}")


if __name__ == "__main__":
    main()
