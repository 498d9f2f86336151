"""Firefox Telemetry histogram JSON -> one ``HistogramRecord`` per (probe, build id).

Pure module: bytes in, numpy arrays out. No Django, no database. The formats accepted are
documented for users in ``docs/formats.md`` ("Histograms"); this docstring records the
decisions behind them.

Formats (detected from the JSON's shape, whatever the file is called)
---------------------------------------------------------------------
1. Wrapped Mozilla histograms: ``{"probe", "build_id", "histogram": {"bucket_count",
   "histogram_type", "range", "sum", "values"}, "alert_emails"?}``, one object, a list of
   them, or JSON lines (one object per line).
2. The plain form: ``{"probe", "build_id", "edges": [...], "counts": [...]}`` (in a list
   or JSON lines too; the two record forms may be mixed).
3. A raw Firefox main ping (``{"application", "environment", "payload", ...}``).
4. A GLAM API response (``{"response": [rows]}`` or the bare list of rows).
5. Mozilla's bare histogram object, or an object mapping names to them (the shape of a
   ping's ``payload.histograms``): the probe (bare object only) and the build id then come
   from the ``probe=`` / ``build_id=`` arguments.

Bucket edges
------------
``edges`` has one more entry than ``counts``; bucket i is ``[edges[i], edges[i+1])``. For
every Mozilla form the last edge is ``+inf``: Firefox's last bucket is an overflow bucket
that starts at the range maximum and has no upper bound. The Mozilla ``values`` object
lists only some buckets (keyed by their lower bound); the full set of lower bounds is
rebuilt from ``histogram_type``, ``range`` and ``bucket_count`` with Firefox's own
algorithms (``bucket_lower_bounds``), and missing buckets are zero, so two builds of one
probe land on the same buckets whatever buckets each left out. A ``values`` key that is
not one of those lower bounds is an error (the range or bucket count does not match the
data). GLAM rows list every bucket (zeros included), so their keys are the lower bounds.

Names
-----
The probe name is ``[process:]NAME[#aggregation][@version][/key]``:

* ``process:`` for histograms of a process other than the parent (``content:GC_MS`` from a
  ping's ``payload.processes.content.histograms``, or a GLAM row with ``"process":
  "content"``), so the same probe gets the same name from a ping and from GLAM;
* ``#aggregation`` for GLAM scalar rows, whose ``client_agg_type`` (max, min, avg, sum,
  count) makes different distributions of one metric;
* ``@version`` for GLAM's per-version aggregates (rows with ``build_id`` "*"): labelled
  by release version instead of build id, they are another series than the per-build
  snapshots of the same probe and must not interleave with them;
* ``/key`` for keyed histograms (``payload.keyedHistograms.NAME.KEY``, GLAM
  ``metric_key``). Keys may themselves contain ``/`` or ``:``; the name is a label, not a
  path to be split.

Pings
-----
Read: ``payload.histograms`` and ``payload.keyedHistograms`` (the parent process), and
``payload.processes.<process>.histograms`` / ``.keyedHistograms`` (other processes, named
with their prefix; ``parent`` there gets none). ``payload.childPayloads`` (older per-child
copies) is not read. The build id is ``application.buildId``, else
``environment.build.buildId``, else the caller's. Histograms with no samples
(``"values": {}``) are kept as zeros: whether a histogram has enough data to compare is
the analysis's decision, not the parser's.

GLAM
----
GLAM gives per-client normalised proportions (``normalised=True``, detected from the data:
values in [0, 1] summing to 1 within GLAM's rounding) and ``total_users`` (``total``).
Rows with ``build_id`` "*" are per-version aggregates: their ``version`` becomes the build
id (a release label under the project's version rule). Several rows for one (probe, build
id) are resolved by their ``os``: the all-OS row (``os`` "*") is taken; without one, the
per-OS rows are merged, proportions weighted by ``total_users`` (GLAM averages clients'
normalised histograms, so the all-OS average is the clients-weighted mean of the per-OS
averages), raw counts summed. Two rows for the same (probe, build id, os) are an error.
A negative ``total_users`` (64 rows of GLAM's sample scalar data) is taken as unknown
(``total=None``): the buckets do not depend on it. ``percentiles`` are not read.

All or nothing
--------------
``parse_histogram_file`` returns every record of a file or raises ``HistogramError``: one
line, "<file>: <record locator>: <reason>" (or "<file>: <reason>" when the file as a whole
is unusable), so a caller can store a file atomically.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, BinaryIO, NoReturn

import msgspec
import numpy as np

from deviations.core.errors import UserError
from deviations.core.versions import VERSION_RE
from ingest import reading

__all__ = [
    "DEFAULT_MAX_BYTES",
    "HISTOGRAM_KINDS",
    "MAX_BUCKETS",
    "MAX_PROBE_CHARS",
    "HistogramError",
    "HistogramRecord",
    "bucket_lower_bounds",
    "parse_histogram_file",
]

#: Largest file accepted, compressed and decompressed. A ping is ~1 MB and a GLAM response
#: a few MB; 256 MiB of JSON decodes to a few GiB of Python objects at most.
DEFAULT_MAX_BYTES = 256 * 1024**2
#: Probe names longer than this are refused: a keyed histogram's key is at most a few
#: dozen characters in real pings, and the name is a database key and a chart label.
MAX_PROBE_CHARS = 1_000
#: Buckets per histogram. Firefox caps enumerated histograms at 1,000 values (categorical
#: at 100 labels); ten times that is room for other producers, and it stops a forged
#: bucket_count of 10**9 before the bucket algorithm runs.
MAX_BUCKETS = 10_000
#: Owner emails per probe; Histograms.json lists one to a handful.
MAX_ALERT_EMAILS = 100
#: GLAM rounds proportions to 4 decimals, and their sums drift from 1 by up to 5e-4 in the
#: real files; a sum within this of 1 (all values <= 1) marks normalised data.
_NORMALISED_TOLERANCE = 0.01

#: The kinds of Firefox histograms (Histograms.json "kind"), the names used in records.
HISTOGRAM_KINDS = (
    "exponential",
    "linear",
    "boolean",
    "flag",
    "count",
    "enumerated",
    "categorical",
)
#: Pings write histogram_type as nsITelemetry's number. Enumerated histograms are linear
#: histograms in Firefox and are sent as 1.
_PING_TYPE_CODES = {
    0: "exponential",
    1: "linear",
    2: "boolean",
    3: "flag",
    4: "count",
    5: "categorical",
}
#: boolean, flag and count histograms have a fixed layout in Firefox: range [1, 2], 3
#: buckets, lower bounds 0, 1, 2.
_FIXED_LAYOUT = (1, 2, 3)
_GLAM_SUMMED = "summed_histogram"
#: Added to the probe name of GLAM per-version aggregates (see "Names").
PER_VERSION_SUFFIX = "@version"

_UTF8_BOM = b"\xef\xbb\xbf"
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_MAX_EMAIL_CHARS = 254  # RFC 5321's limit on a forward path
_SHOWN_CHARS = 60  # of a bad value quoted in an error message
_SHOWN_KEYS = 8
_SHOWN_LOCATOR_CHARS = 200
_JSON_LINES = object()  # _decode_json's answer for several JSON values, one a line


class HistogramError(UserError):
    """The input is not usable. ``str(e)`` is one line: "<file>: <record>: <reason>"."""


@dataclass(frozen=True, eq=False)
class HistogramRecord:
    """One histogram of one probe for one build. The arrays are float64 and read-only."""

    probe: str
    build_id: str
    #: len(counts) + 1 strictly increasing bucket edges; the last is +inf for Mozilla forms.
    edges: np.ndarray
    #: >= 0; proportions when ``normalised`` (GLAM), counts otherwise.
    counts: np.ndarray
    #: One of HISTOGRAM_KINDS; for GLAM, its metric_type without "histogram-" ("scalar"
    #: for scalars); None when the source has none.
    histogram_type: str | None
    #: Sum of the recorded samples (Mozilla's "sum"), when the source has it.
    sum: float | None
    alert_emails: tuple[str, ...]
    #: Where the record is in its file: "records[3]", "line 12", "payload.histograms.GC_MS".
    source: str
    normalised: bool = False
    #: The number of clients (GLAM total_users) or another total the source gives.
    total: float | None = None


@lru_cache(maxsize=4096)
def bucket_lower_bounds(kind: str, low: int, high: int, bucket_count: int) -> tuple[int, ...]:
    """The lower bound of every bucket of a Firefox histogram, as Firefox computes them.

    Notes
    -----
    Bucket 0 is the underflow bucket ``[0, low)``; the last bucket is the overflow bucket
    starting at (about) ``high``. Firefox (``ipc/chromium/src/base/histogram.cc``,
    ``Histogram::InitializeBucketRange`` and ``LinearHistogram::InitializeBucketRange``;
    the same in ``toolkit/components/telemetry/build_scripts/mozparsers/histogram_tools.py``):

    * exponential: ``b[1] = low``; for ``i = 2 .. n-1``, with ``c = b[i-1]``, the log-space
      step that spreads the remaining buckets evenly up to ``high`` is
      ``r = (ln(high) - ln(c)) / (n - i)``, and ``b[i] = round_half_up(exp(ln(c) + r))``,
      or ``c + 1`` when that does not exceed ``c``. A ``low`` below 1 is taken as 1, as
      Firefox does (log 0).
    * linear (also enumerated, categorical, boolean, flag, count): for ``i = 1 .. n-1``,
      ``b[i] = round_half_up((low * (n - 1 - i) + high * (i - 1)) / (n - 2))``; enumerated
      histograms of N values are ``low=1, high=N, n=N+1`` and get bounds 0 .. N.
    """
    n = bucket_count
    bounds = [0] * n
    if kind == "exponential":
        current = max(low, 1)
        bounds[1] = current
        log_high = math.log(high)
        for i in range(2, n):
            log_current = math.log(current)
            step = (log_high - log_current) / (n - i)
            nxt = int(math.floor(math.exp(log_current + step) + 0.5))
            current = nxt if nxt > current else current + 1
            bounds[i] = current
    else:
        for i in range(1, n):
            bounds[i] = int(math.floor((low * (n - 1 - i) + high * (i - 1)) / (n - 2) + 0.5))
    return tuple(bounds)


def parse_histogram_file(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    *,
    display_name: str | None = None,
    build_id: str | None = None,
    probe: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[HistogramRecord]:
    """Every histogram in a file, or ``HistogramError``; the format is detected.

    ``source`` is a path, the file's bytes, or a binary file object; plain JSON or gzip
    (recognised by its magic bytes). ``display_name`` (default: the file's base name)
    starts every error message. ``build_id`` is used for records that carry none (a
    record whose own build id differs from it is an error); ``probe`` names a bare
    Mozilla histogram object. ``max_bytes`` bounds both the compressed and the
    decompressed size. Records come in file order; (probe, build id) is unique.
    """
    name = display_name if display_name is not None else reading.display_name(source)
    ctx = _Context(name, build_id, probe)
    if build_id is not None:
        ctx.check_build_id(build_id, "")
    if probe is not None:
        ctx.check_probe(probe, "")
    data = bytes(reading.read_bounded(source, name, max_bytes, HistogramError))
    try:
        records = _records(data, ctx)
    # Input the decoder takes but Python cannot hold, found by the fuzz test.
    except UnicodeDecodeError as e:
        ctx.fail("", f"not valid UTF-8 text ({e.reason})")
    except RecursionError:
        ctx.fail("", "JSON nested too deeply")
    if not records:
        ctx.fail("", "no histograms in the file")
    seen: dict[tuple[str, str], str] = {}
    for rec in records:
        first = seen.setdefault((rec.probe, rec.build_id), rec.source)
        if first != rec.source:
            ctx.fail(
                rec.source,
                f"a second histogram of probe {_show(rec.probe)} for build "
                f"{rec.build_id} (the first is {first})",
            )
    return records


class _Context:
    """The file's name and the caller's defaults, and the error messages that use them."""

    def __init__(self, name: str, build_id: str | None, probe: str | None) -> None:
        self.name = name
        self.build_id = build_id
        self.probe = probe

    def fail(self, where: str, reason: str) -> NoReturn:
        where = _printable(where)
        raise HistogramError(
            f"{self.name}: {where}: {reason}" if where else f"{self.name}: {reason}"
        )

    def check_probe(self, value: object, where: str) -> str:
        if (
            not isinstance(value, str)
            or not 0 < len(value) <= MAX_PROBE_CHARS
            or not value.isprintable()
            or value != value.strip()
        ):
            self.fail(
                where,
                f"probe name {_show(value)} is not valid: 1 to {MAX_PROBE_CHARS:,} printable "
                "characters, without leading or trailing spaces",
            )
        return value

    def check_build_id(self, value: object, where: str) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a Mozilla build id written as a JSON number
        if not isinstance(value, str) or not VERSION_RE.match(value):
            self.fail(
                where,
                f"build id {_show(value)} is not valid: 1 to 100 characters, letters, digits "
                "and . _ + ~ -, starting with a letter or digit (Mozilla's are 14 digits, "
                "YYYYMMDDhhmmss)",
            )
        return value

    def build_id_of(self, value: object, where: str) -> str:
        """The record's build id, or the caller's when it has none."""
        if value is None:
            if self.build_id is None:
                self.fail(where, "no build id (give 'build_id' in the record, or to the parser)")
            return self.build_id
        found = self.check_build_id(value, where)
        if self.build_id is not None and found != self.build_id:
            self.fail(where, f"build id {found} differs from the one given ({self.build_id})")
        return found


# --- reading -------------------------------------------------------------------------


def _decode_json(data: bytes, ctx: _Context, where: str, lines: bool = False) -> Any:
    """One JSON document (or _JSON_LINES when ``lines`` and the data holds several).

    Python's json reads what msgspec refuses but Python writes (NaN, Infinity, numbers out
    of float range), so that the record holding them is the one named in the error."""
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError) as e:
        first_error = e
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        if lines and e.msg == "Extra data":
            return _JSON_LINES
    except (ValueError, RecursionError):
        pass
    msg = str(first_error)
    if "truncated" in msg:
        ctx.fail(where, "truncated JSON (the input ends inside an unfinished value)")
    ctx.fail(where, f"not valid JSON: {msg}")


def _records(data: bytes, ctx: _Context) -> list[HistogramRecord]:
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if not data.strip():
        ctx.fail("", "empty file")
    doc = _decode_json(data, ctx, "", lines=data.lstrip()[:1] == b"{")
    if doc is _JSON_LINES:
        return _json_lines(data, ctx)
    return _from_document(doc, ctx)


def _json_lines(data: bytes, ctx: _Context) -> list[HistogramRecord]:
    records = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.strip():
            where = f"line {number}"
            records.append(_from_record(_decode_json(line, ctx, where), ctx, where))
    return records


# --- formats -------------------------------------------------------------------------


def _from_document(doc: Any, ctx: _Context) -> list[HistogramRecord]:
    if isinstance(doc, list):
        if not doc:
            ctx.fail("", "an empty list: no histograms")
        if _is_glam_row(doc[0]):
            return _from_glam(doc, ctx, "records")
        return [_from_record(item, ctx, f"records[{i}]") for i, item in enumerate(doc)]
    if not isinstance(doc, dict):
        ctx.fail("", f"not a histogram file: the JSON is {_kind(doc)}, not an object or a list")
    if isinstance(doc.get("payload"), dict) and ("application" in doc or "environment" in doc):
        return _from_ping(doc, ctx)
    if isinstance(doc.get("response"), list):
        return _from_glam(doc["response"], ctx, "response")
    if _is_glam_row(doc):
        return _from_glam([doc], ctx, "records")
    if "histogram" in doc or "edges" in doc or "counts" in doc:
        return [_from_record(doc, ctx, "record")]
    if "values" in doc and ("histogram_type" in doc or "bucket_count" in doc):
        if ctx.probe is None:
            ctx.fail(
                "",
                'a bare Mozilla histogram has no probe name: wrap it as {"probe": ..., '
                '"build_id": ..., "histogram": {...}} or give the probe name',
            )
        return [_record_from_mozilla(doc, ctx, "histogram", ctx.probe, None, {})]
    if doc and all(isinstance(v, dict) and "values" in v for v in doc.values()):
        return [
            _record_from_mozilla(h, ctx, str(key), ctx.check_probe(key, str(key)), None, {})
            for key, h in doc.items()
        ]
    ctx.fail(
        "",
        'not a recognised histogram file: expected a record {"probe", "build_id", '
        '"histogram"} or {"probe", "build_id", "edges", "counts"} (one, a list or '
        'JSON lines), a Firefox main ping, a GLAM response {"response": [...]}, or '
        f"Mozilla histograms by name; got an object with keys {_show_keys(doc)}",
    )


def _from_record(item: Any, ctx: _Context, where: str) -> HistogramRecord:
    """A wrapped Mozilla histogram or a plain edges/counts record."""
    if not isinstance(item, dict):
        ctx.fail(where, f"expected a JSON object, got {_kind(item)}")
    if "histogram" in item:
        histogram = item["histogram"]
        if not isinstance(histogram, dict):
            ctx.fail(where, f"'histogram' must be an object, got {_kind(histogram)}")
        probe = _probe_of(item, ctx, where)
        return _record_from_mozilla(histogram, ctx, where, probe, item.get("build_id"), item)
    if "edges" in item or "counts" in item:
        return _record_from_plain(item, ctx, where)
    ctx.fail(
        where,
        'expected {"probe", "build_id", "histogram": {...}} or {"probe", "build_id", '
        f'"edges": [...], "counts": [...]}}; got an object with keys {_show_keys(item)}',
    )


def _probe_of(item: dict[str, Any], ctx: _Context, where: str) -> str:
    value = item.get("probe", ctx.probe)
    if value is None:
        ctx.fail(where, "no 'probe' (the histogram's name)")
    return ctx.check_probe(value, where)


def _record_from_mozilla(
    histogram: dict[str, Any],
    ctx: _Context,
    where: str,
    probe: str,
    build_id: object,
    wrapper: dict[str, Any],
) -> HistogramRecord:
    kind = _kind_of(histogram.get("histogram_type"), ctx, where)
    bounds = _layout(histogram, kind, ctx, where)
    values = histogram.get("values")
    if not isinstance(values, dict):
        ctx.fail(
            where, f"'values' must be an object {{bucket lower bound: count}}, got {_kind(values)}"
        )
    index = {float(b): i for i, b in enumerate(bounds)}
    counts = np.zeros(len(bounds), dtype=np.float64)
    for key, count in values.items():
        lower = _number_key(key, ctx, where)
        position = index.get(lower)
        if position is None:
            ctx.fail(
                where,
                f"values key {_show(key)} is not a bucket lower bound of this {kind} "
                f"histogram (range {list(histogram.get('range', _FIXED_LAYOUT[:2]))}, "
                f"{len(bounds)} buckets)",
            )
        counts[position] = _count(count, ctx, where, f"values[{_show(key)}]")
    edges = np.array([*bounds, math.inf], dtype=np.float64)
    emails = _alert_emails(wrapper.get("alert_emails"), ctx, where) + _alert_emails(
        histogram.get("alert_emails"), ctx, where
    )
    return _make(
        where,
        probe=probe,
        build_id=ctx.build_id_of(build_id, where),
        edges=edges,
        counts=counts,
        histogram_type=kind,
        total_sum=_optional_number(histogram.get("sum"), ctx, where, "sum"),
        alert_emails=emails,
        normalised=_flag(wrapper.get("normalised", False), ctx, where),
        total=_optional_number(wrapper.get("total"), ctx, where, "total", minimum=0.0),
    )


def _kind_of(value: object, ctx: _Context, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value in _PING_TYPE_CODES:
        return _PING_TYPE_CODES[value]
    if isinstance(value, str) and value in HISTOGRAM_KINDS:
        return value
    codes = ", ".join(f"{code}={kind}" for code, kind in _PING_TYPE_CODES.items())
    ctx.fail(
        where,
        f"histogram_type {_show(value)} is not one of {', '.join(HISTOGRAM_KINDS)} "
        f"(or their numbers in pings: {codes})",
    )


def _layout(histogram: dict[str, Any], kind: str, ctx: _Context, where: str) -> tuple[int, ...]:
    """Every bucket's lower bound, from range and bucket_count (fixed for boolean, flag and
    count histograms when the record omits them)."""
    has_range = "range" in histogram or "bucket_count" in histogram
    if not has_range and kind in ("boolean", "flag", "count"):
        return bucket_lower_bounds(kind, *_FIXED_LAYOUT)
    rng, n = histogram.get("range"), histogram.get("bucket_count")
    if not (
        isinstance(rng, list)
        and len(rng) == 2
        and all(_is_integral(v) for v in rng)
        and _is_integral(n)
    ):
        ctx.fail(
            where,
            f"a {kind} histogram needs 'range' [min, max] (integers) and 'bucket_count' "
            f"(an integer); got range {_show(rng)}, bucket_count {_show(n)}",
        )
    low, high, count = int(rng[0]), int(rng[1]), int(n)  # type: ignore[arg-type]
    if not 3 <= count <= MAX_BUCKETS:
        ctx.fail(where, f"bucket_count {count} is outside 3 .. {MAX_BUCKETS:,}")
    if not 0 <= low < high:
        ctx.fail(where, f"range {[low, high]} must have 0 <= min < max")
    bounds = bucket_lower_bounds(kind, low, high, count)
    if any(b <= a for a, b in zip(bounds, bounds[1:], strict=False)):
        ctx.fail(
            where,
            f"range {[low, high]} is too narrow for {count} {kind} buckets (repeated bounds)",
        )
    return bounds


def _record_from_plain(item: dict[str, Any], ctx: _Context, where: str) -> HistogramRecord:
    probe = _probe_of(item, ctx, where)
    edges_in, counts_in = item.get("edges"), item.get("counts")
    if not isinstance(edges_in, list) or not isinstance(counts_in, list):
        ctx.fail(where, "'edges' and 'counts' must both be lists of numbers")
    if not 1 <= len(counts_in) <= MAX_BUCKETS:
        ctx.fail(where, f"'counts' must have 1 to {MAX_BUCKETS:,} buckets, got {len(counts_in):,}")
    if len(edges_in) != len(counts_in) + 1:
        ctx.fail(
            where,
            f"{len(edges_in)} edges for {len(counts_in)} counts: a histogram of n buckets has "
            "n + 1 edges",
        )
    edges = np.empty(len(edges_in), dtype=np.float64)
    for i, edge in enumerate(edges_in):
        if edge is None and i == len(edges_in) - 1:
            edges[i] = math.inf  # JSON has no infinity: null closes an overflow bucket
        elif (number := _finite_float(edge)) is not None:
            edges[i] = number
        else:
            ctx.fail(where, f"edges[{i}] is {_show(edge)}, not a finite number")
    if np.any(np.diff(edges) <= 0):
        i = int(np.flatnonzero(np.diff(edges) <= 0)[0])
        ctx.fail(
            where,
            f"edges must increase strictly: edges[{i + 1}] = {edges[i + 1]:g} <= {edges[i]:g}",
        )
    counts = np.array(
        [_count(c, ctx, where, f"counts[{i}]") for i, c in enumerate(counts_in)], dtype=np.float64
    )
    histogram_type = item.get("histogram_type")
    if histogram_type is not None:
        histogram_type = _kind_of(histogram_type, ctx, where)
    return _make(
        where,
        probe=probe,
        build_id=ctx.build_id_of(item.get("build_id"), where),
        edges=edges,
        counts=counts,
        histogram_type=histogram_type,
        total_sum=_optional_number(item.get("sum"), ctx, where, "sum"),
        alert_emails=_alert_emails(item.get("alert_emails"), ctx, where),
        normalised=_flag(item.get("normalised", False), ctx, where),
        total=_optional_number(item.get("total"), ctx, where, "total", minimum=0.0),
    )


def _from_ping(doc: dict[str, Any], ctx: _Context) -> list[HistogramRecord]:
    """payload.histograms and payload.keyedHistograms (parent process), and the same under
    payload.processes.<process> for the other processes; childPayloads are not read."""
    build_id = _ping_build_id(doc, ctx)
    payload = doc["payload"]
    sections: list[tuple[str, str, Any, bool]] = [
        ("", "payload.histograms", payload.get("histograms"), False),
        ("", "payload.keyedHistograms", payload.get("keyedHistograms"), True),
    ]
    processes = payload.get("processes") or {}
    if not isinstance(processes, dict):
        ctx.fail("payload.processes", f"expected an object, got {_kind(processes)}")
    for process, content in processes.items():
        if not isinstance(content, dict):
            ctx.fail(f"payload.processes.{process}", f"expected an object, got {_kind(content)}")
        prefix = "" if process == "parent" else f"{process}:"
        base = f"payload.processes.{process}"
        sections.append((prefix, f"{base}.histograms", content.get("histograms"), False))
        sections.append((prefix, f"{base}.keyedHistograms", content.get("keyedHistograms"), True))
    if all(section is None for _, _, section, _ in sections):
        ctx.fail("", "a Telemetry ping without histograms (no payload.histograms)")
    records = []
    for prefix, base, section, keyed in sections:
        for probe, where, histogram in _ping_section(prefix, base, section, keyed, ctx):
            if not isinstance(histogram, dict):
                ctx.fail(where, f"expected a histogram object, got {_kind(histogram)}")
            checked = ctx.check_probe(probe, where)
            records.append(_record_from_mozilla(histogram, ctx, where, checked, build_id, {}))
    return records


def _ping_section(
    prefix: str, base: str, section: Any, keyed: bool, ctx: _Context
) -> Iterator[tuple[str, str, Any]]:
    if section is None:
        return
    if not isinstance(section, dict):
        ctx.fail(base, f"expected an object, got {_kind(section)}")
    for name, value in section.items():
        if not keyed:
            yield f"{prefix}{name}", f"{base}.{name}", value
            continue
        if not isinstance(value, dict):
            ctx.fail(
                f"{base}.{name}", f"expected an object of keyed histograms, got {_kind(value)}"
            )
        for key, histogram in value.items():
            yield f"{prefix}{name}/{key}", f"{base}.{name}[{key!r}]", histogram


def _ping_build_id(doc: dict[str, Any], ctx: _Context) -> str:
    """application.buildId, else environment.build.buildId, else the caller's."""
    application = doc.get("application")
    environment = doc.get("environment")
    build = environment.get("build") if isinstance(environment, dict) else None
    for where, container in (("application", application), ("environment.build", build)):
        if isinstance(container, dict) and container.get("buildId") is not None:
            return ctx.build_id_of(container["buildId"], f"{where}.buildId")
    return ctx.build_id_of(None, "application.buildId")


