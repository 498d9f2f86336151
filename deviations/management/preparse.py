"""``manage.py ingest_traces``: the trace files parsed before Django is set up.

A CLI ingest's peak memory is a high-water mark. Parsed after ``django.setup()``, the
parse's arrays came on top of Django, the models and the write path (63 MB before the
first byte: 1.98x a 60 MB file at the peak). ``manage.py`` calls :func:`prepare` first
when its subcommand is ``ingest_traces``: with nothing loaded but numpy, msgspec and
``ingest.traces`` (no Django), it parses each FILE of ``--release VERSION FILE...`` and
hashes it (sha256) from the bytes the parser reads (one read of the file), keeps only
the small result (``FunctionTimes``: per-function times and call-tree edges, or the
``TraceError`` with its "<file>: <reason>" message), and returns the memory of the parse
to the system (``malloc_trim``) before Django is set up. The command then takes each result
(:func:`take`) instead of parsing and hashing the file again, and stores it as before
(``runs.ingest_local_file``): the copy into the trace storage, the duplicate check by
sha256, the writes. The peak is the larger of the parse's and Django's instead of their
sum (docs/architecture.md, "Trace parsing: speed and memory").

A result is used only if it was made with exactly what the command would parse with: the
same file (device, inode, size and modification time, taken before the parse and checked
again at use), the same display name, thread options and size limit
(``DEVIATIONS_MAX_TRACE_BYTES``, read here from the environment as the settings read it).
Anything else, or anything unusual on the command line (``--help``, ``--version``, an
option this parser refuses, ``--manifest``/``--folders``, a file that cannot be opened),
leaves the file to the command's own path, which gives every message as before. The
arguments are defined once, here, for both (:func:`add_ingest_arguments`): no Django.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deviations.core.packing import file_sha256
from deviations.core.text import safe_file_name

if TYPE_CHECKING:
    from ingest.services import FunctionTimes, TraceError

#: The default of ``settings.DEVIATIONS_MAX_TRACE_BYTES`` (2 GiB).
DEFAULT_MAX_TRACE_BYTES = 2 * 1024**3
#: Results held for the command at most (their arrays and names): a call with many files
#: prepares them until their results reach this, the rest are parsed by the command one at
#: a time as before, so that many results held at once never cost more than one parse
#: (a 60 MB trace's result: ~10 MB, most of it call-tree edges).
HELD_BYTES = 64 * 1024**2


def add_thread_arguments(parser: argparse.ArgumentParser) -> None:
    """The trace commands' thread selection (``ingest_traces``, ``reingest``)."""
    parser.add_argument(
        "--thread-name", default="CrRendererMain",
        help="thread to measure (default: CrRendererMain)",
    )
    parser.add_argument(
        "--process-name", default="Renderer",
        help="process whose threads are measured (default: Renderer)",
    )
    parser.add_argument(
        "--all-threads", action="store_true", help="measure every thread of every process"
    )


def add_ingest_arguments(parser: argparse.ArgumentParser) -> None:
    """``ingest_traces``' own arguments (``Command.add_arguments``, and :func:`prepare`)."""
    parser.add_argument("--series", required=True, help="series name (created if new)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--release", help="release version of FILE..., e.g. 56.0.2909.0")
    source.add_argument(
        "--manifest", type=Path,
        help="CSV with a header release,file and optionally order and revision columns: "
        "one run per line (relative paths are relative to the manifest)",
    )
    source.add_argument(
        "--folders", type=Path,
        help="a folder with one folder per release, named by its version, holding its runs",
    )
    parser.add_argument(
        "--order", type=int, default=None,
        help="sort the release by this number instead of its version",
    )
    parser.add_argument(
        "--revision", default=None,
        help="commit hash or number the release was built from (with --release; a "
        "release that carries another one is refused: change it with series_settings)",
    )
    parser.add_argument(
        "--no-analyse", action="store_true",
        help="store the runs only, leaving the series' statistics to `analyse --series "
        "NAME` (or to the worker's sweeper, within 2 minutes); nothing of the analysis "
        "(SciPy) is loaded",
    )
    add_thread_arguments(parser)
    parser.add_argument(
        "files", nargs="*", metavar="FILE", help="trace files, one per run (with --release)"
    )


@dataclass(frozen=True)
class Prepared:
    """One file parsed and hashed before Django's set-up, and what it was made with."""

    identity: tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns
    name: str
    options: dict[str, Any]
    max_bytes: int
    digest: tuple[str, int]
    parsed: FunctionTimes | TraceError


_PREPARED: dict[str, Prepared] = {}


