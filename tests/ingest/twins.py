"""One trace's events written twice: as Chrome JSON and as a Perfetto protobuf trace.

The protobuf side is built with the ``perfetto`` package's ``TraceProtoBuilder`` (its
bindings of the trace proto), the way the Perfetto SDK and Chrome write: one packet
sequence per thread that starts with ``SEQ_INCREMENTAL_STATE_CLEARED``, track descriptors
for each process and thread, names interned per sequence, the thread's track as the
sequence's default ``track_uuid``, and optionally timestamps on an incremental
sequence-scoped clock (64) defined by a clock snapshot. Used by test_perfetto.py,
test_fuzz.py and tests/benchmarks/perfetto_reader.py.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

#: Events of a thread in time order: ("B", name, ts_us), ("E", ts_us), ("I", name, ts_us).
Event = tuple


@dataclass
class Thread:
    tid: int
    name: str | None
    events: list[Event] = field(default_factory=list)


@dataclass
class Process:
    pid: int
    name: str | None
    threads: list[Thread] = field(default_factory=list)


def to_json(processes: list[Process]) -> bytes:
    out: list[dict] = []
    for p in processes:
        if p.name is not None:
            out.append({"ph": "M", "name": "process_name", "pid": p.pid, "tid": 0,
                        "args": {"name": p.name}})
        for t in p.threads:
            if t.name is not None:
                out.append({"ph": "M", "name": "thread_name", "pid": p.pid, "tid": t.tid,
                            "args": {"name": t.name}})
            for ev in t.events:
                if ev[0] == "E":
                    out.append({"ph": "E", "pid": p.pid, "tid": t.tid, "ts": ev[1]})
                else:
                    out.append({"ph": "B" if ev[0] == "B" else "i", "name": ev[1],
                                "pid": p.pid, "tid": t.tid, "ts": ev[2]})
    return json.dumps({"traceEvents": out}).encode()


_BOOT_NS = 10**15  # a boot clock in ns far from 0, as on a machine up for 11 days
_INCREMENTAL_CLOCK = 64


def to_perfetto(processes: list[Process], *, incremental_clock: bool = False,
                interned: bool = True, chunk: int = 7, seed: int = 0) -> bytes:
    """The same events as a Perfetto trace; threads' packets interleaved in chunks."""
    builder = TraceProtoBuilder()
    uuid = 1000
    sequences: list[list[pb.TracePacket]] = []
    for p in processes:
        uuid += 1
        process_uuid = uuid
        desc = builder.add_packet()
        desc.track_descriptor.uuid = process_uuid
        desc.track_descriptor.process.pid = p.pid
        if p.name is not None:
            desc.track_descriptor.process.process_name = p.name
        for t in p.threads:
            uuid += 1
            desc = builder.add_packet()
            desc.track_descriptor.uuid = uuid
            desc.track_descriptor.parent_uuid = process_uuid
            desc.track_descriptor.thread.pid = p.pid
            desc.track_descriptor.thread.tid = t.tid
            if t.name is not None:
                desc.track_descriptor.thread.thread_name = t.name
            sequences.append(_sequence(t, uuid, len(sequences) + 1, incremental_clock,
                                       interned))
    rng = random.Random(seed)
    cursors = [0] * len(sequences)
    while any(c < len(s) for c, s in zip(cursors, sequences, strict=True)):
        i = rng.randrange(len(sequences))
        for packet in sequences[i][cursors[i] : cursors[i] + chunk]:
            builder.add_packet().CopyFrom(packet)
        cursors[i] += chunk
    return builder.serialize()


def _sequence(t: Thread, track: int, seq: int, incremental_clock: bool,
              interned: bool) -> list[pb.TracePacket]:
    first = pb.TracePacket()
    first.trusted_packet_sequence_id = seq
    first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    first.trace_packet_defaults.track_event_defaults.track_uuid = track
    packets = [first]
    last_ns = _BOOT_NS
    if incremental_clock:
        first.timestamp = _BOOT_NS
        first.timestamp_clock_id = 6
        first.trace_packet_defaults.timestamp_clock_id = _INCREMENTAL_CLOCK
        boot = first.clock_snapshot.clocks.add()
        boot.clock_id, boot.timestamp = 6, _BOOT_NS
        inc = first.clock_snapshot.clocks.add()
        inc.clock_id, inc.timestamp, inc.is_incremental = _INCREMENTAL_CLOCK, _BOOT_NS, True
    iids: dict[str, int] = {}
    for ev in t.events:
        packet = pb.TracePacket()
        packet.trusted_packet_sequence_id = seq
        packet.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        ts_ns = _BOOT_NS + round(ev[-1] * 1000)
        packet.timestamp = ts_ns - last_ns if incremental_clock else ts_ns
        last_ns = ts_ns
        te = packet.track_event
        if ev[0] == "E":
            te.type = pb.TrackEvent.TYPE_SLICE_END
        else:
            te.type = (pb.TrackEvent.TYPE_SLICE_BEGIN if ev[0] == "B"
                       else pb.TrackEvent.TYPE_INSTANT)
            if interned:
                if ev[1] not in iids:
                    iids[ev[1]] = len(iids) + 1
                    entry = packet.interned_data.event_names.add()
                    entry.iid, entry.name = iids[ev[1]], ev[1]
                te.name_iid = iids[ev[1]]
            else:
                te.name = ev[1]
        packets.append(packet)
    return packets


def random_thread_events(rng: random.Random, names: list[str], n_tasks: int,
                         t0: int = 0, unfinished: bool = True) -> list[Event]:
    """Random nesting trees (recursion included: names repeat down a stack), zero-length
    slices, instants, and unfinished slices at the end."""
    events: list[Event] = []
    now = t0

    def slice_(depth: int) -> None:
        nonlocal now
        events.append(("B", rng.choice(names), now))
        now += rng.randrange(0, 3)
        for _ in range(rng.randrange(0, 4) if depth < 6 else 0):
            slice_(depth + 1)
            now += rng.randrange(0, 3)
        if rng.random() < 0.1:
            events.append(("I", rng.choice(names), now))
        now += rng.randrange(0, 5)
        events.append(("E", now))

    for _ in range(n_tasks):
        slice_(0)
        now += rng.randrange(1, 20)
    if unfinished:
        for _ in range(rng.randrange(0, 3)):
            events.append(("B", rng.choice(names), now))
            now += rng.randrange(1, 9)
        events.append(("I", "last", now))
    return events


def chrome_like(rng: random.Random, tasks: int, names: list[str] | None = None) -> list[Process]:
    """A Browser (CrBrowserMain, an IO thread) and two Renderers (CrRendererMain,
    Compositor), each thread with random tasks."""
    pool = names or ["RunTask", "ParseHTML", "Layout", "Paint", "v8.run", "FunctionCall",
                     "EvaluateScript", "Функция", "<b>&amp;</b>", ""]

    def thread(tid: int, name: str) -> Thread:
        return Thread(tid, name, random_thread_events(rng, pool, tasks, t0=rng.randrange(100)))

    return [
        Process(10, "Browser", [thread(10, "CrBrowserMain"), thread(11, "Chrome_IOThread")]),
        Process(20, "Renderer", [thread(1, "CrRendererMain"), thread(21, "Compositor")]),
        Process(30, "Renderer", [thread(1, "CrRendererMain"), thread(31, "Compositor")]),
    ]
