"""Perfetto protobuf traces (``.perfetto-trace``, ``.pftrace``) -> the slice events of a trace.

Pure module: bytes in, numpy columns out; ``ingest.traces.parse_trace`` detects the format
and runs the same nesting and timing code on these columns as on a Chrome JSON trace, so
both formats give the same self time, total time and calls on the same thread selection.

What is read
------------
* ``TracePacket.track_event``: ``TYPE_SLICE_BEGIN`` and ``TYPE_SLICE_END`` are the B and E
  events of the JSON reader (an END closes the innermost open slice of its track);
  ``TYPE_INSTANT`` and ``TYPE_COUNTER`` are counted as ignored phases ``i`` and ``C``;
  ``TYPE_UNSPECIFIED`` with a ``legacy_event`` is read by its ``phase`` (``B``, ``E``,
  ``X`` with ``duration_us``; other phases counted). The name is ``name`` or ``name_iid``
  interned in ``interned_data.event_names`` on the packet's
  ``trusted_packet_sequence_id``.
* Incremental state per sequence: ``SEQ_INCREMENTAL_STATE_CLEARED`` (or
  ``incremental_state_cleared``) clears the interned names and the defaults; a packet with
  ``SEQ_NEEDS_INCREMENTAL_STATE`` on a sequence whose state is not valid (never cleared, or
  after ``previous_packet_dropped``) is skipped and counted, as the trace processor does.
* Tracks: ``track_uuid``, else ``trace_packet_defaults.track_event_defaults.track_uuid``,
  else the thread of the sequence's legacy ``thread_descriptor`` packet (a uuid of 0 is
  "unset"). A ``track_descriptor`` with ``thread {pid, tid, thread_name}`` is that thread:
  tracks of one (pid, tid) are one thread, as pid/tid are in JSON. Processes are named by
  ``process {pid, process_name}`` (or a ``process_descriptor`` packet), else by Chrome's
  process type (Browser, Renderer, GPU Process); a thread without a name whose Chrome
  thread type is the main thread gets Chrome's main-thread name of its process
  (CrBrowserMain, CrRendererMain, CrGpuMain). Any other track (an async or custom track, a
  process track) is a thread of its own, ``(pid, "track <uuid>")``, only taken by
  ``all_threads``; a track without a descriptor is ``("?", "track <uuid>")``.
* Time: ``timestamp`` in ns on the packet's ``timestamp_clock_id``, else the sequence's
  ``trace_packet_defaults.timestamp_clock_id``, else the boot clock. A sequence-scoped
  clock (id 64-127, what the Perfetto SDK and Chrome write: ``is_incremental`` deltas with
  ``unit_multiplier_ns``) is converted through the latest ``clock_snapshot`` of its
  sequence into the snapshot's first global clock. Legacy Chrome timestamps
  (``timestamp_delta_us`` / ``timestamp_absolute_us`` on the track event, from the thread
  descriptor's ``reference_timestamp_us``) are read too. Times become µs (ns / 1000).

What is refused (``error``, naming the file), rather than mis-measured
--------------------------------------------------------------------------------------------
* One thread whose events are on two different clock domains: converting between global
  clocks would need the trace processor's clock graph; no writer known to us does it.
* A sequence-scoped clock used without a clock snapshot on its sequence.
* Bytes that are not a Trace: a top-level field other than ``packet`` (field 1, length
  delimited), a length running past the end (truncated), a bad varint, a packet that does
  not decode, no packets, no track events.

Skipped and counted (a note): legacy events with ``pid_override`` / ``tid_override`` (they
belong to another thread than their track's), interned names that are missing (the slice is
kept, named ``(unknown name iid N)``).

Speed and memory
----------------
Two paths give the same columns (the tests compare them on builder-made traces and on
mutated ones):

* The vectorised path (``_read_vectorised``), taken by any file it can read exactly: numpy
  over the file's bytes, no Python step per packet or event. Packet boundaries: each byte
  0x0a is a candidate packet start, gets the start of the next packet if it were one, and
  the chain from byte 0 is found by pointer doubling (~20 gathers). The packets' fields are
  read in lockstep (one round per field of the longest packet; tags looked up in a table;
  varints decoded a byte position at a time for all that still continue), in blocks of
  ``_BLOCK`` (32,768) packets so that the temporaries stay in cache and small, into compact
  columns; then the track events' fields the same way. The few packets that change their
  sequence's state (interned names, defaults, clears, drops, descriptors, clock
  snapshots) are decoded by upb, one by one, into small tables, and each event finds its
  sequence's state at its position by a sorted search ("as of" joins: valid state, the
  defaults, the snapshot of a sequence clock, an interned name since the last clear).
  Incremental clocks are cumulative sums per snapshot. Anything it does not read exactly
  (legacy thread descriptors or legacy events, a read field twice or with another wire
  type, a group, numbers near 2**62, invalid UTF-8 in a name, any error) hands the whole
  file to the general path, which gives the same result and every error message.
* The general path (``_read_general``, the first implementation): packets decoded by the
  ``protobuf`` package's C parser (upb) against a schema that declares only the fields
  above (every other field is skipped as unknown bytes, never built), in pieces of
  ``_PIECE_BYTES`` of whole packets, and one Python loop over the packets of a piece
  appending to ``array`` columns.

Measured (tests/benchmarks/perfetto_reader.py, 594,404 events; 2-CPU machine loaded by
other jobs, so the ratios count): the general path reads at 2.96 µs per event, the
vectorised one at 0.70 µs (in process, CPU time, best of 3), and the whole ``parse_trace``
goes from 2.4-3.1x the JSON reader's time to 0.9x. Measured alternatives: a hand-written
wire walker in pure Python (2.1 µs per event on the simplest packets, against 1.4 µs for
upb plus the loop); the same lockstep scan in blocks of 131,072 (~15% slower than 32,768:
the arrays leave the cache) and over the whole file at once (a 214 MB peak for a 7.8 MB
file, against 97 MB in blocks); ``np.unique`` over every event for the track and name
numbers (sorts; runs of one track and ``np.minimum.at`` do it in linear time). The peak of
the process is not the reader's: the shared nesting code
(``ingest.traces._function_times``) needs ~196 bytes per event over the columns (~32 bytes
per event), far above the ~14 bytes per event of a Perfetto file, so the peak stays ~17x
the file (4x for JSON, whose events take ~60 bytes of file); 1.5x (~21 bytes per event) is
below what the columns alone take. The figures: docs/architecture.md, "Trace parsing".
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message,
    message_factory,
)

from deviations.core.errors import UserError

__all__ = ["BEGIN", "COMPLETE", "END", "SCHEMA", "Events", "read_events"]

#: Codes of the slice events in ``Events.code``.
BEGIN, END, COMPLETE = 1, 2, 3

#: The fields read, with the numbers and types of Perfetto's trace proto
#: (protos/perfetto/trace/; checked against the perfetto package's bindings by the tests).
#: (message, field, number, type, repeated)
_F = descriptor_pb2.FieldDescriptorProto
SCHEMA: list[tuple[str, str, int, int | str, bool]] = [
    ("Trace", "packet", 1, "TracePacket", True),
    ("TracePacket", "timestamp", 8, _F.TYPE_UINT64, False),
    ("TracePacket", "timestamp_clock_id", 58, _F.TYPE_UINT32, False),
    ("TracePacket", "trusted_packet_sequence_id", 10, _F.TYPE_UINT32, False),
    ("TracePacket", "sequence_flags", 13, _F.TYPE_UINT32, False),
    ("TracePacket", "incremental_state_cleared", 41, _F.TYPE_BOOL, False),
    ("TracePacket", "previous_packet_dropped", 42, _F.TYPE_UINT32, False),
    ("TracePacket", "interned_data", 12, "InternedData", False),
    ("TracePacket", "trace_packet_defaults", 59, "TracePacketDefaults", False),
    ("TracePacket", "track_event", 11, "TrackEvent", False),
    ("TracePacket", "track_descriptor", 60, "TrackDescriptor", False),
    ("TracePacket", "clock_snapshot", 6, "ClockSnapshot", False),
    ("TracePacket", "process_descriptor", 43, "ProcessDescriptor", False),
    ("TracePacket", "thread_descriptor", 44, "ThreadDescriptor", False),
    ("TrackEvent", "type", 9, _F.TYPE_INT32, False),
    ("TrackEvent", "name_iid", 10, _F.TYPE_UINT64, False),
    ("TrackEvent", "name", 23, _F.TYPE_STRING, False),
    ("TrackEvent", "track_uuid", 11, _F.TYPE_UINT64, False),
    ("TrackEvent", "timestamp_delta_us", 1, _F.TYPE_INT64, False),
    ("TrackEvent", "timestamp_absolute_us", 16, _F.TYPE_INT64, False),
    ("TrackEvent", "legacy_event", 6, "LegacyEvent", False),
    ("LegacyEvent", "phase", 2, _F.TYPE_INT32, False),
    ("LegacyEvent", "duration_us", 3, _F.TYPE_INT64, False),
    ("LegacyEvent", "pid_override", 18, _F.TYPE_INT32, False),
    ("LegacyEvent", "tid_override", 19, _F.TYPE_INT32, False),
    ("InternedData", "event_names", 2, "EventName", True),
    ("EventName", "iid", 1, _F.TYPE_UINT64, False),
    ("EventName", "name", 2, _F.TYPE_STRING, False),
    ("TracePacketDefaults", "timestamp_clock_id", 58, _F.TYPE_UINT32, False),
    ("TracePacketDefaults", "track_event_defaults", 11, "TrackEventDefaults", False),
    ("TrackEventDefaults", "track_uuid", 11, _F.TYPE_UINT64, False),
    ("ClockSnapshot", "clocks", 1, "Clock", True),
    ("Clock", "clock_id", 1, _F.TYPE_UINT32, False),
    ("Clock", "timestamp", 2, _F.TYPE_UINT64, False),
    ("Clock", "is_incremental", 3, _F.TYPE_BOOL, False),
    ("Clock", "unit_multiplier_ns", 4, _F.TYPE_UINT64, False),
    ("TrackDescriptor", "uuid", 1, _F.TYPE_UINT64, False),
    ("TrackDescriptor", "parent_uuid", 5, _F.TYPE_UINT64, False),
    ("TrackDescriptor", "name", 2, _F.TYPE_STRING, False),
    ("TrackDescriptor", "static_name", 10, _F.TYPE_STRING, False),
    ("TrackDescriptor", "process", 3, "ProcessDescriptor", False),
    ("TrackDescriptor", "thread", 4, "ThreadDescriptor", False),
    ("TrackDescriptor", "chrome_process", 6, "ChromeProcessDescriptor", False),
    ("TrackDescriptor", "chrome_thread", 7, "ChromeThreadDescriptor", False),
    ("ProcessDescriptor", "pid", 1, _F.TYPE_INT32, False),
    ("ProcessDescriptor", "process_name", 6, _F.TYPE_STRING, False),
    ("ProcessDescriptor", "chrome_process_type", 4, _F.TYPE_INT32, False),
    ("ThreadDescriptor", "pid", 1, _F.TYPE_INT32, False),
    ("ThreadDescriptor", "tid", 2, _F.TYPE_INT32, False),
    ("ThreadDescriptor", "thread_name", 5, _F.TYPE_STRING, False),
    ("ThreadDescriptor", "chrome_thread_type", 4, _F.TYPE_INT32, False),
    ("ThreadDescriptor", "reference_timestamp_us", 6, _F.TYPE_INT64, False),
    ("ChromeProcessDescriptor", "process_type", 1, _F.TYPE_INT32, False),
    ("ChromeThreadDescriptor", "thread_type", 1, _F.TYPE_INT32, False),
]

_TYPE_BEGIN, _TYPE_END, _TYPE_INSTANT, _TYPE_COUNTER = 1, 2, 3, 4
_SEQ_INCREMENTAL_STATE_CLEARED, _SEQ_NEEDS_INCREMENTAL_STATE = 1, 2
#: The clock of a timestamp that names none (BUILTIN_CLOCK_BOOTTIME).
_BOOT_CLOCK = 6
#: Clock ids 64-127 are scoped to their packet sequence (ClockSnapshot's comment).
_FIRST_SEQUENCE_CLOCK, _LAST_SEQUENCE_CLOCK = 64, 127
#: Legacy track events (timestamp_delta_us) count µs on a clock of their own.
_LEGACY_US_CLOCK = -1
#: Chrome's process types (ProcessDescriptor.ChromeProcessType, chrome_enums ProcessType) as
#: the JSON trace names them, and the name of each one's main thread (thread type 1).
_CHROME_PROCESSES = {1: "Browser", 2: "Renderer", 6: "GPU Process"}
_CHROME_MAIN_THREADS = {"Browser": "CrBrowserMain", "Renderer": "CrRendererMain",
                        "GPU Process": "CrGpuMain"}
_CHROME_MAIN_THREAD = 1
#: Packets are decoded in pieces of about this many bytes (whole packets), so that the
#: decoded messages of the whole file (several times its size) never exist at once.
_PIECE_BYTES = 2 << 20
_PACKET_TAG = 0x0A  # field 1 (packet), wire type 2 (length-delimited)


def _message_class() -> Any:
    """The Trace message class of SCHEMA (a file descriptor built in code: no .proto)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="deviations_perfetto_subset.proto", package="deviations.perfetto", syntax="proto2"
    )
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    for msg, name, number, kind, repeated in SCHEMA:
        if msg not in messages:
            messages[msg] = file.message_type.add(name=msg)
        f = messages[msg].field.add(name=name, number=number)
        f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
        if isinstance(kind, str):
            f.type = _F.TYPE_MESSAGE
            f.type_name = f".deviations.perfetto.{kind}"
        else:
            f.type = kind
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("deviations.perfetto.Trace"))


