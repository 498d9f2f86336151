"""Chromium Trace Event Format -> per-function self time and total time.

Pure module: bytes in, numpy arrays out. No Django, no database.

What is computed (seed 003, section III.B): the call stacks of the ``CrRendererMain``
thread of the ``Renderer`` process(es) are rebuilt from duration events (``B``/``E``) and
complete events (``X``); for every function (event name) the parser sums

* self time: a slice's duration minus the durations of its direct children (children
  clipped to the parent);
* total time: a slice's duration, counting a recursive function once per outermost
  call (a slice nested inside a slice of the same name adds nothing to total time but
  counts in ``calls``);
* calls: the number of slices (zero-duration slices included).

Times are microseconds, as in the format (``displayTimeUnit`` only affects display).

Call tree
---------
The same nesting gives the call tree aggregated by (caller, callee), on the same threads
(``FunctionTimes.caller``, ``callee``, ``edge_us``). Every instant inside an outermost
slice of ``f`` is either self time of an ``f`` slice (``self(f)``) or self time of a slice
of another name; for the latter, the deepest ``f`` slice on the stack above it has a child
on that stack, ``c``, and the instant counts in edge ``(f, c)``. So, recursion included
(``f -> c -> f -> c``, ``f -> f``, mutual recursion),
``total(f) = self(f) + sum over c of edge(f, c)``; a direct ``f -> f`` call is no edge.
The slices at the top of a thread are edges of the thread root (caller -1), whose sum is
the threads' busy time. Zero-duration slices have no time and make no edge. Computed in
the same vectorised pass (``_edges``: parents, and the nearest same-name ancestor of the
few recursive slices, by sorted searches; one sort of the pairs).

Decisions
---------
* Events are not sorted in Chrome's output. Per thread they are ordered by timestamp
  (stable, so ``B``/``E`` with equal timestamps keep file order). Slices are nested in the
  order (start, longest first, file order), with a stack: a slice is a child of the
  innermost open slice whose end is strictly after its start (catapult's rule; a
  zero-duration slice therefore never has children).
* ``E`` is matched with the innermost open ``B`` of its thread whatever its name (as
  catapult does); differing names are counted and noted. An ``E`` with no open ``B`` is
  ignored and counted.
* Unfinished slices are closed at the thread's last timestamp (the largest ``ts`` of a
  ``B``/``E``, or end of an ``X``, on that thread) and counted: a ``B`` without ``E``; an
  ``X`` without ``dur`` (older Chrome omitted ``dur`` for a complete event still open when
  tracing stopped: in the real fixtures these are the last tasks of a thread, with
  ``tdur`` 0); an ``X`` with ``dur == -1`` (the same marker in Chrome 75, seen in two
  TracerBench runs). Any other negative ``dur`` is a ``TraceError``.
* A child that ends after its parent (partial overlap, which Chrome does not write but
  hand-made traces can contain) is clipped to its parent's end, counted and noted.
* An array that lacks its closing bracket (``--trace-startup`` output of a Chrome that was
  killed: ``[{...},{...},``) is accepted, as Chrome's trace viewer accepts it, when it
  ends after a complete event; the repair is noted. An event cut in the middle is a
  ``TraceError`` (truncated JSON).
* A ``CrRendererMain`` thread whose process has no ``process_name`` metadata is taken
  (noted); one in a process with another name is not.
* Function names are kept as written (HTML, unicode, anything), except that a name longer
  than 1,000 characters becomes its first 1,000 characters + "…" + the first 8 hex
  digits of the SHA-1 of the full name (UTF-8), so distinct long names stay distinct.
  (The database stores NUL characters as U+FFFD: ``Function.storable``.)
* ``ParseSummary.ignored_phases`` counts, over the whole file, the events of every phase
  other than ``B``, ``E``, ``X`` and ``M`` (an event without ``ph`` counts under "?").
* Output functions are listed in order of first appearance in the file.

Speed and memory: the trade-off
-------------------------------
A file (a path, or a seekable stream) is read in chunks, gzip inflated as it is read, and
its event array decoded in pieces of about ``_PIECE_BYTES`` (2 MB) by ``msgspec`` into a
union of ``Struct`` types tagged by ``"ph"``: B/E/X events keep only ``name``, ``pid``,
``tid``, ``ts`` (and ``dur``), M events also ``args``, and the events of other phases
nothing but their kind; every other key is skipped without building it. Each piece
becomes numpy columns (one C-level ``map`` per field; ~29 bytes an event, about a fifth
of its JSON) before the next is read, so neither the file nor its decoded objects exist
whole (``_decode_stream``, ``_decode_chunks``). Smaller pieces were also faster (2 MB:
0.69 s, 32 MB: 0.89 s to columns for 60 MB: the objects stay in the caches). What the
pieces do not take (a file of one piece, an object whose first key is not
``traceEvents``, an array without its closing bracket, a piece the union refuses, corrupt
or truncated gzip, not JSON) goes the whole-file path, which reads the file again: traces
the tagged union refuses (an unknown or missing ``"ph"``, string pids or tids) are
decoded whole by a plain ``Struct`` (slower, ~30% more memory), which also gives every
error message. All the nesting is vectorised (stable sorts, cumulative sums,
``searchsorted``, ``bincount``, no Python loop over events or slices) and runs on a batch
of whole threads at a time (``_BATCH_EVENTS``), so its arrays (~270 bytes a slice) exist
for one batch, not for the file; the per-name sums are added with ``np.add.at`` in the
order one ``bincount`` over every thread adds them and the edges are summed once over all
batches, so the results are the same to the bit. Python loops run only over metadata
events, unique names, threads, batches, and the threads that contain a partial overlap
(rare: no real fixture has one), which are clipped with an explicit stack.

Alternatives: ``json.load`` needs ~6.6x the file size and is the slowest (measured);
ijson streaming keeps memory flat but parses at about half ``json.load``'s speed (the
issue's figure, not pursued); a plain msgspec ``Struct`` with ``args`` as ``msgspec.Raw``
keeps the buffer alive (measured 4.6x at the peak, over the 4x budget); the tagged union
decodes as fast or faster and peaks at ~3x decoded whole, 1.04x (250 MB) to 1.43x
(60 MB) streamed in pieces with the nesting in batches of threads (measured, the
interpreter and numpy included).
The measured speed and memory of each choice: docs/architecture.md, "Trace parsing".
"""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import count, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, Union

import msgspec
import numpy as np

from deviations.core.errors import UserError
from ingest import reading

if TYPE_CHECKING:
    from ingest import perfetto

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_NAME_CHARS",
    "MAX_TIME_US",
    "FunctionTimes",
    "ParseSummary",
    "ThreadRef",
    "TraceError",
    "parse_trace",
]

#: Largest trace accepted, compressed and decompressed: 2 GiB of JSON needs ~6-7 GiB of RAM
#: at the peak (~3x, more on the slow path), the most a modest server should give one upload.
DEFAULT_MAX_BYTES = 2 * 1024**3
#: Names longer than this are shortened (see the module docstring): a database index and a
#: chart label cannot hold megabytes, and no real function name comes near it.
MAX_NAME_CHARS = 1_000
#: Largest |ts| and dur accepted, in µs: float64 holds every integer up to 2**53 (285
#: years of microseconds); anything larger is corrupt and would lose precision or overflow.
MAX_TIME_US = float(2**53)
#: Chrome writes dur = -1 for a complete event that was still running when tracing stopped.
_UNFINISHED_DUR = -1.0
#: Threads listed in the "selected thread absent" message, and unnamed processes in a note.
_THREADS_SHOWN = 8