# --- GLAM ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GlamRow:
    where: str
    probe: str
    build_id: str
    os: str
    edges: np.ndarray
    counts: np.ndarray
    histogram_type: str
    total: float | None


def _is_glam_row(item: object) -> bool:
    return isinstance(item, dict) and "metric" in item and "histogram" in item


def _from_glam(rows: list[Any], ctx: _Context, base: str) -> list[HistogramRecord]:
    if not rows:
        ctx.fail(base, "an empty GLAM response: no histograms")
    groups: dict[tuple[str, str], list[_GlamRow]] = {}
    for i, item in enumerate(rows):
        row = _glam_row(item, ctx, f"{base}[{i}]")
        groups.setdefault((row.probe, row.build_id), []).append(row)
    return [_glam_record(group, ctx) for group in groups.values()]


def _glam_row(item: Any, ctx: _Context, where: str) -> _GlamRow:
    if not _is_glam_row(item):
        ctx.fail(where, f"expected a GLAM row with 'metric' and 'histogram', got {_kind(item)}")
    process = _glam_text(item.get("process"), "parent", ctx, where, "process")
    metric = _glam_text(item.get("metric"), "", ctx, where, "metric")
    key = _glam_text(item.get("metric_key"), "", ctx, where, "metric_key")
    aggregation = _glam_text(
        item.get("client_agg_type"), _GLAM_SUMMED, ctx, where, "client_agg_type"
    )
    build = item.get("build_id")
    per_version = build == "*"
    if per_version:  # a per-version aggregate: the version is the release label
        build = item.get("version")
        if build is None:
            ctx.fail(where, "build_id '*' (a per-version aggregate) without a 'version'")
    probe = (
        ("" if process == "parent" else f"{process}:")
        + metric
        + ("" if aggregation == _GLAM_SUMMED else f"#{aggregation}")
        + (PER_VERSION_SUFFIX if per_version else "")
        + (f"/{key}" if key else "")
    )
    histogram = item["histogram"]
    if not isinstance(histogram, dict) or not histogram:
        ctx.fail(where, f"'histogram' must be a non-empty object, got {_kind(histogram)}")
    if len(histogram) > MAX_BUCKETS:
        ctx.fail(where, f"more than {MAX_BUCKETS:,} buckets")
    pairs = sorted((_number_key(k, ctx, where), k, v) for k, v in histogram.items())
    lowers = [p[0] for p in pairs]
    if any(b == a for a, b in zip(lowers, lowers[1:], strict=False)):
        ctx.fail(where, "two histogram keys name the same bucket lower bound")
    counts = np.array([_count(v, ctx, where, f"histogram[{_show(k)}]") for _, k, v in pairs])
    metric_type = _glam_text(item.get("metric_type"), "", ctx, where, "metric_type")
    return _GlamRow(
        where=where,
        probe=ctx.check_probe(probe, where),
        build_id=ctx.build_id_of(build, where),
        os=_glam_text(item.get("os"), "*", ctx, where, "os"),
        edges=np.array([*lowers, math.inf], dtype=np.float64),
        counts=counts.astype(np.float64),
        histogram_type=metric_type.removeprefix("histogram-") or "scalar",
        total=_glam_total(item.get("total_users"), ctx, where),
    )