_Trace = _message_class()


@dataclass
class Events:
    """The slice events of the trace, as columns, and what names their threads."""

    #: track events in the file (every type).
    n_events: int
    code: np.ndarray  # uint8: BEGIN, END, COMPLETE
    ts_us: np.ndarray  # float64
    dur_us: np.ndarray  # float64, NaN except on COMPLETE events
    name_id: np.ndarray  # int64 index into names
    names: list[str]  # in order of first appearance
    thread_of: np.ndarray  # int64 index into threads
    threads: list[tuple[int | str, int | str]]
    process_names: dict[int | str, str]
    thread_names: dict[tuple[int | str, int | str], str]
    ignored: dict[str, int]
    notes: list[str]


@dataclass
class _Sequence:
    """The incremental state of one trusted_packet_sequence_id."""

    valid: bool = False
    names: dict[int, str] = field(default_factory=dict)
    clock: int = 0  # trace_packet_defaults.timestamp_clock_id (0: none)
    track: int = 0  # trace_packet_defaults.track_event_defaults.track_uuid (0: none)
    thread: tuple[int, int] | None = None  # legacy thread_descriptor packet
    legacy_us: int | None = None  # legacy timestamps: the last one, in µs
    #: sequence-scoped clocks: id -> [last raw value, snapshot raw value, multiplier,
    #: base clock, base clock's ns at the snapshot, incremental]
    clocks: dict[int, list[int]] = field(default_factory=dict)

    def clear(self) -> None:
        self.valid = True
        self.names = {}
        self.clock = 0
        self.track = 0


