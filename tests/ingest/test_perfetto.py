"""Perfetto protobuf traces: the same times as their JSON twin, and clear refusals."""

from __future__ import annotations

import gzip
import random

import numpy as np
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

from ingest import perfetto
from ingest.traces import FunctionTimes, TraceError, parse_trace
from tests.ingest.twins import Process, Thread, chrome_like, to_json, to_perfetto


def _as_dict(ft: FunctionTimes) -> dict[str, tuple[float, float, int]]:
    return {n: (float(s), float(t), int(c))
            for n, s, t, c in zip(ft.names, ft.self_us, ft.total_us, ft.calls, strict=True)}


def assert_twins(processes: list[Process], **options: object) -> FunctionTimes:
    """JSON and protobuf of the same events give the same times (several selections)."""
    for selection in ({}, {"all_threads": True},
                      {"thread_name": "CrBrowserMain", "process_name": "Browser"}):
        try:
            from_json = parse_trace(to_json(processes), display_name="t", **selection)
        except TraceError as exc:  # the same refusal, word for word
            refusal = str(exc)
        else:
            refusal = ""
        if refusal:
            with pytest.raises(TraceError) as info:
                parse_trace(to_perfetto(processes, **options),  # type: ignore[arg-type]
                            display_name="t", **selection)
            assert str(info.value) == refusal
            continue
        from_proto = parse_trace(to_perfetto(processes, **options),  # type: ignore[arg-type]
                                 display_name="t", **selection)
        assert sorted(from_proto.names) == sorted(from_json.names)  # order: first in the file
        got, want = _as_dict(from_proto), _as_dict(from_json)
        for name in want:
            assert got[name] == pytest.approx(want[name], abs=1e-6), name
        assert from_proto.summary.selected_threads == from_json.summary.selected_threads
        assert from_proto.summary.unclosed_begin == from_json.summary.unclosed_begin
    return from_proto


def test_the_schema_matches_perfettos_trace_proto() -> None:
    """Every field the reader declares has Perfetto's number and wire type."""
    wire = {4: 0, 13: 0, 5: 0, 3: 0, 8: 0, 14: 0, 9: 2, 11: 2}  # varint / length-delimited
    messages = {"Trace": pb.Trace, "TracePacket": pb.TracePacket, "TrackEvent": pb.TrackEvent,
                "LegacyEvent": pb.TrackEvent.LegacyEvent, "InternedData": pb.InternedData,
                "EventName": pb.EventName, "TracePacketDefaults": pb.TracePacketDefaults,
                "TrackEventDefaults": pb.TrackEventDefaults, "ClockSnapshot": pb.ClockSnapshot,
                "Clock": pb.ClockSnapshot.Clock, "TrackDescriptor": pb.TrackDescriptor,
                "ProcessDescriptor": pb.ProcessDescriptor, "ThreadDescriptor": pb.ThreadDescriptor,
                "ChromeProcessDescriptor": pb.ChromeProcessDescriptor,
                "ChromeThreadDescriptor": pb.ChromeThreadDescriptor}
    for msg, name, number, kind, repeated in perfetto.SCHEMA:
        real = messages[msg].DESCRIPTOR.fields_by_name[name]
        assert real.number == number, (msg, name)
        assert real.is_repeated == repeated, (msg, name)
        if isinstance(kind, str):
            assert real.message_type.name == kind, (msg, name)
        else:
            assert wire[real.type] == wire[kind], (msg, name)


def test_nested_slices_recursion_and_unfinished_slices() -> None:
    renderer = Thread(1, "CrRendererMain", [
        ("B", "Task", 0), ("B", "f", 1), ("B", "f", 2), ("B", "g", 3), ("E", 5), ("E", 6),
        ("E", 8), ("I", "mark", 9), ("E", 10),
        ("B", "Task", 20), ("B", "open", 25), ("B", "g", 26), ("E", 30),  # two left open
    ])
    result = assert_twins([Process(7, "Renderer", [renderer])])
    times = _as_dict(result)
    assert times["Task"] == (10 - 7 + 30 - 20 - 5, 10 + 10, 2)
    assert times["f"] == (7 - 4 + 4 - 2, 7, 2)  # recursion counted once in total
    assert times["g"] == (2 + 4, 6, 2)
    assert times["open"] == (1, 5, 1)
    assert result.summary.unclosed_begin == 2
    assert result.summary.ignored_phases == {"i": 1}


