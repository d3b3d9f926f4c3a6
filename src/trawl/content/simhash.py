"""64-bit SimHash: the one implementation behind near-duplicate text and soft-404 pages.

Each feature (a string) is hashed to 64 bits with blake2b; bit n of the SimHash is set
when more than half of the features' hashes have bit n set. Similar feature sets give
hashes a few bits apart. Values are signed 64-bit integers, so they fit SQLite INTEGER and
PostgreSQL bigint; ``value & 0xFFFF_FFFF_FFFF_FFFF`` gives the unsigned form.

Where trawl is built with its C modules, :func:`simhash` is
``trawl.content._simhash.simhash``, and :data:`shingle_simhash`, the SimHash of a text's
word shingles in one call (trawl.content.text), is there too: hashing a feature with
hashlib, its bytes and the call cost most of the time in Python, and the C function hashes
with its own BLAKE2b (the same digests). :func:`reference_simhash` is the reference, used
by a build without compiling.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection

__all__ = [
    "NEAR_DUPLICATE_BITS",
    "hamming",
    "reference_simhash",
    "shingle_simhash",
    "simhash",
]

NEAR_DUPLICATE_BITS = 3
"""Pages whose SimHashes differ in at most this many of the 64 bits are near-duplicates."""

_MASK64 = (1 << 64) - 1
_SIGN = 1 << 63
_BIT_TABLES = [bytes((value >> bit) & 1 for value in range(256)) for bit in range(8)]
"""For each bit of a byte, a translation table mapping every byte to that bit."""


def reference_simhash(features: Collection[str]) -> int:
    """The signed 64-bit SimHash of distinct ``features``; 0 when there are none."""
    digests = b"".join(
        hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        for feature in features
    )
    half = len(features) / 2
    value = 0
    # Column by column: byte n of every digest, then how many of them have each bit set.
    for byte in range(8):
        column = digests[byte::8]
        for bit, table in enumerate(_BIT_TABLES):
            if column.translate(table).count(1) > half:
                value |= 1 << (byte * 8 + bit)
    return value - ((value & _SIGN) << 1)


def _compiled() -> tuple[Callable[[Collection[str]], int], Callable[[str, int], int] | None]:
    """The C functions where they are built, else the reference and None."""
    try:
        from trawl.content._simhash import shingle_simhash, simhash
    except ImportError:
        return reference_simhash, None
    return simhash, shingle_simhash


simhash, shingle_simhash = _compiled()
"""``simhash(features)``: the signed 64-bit SimHash of distinct ``features``, 0 when there
are none. ``shingle_simhash(text, size)``, where built: the SimHash of the distinct runs of
``size`` consecutive ``\\w+`` words of ``text`` as it is (lower-case it first), a word of
digits alone written ``0``, with one space between the words of a run."""


def hamming(a: int, b: int) -> int:
    """How many of the 64 bits of two SimHashes (signed or unsigned) differ."""
    return ((a ^ b) & _MASK64).bit_count()