@dataclass
class _Track:
    parent: int = 0
    name: str = ""
    pid: int | None = None
    tid: int | None = None
    thread_name: str = ""
    chrome_thread_type: int = 0


class _Reader:
    def __init__(self, name: str, error: type[UserError]) -> None:
        self.name, self.error = name, error
        # array columns appended to by read(), or numpy arrays from _read_vectorised
        self.ts: Any = array("q")
        self.code: Any = array("B")
        self.name_id: Any = array("i")
        self.track_id: Any = array("i")
        self.durations: dict[int, float] = {}  # event index -> duration_us (legacy X)
        self.names: dict[str, int] = {}
        self.tracks: dict[Any, int] = {}  # uuid or (pid, tid) -> index
        self.track_clock: dict[int, int] = {}
        self.sequences: dict[int, _Sequence] = {}
        self.descriptors: dict[int, _Track] = {}
        self.legacy_threads: dict[tuple[int, int], _Track] = {}  # thread_descriptor packets
        self.process_names: dict[int | str, str] = {}
        self.ignored: dict[str, int] = {}
        self.n_events = 0
        self.n_packets = 0
        self.skipped_state = 0
        self.skipped_override = 0
        self.missing_names = 0

    def fail(self, reason: str) -> UserError:
        return self.error(f"{self.name}: {reason}")

    def read(self, packets: Any) -> None:
        """Append the events of one piece's packets (the only loop over packets)."""
        sequences = self.sequences
        ts_col, code_col, name_col, track_col = self.ts, self.code, self.name_id, self.track_id
        names, tracks, track_clock = self.names, self.tracks, self.track_clock
        self.n_packets += len(packets)
        seq_id, seq = -1, _Sequence()
        last_key: Any = None
        last_track = last_clock = -1
        for p in packets:
            if p.trusted_packet_sequence_id != seq_id:
                seq_id = p.trusted_packet_sequence_id
                seq = sequences.get(seq_id)  # type: ignore[assignment]
                if seq is None:
                    seq = sequences[seq_id] = _Sequence()
            flags = p.sequence_flags
            if flags & _SEQ_INCREMENTAL_STATE_CLEARED or p.incremental_state_cleared:
                seq.clear()
            if p.previous_packet_dropped:
                seq.valid = False
            if p.HasField("trace_packet_defaults"):
                defaults = p.trace_packet_defaults
                seq.clock = defaults.timestamp_clock_id
                seq.track = defaults.track_event_defaults.track_uuid
            if p.HasField("interned_data"):
                for entry in p.interned_data.event_names:
                    seq.names[entry.iid] = entry.name
            if not p.HasField("track_event"):
                self._other(p, seq)
                clock = p.timestamp_clock_id or seq.clock
                if clock >= _FIRST_SEQUENCE_CLOCK and p.HasField("timestamp"):
                    self._convert(seq, clock, p.timestamp)  # advances an incremental clock
                continue
            self.n_events += 1
            if flags & _SEQ_NEEDS_INCREMENTAL_STATE and not seq.valid:
                self.skipped_state += 1
                continue
            ev = p.track_event
            # time first: every event advances an incremental clock, ignored ones too
            if seq.legacy_us is not None and not p.HasField("timestamp"):
                if ev.HasField("timestamp_absolute_us"):
                    seq.legacy_us = ev.timestamp_absolute_us
                else:
                    seq.legacy_us += ev.timestamp_delta_us
                ts, clock = seq.legacy_us * 1000, _LEGACY_US_CLOCK
            else:
                ts, clock = p.timestamp, p.timestamp_clock_id or seq.clock or _BOOT_CLOCK
                if clock >= _FIRST_SEQUENCE_CLOCK:
                    ts, clock = self._convert(seq, clock, ts)
            kind = ev.type
            if kind == _TYPE_BEGIN or kind == _TYPE_END:  # noqa: PLR1714 (hot path)
                code = kind
            elif kind == 0 and ev.HasField("legacy_event"):
                code = self._legacy(ev.legacy_event)
                if code == 0:
                    continue
            else:
                self._ignore("i" if kind == _TYPE_INSTANT else "C" if kind == _TYPE_COUNTER
                             else "?")
                continue
            # track
            uuid = ev.track_uuid or seq.track
            key: Any = uuid if uuid else seq.thread or ("sequence", seq_id)
            if key != last_key or clock != last_clock:
                track = tracks.setdefault(key, len(tracks))
                if track_clock.setdefault(track, clock) != clock:
                    raise self.fail(
                        f"the events of one track are on two clocks ({track_clock[track]} "
                        f"and {clock}): converting between clocks is not supported"
                    )
                last_key, last_track, last_clock = key, track, clock
            # name
            iid = ev.name_iid
            if iid:
                label = seq.names.get(iid)
                if label is None:
                    self.missing_names += 1
                    label = f"(unknown name iid {iid})"
            else:
                label = ev.name
            name_id = names.get(label)
            if name_id is None:
                name_id = names[label] = len(names)
            ts_col.append(ts)
            code_col.append(code)
            name_col.append(name_id)
            track_col.append(last_track)

    def _legacy(self, legacy: Any) -> int:
        """The code of a legacy event (0: not a slice event, counted or skipped)."""
        phase = chr(legacy.phase) if 0 < legacy.phase < 0x110000 else "?"
        if legacy.pid_override or legacy.tid_override:
            self.skipped_override += 1
            return 0
        if phase == "B":
            return BEGIN
        if phase == "E":
            return END
        if phase == "X":
            self.durations[len(self.ts)] = float(legacy.duration_us)
            return COMPLETE
        self._ignore(phase)
        return 0

    def _ignore(self, phase: str) -> None:
        self.ignored[phase] = self.ignored.get(phase, 0) + 1

    def _convert(self, seq: _Sequence, clock: int, ts: int) -> tuple[int, int]:
        """A sequence-scoped clock's timestamp in ns of the global clock of its snapshot."""
        state = seq.clocks.get(clock)
        if state is None:
            raise self.fail(
                f"clock {clock} (scoped to sequence {self._seq_of(seq)}) is used without a "
                "clock snapshot that defines it"
            )
        if state[5]:  # incremental: each timestamp is a delta from the previous one
            state[0] += ts
            ts = state[0]
        return state[4] + (ts - state[1]) * state[2], state[3]

    def _seq_of(self, seq: _Sequence) -> int:
        return next(k for k, v in self.sequences.items() if v is seq)

    def _other(self, p: Any, seq: _Sequence) -> None:
        """Descriptors and clock snapshots (packets without a track event)."""
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            track = self.descriptors.setdefault(d.uuid, _Track())
            track.parent = d.parent_uuid
            track.name = d.name or d.static_name
            if d.HasField("process"):
                track.pid = d.process.pid
                self._process(d.process.pid, d.process.process_name,
                              d.process.chrome_process_type or d.chrome_process.process_type)
            if d.HasField("thread"):
                track.pid, track.tid = d.thread.pid, d.thread.tid
                track.thread_name = d.thread.thread_name
                track.chrome_thread_type = (d.thread.chrome_thread_type
                                            or d.chrome_thread.thread_type)
        elif p.HasField("clock_snapshot"):
            clocks = list(p.clock_snapshot.clocks)
            base = next((c for c in clocks if c.clock_id < _FIRST_SEQUENCE_CLOCK), None)
            for c in clocks:
                if _FIRST_SEQUENCE_CLOCK <= c.clock_id <= _LAST_SEQUENCE_CLOCK and base:
                    seq.clocks[c.clock_id] = [
                        c.timestamp, c.timestamp, c.unit_multiplier_ns or 1,
                        base.clock_id, base.timestamp * (base.unit_multiplier_ns or 1),
                        int(c.is_incremental),
                    ]
        elif p.HasField("thread_descriptor"):
            t = p.thread_descriptor
            seq.thread = (t.pid, t.tid)
            track = self.legacy_threads.setdefault((t.pid, t.tid), _Track())
            track.pid, track.tid, track.thread_name = t.pid, t.tid, t.thread_name
            track.chrome_thread_type = t.chrome_thread_type
            if t.HasField("reference_timestamp_us"):
                seq.legacy_us = t.reference_timestamp_us
        elif p.HasField("process_descriptor"):
            d = p.process_descriptor
            self._process(d.pid, d.process_name, d.chrome_process_type)

    def _process(self, pid: int, name: str, chrome_type: int) -> None:
        label = name or _CHROME_PROCESSES.get(chrome_type, "")
        if label:
            self.process_names[pid] = label

    def events(self) -> Events:
        """The columns, with each track resolved to its thread."""
        threads: dict[tuple[int | str, int | str], int] = {}
        thread_names: dict[tuple[int | str, int | str], str] = {}
        thread_clock: dict[int, int] = {}
        legacy = self.legacy_threads
        no_descriptor = 0
        track_thread = np.zeros(len(self.tracks), dtype=np.int64)
        for key, index in self.tracks.items():
            label, chrome_type = "", 0
            if isinstance(key, tuple) and key and key[0] == "sequence":
                thread: tuple[int | str, int | str] = ("?", f"sequence {key[1]}")
                no_descriptor += 1
            elif isinstance(key, tuple):
                thread = key
                t = legacy.get(key)
                if t is not None:
                    label, chrome_type = t.thread_name, t.chrome_thread_type
            else:
                d = self.descriptors.get(key)
                if d is None:
                    thread = ("?", f"track {key}")
                    no_descriptor += 1
                elif d.tid is not None and d.pid is not None:
                    thread = (d.pid, d.tid)
                    label, chrome_type = d.thread_name or d.name, d.chrome_thread_type
                else:
                    thread = (self._pid_of(key), f"track {key}")
                    label = d.name
            if not label and chrome_type == _CHROME_MAIN_THREAD:
                pid = thread[0]
                process = self.process_names.get(pid, "")
                label = _CHROME_MAIN_THREADS.get(process, "")
            position = threads.setdefault(thread, len(threads))
            if label:
                thread_names.setdefault(thread, label)
            clock = self.track_clock[index]
            if thread_clock.setdefault(position, clock) != clock:
                raise self.fail(
                    f"thread {thread[1]} of process {thread[0]} has events on two clocks "
                    f"({thread_clock[position]} and {clock}): converting between clocks is "
                    "not supported"
                )
            track_thread[index] = position
        notes = []
        if no_descriptor:
            notes.append(f"{no_descriptor} track(s) had no descriptor (no thread to name them)")
        if self.skipped_state:
            notes.append(
                f"{self.skipped_state} track event(s) needing their sequence's incremental "
                "state before it was set (lost data) were skipped"
            )
        if self.skipped_override:
            notes.append(
                f"{self.skipped_override} legacy event(s) with a pid or tid override (not on "
                "their track's thread) were skipped"
            )
        if self.missing_names:
            notes.append(f"{self.missing_names} event(s) named by an interned name id that "
                         "was never defined")
        # Threads in (pid, tid) order, numbers before names, as the JSON reader lists them.
        by_key = sorted(threads, key=lambda k: tuple((isinstance(x, str), x) for x in k))
        rank = np.empty(len(by_key), dtype=np.int64)
        rank[[threads[k] for k in by_key]] = np.arange(len(by_key))
        track_thread = rank[track_thread] if len(rank) else track_thread
        n = len(self.ts)
        dur = np.full(n, np.nan)
        if self.durations:
            at = np.fromiter(self.durations.keys(), np.int64, len(self.durations))
            dur[at] = np.fromiter(self.durations.values(), np.float64, len(self.durations))
        track_of = np.frombuffer(self.track_id, dtype=np.int32)
        return Events(
            n_events=self.n_events,
            code=np.frombuffer(self.code, dtype=np.uint8).copy(),
            ts_us=np.frombuffer(self.ts, dtype=np.int64) / 1000.0,
            dur_us=dur,
            name_id=np.frombuffer(self.name_id, dtype=np.int32).astype(np.int64),
            names=list(self.names),
            thread_of=track_thread[track_of] if n else np.zeros(0, dtype=np.int64),
            threads=by_key,
            process_names=self.process_names,
            thread_names=thread_names,
            ignored=dict(sorted(self.ignored.items())),
            notes=notes,
        )

    def _pid_of(self, uuid: int) -> int | str:
        """The pid of a track's nearest ancestor that has one ("?" if none)."""
        seen = set()
        while uuid and uuid not in seen:
            seen.add(uuid)
            d = self.descriptors.get(uuid)
            if d is None:
                break
            if d.pid is not None:
                return d.pid
            uuid = d.parent
        return "?"


