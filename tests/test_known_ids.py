"""The compact cache of confirmed URL ids (trawl.known_ids)."""

from __future__ import annotations

import random

import pytest

from trawl.known_ids import KnownIds


def _signed64(rng: random.Random) -> int:
    return rng.getrandbits(64) - (1 << 63)


def _pairs(count: int, seed: int = 1) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(_signed64(rng), _signed64(rng)) for _ in range(count)]


@pytest.mark.parametrize("recent", [100, 100_000])
def test_only_the_pairs_given_are_known(recent: int) -> None:
    cache = KnownIds(10_000, recent=recent)
    pairs = _pairs(2_000)
    cache.add_all([uid for uid, _ in pairs], [h for _, h in pairs])
    assert all(cache.known(uid, h) for uid, h in pairs)
    assert not any(cache.known(uid, h ^ 2) for uid, h in pairs)
    assert not any(cache.known(uid, h) for uid, h in _pairs(2_000, seed=2))


@pytest.mark.parametrize("recent", [1, 100])
def test_extreme_ids_and_hashes_are_kept_apart(recent: int) -> None:
    cache = KnownIds(100, recent=recent)
    edges = [-(1 << 63), -1, 0, 1, (1 << 63) - 1]
    cache.add_all(edges, [-h for h in range(len(edges))])
    for i, uid in enumerate(edges):
        assert cache.known(uid, -i)
        assert not cache.known(uid, -i - 2)


def test_the_cache_stays_within_its_capacity() -> None:
    cache = KnownIds(1_000, recent=100)
    pairs = _pairs(50_000)
    for uid, h in pairs:
        cache.add_all([uid], [h])
        assert len(cache) <= 1_100
    assert sum(cache.known(uid, h) for uid, h in pairs[-500:]) == 500
    assert sum(cache.known(uid, h) for uid, h in pairs[:40_000]) == 0
    assert cache.nbytes <= 2 * 2 * 1024 * 8


def test_an_id_in_use_survives_the_turnover() -> None:
    cache = KnownIds(100, recent=20)
    popular, fresh = _pairs(1)[0], _pairs(5_000, seed=3)
    cache.add_all([popular[0]], [popular[1]])
    for start in range(0, len(fresh), 40):
        assert cache.known(*popular)
        chunk = fresh[start : start + 40]
        cache.add_all([uid for uid, _ in chunk], [h for _, h in chunk])
    assert cache.known(*popular)


def test_a_zero_capacity_cache_knows_nothing() -> None:
    cache = KnownIds(0)
    uid, h = _pairs(1)[0]
    cache.add_all([uid], [h])
    assert not cache.known(uid, h)
    assert len(cache) == 0


def test_a_small_cache_starts_small_and_grows() -> None:
    cache = KnownIds(1_400_000, recent=1_000)
    start = cache.nbytes
    assert start <= 2 * 1024 * 8 + 16
    pairs = _pairs(100_000)
    cache.add_all([uid for uid, _ in pairs], [h for _, h in pairs])
    assert all(cache.known(uid, h) for uid, h in pairs)
    assert start < cache.nbytes <= 2 * 2 * 262_144 * 8