def _glam_total(value: object, ctx: _Context, where: str) -> float | None:
    """total_users; a negative one (64 rows of GLAM's scalar sample data) is unknown: the
    buckets do not depend on it, so the row is kept with total None."""
    total = _optional_number(value, ctx, where, "total_users")
    return None if total is None or total < 0 else total


def _glam_record(group: list[_GlamRow], ctx: _Context) -> HistogramRecord:
    """One record from the rows of one (probe, build id): see "GLAM" in the module doc."""
    by_os: dict[str, _GlamRow] = {}
    for row in group:
        earlier = by_os.setdefault(row.os, row)
        if earlier is not row:
            ctx.fail(
                row.where,
                f"a second row for probe {_show(row.probe)}, build {row.build_id}, os "
                f"{_show(row.os)} (the first is {earlier.where})",
            )
    chosen = [by_os["*"]] if "*" in by_os else list(by_os.values())
    first = chosen[0]
    for row in chosen[1:]:
        if not np.array_equal(row.edges, first.edges):
            ctx.fail(
                row.where, f"its buckets differ from those of {first.where} (same probe and build)"
            )
    looks = [_looks_normalised(row.counts) for row in chosen]
    if any(looks) and not all(looks):
        ctx.fail(first.where, "its per-OS rows mix proportions and counts")
    normalised = all(looks)
    if len(chosen) == 1:
        counts, total = first.counts, first.total
    elif normalised:
        missing = next((row for row in chosen if not row.total), None)
        if missing is not None:
            ctx.fail(missing.where, "per-OS proportions cannot be merged without total_users")
        weights = np.array([row.total for row in chosen], dtype=np.float64)
        counts = weights @ np.vstack([row.counts for row in chosen]) / weights.sum()
        total = float(weights.sum())
    else:
        counts = np.sum([row.counts for row in chosen], axis=0)
        totals = [row.total for row in chosen]
        total = None if None in totals else float(sum(t for t in totals if t is not None))
    return _make(
        first.where,
        source=", ".join(row.where for row in chosen),
        probe=first.probe,
        build_id=first.build_id,
        edges=first.edges,
        counts=counts,
        histogram_type=first.histogram_type,
        total_sum=None,
        alert_emails=(),
        normalised=normalised,
        total=total,
    )