_NAN = float("nan")
_NO_ARGS = msgspec.Raw(b"{}")

# Phase codes of the columns: every phase letter of the format gets a small code, so that
# counting them is a bincount. Codes 0-4 are the ones the parser uses.
_NO_PH, _B, _E, _X, _M = 0, 1, 2, 3, 4
_PHASES = ("", "B", "E", "X", "M", *"IiCbneSTpFstfPNODRcVv()=G")
_PH_INDEX = {ph: i for i, ph in enumerate(_PHASES)}
_UNKNOWN_PH = len(_PHASES)
#: Above this many threads the nesting sweep runs once over all threads (lexsort) instead
#: of once per thread (cheaper sorts, but a Python loop over threads).
_MAX_LOOPED_THREADS = 512
#: Threads are nested in batches of whole threads of at least this many events (one thread
#: larger than it is a batch alone): the nesting's arrays (~270 bytes an event) then exist
#: for one batch at a time, not for every event of the file.
_BATCH_EVENTS = 1 << 17


class TraceError(UserError):
    """The input is not a usable trace. ``str(e)`` is one line: "<file>: <reason>"."""


@dataclass(frozen=True)
class ThreadRef:
    pid: int | str
    tid: int | str
    process_name: str | None
    thread_name: str | None


@dataclass(frozen=True)
class ParseSummary:
    """Counts of everything noteworthy in one trace; ``to_dict()`` is JSON-serialisable."""

    events: int
    slices: int
    selected_threads: tuple[ThreadRef, ...]
    unmatched_end: int
    unclosed_begin: int
    x_without_dur: int
    clipped_overlaps: int
    ignored_phases: dict[str, int]
    notes: tuple[str, ...]
    #: X events with dur == -1 (still running when tracing stopped), closed like unclosed B.
    x_unfinished: int = 0
    #: E events whose (non-empty) name differs from the B they close.
    end_name_mismatches: int = 0
    #: names longer than MAX_NAME_CHARS, shortened.
    shortened_names: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["selected_threads"] = [asdict(t) for t in self.selected_threads]
        d["notes"] = list(self.notes)
        d["ignored_phases"] = dict(self.ignored_phases)
        return d


@dataclass(frozen=True)
class FunctionTimes:
    """Per-function times (``names[i]``: ``self_us[i]``, ``total_us[i]``, ``calls[i]``) and
    the call tree aggregated by (caller, callee): ``edge_us[j]`` is the time of
    ``names[callee[j]]`` under ``names[caller[j]]`` (the module's "Call tree"), with
    ``caller[j] == -1`` for the slices at the top of a measured thread. For every function
    ``f``: ``total_us[f] == self_us[f] + edge_us[caller == f].sum()`` (up to rounding)."""

    names: list[str]
    self_us: np.ndarray
    total_us: np.ndarray
    calls: np.ndarray
    summary: ParseSummary
    caller: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    callee: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_us: np.ndarray = field(default_factory=lambda: np.zeros(0))


class _Args(msgspec.Struct, gc=False):
    name: Any = None


class _Slice(msgspec.Struct, gc=False, tag_field="ph"):
    """Fast path: a union tagged by "ph", so each kind of event carries only the fields the
    parser reads (args only on M events); the decoder skips every other key without
    building it. What a kind does not carry is a class attribute, so that one attrgetter
    serves every kind."""

    name: str = ""
    pid: int = 0
    tid: int = 0
    ts: float = _NAN
    dur: ClassVar[float] = _NAN
    args: ClassVar[None] = None


class _Begin(_Slice, tag="B"):
    pass


class _End(_Slice, tag="E"):
    pass


class _Complete(_Slice, tag="X"):
    dur: float = _NAN


class _Meta(msgspec.Struct, gc=False, tag_field="ph", tag="M"):
    name: str = ""
    pid: int = 0
    tid: int = 0
    args: _Args | None = None
    ts: ClassVar[float] = _NAN
    dur: ClassVar[float] = _NAN


class _Ignored(msgspec.Struct, gc=False, tag_field="ph"):
    """Events of the phases the parser only counts: nothing is kept but their kind."""

    name: ClassVar[str] = ""
    pid: ClassVar[int] = 0
    tid: ClassVar[int] = 0
    ts: ClassVar[float] = _NAN
    dur: ClassVar[float] = _NAN
    args: ClassVar[None] = None


_IGNORED_KINDS = tuple(
    msgspec.defstruct(f"_Phase{i}", [], bases=(_Ignored,), tag=ph, tag_field="ph")
    for i, ph in enumerate(_PHASES[5:])
)
_KIND_CODE = {
    kind: _PH_INDEX[ph]
    for kind, ph in [(_Begin, "B"), (_End, "E"), (_Complete, "X"), (_Meta, "M")]
    + list(zip(_IGNORED_KINDS, _PHASES[5:], strict=True))
}
_Tagged = _Begin | _End | _Complete | _Meta | Union[_IGNORED_KINDS]  # noqa: UP007


class _TaggedTrace(msgspec.Struct, gc=False):
    traceEvents: list[_Tagged]  # type: ignore[valid-type]  # noqa: N815 (the format's key)


class _Event(msgspec.Struct, gc=False):
    """Slow path, for traces the tagged union refuses (an unknown or missing "ph", string
    pids or tids), and to report what is wrong with those that are not traces."""

    ph: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = _NAN
    dur: float = _NAN
    args: msgspec.Raw = _NO_ARGS


class _ObjectTrace(msgspec.Struct, gc=False):
    traceEvents: list[_Event]  # noqa: N815 (the format's key)


_DECODERS = {
    (ord("["), True): msgspec.json.Decoder(list[_Tagged]),  # type: ignore[valid-type]
    (ord("{"), True): msgspec.json.Decoder(_TaggedTrace),
    (ord("["), False): msgspec.json.Decoder(list[_Event]),
    (ord("{"), False): msgspec.json.Decoder(_ObjectTrace),
}
_get_ph = attrgetter("ph")
_get_name = attrgetter("name")
_get_pid = attrgetter("pid")
_get_tid = attrgetter("tid")
_get_ts = attrgetter("ts")
_get_dur = attrgetter("dur")


@dataclass
class _Counts:
    unmatched_end: int = 0
    unclosed_begin: int = 0
    x_without_dur: int = 0
    x_unfinished: int = 0
    clipped_overlaps: int = 0
    end_name_mismatches: int = 0
    shortened_names: int = 0
    notes: list[str] = field(default_factory=list)


