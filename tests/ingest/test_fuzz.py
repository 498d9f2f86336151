"""Hostile input (hardening #8): seeded mutations of real and hand-made documents.

Every case either parses or raises the parser's ``UserError`` subclass with a message
naming the file; through the upload paths, a bad file fails alone, leaves no partial row
and no uploaded bytes behind. Bounded: ~60,000 parser cases and a few hundred uploads run
in seconds. ``python -m tests.ingest.mutations`` holds the mutator.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from deviations.core.errors import UserError
from deviations.core.models import ApiToken
from deviations.histograms.models import HistogramSnapshot, Probe
from deviations.histograms.store import store_histogram_file
from deviations.traces.models import Run, RunTimes
from ingest.ab import ABFormatError, parse_ab_file
from ingest.canaries import ObservationsError, parse_observations
from ingest.histograms import HistogramError, parse_histogram_file
from ingest.results import FORMATS, ResultsError, parse_results
from ingest.traces import TraceError, parse_trace
from tests.conftest import SHARED_DATA, plain_histogram, renderer_events
from tests.ingest.mutations import cases
from tests.ingest.twins import Process, Thread, chrome_like, to_perfetto

FIXTURES = SHARED_DATA / "traces" / "fixtures"
HISTOGRAMS = SHARED_DATA / "histograms"


def _trace_seeds() -> list[bytes]:
    own = [
        json.dumps({"traceEvents": renderer_events([("A", 0, 10), ("B", 2, 3), ("A", 20, 5)])}),
        json.dumps(renderer_events([("A", 0, 10)]) + [
            {"ph": "B", "name": "C", "pid": 7, "tid": 1, "ts": 30},
            {"ph": "E", "name": "C", "pid": 7, "tid": 1, "ts": 40},
        ]),
    ]
    files = ["catapult__simple_trace.json", "catapult__nestable_async.json",
             "catapult__nanoseconds.json"]
    # Real files as seeds where ../shared is beside the clone (CI); the suite's own
    # documents alone otherwise (a clone of the repository must pass by itself).
    # (Perfetto seeds are fuzzed on their own below: among these they would leave a clone
    # without ../shared too few JSON seeds to reach the parser's depths.)
    return [s.encode() for s in own] + [
        (FIXTURES / f).read_bytes() for f in files if (FIXTURES / f).is_file()]


def _perfetto_seeds() -> list[bytes]:
    """Perfetto protobuf traces: interned names, absolute and incremental clocks."""
    import random

    small = [Process(5, "Renderer", [Thread(1, "CrRendererMain", [
        ("B", "A", 0), ("B", "B", 2), ("E", 5), ("I", "m", 6), ("E", 10), ("B", "A", 20)])])]
    return [to_perfetto(small), to_perfetto(small, incremental_clock=True, interned=False),
            to_perfetto(chrome_like(random.Random(1), tasks=2), incremental_clock=True)]


def _histogram_seeds() -> list[bytes]:
    own = [json.dumps([plain_histogram("P", str(b), [1, 2, 3]) for b in (1, 2)]).encode(),
           json.dumps([plain_histogram("Q", str(b), [0, 5, 9, 4, 1]) for b in (1, 2, 3)])
           .encode()]
    files = ["glam__enumerated_histogram_version.json", "glam__boolean_histogram_version.json",
             "glam__exponential_histogram_version.json"]
    return own + [(HISTOGRAMS / f).read_bytes() for f in files if (HISTOGRAMS / f).is_file()]


def _fuzz(seeds: list[bytes], parse: Any, error: type[UserError], n: int) -> tuple[int, int]:
    parsed = refused = 0
    unnamed = []
    for i, data in cases(seeds, n, seed=2026):
        try:
            parse(data)
        except error as exc:
            refused += 1
            if not str(exc).startswith("fuzz.json:"):  # "fuzz.json: …" or "fuzz.json:3: …"
                unnamed.append((i, str(exc)))
        except Exception as exc:
            raise AssertionError(f"case {i}: {type(exc).__name__}: {exc}") from exc
        else:
            parsed += 1
    assert unnamed == []
    return parsed, refused


def test_trace_parser_raises_only_its_error() -> None:
    parsed, refused = _fuzz(
        _trace_seeds(), lambda d: parse_trace(d, display_name="fuzz.json", all_threads=True),
        TraceError, 20_000,
    )
    # The mutations reach the parser's depths: some cases still parse.
    assert parsed > 1_000
    perfetto_parsed, perfetto_refused = _fuzz(
        _perfetto_seeds(), lambda d: parse_trace(d, display_name="fuzz.json", all_threads=True),
        TraceError, 5_000,
    )
    assert perfetto_parsed > 100
    assert perfetto_refused > 100
    assert refused > 1_000


def test_histogram_parser_raises_only_its_error() -> None:
    parsed, refused = _fuzz(
        _histogram_seeds(),
        lambda d: parse_histogram_file(d, display_name="fuzz.json"),
        HistogramError, 20_000,
    )
    assert parsed > (400 if HISTOGRAMS.is_dir() else 100)  # the GLAM seeds parse more often
    assert refused > 1_000


def _ab_seeds() -> list[bytes]:
    data = Path(__file__).resolve().parents[1] / "experiments" / "ab" / "data"
    own = json.dumps({"metrics": {"latency": {"unit": "ms", "percentile": 99}}, "slices": [
        {"slice": s, "build": b, "metric": "latency", "values": [10 + s, 12.5, 11 + (b == "B")]}
        for s in range(6) for b in ("A", "B")]}).encode()
    raw = "slice,build,metric,value\n" + "".join(
        f"{s},{b},latency,{v}\n" for s in range(4) for b in "AB" for v in (1.5, 2.5, 40))
    return [own, raw.encode()] + [f.read_bytes() for f in sorted(data.glob("*.csv"))]


def test_ab_parser_raises_only_its_error() -> None:
    parsed, refused = _fuzz(
        _ab_seeds(), lambda d: parse_ab_file(io.BytesIO(d), name="fuzz.json"),
        ABFormatError, 10_000,
    )
    assert parsed > 100  # a valid A/B run has many fields a mutation can break
    assert refused > 1_000


def test_mutated_ab_files_that_parse_are_analysed_without_error() -> None:
    """Issue 23: 13 of 20,000 mutated A/B files parsed, then crashed the analysis (values
    near 1e300 overflowed its sums); values beyond ±1e12 are refused by the reader now."""
    from deviations.experiments.ab import analysis

    analysed = 0
    for i, data in cases(_ab_seeds(), 10_000, seed=2026):
        try:
            run = parse_ab_file(io.BytesIO(data), name="fuzz.json")
        except ABFormatError:
            continue
        stored = run.to_dict()
        try:
            result = analysis.analyse(stored, {})
            json.dumps(result, allow_nan=False)  # what is stored is strict JSON
            analysis.aa_floors(stored)
        except Exception as exc:
            raise AssertionError(f"case {i}: {type(exc).__name__}: {exc}") from exc
        analysed += 1
    assert analysed > 100


def test_canary_observations_parser_raises_only_its_error() -> None:
    seeds = [b"arm,value\nA,1.5\nB,2\nA,3e2\n",
             b"arm,value,timestamp\nA,1,1700000000\nB,2.5,1700000001.5\n",
             b"arm,timestamp\nA,10\nB,11\nA,12\n"]
    parsed, refused = _fuzz(seeds, lambda d: parse_observations(d, "fuzz.json"),
                            ObservationsError, 10_000)
    assert parsed > 200
    assert refused > 1_000


RESULTS = Path(__file__).resolve().parent / "results_fixtures"


def _results_seeds(fmt: str) -> list[bytes]:
    """Two releases of the tool's real output (r01, r09) and the hand-made documents."""
    from tests.ingest.test_results import MINIMAL

    files = sorted((RESULTS / fmt).glob("r0[19].*"))
    return [f.read_bytes() for f in files] + [MINIMAL[fmt].encode()]