def _looks_normalised(counts: np.ndarray) -> bool:
    return bool(counts.max() <= 1.0 and abs(counts.sum() - 1.0) <= _NORMALISED_TOLERANCE)


def _glam_text(value: object, default: str, ctx: _Context, where: str, field: str) -> str:
    if value is None or value == "":
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        ctx.fail(where, f"'{field}' must be a string, got {_kind(value)}")
    return value


# --- values --------------------------------------------------------------------------


def _make(
    where: str,
    *,
    probe: str,
    build_id: str,
    edges: np.ndarray,
    counts: np.ndarray,
    histogram_type: str | None,
    total_sum: float | None,
    alert_emails: tuple[str, ...],
    normalised: bool,
    total: float | None,
    source: str | None = None,
) -> HistogramRecord:
    edges.setflags(write=False)
    counts.setflags(write=False)
    return HistogramRecord(
        probe=probe,
        build_id=build_id,
        edges=edges,
        counts=counts,
        histogram_type=histogram_type,
        sum=total_sum,
        alert_emails=tuple(dict.fromkeys(alert_emails)),
        source=source if source is not None else where,
        normalised=normalised,
        total=total,
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integral(value: object) -> bool:
    number = _finite_float(value)
    return number is not None and number.is_integer()


def _number_key(key: str, ctx: _Context, where: str) -> float:
    """A bucket's lower bound written as an object key ("268", "1.30")."""
    try:
        lower = float(key)
    except ValueError:
        lower = math.nan
    if not math.isfinite(lower) or key != key.strip():
        ctx.fail(where, f"bucket key {_show(key)} is not a number (a bucket's lower bound)")
    return lower


#: The largest count a bucket may hold: far above any real histogram (GLAM's aggregates
#: hold up to about 1e12 samples), far below where a histogram's total or its squared
#: counts overflow a float (1e308 was accepted, and every distance became 1.0; issue 23).
MAX_COUNT = 1e15


def _count(value: object, ctx: _Context, where: str, label: str) -> float:
    count = _finite_float(value)
    if count is None or count < 0:
        ctx.fail(where, f"{label} is {_show(value)}: a count must be a finite number >= 0")
    if count > MAX_COUNT:
        ctx.fail(where, f"{label} is {_show(value)}: a count must be at most {MAX_COUNT:g}")
    return count


def _finite_float(value: object) -> float | None:
    """``value`` as a finite float, or None (not a number, infinite, or an integer too
    large for a float)."""
    if not _is_number(value):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _optional_number(
    value: object, ctx: _Context, where: str, label: str, minimum: float = -math.inf
) -> float | None:
    if value is None:
        return None
    number = _finite_float(value)
    if number is None or number < minimum:
        bound = "" if minimum == -math.inf else f" >= {minimum:g}"
        ctx.fail(where, f"'{label}' is {_show(value)}, not a finite number{bound}")
    return number


def _flag(value: object, ctx: _Context, where: str) -> bool:
    if not isinstance(value, bool):
        ctx.fail(where, f"'normalised' must be true or false, got {_show(value)}")
    return value


def _alert_emails(value: object, ctx: _Context, where: str) -> tuple[str, ...]:
    """Owner emails, a list as in Histograms.json's "alert_emails"."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_ALERT_EMAILS:
        ctx.fail(where, f"'alert_emails' must be a list of at most {MAX_ALERT_EMAILS} addresses")
    for i, email in enumerate(value):
        if (
            not isinstance(email, str)
            or len(email) > _MAX_EMAIL_CHARS
            or not _EMAIL_RE.match(email)
        ):
            ctx.fail(where, f"alert_emails[{i}] = {_show(email)} is not an email address")
    return tuple(value)


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _show(value: object) -> str:
    """A bad value quoted safely in a one-line message: repr, shortened."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _printable(locator: str) -> str:
    """A locator (which holds names from the file) kept to one short line."""
    if not locator.isprintable():
        locator = locator.encode("unicode_escape").decode("ascii")
    if len(locator) > _SHOWN_LOCATOR_CHARS:
        locator = locator[: _SHOWN_LOCATOR_CHARS - 1] + "…"
    return locator


def _show_keys(obj: dict[str, Any]) -> str:
    keys = [_show(k) for k in list(obj)[:_SHOWN_KEYS]]
    more = f" and {len(obj) - _SHOWN_KEYS} more" if len(obj) > _SHOWN_KEYS else ""
    return (", ".join(keys) + more) if keys else "(none)"