class _RefusedError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Raises instead of printing and exiting: the command's own parser does that."""

    def error(self, message: str) -> Any:
        raise _RefusedError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(add_help=False, allow_abbrev=False)
    # Django's base options (BaseCommand.create_parser), so that they are not taken for
    # files; --help and --version are never parsed here.
    parser.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3])
    parser.add_argument("--settings")
    parser.add_argument("--pythonpath")
    parser.add_argument("--traceback", action="store_true")
    parser.add_argument("--no-color", action="store_true")
    parser.add_argument("--force-color", action="store_true")
    add_ingest_arguments(parser)
    return parser


def _identity(path: Path) -> tuple[int, int, int, int]:
    """What says the file is the same one: device, inode, size, modification time. Only a
    regular file is prepared (a pipe read here would be empty for the command)."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: not a regular file")
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _key(path: Path) -> str:
    return os.path.abspath(path)


def prepare(args: list[str]) -> int:
    """Parse and hash the FILEs of ``ingest_traces`` ``args`` (the command line after the
    subcommand) for the command to :func:`take`; the number of files prepared. Returns 0
    and does nothing when the command line is not a plain ``--release VERSION FILE...``."""
    if {"-h", "--help", "--version"} & set(args):
        return 0
    try:
        opts = _parser().parse_args(args)
        max_bytes = int(os.environ.get("DEVIATIONS_MAX_TRACE_BYTES", DEFAULT_MAX_TRACE_BYTES))
    except (_RefusedError, ValueError):
        return 0
    if opts.release is None or not opts.files:
        return 0
    options = {"thread_name": opts.thread_name, "process_name": opts.process_name,
               "all_threads": opts.all_threads}
    prepared = 0
    held = sum(_held_bytes(result.parsed) for result in _PREPARED.values())
    for file in opts.files:
        path = Path(file)
        if held >= HELD_BYTES:
            break  # the rest are parsed by the command, one at a time
        if _key(path) in _PREPARED:
            continue
        result = _prepare_one(path, options, max_bytes)
        if result is not None:
            _PREPARED[_key(path)] = result
            held += _held_bytes(result.parsed)
            prepared += 1
    _trim()
    return prepared


def _held_bytes(parsed: FunctionTimes | TraceError) -> int:
    """Roughly what a result holds: its arrays and names (an error: nothing to speak of)."""
    arrays = ("self_us", "total_us", "calls", "caller", "callee", "edge_us")
    if not all(hasattr(parsed, name) for name in arrays):
        return 0
    names: list[str] = getattr(parsed, "names", [])
    return (sum(int(getattr(parsed, name).nbytes) for name in arrays)
            + sum(len(name) + 56 for name in names))


def _prepare_one(path: Path, options: dict[str, Any], max_bytes: int) -> Prepared | None:
    """The file parsed (as ``runs.parse_file`` does) and hashed from the bytes the parser
    reads (read a second time only if the parser did not read them all); None when it
    cannot be opened or changed meanwhile (the command's own path then says why)."""
    from ingest.services import TraceError, parse_trace

    name = safe_file_name(path.name)
    try:
        before = _identity(path)
    except OSError:
        return None
    digest = hashlib.sha256()
    read = 0

    def observe(data: bytes) -> None:
        nonlocal read
        digest.update(data)
        read += len(data)

    parsed: FunctionTimes | TraceError
    try:
        parsed = parse_trace(
            path, display_name=name, thread_name=options["thread_name"],
            process_name=options["process_name"], all_threads=options["all_threads"],
            max_bytes=max_bytes, observe=observe,
        )
    except TraceError as exc:
        parsed = exc
    except OSError as exc:  # as runs.parse_file words it
        parsed = TraceError(f"{name}: cannot read the file ({exc.strerror or exc})")
    try:
        digest_and_size = ((digest.hexdigest(), read) if read == before[2]
                           else file_sha256(path))
        if _identity(path) != before:
            return None
    except OSError:
        return None
    return Prepared(before, name, options, max_bytes, digest_and_size, parsed)


def take(path: Path, name: str, options: dict[str, Any], max_bytes: int
         ) -> tuple[tuple[str, int], FunctionTimes | TraceError] | None:
    """The digest and parse of ``path`` made by :func:`prepare` (once: it is forgotten),
    if made with these display name, thread options and size limit and the file has not
    changed since; else None."""
    prepared = _PREPARED.pop(_key(path), None)
    if prepared is None:
        return None
    try:
        same_file = _identity(path) == prepared.identity
    except OSError:
        return None
    if (not same_file or prepared.name != name or prepared.options != options
            or prepared.max_bytes != max_bytes):
        return None
    return prepared.digest, prepared.parsed


def forget() -> None:
    """Drop every result not taken (tests)."""
    _PREPARED.clear()


def _trim() -> None:
    """Give the memory the parse freed back to the system before Django's set-up: glibc
    keeps it in its heap, where Django's objects reuse little of it (60 MB trace: RSS
    after the parse 82.0 MB without this, 47.2 MB with it; the Django phase then peaked
    at 98.9 MB without, 80.2 MB with). Nothing on other C libraries."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