@pytest.mark.parametrize("incremental_clock", [False, True])
@pytest.mark.parametrize("interned", [True, False])
def test_chrome_like_twins(incremental_clock: bool, interned: bool) -> None:
    processes = chrome_like(random.Random(5), tasks=30)
    result = assert_twins(processes, incremental_clock=incremental_clock, interned=interned)
    assert [(t.pid, t.thread_name) for t in result.summary.selected_threads] == [
        (10, "CrBrowserMain")]


@pytest.mark.parametrize("seed", range(12))
def test_random_traces_are_twins(seed: int) -> None:
    """Property: random nesting trees on random threads, several processes."""
    rng = random.Random(seed)
    processes = chrome_like(rng, tasks=rng.randrange(1, 40),
                            names=[f"fn{i}" for i in range(rng.randrange(1, 8))])
    assert_twins(processes, incremental_clock=bool(seed % 2), seed=seed,
                 chunk=rng.randrange(1, 20))


def test_default_selection_takes_both_renderers() -> None:
    processes = chrome_like(random.Random(1), tasks=5)
    result = parse_trace(to_perfetto(processes), display_name="t.pftrace")
    assert [(t.pid, t.tid, t.process_name, t.thread_name)
            for t in result.summary.selected_threads] == [
        (20, 1, "Renderer", "CrRendererMain"), (30, 1, "Renderer", "CrRendererMain")]


def test_gzip_and_stream_and_path(tmp_path: object) -> None:
    data = to_perfetto(chrome_like(random.Random(2), tasks=5))
    want = _as_dict(parse_trace(data))
    path = tmp_path / "run.pftrace.gz"  # type: ignore[operator]
    path.write_bytes(gzip.compress(data))
    assert _as_dict(parse_trace(path)) == want


def _packet_trace(*fill: object) -> bytes:
    builder = TraceProtoBuilder()
    for f in fill:
        f(builder.add_packet())  # type: ignore[operator]
    return builder.serialize()


def _thread(p: pb.TracePacket, uuid: int = 1, pid: int = 5, tid: int = 1,
            name: str = "CrRendererMain") -> None:
    p.track_descriptor.uuid = uuid
    p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = pid, tid
    p.track_descriptor.thread.thread_name = name


def _event(kind: int, ts: int, name: str = "", uuid: int = 1, **packet: int) -> object:
    def fill(p: pb.TracePacket) -> None:
        p.timestamp = ts
        p.track_event.type = kind
        p.track_event.track_uuid = uuid
        if name:
            p.track_event.name = name
        for k, v in packet.items():
            setattr(p, k, v)
    return fill


B, E = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END


def test_chrome_process_and_thread_types_name_them() -> None:
    def process(p: pb.TracePacket) -> None:
        p.track_descriptor.uuid = 9
        p.track_descriptor.process.pid = 5
        p.track_descriptor.chrome_process.process_type = 2  # PROCESS_RENDERER

    def thread(p: pb.TracePacket) -> None:
        p.track_descriptor.uuid = 1
        p.track_descriptor.parent_uuid = 9
        p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = 5, 3
        p.track_descriptor.chrome_thread.thread_type = 1  # the main thread

    data = _packet_trace(process, thread, _event(B, 1000, "a"), _event(E, 3000))
    result = parse_trace(data)
    assert result.names == ["a"]
    assert result.total_us.tolist() == [2.0]
    assert result.summary.selected_threads[0].process_name == "Renderer"
    assert result.summary.selected_threads[0].thread_name == "CrRendererMain"


