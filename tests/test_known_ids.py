"""The compact cache of confirmed URL ids (trawl.known_ids)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest

from trawl.known_ids import KnownIds, Table, _Generation, _table_maker

TABLES: dict[str, Callable[[int], Table]] = {"reference": _Generation}
"""The generations' tables to test: the reference, and the C one where it is built."""
if not os.environ.get("TRAWL_PURE"):
    from trawl._idtable import IdTable

    TABLES["c"] = IdTable


@pytest.fixture(params=sorted(TABLES))
def table(request: pytest.FixtureRequest) -> Callable[[int], Table]:
    return TABLES[request.param]


def _signed64(rng: random.Random) -> int:
    return rng.getrandbits(64) - (1 << 63)


def _pairs(count: int, seed: int = 1) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(_signed64(rng), _signed64(rng)) for _ in range(count)]


@pytest.mark.parametrize("recent", [100, 100_000])
def test_only_the_pairs_given_are_known(recent: int, table: Callable[[int], Table]) -> None:
    cache = KnownIds(10_000, recent=recent, table=table)
    pairs = _pairs(2_000)
    cache.add_all([uid for uid, _ in pairs], [h for _, h in pairs])
    assert all(cache.known(uid, h) for uid, h in pairs)
    assert not any(cache.known(uid, h ^ 2) for uid, h in pairs)
    assert not any(cache.known(uid, h) for uid, h in _pairs(2_000, seed=2))


@pytest.mark.parametrize("recent", [1, 100])
def test_extreme_ids_and_hashes_are_kept_apart(recent: int, table: Callable[[int], Table]) -> None:
    cache = KnownIds(100, recent=recent, table=table)
    edges = [-(1 << 63), -1, 0, 1, (1 << 63) - 1]
    cache.add_all(edges, [-h for h in range(len(edges))])
    for i, uid in enumerate(edges):
        assert cache.known(uid, -i)
        assert not cache.known(uid, -i - 2)


def test_the_cache_stays_within_its_capacity(table: Callable[[int], Table]) -> None:
    cache = KnownIds(1_000, recent=100, table=table)
    pairs = _pairs(50_000)
    for uid, h in pairs:
        cache.add_all([uid], [h])
        assert len(cache) <= 1_100
    assert sum(cache.known(uid, h) for uid, h in pairs[-500:]) == 500
    assert sum(cache.known(uid, h) for uid, h in pairs[:40_000]) == 0
    assert cache.nbytes <= 2 * 2 * 1024 * 8


def test_an_id_in_use_survives_the_turnover(table: Callable[[int], Table]) -> None:
    cache = KnownIds(100, recent=20, table=table)
    popular, fresh = _pairs(1)[0], _pairs(5_000, seed=3)
    cache.add_all([popular[0]], [popular[1]])
    for start in range(0, len(fresh), 40):
        assert cache.known(*popular)
        chunk = fresh[start : start + 40]
        cache.add_all([uid for uid, _ in chunk], [h for _, h in chunk])
    assert cache.known(*popular)


def test_a_zero_capacity_cache_knows_nothing(table: Callable[[int], Table]) -> None:
    cache = KnownIds(0, table=table)
    uid, h = _pairs(1)[0]
    cache.add_all([uid], [h])
    assert not cache.known(uid, h)
    assert len(cache) == 0


def test_a_small_cache_starts_small_and_grows(table: Callable[[int], Table]) -> None:
    cache = KnownIds(1_400_000, recent=1_000, table=table)
    start = cache.nbytes
    assert start <= 2 * 1024 * 8 + 16
    pairs = _pairs(100_000)
    cache.add_all([uid for uid, _ in pairs], [h for _, h in pairs])
    assert all(cache.known(uid, h) for uid, h in pairs)
    assert start < cache.nbytes <= 2 * 2 * 262_144 * 8


def test_the_c_table_answers_as_the_reference_does() -> None:
    if "c" not in TABLES:
        assert _table_maker() is _Generation
        return
    assert _table_maker() is TABLES["c"]
    tables = [TABLES["c"](64), _Generation(64)]
    rng = random.Random(7)
    given = _pairs(3_000, seed=5)
    for n, (uid, h) in enumerate(given):
        for i, t in enumerate(tables):
            if t.size >= t.limit:
                tables[i] = t = t.grown()
            t.add(uid, h)
            t.add(uid, h)
        if n % 100 == 0:
            probes = [
                (uid, h),
                (uid, h ^ 1),
                (uid, h ^ 2),
                (uid ^ 4, h),
                *_pairs(20, rng.randrange(1 << 30)),
            ]
            for probe in probes:
                assert tables[0].find(*probe) == tables[1].find(*probe)
    c, reference = tables
    assert (c.size, c.limit, c.nbytes) == (reference.size, reference.limit, reference.nbytes)
    assert c.size == len(set(given))
    assert all(c.find(uid, h) for uid, h in given)


@pytest.mark.skipif("c" not in TABLES, reason="TRAWL_PURE builds no C table")
def test_the_c_table_refuses_what_it_cannot_hold() -> None:
    make = TABLES["c"]
    with pytest.raises(ValueError, match="power of two"):
        make(3)
    small = make(4)
    with pytest.raises(OverflowError):
        small.find(1 << 63, 0)
    with pytest.raises(OverflowError):
        small.add(0, -(1 << 63) - 1)
    for uid in range(3):
        small.add(uid, uid)
    with pytest.raises(OverflowError, match="full"):
        small.add(3, 3)
    assert [small.find(uid, uid) for uid in range(4)] == [True, True, True, False]