@pytest.mark.parametrize("fmt", FORMATS)
def test_results_readers_raise_only_their_error(fmt: str) -> None:
    """~20,000 cases over the seven formats: every case parses whole or raises
    ``ResultsError`` naming the file, detected or read as its format; none crashes."""
    seeds = _results_seeds(fmt)
    parsed, refused = _fuzz(seeds, lambda d: parse_results(d, display_name="fuzz.json"),
                            ResultsError, 1_500)
    as_format, _ = _fuzz(
        seeds, lambda d: parse_results(d, display_name="fuzz.json", format=fmt),
        ResultsError, 1_500)
    # About 4% of the cases still parse (the readers check every field's type): the
    # mutations reach past the JSON decoder into the readers' checks.
    assert parsed > 30, (parsed, refused)
    assert as_format > 30
    assert refused > 1_000


@pytest.mark.django_db
def test_uploads_of_mutated_traces_fail_alone_and_leave_nothing(
    client: Any, committed: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    user = get_user_model().objects.create_user("ci")
    token = ApiToken.issue(user, "CI")[1]
    statuses: dict[int, int] = {}
    for i, data in cases(_trace_seeds(), 150, seed=7):
        upload = io.BytesIO(data)
        upload.name = f"case{i}.json"
        # Over five releases: what parses is analysed between releases, as a series is.
        response = committed(
            client.post, f"/api/series/fuzz/releases/1.{i % 5}/runs", {"file": upload},
            headers={"Authorization": f"Bearer {token}"},
        )
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code in (200, 201, 400), (i, response.content)
    runs = Run.objects.all()
    assert set(runs.values_list("status", flat=True)) <= {Run.DONE, Run.FAILED}
    assert RunTimes.objects.count() == runs.filter(status=Run.DONE).count()
    assert all(r.error.startswith(f"{r.file_name}: ") for r in runs.filter(status=Run.FAILED))
    # What stays on disk is the kept file of each run that has one, and nothing else.
    left = list((tmp_path / "media").rglob("*")) if (tmp_path / "media").exists() else []
    assert sorted(p.name for p in left if p.is_file()) == sorted(
        runs.filter(file_stored=True).values_list("sha256", flat=True))
    # Parse, then analyse: whatever the mutated files that parsed hold, the analysis of
    # the series ran (in-process, after each run) and its pages and matrix read it.
    from deviations.traces.models import SeriesAnalysis

    assert runs.filter(status=Run.DONE).exists()
    assert SeriesAnalysis.objects.filter(series__name="fuzz").exists()
    client.force_login(user)
    measured = sorted(set(runs.filter(status=Run.DONE).values_list("release__version",
                                                                    flat=True)))
    for page in ("/series/fuzz/", "/series/fuzz/matrix.json",
                 f"/series/fuzz/releases/{measured[0]}/"):
        assert client.get(page).status_code == 200, page


HOSTILE_NAMES = ["", " ", "a" * 5_000, "<img src=x onerror=alert(1)>", "é😀\u202e", "\t",
                 "a\\b", "1e309", "RunTask", "NaN"]
HOSTILE_TIMES = [0, 0.0, -5, 1e-9, 0.5, 1, 3, 1e6, 1e12, 1e15, 2**53, 7.25]


@pytest.mark.django_db
def test_traces_with_hostile_values_parse_then_analyse(client: Any, committed: Any) -> None:
    """Byte mutations rarely survive the JSON decoder (3 of 150 above), so the analysis
    sees few of them: these traces are valid JSON whose values are hostile (names empty,
    huge, markup, bidi; times zero, negative, fractional, 2**53; events overlapping, nested
    past their parent, duplicated) over six releases. Each is stored or refused alone;
    what is stored is analysed, and the series' pages, matrix and comparisons read it."""
    import random

    from deviations.traces.models import SeriesAnalysis

    user = get_user_model().objects.create_user("ci")
    token = ApiToken.issue(user, "CI")[1]
    rng = random.Random(29)
    for i in range(60):
        events = [(rng.choice(HOSTILE_NAMES) if rng.random() < 0.3 else f"f{rng.randrange(6)}",
                   rng.choice(HOSTILE_TIMES) if rng.random() < 0.3 else rng.uniform(0, 500),
                   rng.choice(HOSTILE_TIMES) if rng.random() < 0.3 else rng.uniform(0, 80))
                  for _ in range(rng.randint(0, 25))]
        upload = io.BytesIO(json.dumps({"traceEvents": renderer_events(events)}).encode())
        upload.name = f"case{i}.json"
        response = committed(
            client.post, f"/api/series/values/releases/2.{i % 6}/runs", {"file": upload},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code in (200, 201, 400), (i, response.content)
    runs = Run.objects.all()
    assert set(runs.values_list("status", flat=True)) <= {Run.DONE, Run.FAILED}
    assert runs.filter(status=Run.DONE).count() > 30
    assert all(r.error.startswith(f"{r.file_name}: ") for r in runs.filter(status=Run.FAILED))
    assert SeriesAnalysis.objects.filter(series__name="values").exists()
    client.force_login(user)
    for page in ("/series/values/", "/series/values/matrix.json",
                 "/series/values/releases/2.3/", "/series/values/compare/?base=2.0&new=2.5"):
        assert client.get(page).status_code == 200, page


@pytest.mark.django_db
def test_mutated_results_files_store_whole_or_not_at_all() -> None:
    """Through the write path of a metric series: each mutated file of every format is
    stored whole (its runs, their values, its metrics) or refused with a message naming
    it, leaving the database as it was; and what is stored can be analysed."""
    from deviations.traces.analysis import analyse_series
    from deviations.traces.models import Function, Metric, Release, Series
    from deviations.traces.uploads.results import store_results
    from deviations.traces.uploads.runs import IngestError

    def counts() -> tuple[int, ...]:
        return tuple(m.objects.count() for m in (Series, Release, Function, Metric, Run,
                                                 RunTimes))

    stored = 0
    refused: list[tuple[int, str]] = []
    for fmt in FORMATS:
        for i, data in cases(_results_seeds(fmt), 60, seed=13):
            before = counts()
            try:
                store_results(f"fuzz-{fmt}", data, f"case{i}.json", release=f"1.{i}",
                              analyse=False)
            except (ResultsError, IngestError) as exc:
                refused.append((i, exc.message))
                assert counts() == before
            else:
                stored += 1
    assert stored > 10
    assert [m for i, m in refused if not m.startswith(f"case{i}.json: ")] == []
    for series in Series.objects.all():
        analyse_series(series.pk)  # no mutated value breaks the statistics


@pytest.mark.django_db
def test_mutated_histogram_files_store_whole_or_not_at_all(client: Any) -> None:
    for seed in _histogram_seeds():  # the probes as they were, then mutated builds of them
        store_histogram_file(seed, display_name="seed.json")
    for i, data in cases(_histogram_seeds(), 150, seed=11):
        before = (Probe.objects.count(), HistogramSnapshot.objects.count())
        try:
            store_histogram_file(data, display_name=f"case{i}.json")
        except HistogramError:
            assert (Probe.objects.count(), HistogramSnapshot.objects.count()) == before
    # Parse, then analyse: change detection over every probe the mutated files made, and
    # each probe's page.
    from deviations.histograms.detection import detect

    probes = list(Probe.objects.all())
    assert len(probes) >= len(_histogram_seeds())
    detect([p.pk for p in probes])
    user = get_user_model().objects.create_user("viewer")
    client.force_login(user)
    for probe in probes:
        assert client.get(f"/histograms/probes/{probe.pk}/").status_code == 200, probe.name


@pytest.mark.parametrize("doc", [
    b"[" * 200_000,
    b'{"traceEvents":' + b"[" * 200_000,
    b'[{"ph":"M","name":"process_name","pid":1,"tid":1,"args":' + b"[" * 200_000,
    b'[{"ph":"M","name":"process_name","pid":1,"tid":1,"args":' + b"[" * 200_000 + b"]" * 200_000
    + b"}]",
])
def test_deep_nesting_is_refused(doc: bytes) -> None:
    with pytest.raises(TraceError, match=r"^deep\.json: "):
        parse_trace(doc, display_name="deep.json")
    with pytest.raises(HistogramError, match=r"^deep\.json: "):
        parse_histogram_file(doc, display_name="deep.json")
    with pytest.raises(ResultsError, match=r"^deep\.json: "):
        parse_results(doc, display_name="deep.json")


_BOMB = """
import resource, sys
from ingest.traces import TraceError, parse_trace
from ingest.ab import ABFormatError, parse_ab_file
from ingest.canaries import ObservationsError, parse_observations
from ingest.histograms import HistogramError, parse_histogram_file
from ingest.results import ResultsError, parse_results
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for parse, error in ((parse_trace, TraceError), (parse_histogram_file, HistogramError),
                     (parse_results, ResultsError)):
    try:
        parse(sys.argv[1], display_name="bomb.json.gz", max_bytes=20 * 1024 * 1024)
    except error as exc:
        assert "decompresses to more than" in str(exc), exc
    else:
        raise AssertionError("the bomb was parsed")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base // 1024, peak // 1024)
"""


def test_a_gzip_bomb_stops_at_the_limit_in_bounded_memory(tmp_path: Path) -> None:
    """200 MB of JSON inflated from ~0.2 MB, with a 20 MB limit: refused after inflating
    about the limit, never the whole (peak RSS measured in a fresh process)."""
    import gzip
    import subprocess
    import sys

    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b"[")
        for _ in range(100):
            f.write(b"0," * (1024 * 1024))
        f.write(b"0]")
    assert bomb.stat().st_size < 1024 * 1024
    out = subprocess.run(
        [sys.executable, "-c", _BOMB, str(bomb)], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    base_mb, peak_mb = (int(x) for x in out)
    # Inflating stops one piece (1 MiB) past the 20 MB limit; the whole would be 200 MB.
    assert peak_mb - base_mb < 60, (base_mb, peak_mb)