def test_legacy_thread_descriptor_and_delta_timestamps() -> None:
    """Chrome before the track descriptors: a thread_descriptor packet per sequence and
    timestamp_delta_us on the track events (the sequence's default track)."""
    def descriptor(p: pb.TracePacket) -> None:
        p.trusted_packet_sequence_id = 3
        p.incremental_state_cleared = True
        p.thread_descriptor.pid, p.thread_descriptor.tid = 5, 7
        p.thread_descriptor.thread_name = "CrRendererMain"
        p.thread_descriptor.reference_timestamp_us = 1_000_000

    def event(kind: int, delta: int, name: str = "") -> object:
        def fill(p: pb.TracePacket) -> None:
            p.trusted_packet_sequence_id = 3
            p.track_event.type = kind
            p.track_event.timestamp_delta_us = delta
            if name:
                p.track_event.name = name
        return fill

    data = _packet_trace(descriptor, event(B, 10, "a"), event(B, 5, "b"), event(E, 20),
                         event(E, 1))
    assert _as_dict(parse_trace(data, all_threads=True)) == {"a": (6.0, 26.0, 1),
                                                             "b": (20.0, 20.0, 1)}


def test_legacy_complete_events_and_other_phases() -> None:
    def legacy(phase: str, ts: int, dur: int = 0) -> object:
        def fill(p: pb.TracePacket) -> None:
            p.timestamp = ts
            p.track_event.track_uuid = 1
            p.track_event.name = "x"
            p.track_event.legacy_event.phase = ord(phase)
            p.track_event.legacy_event.duration_us = dur
        return fill

    result = parse_trace(_packet_trace(_thread, legacy("X", 1000, 7), legacy("n", 2000)),
                         all_threads=True)
    assert _as_dict(result) == {"x": (7.0, 7.0, 1)}
    assert result.summary.ignored_phases == {"n": 1}


def test_packets_needing_lost_incremental_state_are_skipped() -> None:
    needs = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    data = _packet_trace(
        _thread,
        _event(B, 1000, "lost", trusted_packet_sequence_id=4, sequence_flags=needs),
        _event(E, 2000, trusted_packet_sequence_id=4, sequence_flags=needs),
        _event(B, 3000, "kept", trusted_packet_sequence_id=4, sequence_flags=1),
        _event(E, 4000, trusted_packet_sequence_id=4, sequence_flags=needs),
    )
    result = parse_trace(data, all_threads=True)
    assert _as_dict(result) == {"kept": (1.0, 1.0, 1)}
    assert any("2 track event(s)" in note for note in result.summary.notes)


def test_a_thread_on_two_clocks_is_refused() -> None:
    data = _packet_trace(_thread, _event(B, 1000, "a"),
                         _event(E, 2000, timestamp_clock_id=3))
    with pytest.raises(TraceError, match=r"^t\.pftrace: .*two clocks"):
        parse_trace(data, display_name="t.pftrace", all_threads=True)


def test_a_sequence_clock_without_snapshot_is_refused() -> None:
    data = _packet_trace(_thread, _event(B, 1000, "a", timestamp_clock_id=64))
    with pytest.raises(TraceError, match=r"^t\.pftrace: clock 64 .* without a clock snapshot"):
        parse_trace(data, display_name="t.pftrace", all_threads=True)


def test_a_renderer_is_required_by_default() -> None:
    data = _packet_trace(lambda p: _thread(p, name="Compositor"), _event(B, 1000, "a"),
                         _event(E, 2000))
    with pytest.raises(TraceError, match=r"no thread named CrRendererMain.*Compositor"):
        parse_trace(data, display_name="t.pftrace")


_GOOD = to_perfetto(chrome_like(random.Random(3), tasks=3))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (_GOOD[: len(_GOOD) // 2], "truncated"),
        (_GOOD[:-1], "truncated"),
        (bytes(random.Random(1).randrange(256) for _ in range(500)), "not a JSON or Perfetto"),
        (b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "bad varint"),
        (b"\x0a\x05\x58", "truncated"),
        (gzip.compress(_GOOD)[:-30], "truncated gzip"),
        (b"\x08\x05", "byte 0"),  # field 1 as a varint: not a packet
        (b"\x0a\x02\x58\x01", "without track events"),  # one packet, timestamp only
        (b"\x0a\x03\x5a\x01\x48", "does not decode"),  # track_event cut inside its field
        (b"\x0a\x02\x5a\x05", "does not decode"),  # track_event claims 5 bytes of 0
        (b"\x0a\x00" * 3, "without track events"),
    ],
)
def test_bad_input_is_one_error_naming_the_file(data: bytes, fragment: str) -> None:
    with pytest.raises(TraceError) as info:
        parse_trace(data, display_name="bad.pftrace")
    assert str(info.value).startswith("bad.pftrace: ")
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_the_size_limit_holds_for_protobuf() -> None:
    with pytest.raises(TraceError, match="larger than the limit"):
        parse_trace(_GOOD, display_name="big.pftrace", max_bytes=100)


