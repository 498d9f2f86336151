"""Which reader a file is for, from its first bytes: a trace or benchmark results.

The upload page and the API take either into a series; a trace can be gigabytes, so the
choice is made from a bounded head (gunzipped when gzip) without parsing the file:

- a Perfetto protobuf trace is binary (its first byte is a field tag, never text);
- a Chrome JSON trace is an array of events (``[`` then ``{``), or an object holding
  ``traceEvents`` or events with ``"ph"`` near its start;
- anything else is text a results reader may take (a JSON object of Google Benchmark,
  pytest-benchmark, hyperfine, asv, Perfherder or Bencher; a log with PERFHERDER_DATA
  lines; CSV): ``ingest.results`` then names the format or says why none fits.
"""

from __future__ import annotations

import re
import zlib

#: Bytes of (decompressed) head looked at.
HEAD_BYTES = 64 * 1024
_TRACE_KEYS = re.compile(rb'"(traceEvents|ph)"\s*:')


def looks_like_trace(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes, gzip or not) starts a trace."""
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(head, HEAD_BYTES)
        except zlib.error:
            return True  # corrupt gzip: the trace reader says so, as it always did
    if any(b < 0x09 or 0x0D < b < 0x20 for b in head[:256]):
        return True  # binary (a protobuf packet's tag and length), never JSON or CSV text
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if not text:
        return True  # empty: refused by whichever reader, the trace one as before
    if text[:1] == b"[":  # an array of events; not a log line such as "[task 2026-…]"
        rest = text[1:].lstrip(b" \t\r\n")
        return rest[:1] in (b"{", b"]", b"")
    if text[:1] == b"{":
        return bool(_TRACE_KEYS.search(text[:HEAD_BYTES]))
    return False