def parse_trace(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    *,
    display_name: str | None = None,
    thread_name: str = "CrRendererMain",
    process_name: str = "Renderer",
    all_threads: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    observe: Callable[[bytes], None] | None = None,
) -> FunctionTimes:
    """Per-function self time, total time and calls of the selected threads of a trace.

    ``source`` is a path, the file's bytes, or a binary file object; plain JSON or gzip
    (recognised by its magic bytes). ``display_name`` (default: the file's base name)
    starts every error message. The default selection is every ``thread_name`` thread of
    every process named ``process_name`` (aggregated); ``all_threads`` takes every thread
    that has duration events. ``max_bytes`` bounds both the compressed and the
    decompressed size. Raises ``TraceError`` for anything that is not a usable trace.
    ``observe``, with a path: called with the file's bytes as the streamed path reads them
    (as on disk, before any gzip inflation), in order, each once; they are the whole file
    only if their lengths add up to its size (the whole-file path, or a streamed read cut
    short, does not call it for the rest). ``manage.py ingest_traces`` hashes the file so,
    without reading it a second time.
    """
    name = display_name if display_name is not None else reading.display_name(source)
    try:
        return _parse(source, name, thread_name, process_name, all_threads, max_bytes,
                      observe)
    except MemoryError:
        raise TraceError(f"{name}: out of memory while parsing (file too large)") from None
    # Input the decoder takes but Python cannot hold, found by the fuzz test: a lone
    # surrogate escape ("\ud800"), JSON nested thousands deep, a pid beyond 64 bits.
    except UnicodeDecodeError as e:
        raise TraceError(f"{name}: not valid UTF-8 text ({e.reason})") from None
    except RecursionError:
        raise TraceError(f"{name}: JSON nested too deeply") from None
    except OverflowError:
        raise TraceError(f"{name}: a number does not fit in 64 bits (a pid, tid or time)") from None


def _parse(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    name: str,
    thread_name: str,
    process_name: str,
    all_threads: bool,
    max_bytes: int,
    observe: Callable[[bytes], None] | None = None,
) -> FunctionTimes:
    counts = _Counts()
    streamed = _decode_stream(source, max_bytes, observe)
    if isinstance(streamed, _Columns):
        columns: _Columns | None = streamed
        data: bytes | bytearray = b""
    else:
        data = streamed if streamed is not None else reading.read_bounded(
            source, name, max_bytes, TraceError)
        del streamed
        if not _is_json(data):
            # Imported here: the Perfetto reader brings protobuf (~0.1 s of every CLI
            # call's start-up, docs/architecture.md "Start-up"), which JSON never needs.
            from ingest import perfetto

            slices = perfetto.read_events(data, name, TraceError)
            del data  # the file's bytes are not held while nesting
            return _perfetto_times(slices, thread_name, process_name, all_threads, name,
                                   counts)
        columns = _decode_in_pieces(data)
    if columns is None:  # the whole file at once: the slow path, and every error message
        events, tagged = _decode(data, name, counts)
        del data  # freed now on the fast path (the slow path's Raw args keep it alive)
        columns = _Columns(tagged)
        columns.add(events)
        del events
    else:
        del data
    n = columns.n
    if n == 0:
        raise TraceError(f"{name}: the trace contains no events")
    code, ts, dur, first, thread_of, thread_keys = columns.arrays()
    unique_names, metas, unknown = list(columns.seen), columns.meta, columns.unknown
    del columns

    per_phase = np.bincount(code, minlength=_UNKNOWN_PH + 1)
    if per_phase[_NO_PH] == n:
        raise TraceError(
            f"{name}: not a Chrome trace: none of the {n} events has a 'ph' (phase) field "
            "(a DevTools protocol log?)"
        )
    ignored = {(ph or "?"): int(c) for ph, c in zip(_PHASES, per_phase.tolist(), strict=False) if c}
    for ph in ("B", "E", "X", "M"):
        ignored.pop(ph, None)
    ignored.update(unknown)
    ignored = dict(sorted(ignored.items()))

    proc_names, thread_names = _metadata(metas)
    del metas
    is_first = first == np.arange(n)
    # int32 ids (a file under 2 GiB has fewer events): 4 bytes an event less to hold
    name_id = (np.cumsum(is_first, dtype=np.int32) - 1)[first]
    del first, is_first
    return _function_times(
        n, code, ts, dur, name_id, unique_names, thread_of, thread_keys, proc_names,
        thread_names, ignored, thread_name, process_name, all_threads, name, counts,
    )


def _is_json(data: bytes | bytearray) -> bool:
    """JSON (optional BOM and whitespace, then '[' or '{'), or empty: else Perfetto protobuf."""
    head = data[:4096]
    if head[:3] == _UTF8_BOM:
        head = head[3:]
    head = head.lstrip(_WHITESPACE)
    return not head or head[:1] in (b"[", b"{")


def _perfetto_times(
    events: perfetto.Events,
    thread_name: str,
    process_name: str,
    all_threads: bool,
    name: str,
    counts: _Counts,
) -> FunctionTimes:
    """A Perfetto protobuf trace's slice events (``ingest.perfetto``) through the same
    nesting and timing as a JSON trace's (B, E and X events)."""
    from ingest import perfetto  # already loaded by the caller (see _parse)

    codes = np.zeros(max(perfetto.BEGIN, perfetto.END, perfetto.COMPLETE) + 1, np.uint8)
    codes[[perfetto.BEGIN, perfetto.END, perfetto.COMPLETE]] = (_B, _E, _X)
    code = codes[events.code]
    counts.notes.extend(events.notes)
    return _function_times(
        events.n_events, code, events.ts_us, events.dur_us, events.name_id, events.names,
        events.thread_of, events.threads, events.process_names, events.thread_names,
        events.ignored, thread_name, process_name, all_threads, name, counts,
    )