# --- The vectorised path ------------------------------------------------------------------
#
# The common packet shape (timestamp, sequence id and flags, a track_event of type, name or
# name_iid and track_uuid) is read for all packets at once with numpy over the file's bytes;
# the few packets that change a sequence's state (interned names, defaults, clears, drops,
# descriptors, clock snapshots) are decoded one by one by upb, in file order, into small
# tables; each event then finds the state of its sequence at its position with a search
# ("as of" joins). Anything else (legacy thread descriptors and events, a field twice, an
# unexpected wire type, an error of any kind) hands the whole file to the general path
# (``_read_general``: upb and ``_Reader.read``), which gives the same results and every error
# message.


class _HandOver(Exception):  # noqa: N818 (not an error: a hand-over)
    """The vectorised path does not read this file (exactly): the general path does."""


#: Top-level fields read by the vectorised path -> their wire type (0 varint, 2 bytes).
_VECTOR_FIELDS = {8: 0, 58: 0, 10: 0, 13: 0, 11: 2}
#: Top-level fields that make a packet go through upb (state changes): field numbers.
_STATE_FIELDS = [41, 42, 12, 59, 60, 6, 43, 44]
#: TrackEvent fields read: type, name_iid, track_uuid (varints), name (bytes).
_EVENT_FIELDS = {9: 0, 10: 0, 11: 0, 23: 2}
#: TrackEvent fields that need the general path (legacy events).
_EVENT_GENERAL = [6]
#: Times and ids beyond this go the general path (no int64 overflow in sums and products).
_SAFE = 1 << 62
_U32 = np.uint64(0xFFFFFFFF)

_TracePacket = message_factory.GetMessageClass(
    _Trace.DESCRIPTOR.fields_by_name["packet"].message_type)


def _varints(b: np.ndarray, pos: np.ndarray, strict: bool = True) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """The varints at ``pos`` in ``b`` and the positions after them (reads clipped at the
    end of ``b``: the caller checks the positions against its message's end). A varint
    longer than 10 bytes or beyond 64 bits raises ``_HandOver``, or if not ``strict`` gets
    a position after the end of ``b``."""
    last = len(b) - 1
    byte = b[pos if not len(pos) or pos.max() <= last else np.minimum(pos, last)]
    value = byte.astype(np.uint64)
    more = np.flatnonzero(byte >= 0x80)
    after = pos + 1
    if more.size:
        value[more] &= np.uint64(0x7F)
    shift = 7
    while more.size:
        if shift > 63:
            if strict:
                raise _HandOver  # longer than 10 bytes: the general path names the error
            after[more] = len(b) + 1
            break
        at = after[more]
        byte = b[np.minimum(at, last)]
        if shift == 63 and (byte > 1).any():
            if strict:
                raise _HandOver
            after[more[byte > 1]] = len(b) + 1
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = at + 1
        more = more[byte >= 0x80]
        shift += 7
    return value, after


