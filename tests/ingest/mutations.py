"""A seeded mutation fuzzer for the parsers: bytes in, mutated bytes out, reproducible.

Each case applies one to three mutations to a seed document: byte flips, deletions,
duplications, truncation, and splices of tokens that break parsers (huge or non-finite
numbers, deep nesting, lone surrogates, invalid UTF-8, wrong types, gzip framing). Used by
``test_fuzz.py`` (bounded) and runnable for longer: ``python -m tests.ingest.mutations N``.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Iterator

TOKENS = [
    b"1e999", b"-1e999", b"1e308", b"-1e308", b"123456789012345678901234567890123456789",
    b"-0", b"NaN", b"Infinity", b"null", b"true", b"[]", b"{}", b'""', b'"\\ud800"',
    b'"\\udfff\\ud800"', b"\xff\xfe", b"\xc3\x28", b"\x00", b'"\\u0000"', b"[" * 5000,
    b"{\"a\":" * 3000, b'"' + b"x" * 5000 + b'"', b"9" * 400, b"0.1e-400", b"1" + b"0" * 30,
    b'"ph":"X"', b'"ph":"B"', b'"ph":"E"', b'"dur":', b'"ts":', b'"pid":"p"', b'"tid":[]',
    b'"values":{"1e400":5}', b'"values":{"-1":-5}', b'"bucket_count":1e30', b'"range":[1e309,2]',
    b'"sum":1e400', b'"build_id":"../x"', b'"probe":"\\n"', b",", b":", b"]", b"}",
]


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(7) if rng.random() < 0.2 else rng.randrange(6)
        at = rng.randrange(len(out) + 1)
        if op == 0 and out:  # flip a byte
            i = rng.randrange(len(out))
            out[i] = rng.randrange(256)
        elif op == 1 and out:  # delete a range
            out[at : at + rng.randint(1, 64)] = b""
        elif op == 2 and out:  # duplicate a range
            chunk = out[at : at + rng.randint(1, 256)]
            out[at:at] = chunk
        elif op == 3:  # truncate
            del out[at:]
        elif op == 4:  # insert a token
            out[at:at] = rng.choice(TOKENS)
        elif op == 5 and out:  # replace a number-looking run with a token
            i = rng.randrange(len(out))
            j = i
            while j < len(out) and chr(out[j]) in "0123456789.-+eE":
                j += 1
            out[i:j] = rng.choice(TOKENS)
        else:  # gzip it, maybe truncated or corrupted
            packed = bytearray(gzip.compress(bytes(out)))
            if rng.random() < 0.5 and len(packed) > 20:
                packed = packed[: rng.randrange(10, len(packed))]
            elif len(packed) > 20:
                packed[rng.randrange(10, len(packed))] ^= 0xFF
            out = packed
    return bytes(out)


def cases(seeds: list[bytes], n: int, seed: int = 0) -> Iterator[tuple[int, bytes]]:
    rng = random.Random(seed)
    for i in range(n):
        yield i, mutate(rng.choice(seeds), rng)
