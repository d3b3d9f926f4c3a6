"""The seen-set stays exact when its Bloom filter is wrong.

The filter here is sized for 10 URLs at a 50 % error rate and then fed hundreds, so
nearly every new URL is a false "maybe": the store must settle each one, and the
verdict must still be exactly right.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from trawl.extract.urls import url_hash
from trawl.frontier.seen import SeenSet
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, NewURL


def new_url(n: int, host: str = "a.test") -> NewURL:
    text = f"http://{host}/page/{n}"
    return NewURL(id=url_hash(text), url=text, host=host, depth=1)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path) as opened:
        yield opened


async def settle(seen: SeenSet, store: SQLiteStore, urls: list[NewURL]) -> list[NewURL]:
    """Filter ``urls`` and insert the survivors, as the committer does; return them."""
    verdict = await seen.filter_new(urls)
    await store.commit(CommitBatch(new_urls=verdict.new))
    return verdict.new


async def test_false_positives_never_drop_a_new_url(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=10, error_rate=0.5, known_cache=0)
    known = [new_url(n) for n in range(300)]
    assert await settle(seen, store, known) == known

    fresh = [new_url(n) for n in range(300, 600)]
    verdict = await seen.filter_new(fresh + known)
    assert verdict.new == fresh
    assert verdict.duplicates == len(known)
    assert verdict.collisions == 0
    # The filter is saturated: it could not tell most fresh URLs from known ones.
    assert verdict.store_lookups > len(known) + len(fresh) // 2


async def test_the_unique_count_is_exact(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=10, error_rate=0.5, known_cache=0)
    total_new = 0
    for start in range(0, 400, 50):
        batch = [new_url(n) for n in range(start, start + 100)]
        total_new += len(await settle(seen, store, batch))
    assert total_new == 450
    assert (await store.counters())["discovered"] == 450
    assert len([row async for row in store.export()]) == 450


async def test_duplicates_inside_one_batch_are_counted(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=10, error_rate=0.5, known_cache=0)
    a, b = new_url(1), new_url(2)
    verdict = await seen.filter_new([a, b, a, a, b])
    assert verdict.new == [a, b]
    assert verdict.duplicates == 3
    assert verdict.collisions == 0


async def test_a_known_id_with_other_text_is_a_collision(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=10, error_rate=0.5, known_cache=0)
    original = new_url(1)
    await settle(seen, store, [original])
    impostor = NewURL(id=original.id, url="http://a.test/other", host="a.test", depth=2)
    verdict = await seen.filter_new([impostor, new_url(2)])
    assert verdict.new == [new_url(2)]
    assert verdict.collisions == 1
    assert verdict.duplicates == 0
    assert await store.existing([original.id]) == {original.id: original.url}


async def test_load_rebuilds_the_filter_from_the_store(store: SQLiteStore) -> None:
    first = SeenSet(store, expected_urls=1000, error_rate=0.01)
    urls = [new_url(n) for n in range(120)]
    await settle(first, store, urls)

    resumed = SeenSet(store, expected_urls=1000, error_rate=0.01)
    assert await resumed.load() == 120
    verdict = await resumed.filter_new(urls)
    assert verdict.new == []
    assert verdict.duplicates == 120
    assert verdict.store_lookups == 120


async def test_definitely_new_urls_skip_the_store(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=100_000, error_rate=0.001)
    verdict = await seen.filter_new([new_url(n) for n in range(50)])
    assert len(verdict.new) == 50
    assert verdict.store_lookups == 0
    assert seen.bloom_bytes > 0


async def test_confirmed_urls_are_answered_without_a_store_lookup(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=10_000, error_rate=0.01, known_cache=1_000)
    known = [new_url(n) for n in range(200)]
    await settle(seen, store, known)
    verdict = await seen.filter_new([*known, new_url(200)])
    assert verdict.new == [new_url(200)]
    assert verdict.duplicates == 200
    assert verdict.store_lookups <= 5  # only Bloom false positives among new URLs


async def test_cached_id_with_other_text_is_settled_by_the_store(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=10_000, error_rate=0.01, known_cache=1_000)
    original = new_url(1)
    await settle(seen, store, [original])
    impostor = NewURL(original.id, "http://a.test/other", "a.test", 1)
    verdict = await seen.filter_new([impostor])
    assert (verdict.new, verdict.collisions, verdict.store_lookups) == ([], 1, 1)


async def test_a_popular_url_stays_cached_while_the_cache_turns_over(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=100_000, error_rate=0.0001, known_cache=100)
    popular = new_url(0)
    await settle(seen, store, [popular])
    lookups = 0
    for start in range(1, 1000, 40):
        # Forty new URLs a batch: each batch overflows a generation (50 ids).
        fresh = [new_url(n) for n in range(start, start + 40)]
        verdict = await seen.filter_new([popular, *fresh])
        assert verdict.new == fresh
        assert verdict.duplicates == 1
        lookups += verdict.store_lookups
        await store.commit(CommitBatch(new_urls=verdict.new))
    # Only Bloom false positives among the 1,000 new URLs reach the store.
    assert lookups <= 2