@dataclass
class _Column:
    """One field of a set of messages: its value (a varint) or length, where it is, and
    the offset of its payload (length-delimited)."""

    value: np.ndarray  # uint64, 0 where absent
    present: np.ndarray  # bool
    offset: np.ndarray | None  # int64 (length-delimited fields only)

    def __getitem__(self, which: np.ndarray) -> _Column:
        return _Column(self.value[which], self.present[which],
                       None if self.offset is None else self.offset[which])


#: Tags (field number * 8 + wire type) looked up in a table of this size; longer ones (field
#: numbers from 2048) are unknown fields to every message read here.
_TAG_TABLE = 1 << 14
_VALID_WIRE = np.array([True, True, True, False, False, True, False, False])


@dataclass
class _Layout:
    """How ``_fields`` reads one message type: per tag, the slot of a wanted field (its
    wire type checked), ``flag`` (a flagged field, any wire type), ``skip`` (another
    field) or ``bad`` (field 0, a wanted field with another wire type, a group)."""

    wanted: list[int]
    delimited: list[int]  # the wanted fields that are length-delimited
    slot: np.ndarray  # int8 per tag
    flag: int
    skip: int
    bad: int

    @classmethod
    def of(cls, wanted: dict[int, int], flagged: list[int]) -> _Layout:
        numbers = list(wanted)
        flag, skip, bad = len(numbers), len(numbers) + 1, len(numbers) + 2
        tag = np.arange(_TAG_TABLE)
        slot = np.where(_VALID_WIRE[tag & 7], skip, bad).astype(np.int8)
        slot[tag >> 3 == 0] = bad
        for number in flagged:
            slot[number << 3 : (number + 1) << 3] = flag
        for s, number in enumerate(numbers):
            slot[number << 3 : (number + 1) << 3] = bad
            slot[number << 3 | wanted[number]] = s
        return cls(numbers, [k for k in numbers if wanted[k] == 2], slot, flag, skip, bad)


def _fields(b: np.ndarray, start: np.ndarray, end: np.ndarray,
            layout: _Layout) -> tuple[dict[int, _Column], np.ndarray]:
    """The wanted fields of the messages ``b[start[i]:end[i]]``, read for all messages in
    lockstep (one round per field of the longest message: a few numpy operations over the
    messages still open), and which messages hold a flagged field. A wanted field with
    another wire type or twice in a message, a group, a bad tag, a field running past its
    message: ``_HandOver``."""
    n = len(start)
    k = len(layout.wanted)
    value = np.zeros((k, n), dtype=np.uint64)
    present = np.zeros((k, n), dtype=bool)
    offset = {number: np.zeros(n, dtype=np.int64) for number in layout.delimited}
    has_flag = np.zeros(n, dtype=bool)
    active = np.flatnonzero(start < end)
    pos = start.copy()
    while active.size:
        active_end = end[active]
        tag, after = _varints(b, pos[active])
        if (tag >= _TAG_TABLE).any():  # field numbers from 2048: unknown here
            if (tag > np.uint64(0xFFFFFFFF)).any():
                raise _HandOver
            tag = np.where(tag >= _TAG_TABLE, np.uint64(_TAG_TABLE - 8) | (tag & 7), tag)
        slot = layout.slot[tag]
        if (slot == layout.bad).any():
            raise _HandOver  # upb's business (an error, or a field it treats as unknown)
        wire = tag & 7
        fixed = wire & 1  # wire type 1 (8 bytes) or 5 (4 bytes); else 0 (varint), 2 (length)
        if fixed.any():
            field_value = np.zeros(len(active), dtype=np.uint64)
            varint = np.flatnonzero(fixed == 0)  # a varint: the value or the length
            field_value[varint], after[varint] = _varints(b, after[varint])
            after[fixed != 0] += np.where(wire[fixed != 0] == 1, 8, 4)
        else:
            field_value, after = _varints(b, after)
        delimited = np.flatnonzero(wire == 2)
        if delimited.size:
            length = field_value[delimited]
            if (length > np.uint64(len(b))).any():
                raise _HandOver
            if offset:  # the payload offsets, for the wanted delimited fields
                payload = after.copy()
            after[delimited] += length.astype(np.int64)
        if (after > active_end).any():
            raise _HandOver  # a field running past its message: the general path's error
        kept = np.flatnonzero(slot < k)
        if kept.size:
            which, row = active[kept], slot[kept]
            flat = row.astype(np.int64) * n + which  # into the (field, message) tables
            if present.take(flat).any():
                raise _HandOver  # a field twice: merged or overridden, upb's business
            present.put(flat, True)
            value.put(flat, field_value[kept])
            for s, number in enumerate(layout.wanted):
                if number in offset:
                    at = kept[row == s]
                    if at.size:
                        offset[number][active[at]] = payload[at]
        flagged = np.flatnonzero(slot == layout.flag)
        if flagged.size:
            has_flag[active[flagged]] = True
        open_ = after < active_end
        active = active[open_]
        pos[active] = after[open_]
    columns = {number: _Column(value[s], present[s], offset.get(number))
               for s, number in enumerate(layout.wanted)}
    return columns, has_flag