def _function_times(
    n: int,
    code: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    name_id: np.ndarray,
    unique_names: list[str],
    thread_of: np.ndarray,
    thread_keys: list[tuple[int | str, int | str]],
    proc_names: dict[int | str, str],
    thread_names: dict[tuple[int | str, int | str], str],
    ignored: dict[str, int],
    thread_name: str,
    process_name: str,
    all_threads: bool,
    name: str,
    counts: _Counts,
) -> FunctionTimes:
    """Per-function times of the selected threads, from the events as columns (each
    event's phase code, ts, dur, name id and thread index), whatever the file's format."""
    empty_id = _find(unique_names, "")

    is_slice = (code == _B) | (code == _E) | (code == _X)
    active = np.bincount(thread_of[is_slice], minlength=len(thread_keys)) > 0
    chosen = _select_threads(
        thread_keys,
        active,
        proc_names,
        thread_names,
        thread_name,
        process_name,
        all_threads,
        name,
        counts,
    )
    remap = np.full(len(thread_keys), -1, dtype=np.int64)
    remap[chosen] = np.arange(len(chosen))
    sel = np.flatnonzero(is_slice & (remap[thread_of] >= 0))
    del is_slice

    # The checks run over every selected event, in file order (the first bad one is named).
    picked = np.zeros(len(code), dtype=bool)
    picked[sel] = True
    missing = picked & np.isnan(ts)
    if missing.any():
        bad = int(np.flatnonzero(missing)[0])
        raise TraceError(f"{name}: event #{bad} (phase {_PHASES[code[bad]]}) has no 'ts'")
    del missing
    # Times are microseconds held in float64: beyond 2**53 they lose whole microseconds,
    # and 1e308 + 1e308 overflows to infinity, which no statistic can use.
    is_x = code == _X
    absurd = picked & (~(np.abs(ts) <= MAX_TIME_US) | (is_x & (dur > MAX_TIME_US)))
    if absurd.any():
        bad = int(np.flatnonzero(absurd)[0])
        raise TraceError(
            f"{name}: event #{bad} has a time out of range (ts={ts[bad]:g}, dur={dur[bad]:g}): "
            f"timestamps and durations must be finite microseconds of at most {MAX_TIME_US:,}"
        )
    del absurd
    negative = picked & is_x & (dur < 0) & (dur != _UNFINISHED_DUR)
    if negative.any():
        bad = int(np.flatnonzero(negative)[0])
        raise TraceError(f"{name}: event #{bad} has a negative duration (dur={dur[bad]:g})")
    del negative, picked, is_x

    # Nesting, a batch of whole threads at a time (its memory is the batch's, not the
    # file's); the sums are added in the order one pass over every thread would add them.
    sums = _Sums(len(unique_names))
    sel_thread = remap[thread_of[sel]]
    by_thread = sel[_stable_order(sel_thread)].astype(np.int32)
    per_thread = np.bincount(sel_thread, minlength=len(chosen)).tolist()
    del sel, sel_thread
    for lo, hi in _batches(per_thread, _BATCH_EVENTS):
        idx = np.sort(by_thread[lo:hi])  # file order
        start, end, slice_thread, slice_name, slice_seq = _slices(
            remap[thread_of[idx]], code[idx], ts[idx], dur[idx], name_id[idx], empty_id,
            len(chosen), counts
        )
        del idx
        _times(start, end, slice_thread, slice_name, slice_seq, sums, counts)
        del start, end, slice_thread, slice_name, slice_seq
    del by_thread, code, ts, dur, thread_of, name_id
    _slice_notes(counts)
    calls = sums.calls
    self_us, total_us, edges = sums.self_us, sums.total_us, sums.edges()
    used = np.flatnonzero(calls > 0)  # names seen only on E events are not functions
    names = [_shorten(unique_names[i], counts) for i in used.tolist()]
    position = np.full(len(unique_names) + 1, -1, dtype=np.int64)  # [-1]: the thread root
    position[used] = np.arange(len(used))
    caller, callee, edge_us = edges

    summary = ParseSummary(
        events=n,
        slices=sums.slices,
        selected_threads=tuple(
            ThreadRef(
                pid=thread_keys[p][0],
                tid=thread_keys[p][1],
                process_name=proc_names.get(thread_keys[p][0]),
                thread_name=thread_names.get(thread_keys[p]),
            )
            for p in chosen
        ),
        unmatched_end=counts.unmatched_end,
        unclosed_begin=counts.unclosed_begin,
        x_without_dur=counts.x_without_dur,
        clipped_overlaps=counts.clipped_overlaps,
        ignored_phases=ignored,
        notes=tuple(counts.notes),
        x_unfinished=counts.x_unfinished,
        end_name_mismatches=counts.end_name_mismatches,
        shortened_names=counts.shortened_names,
    )
    return FunctionTimes(
        names=names,
        self_us=self_us[used],
        total_us=total_us[used],
        calls=calls[used],
        summary=summary,
        caller=position[caller],
        callee=position[callee],
        edge_us=edge_us,
    )


def _find(items: list[str], item: str) -> int:
    try:
        return items.index(item)
    except ValueError:
        return -1