def test_events_columns() -> None:
    events = perfetto.read_events(_GOOD, "g", TraceError)
    assert events.n_events == len(events.code) + sum(events.ignored.values())
    assert set(np.unique(events.code).tolist()) <= {perfetto.BEGIN, perfetto.END}
    assert len(events.threads) == 6


def _both_paths(data: bytes | bytearray) -> tuple[object, object]:
    """(vectorised, general) readings of ``data``: Events, an error message, or None where
    the vectorised path hands the file to the general one."""

    def fail(reason: str) -> TraceError:
        return TraceError(reason)

    results: list[object] = []
    for read in (perfetto._read_vectorised, lambda d, r: perfetto._read_general(d, r, fail)):
        reader = perfetto._Reader("t", TraceError)
        try:
            read(data, reader)
            results.append(reader.events())
        except perfetto._HandOver:
            results.append(None)
        except TraceError as exc:
            results.append(str(exc))
    return results[0], results[1]


def _same_events(a: perfetto.Events, b: perfetto.Events) -> bool:
    for key in a.__dataclass_fields__:
        x, y = getattr(a, key), getattr(b, key)
        if isinstance(x, np.ndarray):
            if x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=True):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize(("incremental_clock", "interned"),
                         [(False, True), (True, True), (True, False), (False, False)])
def test_the_vectorised_path_reads_the_common_shape(incremental_clock: bool,
                                                    interned: bool) -> None:
    """Builder-made traces take the vectorised path, with the general path's columns."""
    data = to_perfetto(chrome_like(random.Random(5), tasks=20),
                       incremental_clock=incremental_clock, interned=interned)
    for source in (data, bytearray(data)):  # a stream is read into a bytearray
        fast, general = _both_paths(source)
        assert isinstance(fast, perfetto.Events)
        assert isinstance(general, perfetto.Events)
        assert _same_events(fast, general)


def test_the_vectorised_path_reads_instants_only() -> None:
    instants = [Process(5, "Renderer", [Thread(1, "CrRendererMain", [
        ("I", "a", 1), ("I", "b", 2)])])]
    fast, general = _both_paths(to_perfetto(instants))
    assert isinstance(fast, perfetto.Events)
    assert isinstance(general, perfetto.Events)
    assert _same_events(fast, general)
    assert fast.ignored == {"i": 2}
    assert len(fast.code) == 0


def test_the_vectorised_path_agrees_or_hands_over_on_mutations() -> None:
    """On mutated traces the vectorised path gives the general path's columns, or hands the
    file over (never a different result, never a result where the general path refuses)."""
    from tests.ingest.mutations import cases

    small = [Process(5, "Renderer", [Thread(1, "CrRendererMain", [
        ("B", "A", 0), ("B", "B", 2), ("E", 5), ("I", "m", 6), ("E", 10), ("B", "A", 20)])])]
    seeds = [to_perfetto(small), to_perfetto(small, incremental_clock=True, interned=False),
             to_perfetto(chrome_like(random.Random(1), tasks=2), incremental_clock=True)]
    agreed = 0
    for i, data in cases(seeds, 3_000, seed=11):
        fast, general = _both_paths(data)
        if fast is None:
            continue
        assert isinstance(fast, perfetto.Events), (i, fast)
        assert isinstance(general, perfetto.Events), (i, general)
        assert _same_events(fast, general), i
        agreed += 1
    assert agreed > 50  # most mutations break the framing: refused by both