def _packets(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(payload start, payload end) of every packet: the top level of the Trace message.

    Packets follow one another, each one's end depends on its start; so every byte that
    could start a packet (0x0a) gets the start of the next one if it did, and the chain
    from byte 0 is followed by pointer doubling (about 20 numpy gathers over the
    candidates rather than one Python step per packet)."""
    n = len(b)
    if n == 0 or b[0] != _PACKET_TAG:
        raise _HandOver
    candidate = np.flatnonzero(b == _PACKET_TAG)
    length, start = _varints(b, candidate + 1, strict=False)
    if (length > np.uint64(n)).any():  # cannot be a packet; only one in the chain matters
        length = np.minimum(length, np.uint64(n + 1))
    end = start + length.astype(np.int64)
    following = np.searchsorted(candidate, end)
    sentinel = len(candidate)
    following[following < sentinel] = np.where(
        candidate[following[following < sentinel]] == end[following < sentinel],
        following[following < sentinel], sentinel)
    jump = np.append(following, sentinel).astype(np.int32)
    on_chain = np.zeros(len(candidate) + 1, dtype=bool)
    reached = np.zeros(1, dtype=np.int32)  # the chain's nodes within 2**k steps of byte 0
    on_chain[0] = True
    while True:
        further = jump[reached]  # then those 2**k to 2**(k+1) steps away
        further = further[further < sentinel]
        if not further.size:
            break
        on_chain[further] = True
        reached = np.concatenate([reached, further])
        jump = jump[jump]
    chain = np.flatnonzero(on_chain[:-1])
    if end[chain[-1]] != n or (start[chain] > end[chain]).any():
        raise _HandOver  # truncated, or a byte that starts no packet: the general errors
    return start[chain], end[chain]


def _as_of(group: np.ndarray, position: np.ndarray, at_group: np.ndarray,
           at_position: np.ndarray) -> np.ndarray:
    """For each query (at_group, at_position), the index of the record of the same group
    with the largest position <= at_position (-1 if none); groups and positions are
    non-negative. Queries in blocks of _BLOCK (the temporaries stay small)."""
    result = np.full(len(at_group), -1, dtype=np.int64)
    if not len(group) or not len(at_group):
        return result
    groups, dense = np.unique(group, return_inverse=True)
    span = max(int(position.max()), int(at_position.max())) + 1
    keys = dense.astype(np.int64) * span + position
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    small = int(groups[-1]) < _SMALL_GROUPS  # groups found by a table, not a search
    if small:
        table = np.zeros(int(groups[-1]) + 2, dtype=np.int64)  # the last: any larger group
        table[groups] = np.arange(len(groups))
        limit = len(table) - 1
    for lo in range(0, len(at_group), _BLOCK):
        g, p = at_group[lo:lo + _BLOCK], at_position[lo:lo + _BLOCK]
        if small:
            found = table[np.minimum(g, limit)]
        else:
            found = np.minimum(np.searchsorted(groups, g), len(groups) - 1)
        known = groups[found] == g
        index = np.searchsorted(keys, found * span + p, side="right") - 1
        ok = known & (index >= 0)
        ok[ok] &= dense[order[index[ok]]] == found[ok]
        result[lo:lo + _BLOCK][ok] = order[index[ok]]
    return result


_PACKET_LAYOUT = _Layout.of(_VECTOR_FIELDS, _STATE_FIELDS)
_EVENT_LAYOUT = _Layout.of(_EVENT_FIELDS, _EVENT_GENERAL)
#: ``_as_of`` finds the groups below this by a table (the sequences, the interned names
#: of sequences), larger ones by a search.
_SMALL_GROUPS = 1 << 20
#: Packets (and events) are scanned in blocks of this many, so that the scan's temporaries
#: (a dozen arrays per block) stay a few MB whatever the file's size.
_BLOCK = 1 << 15


@dataclass
class _Packets:
    """The vectorised path's columns, one row per packet."""

    ts: np.ndarray  # int64
    has_ts: np.ndarray  # bool
    clock_id: np.ndarray  # uint32
    seq: np.ndarray  # int64: index into sequences
    sequences: np.ndarray  # int64: the trusted_packet_sequence_ids, sorted
    flags: np.ndarray  # uint8: sequence_flags & 3
    state: np.ndarray  # bool: a packet through upb (state fields, or a clear flag)
    events: np.ndarray  # int64: the packets with a track_event
    event_start: np.ndarray  # int64, per event: its track_event's bytes
    event_end: np.ndarray


def _packet_columns(b: np.ndarray, start: np.ndarray, end: np.ndarray) -> _Packets:
    n = len(start)
    ts = np.zeros(n, dtype=np.uint64)
    has_ts = np.zeros(n, dtype=bool)
    clock_id = np.zeros(n, dtype=np.uint32)
    seq_raw = np.zeros(n, dtype=np.uint32)
    flags = np.zeros(n, dtype=np.uint8)
    state = np.zeros(n, dtype=bool)
    has_event = np.zeros(n, dtype=bool)
    event_start = np.zeros(n, dtype=np.int64)
    event_end = np.zeros(n, dtype=np.int64)
    for lo in range(0, n, _BLOCK):
        part = slice(lo, lo + _BLOCK)
        columns, state[part] = _fields(b, start[part], end[part], _PACKET_LAYOUT)
        ts[part], has_ts[part] = columns[8].value, columns[8].present
        clock_id[part] = columns[58].value & _U32
        seq_raw[part] = columns[10].value & _U32
        flags[part] = columns[13].value & np.uint64(3)
        has_event[part] = columns[11].present
        offset = columns[11].offset
        assert offset is not None  # a length-delimited field
        event_start[part] = offset
        event_end[part] = offset + columns[11].value.astype(np.int64)
        del columns
    if (ts >= np.uint64(_SAFE)).any():
        raise _HandOver
    state |= (flags & _SEQ_INCREMENTAL_STATE_CLEARED) != 0
    sequences, seq = _unique_runs(seq_raw)
    events = np.flatnonzero(has_event)
    return _Packets(ts.view(np.int64), has_ts, clock_id, seq.astype(np.int64),
                    sequences.astype(np.int64), flags, state, events, event_start[events],
                    event_end[events])


def _unique_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, sorting only the values that start a run
    of equal values (packets come in runs of one sequence)."""
    change = np.empty(len(values), dtype=bool)
    change[:1] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    unique, run_index = np.unique(values[starts], return_inverse=True)
    return unique, run_index.reshape(-1)[np.cumsum(change) - 1]


@dataclass
class _Records:
    """What the state packets (decoded by upb) set, each with its packet index."""

    clears: list[int] = field(default_factory=list)
    drops: list[int] = field(default_factory=list)
    defaults: list[tuple[int, int, int]] = field(default_factory=list)  # packet, clock, track
    interned: list[tuple[int, int, str]] = field(default_factory=list)  # packet, iid, name
    #: (packet, clock, [last, snapshot value, multiplier, base clock, base ns, incremental])
    snapshots: list[tuple[int, int, list[int]]] = field(default_factory=list)


def _state_packets(data: bytes | bytearray, start: np.ndarray, end: np.ndarray,
                   which: np.ndarray, reader: _Reader) -> _Records:
    """The state packets through upb, in file order (descriptors go to ``reader``)."""
    records = _Records()
    view = memoryview(data)
    try:
        for i, s, e in zip(which.tolist(), start[which].tolist(), end[which].tolist(),
                           strict=True):
            try:
                p = _TracePacket.FromString(view[s:e])
            except message.DecodeError:
                raise _HandOver from None
            if p.HasField("thread_descriptor"):
                raise _HandOver  # legacy timestamps: the general path
            if p.sequence_flags & _SEQ_INCREMENTAL_STATE_CLEARED or p.incremental_state_cleared:
                records.clears.append(i)
            if p.previous_packet_dropped:
                records.drops.append(i)
            if p.HasField("trace_packet_defaults"):
                d = p.trace_packet_defaults
                records.defaults.append(
                    (i, d.timestamp_clock_id, d.track_event_defaults.track_uuid))
            if p.HasField("interned_data"):
                records.interned += [(i, e.iid, e.name) for e in p.interned_data.event_names]
            if not p.HasField("track_event"):  # as _Reader.read: descriptors, snapshots
                one = _Sequence()
                reader._other(p, one)
                records.snapshots += [(i, c, s) for c, s in one.clocks.items()]
    finally:
        view.release()
    return records


def _latest(packets: _Packets, records: list[int], at: np.ndarray) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """(record index, its packet) of the latest of ``records`` (packet indices) on each
    packet's sequence at or before it, for the packets ``at`` (-1, -1 if none)."""
    where = np.array(records, dtype=np.int64)
    found = _as_of(packets.seq[where], where, packets.seq[at], at)
    return found, np.append(where, -1)[found]  # found -1: the appended -1


def _read_vectorised(data: bytes | bytearray, reader: _Reader) -> None:
    """Fill ``reader`` as ``_Reader.read`` would, for the whole file at once; raises
    ``_HandOver`` for what it does not read exactly (``reader`` is then discarded)."""
    b = np.frombuffer(data, dtype=np.uint8)
    start, end = _packets(b)
    reader.n_packets = len(start)
    packets = _packet_columns(b, start, end)
    records = _state_packets(data, start, end, np.flatnonzero(packets.state), reader)
    del start, end

    # Every track event counts; those needing a lost incremental state are skipped. Every
    # one is scanned (upb decodes them all: a bad one is an error).
    reader.n_events = len(packets.events)
    if not reader.n_events:
        raise _HandOver  # nothing to read: the general path's error
    fields, legacy = _event_columns(b, packets.event_start, packets.event_end)
    packets.event_start = packets.event_end = np.zeros(0, dtype=np.int64)  # freed
    if legacy.any():
        raise _HandOver
    events = packets.events
    cleared = _latest(packets, records.clears, events)[1]
    valid = cleared > _latest(packets, records.drops, events)[1]
    skipped = ((packets.flags[events] & _SEQ_NEEDS_INCREMENTAL_STATE) != 0) & ~valid
    reader.skipped_state = int(skipped.sum())
    if reader.skipped_state:
        kept = np.flatnonzero(~skipped)
        events, cleared = events[kept], cleared[kept]
        fields = {k: column[kept] for k, column in fields.items()}
    del valid, skipped

    # trace_packet_defaults: the latest since the sequence's last clear
    default_clock = np.zeros(len(events), dtype=np.int64)
    default_track = np.zeros(len(events), dtype=np.uint64)
    if records.defaults:
        index, found = _latest(packets, [d[0] for d in records.defaults], events)
        live = (found >= 0) & (found >= cleared)
        clocks = np.array([d[1] for d in records.defaults], dtype=np.int64)
        tracks = np.array([d[2] for d in records.defaults], dtype=np.uint64)
        default_clock = np.where(live, clocks[index], 0)
        default_track = np.where(live, tracks[index], np.uint64(0))
        del index, found, live

    # Time: the packet's clock, else its sequence's default, else the boot clock.
    clock = packets.clock_id[events].astype(np.int64)
    clock = np.where(clock != 0, clock, default_clock)
    clock[clock == 0] = _BOOT_CLOCK
    ts = packets.ts[events]
    _sequence_clocks(packets, records, events, ts, clock)

    # Kinds: slices kept; instants, counters and the rest counted.
    kind = (fields[9].value & _U32).astype(np.int64)
    for phase, count in (("i", int((kind == _TYPE_INSTANT).sum())),
                         ("C", int((kind == _TYPE_COUNTER).sum())),
                         ("?", int(((kind < _TYPE_BEGIN) | (kind > _TYPE_COUNTER)).sum()))):
        if count:
            reader.ignored[phase] = count
    slices = np.flatnonzero((kind == _TYPE_BEGIN) | (kind == _TYPE_END))
    reader.code = kind[slices].astype(np.uint8)
    reader.ts = ts[slices]
    del kind, ts
    events, cleared = events[slices], cleared[slices]
    if not len(slices):
        reader.track_id = reader.name_id = np.zeros(0, dtype=np.int32)
        return
    reader.track_id = _tracks(reader, packets, events, fields[11].value[slices],
                              default_track[slices], clock[slices])
    del default_track, default_clock, clock
    reader.name_id = _names(data, reader, packets, records, events, cleared, fields, slices)


def _event_columns(b: np.ndarray, start: np.ndarray,
                   end: np.ndarray) -> tuple[dict[int, _Column], np.ndarray]:
    """The track events' fields (in blocks), and which hold a legacy event."""
    m = len(start)
    columns = {k: _Column(np.zeros(m, dtype=np.uint64), np.zeros(m, dtype=bool),
                          np.zeros(m, dtype=np.int64) if wire == 2 else None)
               for k, wire in _EVENT_FIELDS.items()}
    legacy = np.zeros(m, dtype=bool)
    for lo in range(0, m, _BLOCK):
        part = slice(lo, lo + _BLOCK)
        block, legacy[part] = _fields(b, start[part], end[part], _EVENT_LAYOUT)
        for k, column in block.items():
            columns[k].value[part] = column.value
            columns[k].present[part] = column.present
            if column.offset is not None:
                columns[k].offset[part] = column.offset  # type: ignore[index]
    return columns, legacy


def _sequence_clocks(packets: _Packets, records: _Records, events: np.ndarray,
                     ts: np.ndarray, clock: np.ndarray) -> None:
    """Sequence-scoped clocks (ids from 64) converted through their sequence's latest
    snapshot into its global clock, in place: incremental ones summed since the snapshot
    over every packet that advances them (kept events, and timestamped packets without a
    track event on such a clock)."""
    scoped = np.flatnonzero(clock >= _FIRST_SEQUENCE_CLOCK)
    no_event = np.ones(len(packets.ts), dtype=bool)
    no_event[packets.events] = False
    others = np.flatnonzero(no_event & packets.has_ts)
    del no_event
    if others.size:  # their clock: the packet's, else the sequence's default
        other_clock = packets.clock_id[others].astype(np.int64)
        if records.defaults:
            index, found = _latest(packets, [d[0] for d in records.defaults], others)
            cleared = _latest(packets, records.clears, others)[1]
            live = (found >= 0) & (found >= cleared)
            clocks = np.array([d[1] for d in records.defaults], dtype=np.int64)
            other_clock = np.where(other_clock != 0, other_clock,
                                   np.where(live, clocks[index], 0))
        keep = other_clock >= _FIRST_SEQUENCE_CLOCK
        others, other_clock = others[keep], other_clock[keep]
    if not scoped.size and not others.size:
        return
    moving, moving_clock = events[scoped], clock[scoped]
    if others.size:
        moving = np.concatenate([moving, others])
        order = np.argsort(moving, kind="stable")
        moving = moving[order]
        moving_clock = np.concatenate([moving_clock, other_clock])[order]
    snapshots = records.snapshots
    snap_clock = np.array([s[1] for s in snapshots], dtype=np.int64)
    n_clocks = max(int(moving_clock.max()), int(snap_clock.max(initial=0))) + 1  # < 2**32
    group = packets.seq[moving] * n_clocks + moving_clock
    del moving_clock
    snap_packet = np.array([s[0] for s in snapshots], dtype=np.int64)
    snap_group = packets.seq[snap_packet] * n_clocks + snap_clock
    found = _as_of(snap_group, snap_packet, group, moving)
    del group
    if (found < 0).any():
        raise _HandOver  # a clock without snapshot: the general path's error
    params = [s[2] for s in snapshots]  # [last, snapshot, multiplier, base, base ns, incr]
    if any(abs(v) >= _SAFE for s in params for v in s):
        raise _HandOver
    snap_ts, multiplier, base, base_ns, incremental = (
        np.array([s[k] for s in params], dtype=np.int64) for k in (1, 2, 3, 4, 5))
    raw = packets.ts[moving]
    if int(raw.sum(dtype=np.float64)) >= _SAFE:  # raw >= 0: no sum below overflows
        raise _HandOver
    # incremental: each value is the sum of the deltas since its snapshot
    value = raw - snap_ts[found]
    used = np.flatnonzero((np.bincount(found, minlength=len(snapshots)) > 0)
                          & (incremental != 0))
    if len(used) <= 32:  # few snapshots (one per sequence, typically): one pass each
        for snapshot in used.tolist():
            at = np.flatnonzero(found == snapshot)
            value[at] = np.cumsum(raw[at])
    else:  # a stable sort by snapshot keeps file order within each
        by_snapshot = np.argsort(found, kind="stable")
        sorted_raw = raw[by_snapshot]
        total = np.cumsum(sorted_raw)
        first = np.r_[True, found[by_snapshot][1:] != found[by_snapshot][:-1]]
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(first)), 0))
        summed = np.empty_like(raw)
        summed[by_snapshot] = total - (total - sorted_raw)[group_start]
        value = np.where(incremental[found] != 0, summed, value)
    del raw
    if (max(abs(int(value.max())), abs(int(value.min()))) * int(np.abs(multiplier).max())
            + int(np.abs(base_ns).max()) >= _SAFE):
        raise _HandOver
    converted = base_ns[found] + value * multiplier[found]
    mine = np.searchsorted(moving, events[scoped]) if others.size else slice(None)
    ts[scoped] = converted[mine]
    clock[scoped] = base[found[mine]]


