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
Packets are decoded by the ``protobuf`` package's C parser (upb) against a schema that
declares only the fields above (every other field is skipped as unknown bytes, never
built), in pieces of ``_PIECE_BYTES`` of whole packets so that the decoded messages of the
whole file never exist at once; one Python loop over the packets of a piece appends to
``array`` columns (8 + 1 + 4 + 4 bytes per event). A hand-written wire walker in Python was
measured slower (2.1 µs per event on the simplest packets against 1.4 µs for upb and the
loop). The figures: docs/architecture.md, "Trace parsing".
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
        self.ts = array("q")
        self.code = array("B")
        self.name_id = array("i")
        self.track_id = array("i")
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
    if reader.n_packets == 0:
        raise fail("no trace packets")
    if reader.n_events == 0:
        raise error(f"{name}: a Perfetto trace ({reader.n_packets:,} packets) without track "
                    "events: nothing to measure")
    return reader.events()