def _factorise(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and each element's index among them (np.unique with return_inverse;
    int32), sorting only the heads of runs: Chrome writes events in per-thread chunks."""
    if len(values) == 0:
        return values[:0], np.zeros(0, dtype=np.int32)
    heads = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    uniq, head_index = np.unique(values[heads], return_inverse=True)
    return uniq, np.repeat(head_index.astype(np.int32), np.diff(np.r_[heads, len(values)]))


_KEY_BITS = 31


def _thread_columns(
    pid: np.ndarray, tid: np.ndarray
) -> tuple[np.ndarray, list[tuple[int | str, int | str]]]:
    """Each event's thread index, and the distinct (pid, tid) threads (integer ids)."""
    if len(pid):
        small = pid.min() >= 0 and tid.min() >= 0 and max(pid.max(), tid.max()) < (1 << _KEY_BITS)
        if small:
            uniq, thread_of = _factorise((pid << _KEY_BITS) | tid)
            mask = (1 << _KEY_BITS) - 1
            keys = [(k >> _KEY_BITS, k & mask) for k in uniq.tolist()]
        else:
            pids, pid_of = _factorise(pid)
            tids, tid_of = _factorise(tid)
            uniq, thread_of = _factorise(pid_of.astype(np.int64) * len(tids) + tid_of)
            p_list, t_list = pids.tolist(), tids.tolist()
            keys = [(p_list[k // len(tids)], t_list[k % len(tids)]) for k in uniq.tolist()]
        return thread_of, keys
    return np.zeros(0, dtype=np.int64), []


def _select_threads(
    thread_keys: list[tuple[int | str, int | str]],
    active: np.ndarray,
    proc_names: dict[int | str, str],
    thread_names: dict[tuple[int | str, int | str], str],
    thread_name: str,
    process_name: str,
    all_threads: bool,
    name: str,
    counts: _Counts,
) -> list[int]:
    """Positions in ``thread_keys`` of the threads to aggregate, in increasing order."""
    if all_threads:
        chosen = np.flatnonzero(active).tolist()
        if not chosen:
            counts.notes.append("no duration events (B/E/X) on any thread")
        return chosen
    position = {k: i for i, k in enumerate(thread_keys)}
    chosen = []
    unnamed: list[tuple[int | str, int | str]] = []
    for key, label in thread_names.items():
        if label != thread_name or key not in position:
            continue
        proc = proc_names.get(key[0])
        if proc == process_name:
            chosen.append(position[key])
        elif proc is None:
            chosen.append(position[key])
            unnamed.append(key)
    if len(unnamed) <= _THREADS_SHOWN:
        counts.notes.extend(
            f"process {pid} has no process_name; its {thread_name} thread {tid} was taken"
            for pid, tid in unnamed
        )
    else:
        shown = ", ".join(str(pid) for pid, _ in unnamed[:_THREADS_SHOWN])
        counts.notes.append(
            f"{len(unnamed)} processes have no process_name ({shown}, ...); their "
            f"{thread_name} threads were taken"
        )
    if not chosen:
        named = sorted({(t, proc_names.get(k[0], "?")) for k, t in thread_names.items()})
        if named:
            shown = ", ".join(f"{t} ({p})" for t, p in named[:_THREADS_SHOWN])
            if len(named) > _THREADS_SHOWN:
                shown += f" and {len(named) - _THREADS_SHOWN} more"
        else:
            shown = (
                f"{int(active.sum())} unnamed thread(s) with duration events "
                "(no thread_name metadata)"
            )
        raise TraceError(
            f"{name}: no thread named {thread_name} in a process named {process_name}; "
            f"threads seen: {shown}"
        )
    return sorted(chosen)


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """Stable argsort; small non-negative integers go through numpy's O(n) radix sort."""
    if keys.dtype.kind in "iu" and len(keys) and keys.min() >= 0 and keys.max() < (1 << 15):
        keys = keys.astype(np.int16)
    return np.argsort(keys, kind="stable")


def _slices(
    thread: np.ndarray,
    code: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    name_id: np.ndarray,
    empty_id: int,
    n_threads: int,
    counts: _Counts,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Match B with E and close unfinished slices: (start, end, thread, name, seq) per
    slice, ordered by (thread, start, seq), where ``seq`` is the opening event's position in
    the per-thread timestamp order (file order among equal timestamps)."""
    order = np.argsort(ts, kind="stable")  # Chrome's buffer is nearly sorted: timsort
    order = order[_stable_order(thread[order])]
    th, cd, t, d, nm = (a[order] for a in (thread, code, ts, dur, name_id))
    del order
    m = len(th)
    end_at = np.full(m, np.nan)
    is_x = cd == _X
    open_x = is_x & (np.isnan(d) | (d == _UNFINISHED_DUR))
    done_x = is_x & ~open_x
    end_at[done_x] = t[done_x] + d[done_x]
    last_ts = np.full(n_threads, -np.inf)
    if m:
        reach = np.where(done_x, end_at, t)
        seg = np.flatnonzero(np.r_[True, th[1:] != th[:-1]])
        last_ts[th[seg]] = np.maximum.reduceat(reach, seg)
        del reach

    is_opener = is_x.copy()
    be = np.flatnonzero((cd == _B) | (cd == _E))
    if len(be):
        pair_b, pair_e, open_b = _match_begin_end(th[be], cd[be] == _B, counts)
        pair_b, pair_e, open_b = be[pair_b], be[pair_e], be[open_b]
        end_at[pair_b] = t[pair_e]
        end_at[open_b] = last_ts[th[open_b]]
        is_opener[pair_b] = True
        is_opener[open_b] = True
        e_name = nm[pair_e]
        mismatch = int(np.count_nonzero((e_name != nm[pair_b]) & (e_name != empty_id)))
        counts.end_name_mismatches += mismatch
    end_at[open_x] = last_ts[th[open_x]]
    no_dur = int(np.count_nonzero(is_x & np.isnan(d)))
    minus_one = int(np.count_nonzero(is_x & (d == _UNFINISHED_DUR)))
    counts.x_without_dur += no_dur
    counts.x_unfinished += minus_one
    opener = np.flatnonzero(is_opener)
    return t[opener], end_at[opener], th[opener], nm[opener], opener


def _match_begin_end(
    thread: np.ndarray, is_begin: np.ndarray, counts: _Counts
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Match B and E events (ordered by thread, then time) as a stack per thread would.

    Returns the positions of matched B, of their E, and of the B left open. The walk
    +1 per B, -1 per E is taken per thread; an E that takes it below its running minimum
    (below zero once earlier unmatched E are discounted) has no open B. Once those are
    dropped, B and E at one nesting level alternate B, E, B, E, ... within a thread, so a
    sort by (level, position) puts every B right before its E.
    """
    k = len(thread)
    step = np.where(is_begin, 1, -1)
    seg_start = np.r_[True, thread[1:] != thread[:-1]]
    seg_id = np.cumsum(seg_start) - 1
    walk = np.cumsum(step)
    walk -= (walk - step)[seg_start][seg_id]  # per-thread running sum
    shift = seg_id * (2 * k + 2)  # each thread lies below all earlier ones
    low = np.minimum(np.minimum.accumulate(walk - shift) + shift, 0)
    prev_low = np.r_[0, low[:-1]]
    prev_low[seg_start] = 0
    unmatched = low < prev_low
    n_unmatched = int(np.count_nonzero(unmatched))
    counts.unmatched_end += n_unmatched
    depth = walk - low
    level = np.where(is_begin, depth, depth + 1)
    keep = np.flatnonzero(~unmatched)
    srt = keep[_stable_order(level[keep])]  # by (level, position)
    b_here = is_begin[srt]
    e_next = np.r_[
        (level[srt[1:]] == level[srt[:-1]])
        & (thread[srt[1:]] == thread[srt[:-1]])
        & ~is_begin[srt[1:]],
        False,
    ]
    matched = np.flatnonzero(b_here & e_next)
    open_b = srt[b_here & ~e_next]
    counts.unclosed_begin += len(open_b)
    return srt[matched], srt[matched + 1], np.sort(open_b)


def _times(
    start: np.ndarray,
    end: np.ndarray,
    thread: np.ndarray,
    name_id: np.ndarray,
    seq: np.ndarray,
    sums: _Sums,
    counts: _Counts,
) -> None:
    """Add the self time, total time and calls per name id, and the call tree's edges
    (``_edges``), of slices ordered by (thread, start, seq) to ``sums``."""
    n_names = len(sums.calls)
    sums.calls += np.bincount(name_id, minlength=n_names)
    sums.slices += len(start)
    # Zero-duration slices are calls with no time: they have no children (nothing starts
    # strictly before their end) and add nothing to their parent's children, so only the
    # slices of positive duration need nesting.
    positive = np.flatnonzero(end > start)
    th, s, e, nm, sq = (a[positive] for a in (thread, start, end, name_id, seq))
    del positive
    k = len(s)
    if k == 0:
        return
    # Temporaries are dropped as soon as they are used (`del`): this batch of the largest
    # thread is the parse's peak memory (the CLI's at 60 MB, issue 24).
    pre = _preorder(th, s, e, sq)
    del sq
    if pre is not None:
        th, s, e, nm = th[pre], s[pre], e[pre], nm[pre]
    del pre

    depth, last_desc, nested = _sweep(th, s, e)
    if not nested.all():
        e = e.copy()
        clipped = 0
        for bad in np.unique(th[~nested]).tolist():
            lo, hi = np.searchsorted(th, [bad, bad + 1])
            e[lo:hi], n_clipped = _clip_with_stack(s[lo:hi], e[lo:hi])
            clipped += n_clipped
        counts.clipped_overlaps += clipped
        depth, last_desc, nested = _sweep(th, s, e)
        if not nested.all():  # pragma: no cover - clipped slices always nest
            raise AssertionError("slices still overlap after clipping")

    # Parent: the last slice before i (pre-order) one level up.
    by_depth = _stable_order(depth)
    keys = depth[by_depth] * k + by_depth
    child = by_depth[depth[by_depth] > 0]  # queries in increasing order: a fast searchsorted
    parent = by_depth[np.searchsorted(keys, (depth[child] - 1) * k + child) - 1]
    dur = e - s
    del s, e, nested
    self_time = dur - np.bincount(parent, weights=dur[child], minlength=k)

    # Recursion: i is inside a call of the same name iff an earlier slice j (pre-order) of
    # the same thread and name has i among its descendants (i <= last_desc[j]).
    by_group = _stable_order(th.astype(np.int64) * n_names + nm)
    group = (th.astype(np.int64) * n_names + nm)[by_group]
    new_group = np.r_[True, group[1:] != group[:-1]]
    del group, th
    span = (np.cumsum(new_group) - 1) * (k + 1)
    running = np.maximum.accumulate(last_desc[by_group] + span) - span
    del span
    before = np.r_[-1, running[:-1]]
    del running
    before[new_group] = -1
    nested_same = np.zeros(k, dtype=bool)
    nested_same[by_group] = before >= by_group
    del before

    # np.add.at adds in index order from the running sums, as one bincount over every
    # batch would: the same floats to the bit, batch or not.
    np.add.at(sums.self_us, nm, self_time)
    del self_time
    np.add.at(sums.total_us, nm, np.where(nested_same, 0.0, dur))
    pair, contrib = _edges(nm, depth, dur, child, parent, by_depth, keys, by_group, new_group,
                           last_desc, nested_same, n_names)
    sums.pairs.append(pair)
    sums.contribs.append(contrib)


def _edges(
    nm: np.ndarray,
    depth: np.ndarray,
    dur: np.ndarray,
    child: np.ndarray,
    parent: np.ndarray,
    by_depth: np.ndarray,
    keys: np.ndarray,
    by_group: np.ndarray,
    new_group: np.ndarray,
    last_desc: np.ndarray,
    nested_same: np.ndarray,
    n_names: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The call tree by (caller name, callee name): see the module's "Call tree".

    A slice C whose parent P has another name f gives edge (f, name(C)) its duration less
    the slices D named f that lie inside C with no other f slice between P and D (those
    are f's own time again: self time of D and D's edges). Such a D is a slice whose
    nearest same-name ancestor is P and whose ancestor one level below P is C, not D
    itself (a direct f -> f call is no edge). Slices at depth 0 are edges of the thread
    root (caller -1). Returns each edge slice's pair ``(caller + 1) * n_names + callee``
    and its µs, in slice order (``_Sums.edges`` adds them up by pair).
    """
    k = len(nm)
    contrib = dur.copy()
    if nested_same.any():
        # Groups (thread, name) in pre-order; restricted to those holding recursion (few).
        gid = np.cumsum(new_group) - 1
        has_rec = np.bincount(gid, weights=nested_same[by_group], minlength=int(gid[-1]) + 1) > 0
        where = np.flatnonzero(has_rec[gid])
        members, gspan = by_group[where], gid[where] * (k + 1)
        m = len(members)
        # Depth among same-name slices: members before it minus those that ended before it.
        ends = np.sort(last_desc[members] + gspan)
        gdepth = np.arange(m) - np.searchsorted(ends, members + gspan, side="left")
        # Nearest same-name ancestor: the last member before it one same-name level up (the
        # last such member overall is in its own group, as for parents above).
        by_gdepth = _stable_order(gdepth)
        gkeys = gdepth[by_gdepth] * m + by_gdepth
        q = np.flatnonzero(gdepth > 0)
        ancestor = members[by_gdepth[np.searchsorted(gkeys, (gdepth[q] - 1) * m + q) - 1]]
        inner = members[q]
        below = depth[ancestor] + 1  # the level of C
        indirect = below < depth[inner]
        inner, below = inner[indirect], below[indirect]
        c = by_depth[np.searchsorted(keys, below * k + inner) - 1]
        contrib -= np.bincount(c, weights=dur[inner], minlength=k)
    caller = np.full(k, -1, dtype=np.int64)
    caller[child] = nm[parent]
    edge = np.flatnonzero(caller != nm)
    return (caller[edge] + 1) * n_names + nm[edge], contrib[edge]


class _Sums:
    """Per-name sums and the call tree's edge slices, added batch by batch of threads."""

    def __init__(self, n_names: int) -> None:
        self.n_names = n_names
        self.self_us = np.zeros(n_names)
        self.total_us = np.zeros(n_names)
        self.calls = np.zeros(n_names, dtype=np.int64)
        self.slices = 0
        self.pairs: list[np.ndarray] = []
        self.contribs: list[np.ndarray] = []

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(caller, callee, µs), one entry per distinct pair: the edge slices of every
        batch, in slice order, sorted by pair and added up."""
        if not self.pairs:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        pair, contrib = np.concatenate(self.pairs), np.concatenate(self.contribs)
        self.pairs, self.contribs = [], []
        order = np.argsort(pair)
        pair = pair[order]
        heads = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        edge_us = np.add.reduceat(contrib[order], heads)
        uniq = pair[heads]
        return uniq // self.n_names - 1, uniq % self.n_names, edge_us


def _batches(sizes: list[int], target: int) -> Iterator[tuple[int, int]]:
    """(lo, hi) of consecutive runs of whole items (threads) of ``sizes`` events, each
    closed once it holds ``target`` events or more; none for no events."""
    lo = hi = 0
    for size in sizes:
        hi += size
        if hi - lo >= target:
            yield lo, hi
            lo = hi
    if hi > lo:
        yield lo, hi


def _slice_notes(counts: _Counts) -> None:
    """The notes of what the nesting counted (over every batch of threads)."""
    if counts.unmatched_end:
        counts.notes.append(f"{counts.unmatched_end} E event(s) without an open B were ignored")
    if counts.unclosed_begin:
        counts.notes.append(
            f"{counts.unclosed_begin} B event(s) without an E were closed at their thread's "
            "last timestamp"
        )
    if counts.end_name_mismatches:
        counts.notes.append(
            f"{counts.end_name_mismatches} E event(s) named differently from the B they close "
            "were matched by stack position (as catapult does)"
        )
    if counts.x_without_dur:
        counts.notes.append(
            f"{counts.x_without_dur} X event(s) without 'dur' (still running when tracing "
            "stopped) were closed at their thread's last timestamp"
        )
    if counts.x_unfinished:
        counts.notes.append(
            f"{counts.x_unfinished} X event(s) with dur=-1 (still running when tracing "
            "stopped) were closed at their thread's last timestamp"
        )
    if counts.clipped_overlaps:
        counts.notes.append(
            f"{counts.clipped_overlaps} slice(s) ended after their parent and were clipped to "
            "the parent's end"
        )


def _preorder(th: np.ndarray, s: np.ndarray, e: np.ndarray, seq: np.ndarray) -> np.ndarray | None:
    """Permutation to pre-order (thread, start, longest first, seq) of slices already
    ordered by (thread, start, seq); None if they already are. Only ties are re-sorted."""
    tie = (th[1:] == th[:-1]) & (s[1:] == s[:-1])
    if not tie.any():
        return None
    in_tie = np.zeros(len(s), dtype=bool)
    in_tie[1:] |= tie
    in_tie[:-1] |= tie
    members = np.flatnonzero(in_tie)
    run = np.cumsum(np.r_[True, ~tie])[members]
    pre = np.arange(len(s))
    pre[members] = members[np.lexsort((seq[members], -e[members], run))]
    return pre


def _sweep(
    th: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sweep the starts and ends of pre-ordered slices of positive duration in time order.

    Returns each slice's depth (slices open at its start), the pre-order index of its last
    descendant, and whether it nests: the number of open slices just before its end is
    its depth + 1 (if every slice passes, no two overlap partially: a first partial overlap
    would upset the count of the earlier slice). At equal times ends come before starts (a
    slice ending at t does not contain one starting at t) and inner ends before outer ones.
    """
    k = len(s)
    bounds = np.flatnonzero(np.r_[True, th[1:] != th[:-1], True])
    if len(bounds) - 1 > _MAX_LOOPED_THREADS:
        return _sweep_all(th, s, e)
    depth = np.empty(k, dtype=np.int64)
    last_desc = np.empty(k, dtype=np.int64)
    nested = np.empty(k, dtype=bool)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        ss, ee = s[lo:hi], e[lo:hi]
        size = hi - lo
        by_end = (size - 1) - np.argsort(ee[::-1], kind="stable")  # (end, later first)
        ends = ee[by_end]
        d = np.arange(size) - np.searchsorted(ends, ss, side="right")
        starts_before = np.searchsorted(ss, ends, side="left")
        depth[lo:hi] = d
        nested[lo + by_end] = starts_before - np.arange(size) == d[by_end] + 1
        last_desc[lo + by_end] = lo + starts_before - 1
    return depth, last_desc, nested


def _sweep_all(
    th: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_sweep in one pass over all threads (for traces with very many threads)."""
    k = len(s)
    idx = np.arange(k, dtype=np.int64)
    tie = np.concatenate([idx, -1 - idx])  # starts in pre-order; ends later-first, before
    order = np.lexsort((tie, np.r_[np.ones(k), np.zeros(k)], np.r_[s, e], np.r_[th, th]))
    is_start = order < k
    step = np.where(is_start, 1, -1)
    open_before = np.cumsum(step) - step
    where = np.empty(2 * k, dtype=np.int64)
    where[order] = np.arange(2 * k)
    depth = open_before[where[:k]]
    nested = open_before[where[k:]] == depth + 1
    last_desc = np.cumsum(is_start)[where[k:]] - 1
    return depth, last_desc, nested


_WHITESPACE = b" \t\r\n"
_UTF8_BOM = b"\xef\xbb\xbf"
#: The fast path reads and decodes the event array in pieces of about this many bytes,
#: each turned into numpy columns before the next is read: neither the file nor its
#: decoded objects (~2x its size) exist whole. 2 MB was faster than 4, 8 and 32 MB (the
#: objects of a piece stay in the caches) and holds ~10 MB at a time (docs/architecture.md).
_PIECE_BYTES = 2 << 20
#: Attempts at a piece's end before the whole-file path takes over (a "},{" inside an
#: event's args or a string is not an end between events: that piece fails to decode).
_PIECE_TRIES = 8
_ARRAY_START = re.compile(rb'[ \t\r\n]*(?:\[|\{[ \t\r\n]*"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[)')


class _Columns:
    """The events as numpy columns, built from one list of decoded events or from pieces
    (each piece's objects are freed before the next is decoded)."""

    def __init__(self, tagged: bool) -> None:
        self.tagged = tagged
        self.n = 0
        self.seen: dict[str, int] = {}  # name -> position of its first event
        self.threads: dict[tuple[Any, Any], int] = {}  # slow path: (pid, tid) -> first
        self.meta: list[Any] = []  # the M events
        self.unknown: Counter[str] = Counter()  # slow path: events of unknown phases
        self._parts: dict[str, list[np.ndarray]] = defaultdict(list)

    def add(self, events: list[Any]) -> None:
        """Append the columns of ``events`` (one C-level pass per field)."""
        n, offset, parts = len(events), self.n, self._parts
        if self.tagged:
            code = np.fromiter(map(_KIND_CODE.__getitem__, map(type, events)), np.uint8, n)
        else:
            code = np.fromiter(
                map(_PH_INDEX.get, map(_get_ph, events), repeat(_UNKNOWN_PH)), np.uint8, n
            )
            self.unknown.update(events[i].ph for i in np.flatnonzero(code == _UNKNOWN_PH))
        self.meta += [events[i] for i in np.flatnonzero(code == _M).tolist()]
        parts["code"].append(code)
        parts["ts"].append(np.fromiter(map(_get_ts, events), np.float64, n))
        if self.tagged:  # a kind other than X has dur NaN as a class attribute: one pass
            dur = np.fromiter(map(_get_dur, events), np.float64, n)
        else:  # the plain Struct reads dur on any event: X events' only
            dur = np.full(n, np.nan)
            x_at = np.flatnonzero(code == _X)
            dur[x_at] = np.fromiter(map(_get_dur, map(events.__getitem__, x_at.tolist())),
                                    np.float64, len(x_at))
        parts["dur"].append(dur)
        # setdefault keeps each name's first position; dict order is the order of first
        # appearance, and the positions that are their own first occurrence number them.
        parts["first"].append(np.fromiter(
            map(self.seen.setdefault, map(_get_name, events), count(offset)), np.int64, n
        ))
        if self.tagged:
            parts["pid"].append(np.fromiter(map(_get_pid, events), np.int64, n))
            parts["tid"].append(np.fromiter(map(_get_tid, events), np.int64, n))
        else:
            pairs = zip(map(_get_pid, events), map(_get_tid, events), strict=True)
            parts["thread"].append(
                np.fromiter(map(self.threads.setdefault, pairs, count(offset)), np.int64, n)
            )
        self.n += n

    def _take(self, key: str, dtype: type) -> np.ndarray:
        parts = self._parts.pop(key, [])
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                              list[tuple[int | str, int | str]]]:
        """code, ts, dur, first (each event's name's first position), thread_of, threads."""
        code, ts = self._take("code", np.uint8), self._take("ts", np.float64)
        dur, first = self._take("dur", np.float64), self._take("first", np.int64)
        if self.tagged:
            thread_of, keys = _thread_columns(self._take("pid", np.int64),
                                              self._take("tid", np.int64))
        else:
            thread_first = self._take("thread", np.int64)
            is_first = thread_first == np.arange(self.n)
            thread_of = (np.cumsum(is_first, dtype=np.int32) - 1)[thread_first]
            keys = list(self.threads)
        return code, ts, dur, first, thread_of, keys


def _piece_end(data: bytes | bytearray, at: int) -> tuple[int, int] | None:
    """The first ``}`` + ``,`` + whitespace + ``{`` at or after ``at``: (index of the
    ``}``, index of the ``{``), or None when there is none."""
    n = len(data)
    while (j := data.find(b"},", at)) >= 0:
        k = j + 2
        while k < n and k - j < 64 and data[k] in _WHITESPACE:
            k += 1
        if k < n and data[k] == ord("{"):
            return j, k
        at = j + 1
    return None


def _decode_in_pieces(data: bytes | bytearray) -> _Columns | None:
    """The fast path for a large trace already in memory: its event array decoded piece by
    piece (``_decode_chunks``). None for a file of one piece, or when the pieces give up."""
    if len(data) <= _PIECE_BYTES:
        return None
    view = memoryview(data)
    try:
        chunks = (view[i : i + reading.CHUNK] for i in range(0, len(data), reading.CHUNK))
        decoded = _decode_chunks(chunks, len(data))
    finally:
        view.release()
    return decoded if isinstance(decoded, _Columns) else None


def _decode_stream(source: object, max_bytes: int,
                   observe: Callable[[bytes], None] | None = None
                   ) -> _Columns | bytearray | None:
    """The fast path for a file (a path, or a seekable binary stream): read, inflated if
    gzip, and decoded in pieces without ever holding the whole file (``_decode_chunks``).

    Returns the columns; or the whole (decompressed) bytes when they fit in one piece; or
    None, the stream put back where it was, when the whole-file path must take the file
    (not a path or seekable stream, a file over ``max_bytes``, corrupt gzip, not JSON, or
    anything the pieces do not take): it reads the file again and gives every error message.
    ``observe`` (a path only): called with each piece of the file's bytes as read.
    """
    if isinstance(source, str | os.PathLike):
        try:
            f: Any = open(source, "rb")  # noqa: SIM115 (closed below)
        except OSError:
            return None
        close, start = True, 0
    elif callable(getattr(source, "seekable", None)) and source.seekable():  # type: ignore[attr-defined]
        f, close = source, False
        start = f.tell()
    else:
        return None
    try:
        if close and os.fstat(f.fileno()).st_size > max_bytes:
            return None
        reader: Any = _Observed(f, observe) if observe is not None and close else f
        decoded = _decode_chunks(reading.iter_chunks(reader), max_bytes)
    except (OSError, ValueError, zlib.error):
        decoded = None
    finally:
        if close:
            f.close()
    if decoded is None and not close:
        f.seek(start)
    return decoded


class _Observed:
    """A file whose bytes, as they are read, are also given to ``observe``."""

    def __init__(self, f: BinaryIO, observe: Callable[[bytes], None]) -> None:
        self.f = f
        self.observe = observe

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.observe(data)
        return data


def _decode_chunks(chunks: Iterator[Any], max_bytes: int) -> _Columns | bytearray | None:
    """The event array of a JSON trace given as consecutive byte chunks, decoded piece by
    piece with the tagged union, each piece made columns before the next is read.

    A piece ends at the first ``},{`` (whitespace allowed after the comma) about
    ``_PIECE_BYTES`` on; its bytes are decoded in place as an array of their own (the
    comma becomes ``]``, then the ``[`` of the next piece), so only about one piece of the
    file is held at a time. A ``},{`` inside an event (its args, a string) leaves that
    piece's last event unfinished, which the decoder refuses, and the next ``},{`` is
    tried. Returns the columns; the bytes read when the input ends within its first piece
    (the caller decodes them whole); None (nothing kept) for input over ``max_bytes``, not
    JSON, an object whose first key is not ``traceEvents``, an array without its closing
    bracket, a piece the union refuses or that will not decode: the whole-file path then
    takes the trace (the slow path, the repair of an unclosed array, every error message).
    """
    buf = bytearray()
    total = 0
    eof = False

    def more() -> bool:
        nonlocal total, eof
        chunk = next(chunks, None)
        if chunk is None:
            eof = True
            return False
        total += len(chunk)
        buf.extend(chunk)
        return True

    while len(buf) <= _PIECE_BYTES and more():
        pass
    if total > max_bytes:
        return None
    if eof:
        return buf  # one piece: decoded whole
    if not _is_json(buf):
        return None
    lead = 3 if buf[:3] == _UTF8_BOM else 0
    found = _ARRAY_START.match(buf, lead)
    if found is None:
        return None
    in_object = found.group(0).rstrip(b"[ \t\r\n") != b""
    closer = ord("}") if in_object else ord("]")
    piece_decoder = _DECODERS[(ord("["), True)]
    columns = _Columns(tagged=True)
    p = found.end() - 1  # the array's "[": every piece starts with one
    while True:
        searched = p + _PIECE_BYTES
        while len(buf) < searched + _PIECE_BYTES // 4 and more():
            pass
        end = _piece_end(buf, searched)
        for _ in range(_PIECE_TRIES):
            while end is None and not eof:
                searched = max(searched, len(buf) - 64)
                if more():
                    end = _piece_end(buf, searched)
            if total > max_bytes:
                return None
            if end is None:  # the rest of the input, closing bracket(s) included
                last = len(buf) - 1
                while last > p and buf[last] in _WHITESPACE:
                    last -= 1
                if buf[last] != closer:
                    return None
                rest = bytearray(b'{"traceEvents":' if in_object else b"")
                rest += memoryview(buf)[p:]
                del buf[:]
                try:
                    events = _DECODERS[(rest[0], True)].decode(rest)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    return None
                columns.add(events.traceEvents if in_object else events)
                return columns
            j, k = end
            buf[j + 1] = ord("]")
            view = memoryview(buf)
            piece = view[p : j + 2]
            try:
                events = piece_decoder.decode(piece)
                break
            except msgspec.DecodeError:  # a "},{" inside an event: the next one
                buf[j + 1] = ord(",")
                end = _piece_end(buf, j + 1)
            except msgspec.ValidationError:
                return None
            finally:
                piece.release()
                view.release()
        else:
            return None
        columns.add(events)
        del events
        buf[k - 1] = ord("[")
        del buf[: k - 1]  # bytearray drops a prefix without moving the rest
        p = 0


def _decode(data: bytes | bytearray, name: str, counts: _Counts) -> tuple[list[Any], bool]:
    """Decode the events of the array or object form (the only full pass over the JSON)."""
    n = len(data)
    first = 0
    if data[:3] == _UTF8_BOM:
        first = 3
    while first < n and data[first] in _WHITESPACE:
        first += 1
        if first > 4096:  # a pathological amount of leading whitespace: let C do it
            first = n - len(data.lstrip(_WHITESPACE))
            break
    if first >= n:
        raise TraceError(f"{name}: empty file")
    lead = data[first]
    if lead not in b"[{":
        raise TraceError(
            f"{name}: not a JSON trace: unexpected character {chr(lead)!r} at byte {first} "
            f"(a trace starts with '[' or '{{')"
        )
    last = n - 1
    while data[last] in _WHITESPACE:
        last -= 1
        if n - last > 4096:  # likewise for trailing whitespace
            last = len(data.rstrip(_WHITESPACE)) - 1
            break
    repaired = lead == ord("[") and data[last] != ord("]") and data[last] in b",}"
    if repaired:
        # Unterminated array (Chrome killed while writing --trace-startup output).
        if not isinstance(data, bytearray):
            data = bytearray(data)
        if data[last] == ord(","):
            data[last] = ord("]")
        else:
            data[last + 1 : last + 1] = b"]"
        counts.notes.append(
            "the event array had no closing ']' (Chrome stopped while writing?): closed it"
        )
    # msgspec.Raw values keep a view of the buffer, so the view is never released here.
    view = memoryview(data)[first:] if first else data
    try:
        try:
            return _decode_events(view, lead, tagged=True), True
        except msgspec.ValidationError:
            pass
        return _decode_events(view, lead, tagged=False), False
    except msgspec.ValidationError as e:
        msg = str(e)
        if "missing required field `traceEvents`" in msg:
            raise TraceError(f"{name}: not a trace: the JSON object has no 'traceEvents'") from None
        raise TraceError(f"{name}: not a trace: {msg}") from None
    except msgspec.DecodeError as e:
        msg = str(e)
        closer = ord("]") if lead == ord("[") else ord("}")
        if repaired or ("truncated" in msg and data[last] != closer):
            raise TraceError(
                f"{name}: truncated JSON (the input ends at byte {n} inside an unfinished value)"
            ) from None
        raise TraceError(f"{name}: not valid JSON: {msg}") from None


def _decode_events(view: bytes | bytearray | memoryview, lead: int, tagged: bool) -> list:
    decoded = _DECODERS[(lead, tagged)].decode(view)
    return decoded if lead == ord("[") else decoded.traceEvents


def _metadata(
    metas: list[Any],
) -> tuple[dict[int | str, str], dict[tuple[int | str, int | str], str]]:
    """process_name by pid and thread_name by (pid, tid), from the M events."""
    procs: dict[int | str, str] = {}
    threads: dict[tuple[int | str, int | str], str] = {}
    for ev in metas:
        if ev.name not in ("process_name", "thread_name"):
            continue
        args = ev.args
        if isinstance(args, msgspec.Raw):
            args = msgspec.json.decode(args)
            label = args.get("name") if isinstance(args, dict) else None
        else:
            label = args.name if args is not None else None
        if not isinstance(label, str):
            continue
        if ev.name == "process_name":
            procs[ev.pid] = label
        else:
            threads[(ev.pid, ev.tid)] = label
    return procs, threads


def _clip_with_stack(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, int]:
    """Nest one thread's pre-ordered slices with a stack, clipping children to parents."""
    starts = s.tolist()
    ends = e.tolist()
    stack: list[int] = []
    clipped = 0
    for i, si in enumerate(starts):
        while stack and ends[stack[-1]] <= si:
            stack.pop()
        if stack and ends[i] > ends[stack[-1]]:
            ends[i] = ends[stack[-1]]
            clipped += 1
        stack.append(i)
    return np.array(ends, dtype=np.float64), clipped


def _shorten(name: str, counts: _Counts) -> str:
    if len(name) <= MAX_NAME_CHARS:
        return name
    counts.shortened_names += 1
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass"), usedforsecurity=False)
    return name[:MAX_NAME_CHARS] + "…" + digest.hexdigest()[:8]