def _tracks(reader: _Reader, packets: _Packets, events: np.ndarray, uuid: np.ndarray,
            default_track: np.ndarray, clock: np.ndarray) -> np.ndarray:
    """Each slice's track (numbered in order of first use, into ``reader.tracks``):
    track_uuid, else the sequence's default, else the sequence itself."""
    uuid = np.where(uuid != 0, uuid, default_track)
    by_sequence = uuid == 0
    key = np.where(by_sequence, packets.sequences[packets.seq[events]].astype(np.uint64),
                   uuid)
    del uuid
    # runs of one track (packets come in chunks per sequence): unique over the runs only
    change = np.r_[True, (key[1:] != key[:-1]) | (by_sequence[1:] != by_sequence[:-1])]
    run_start = np.flatnonzero(change)
    _, first_run, run_track = np.unique(np.c_[by_sequence[run_start], key[run_start]],
                                        return_index=True, return_inverse=True, axis=0)
    first = run_start[first_run]
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    track: np.ndarray = rank[run_track.reshape(-1)][np.cumsum(change) - 1].astype(np.int32)
    track_clock = np.zeros(len(first), dtype=np.int64)
    track_clock[track] = clock
    if (track_clock[track] != clock).any():
        raise _HandOver  # a track on two clocks: the general path's error
    for k in np.argsort(first).tolist():
        raw_key = int(key[first[k]])
        reader.tracks[("sequence", raw_key) if by_sequence[first[k]] else raw_key] = int(rank[k])
        reader.track_clock[int(rank[k])] = int(track_clock[rank[k]])
    return track


