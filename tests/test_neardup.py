"""The four-table block index: every pair within 3 bits is found, no pair further apart is
returned, and a look-up reads only pages that share a block.

The ``index`` fixture is the only place that names an implementation; the tests hold any
:class:`~trawl.content.neardup.BlockIndex` to the same contract.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from trawl.content.neardup import BlockIndex, MemoryBlockIndex, NearDuplicates
from trawl.content.text import NEAR_DUPLICATE_BITS, hamming
from trawl.store.values import blocks

MASK64 = (1 << 64) - 1
signed64 = st.integers(-(1 << 63), (1 << 63) - 1)


def index() -> BlockIndex:
    return MemoryBlockIndex()


def flip(value: int, bits: list[int]) -> int:
    """``value`` (signed) with the given bit positions flipped, returned signed."""
    for bit in bits:
        value ^= 1 << bit
    value &= MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def shares_a_block(a: int, b: int) -> bool:
    return any(x == y for x, y in zip(blocks(a), blocks(b), strict=True))


def test_blocks_cover_the_64_bits() -> None:
    assert blocks(0x1234_5678_9ABC_DEF0) == (0xDEF0, 0x9ABC, 0x5678, 0x1234)
    assert blocks(-1) == (0xFFFF,) * 4 == blocks(MASK64)


@settings(max_examples=300)
@given(signed64, st.lists(st.integers(0, 63), max_size=NEAR_DUPLICATE_BITS, unique=True))
async def test_a_hash_within_3_bits_is_found(original: int, bits: list[int]) -> None:
    near = NearDuplicates(index())
    assert await near.check(1, original) is None
    assert await near.check(2, flip(original, bits)) == 1


@settings(max_examples=300)
@given(signed64, st.lists(st.integers(0, 63), min_size=10, max_size=40, unique=True))
async def test_a_hash_10_or_more_bits_away_is_not_returned(original: int, bits: list[int]) -> None:
    near = NearDuplicates(index())
    await near.check(1, original)
    assert await near.check(2, flip(original, bits)) is None


async def test_far_hashes_are_rarely_even_candidates() -> None:
    """With 10 bits flipped, the chance that some block is untouched is about one in five;
    an index that hands back every stored page would make this one in one."""
    rng = random.Random(5)
    candidates = 0
    for trial in range(1000):
        stored = index()
        original = rng.getrandbits(64) - (1 << 63)
        await stored.add(trial, original)
        moved = flip(original, rng.sample(range(64), 10))
        candidates += len(await stored.candidates(blocks(moved)))
    assert candidates < 400


@settings(max_examples=100, deadline=None)
@given(
    st.lists(signed64, min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 29), st.lists(st.integers(0, 63), max_size=6)), max_size=40),
)
async def test_check_returns_the_oldest_page_within_3_bits(
    seeds: list[int], derived: list[tuple[int, list[int]]]
) -> None:
    """Brute force over every earlier page is the oracle."""
    hashes = seeds + [flip(seeds[i % len(seeds)], bits) for i, bits in derived]
    near = NearDuplicates(index())
    for url_id, value in enumerate(hashes):
        close = [i for i in range(url_id) if hamming(hashes[i], value) <= NEAR_DUPLICATE_BITS]
        found = await near.check(url_id, value)
        assert found == (close[0] if close else None)
        if found is not None:
            assert hamming(hashes[found], value) <= NEAR_DUPLICATE_BITS


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), signed64), max_size=40), signed64)
async def test_candidates_are_the_pages_sharing_a_block(
    added: list[tuple[int, int]], query: int
) -> None:
    stored = index()
    latest: dict[int, int] = {}
    for url_id, value in added:
        # Hashes near the query, so that blocks are shared often.
        value = value if url_id % 2 else flip(query, [url_id, 20 + url_id, 40 + url_id])
        await stored.add(url_id, value)
        latest.pop(url_id, None)
        latest[url_id] = value
    expected = [(u, h) for u, h in latest.items() if shares_a_block(h, query)]
    assert await stored.candidates(blocks(query)) == expected


async def test_a_page_is_not_its_own_near_duplicate_and_keeps_one_hash() -> None:
    stored = index()
    near = NearDuplicates(stored)
    first = 0x0123_4567_89AB_CDEF
    assert await near.check(7, first) is None
    assert await near.check(7, first) is None
    # Re-fetched with a new hash: the old one no longer matches anything.
    changed = flip(first, list(range(0, 64, 3)))
    assert await near.check(7, changed) is None
    assert await near.check(8, first) is None
    assert await near.check(9, flip(changed, [1])) == 7


async def test_unsigned_input_is_stored_signed() -> None:
    stored = index()
    near = NearDuplicates(stored)
    value = -0x1234_5678_9ABC_DEF0
    await near.check(1, value & MASK64)
    assert await stored.candidates(blocks(value)) == [(1, value)]
    assert await near.check(2, flip(value, [63])) == 1


async def test_lookups_read_few_rows_among_many_pages() -> None:
    rng = random.Random(11)
    stored = index()
    for url_id in range(1000):
        await stored.add(url_id, rng.getrandbits(64) - (1 << 63))
    read = 0
    for _ in range(200):
        read += len(await stored.candidates(blocks(rng.getrandbits(64))))
    # About 4 * 1000 / 65536 = 0.06 rows per look-up expected; a scan would read 1000.
    assert read < 100