def _names(data: bytes | bytearray, reader: _Reader, packets: _Packets, records: _Records,
           events: np.ndarray, cleared: np.ndarray, fields: dict[int, _Column],
           slices: np.ndarray) -> np.ndarray:
    """Each slice's name (numbered in order of first use, into ``reader.names``): name_iid
    through its sequence's interned names since its last clear, else name. ``fields``: of
    every kept event; ``slices``: the slices among them."""
    iid = fields[10].value[slices]
    labels: dict[str, int] = {}
    label = np.zeros(len(iid), dtype=np.int64)
    named = np.flatnonzero(iid == 0)
    if named.size:  # an END has no name: "" (as upb reads an absent field)
        label[named] = labels.setdefault("", len(labels))
        named = named[fields[23].present[slices[named]]]
    if named.size:
        offset = fields[23].offset
        assert offset is not None  # a length-delimited field
        starts = offset[slices[named]].tolist()
        ends = (offset[slices[named]] + fields[23].value[slices[named]].astype(np.int64)).tolist()
        by_bytes: dict[bytes, int] = {}
        raw_names = [bytes(data[s:e]) for s, e in zip(starts, ends, strict=True)]
        try:
            for raw_name in set(raw_names):
                by_bytes[raw_name] = labels.setdefault(raw_name.decode(), len(labels))
        except UnicodeDecodeError:
            raise _HandOver from None
        label[named] = [by_bytes[raw_name] for raw_name in raw_names]
    by_iid = np.flatnonzero(iid != 0)
    interned = records.interned
    if by_iid.size:
        if (iid[by_iid] >= np.uint64(1 << 32)).any() or any(e[1] >= 1 << 32 for e in interned):
            raise _HandOver
        where = events[by_iid]
        iids = max(int(iid[by_iid].max()), max((e[1] for e in interned), default=0)) + 1
        wanted = packets.seq[where] * iids + iid[by_iid].astype(np.int64)
        found = np.full(len(by_iid), -1, dtype=np.int64)
        if interned:
            def_packet = np.array([e[0] for e in interned], dtype=np.int64)
            def_group = packets.seq[def_packet] * iids + np.array(
                [e[1] for e in interned], dtype=np.int64)
            found = _as_of(def_group, def_packet, wanted, where)
            dead = found >= 0
            dead[dead] = def_packet[found[dead]] < cleared[by_iid[dead]]
            found[dead] = -1  # defined before the sequence's last clear
        del wanted, where
        def_label = np.array([labels.setdefault(e[2], len(labels)) for e in interned]
                             + [0], dtype=np.int64)
        label[by_iid] = def_label[found]
        missing = np.flatnonzero(found < 0)
        reader.missing_names = len(missing)
        if missing.size:
            label[by_iid[missing]] = [labels.setdefault(f"(unknown name iid {k})", len(labels))
                                      for k in iid[by_iid[missing]].tolist()]
    # names numbered in order of first use
    texts = list(labels)
    first_use = np.full(len(labels), len(label), dtype=np.int64)
    np.minimum.at(first_use, label, np.arange(len(label)))
    order = np.argsort(first_use)[: int((first_use < len(label)).sum())]
    rank = np.zeros(len(labels), dtype=np.int32)
    rank[order] = np.arange(len(order))
    reader.names = {texts[k]: i for i, k in enumerate(order.tolist())}
    return rank[label]


def _pieces(data: bytes | bytearray, fail: Any) -> list[tuple[int, int]]:
    """(start, end) of runs of whole packets of about _PIECE_BYTES: the one walk over the
    top level of the Trace message, which also finds a truncated or foreign file."""
    n = len(data)
    pieces = []
    i = start = 0
    while i < n:
        if data[i] != _PACKET_TAG:
            if i == 0:
                char = chr(data[0]) if chr(data[0]).isprintable() else f"0x{data[0]:02x}"
                raise fail(f"it starts with {char!r}"
                           " at byte 0, where JSON has '[' or '{' and a Perfetto trace a packet "
                           "(0x0a)")
            raise fail(f"byte {i} does not start a trace packet (0x{data[i]:02x}, expected 0x0a)")
        b = data[i + 1] if i + 1 < n else 0x80
        if b < 0x80:  # a length of one byte: most packets
            j, length = i + 2, b
        else:
            j, length, shift = i + 1, 0, 0
            while True:
                if j >= n:
                    raise fail(f"truncated: the packet at byte {i} ends inside its length")
                b = data[j]
                j += 1
                length |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift >= 64:
                    raise fail(f"bad varint: the length of the packet at byte {i}")
        i = j + length
        if i > n:
            raise fail(
                f"truncated: the packet at byte {j} claims {length:,} bytes, {n - j:,} are left"
            )
        if i - start >= _PIECE_BYTES:
            pieces.append((start, i))
            start = i
    if start < n:
        pieces.append((start, n))
    return pieces


def read_events(data: bytes | bytearray, name: str, error: type[UserError]) -> Events:
    """The slice events of a Perfetto trace (the bytes of a Trace message).

    Raises ``error`` ("<name>: <reason>") for anything that is not a usable trace.
    """

    def fail(reason: str) -> UserError:
        return error(f"{name}: not a JSON or Perfetto trace: {reason}")

    reader = _Reader(name, error)
    try:
        _read_vectorised(data, reader)
    except _HandOver:
        reader = _Reader(name, error)
        _read_general(data, reader, fail)
    if reader.n_packets == 0:
        raise fail("no trace packets")
    if reader.n_events == 0:
        raise error(f"{name}: a Perfetto trace ({reader.n_packets:,} packets) without track "
                    "events: nothing to measure")
    return reader.events()


def _read_general(data: bytes | bytearray, reader: _Reader, fail: Any) -> None:
    """Every packet through upb and ``_Reader.read``, in pieces of about _PIECE_BYTES."""
    view = memoryview(data)
    try:
        for start, end in _pieces(data, fail):
            try:
                trace = _Trace.FromString(view[start:end])
            except message.DecodeError:
                raise fail(f"a packet between bytes {start:,} and {end:,} does not decode "
                           "as a Perfetto trace packet") from None
            reader.read(trace.packet)
            del trace
    finally:
        view.release()
