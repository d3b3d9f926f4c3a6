"""The compact cache of confirmed URL ids (trawl.frontier.known_ids)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence

import pytest

from trawl.frontier.known_ids import (
    KnownIds,
    Table,
    _Generation,
    _screen,
    _screen_for,
    _table_maker,
)
from trawl.store.values import NewURL

TABLES: dict[str, Callable[[int], Table]] = {"reference": _Generation}
"""The generations' tables to test: the reference, and the C one where it is built."""
if not os.environ.get("TRAWL_PURE"):
    from trawl.frontier._idtable import IdTable

    TABLES["c"] = IdTable


@pytest.fixture(params=sorted(TABLES))
def table(request: pytest.FixtureRequest) -> Callable[[int], Table]:
    return TABLES[request.param]


def _signed64(rng: random.Random) -> int:
    return rng.getrandbits(64) - (1 << 63)


def _pairs(count: int, seed: int = 1) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(_signed64(rng), _signed64(rng)) for _ in range(count)]


def _links(count: int, seed: int = 1) -> list[NewURL]:
    """Candidates with random ids and texts (no id is the hash of its text here: the
    cache keys on the pair it is given)."""
    rng = random.Random(seed)
    return [
        NewURL(_signed64(rng), f"https://h{rng.randrange(50)}.test/{rng.getrandbits(40)}", "h", 1)
        for _ in range(count)
    ]


def _remember(cache: KnownIds, links: Sequence[NewURL]) -> None:
    cache.add_all([link.id for link in links], [hash(link.url) for link in links])


def _known(cache: KnownIds, link: NewURL) -> bool:
    unique, duplicates = cache.screen([link])
    assert duplicates + len(unique) == 1
    return duplicates == 1


def _retext(link: NewURL) -> NewURL:
    return link._replace(url=link.url + "#other")


@pytest.mark.parametrize("recent", [100, 100_000])
def test_only_the_pairs_given_are_known(recent: int, table: Callable[[int], Table]) -> None:
    cache = KnownIds(10_000, recent=recent, table=table)
    links = _links(2_000)
    _remember(cache, links)
    assert all(_known(cache, link) for link in links)
    assert not any(_known(cache, _retext(link)) for link in links)
    assert not any(_known(cache, link) for link in _links(2_000, seed=2))


@pytest.mark.parametrize("recent", [1, 100])
def test_extreme_ids_are_kept_apart(recent: int, table: Callable[[int], Table]) -> None:
    cache = KnownIds(100, recent=recent, table=table)
    edges = [NewURL(uid, f"https://e.test/{uid}", "e", 1) for uid in (-(1 << 63), -1, 0, 1)]
    edges.append(NewURL((1 << 63) - 1, "https://e.test/top", "e", 1))
    _remember(cache, edges)
    for link in edges:
        assert _known(cache, link)
        assert not _known(cache, _retext(link))


def test_a_batch_is_split_into_the_first_of_each_unknown_id_and_a_count_of_the_rest(
    table: Callable[[int], Table],
) -> None:
    cache = KnownIds(1_000, recent=10, table=table)
    held, fresh = _links(30), _links(5, seed=2)
    _remember(cache, held)  # 10 in the dict, 20 in the tables
    other_text = _retext(held[0])
    repeat = fresh[0]._replace(url="x")
    batch = [fresh[0], held[3], fresh[1], fresh[0], held[25], other_text, repeat]
    unique, duplicates = cache.screen(batch)
    assert list(unique.values()) == [fresh[0], fresh[1], other_text]
    assert list(unique) == [fresh[0].id, fresh[1].id, held[0].id]
    assert duplicates == 4


def test_an_id_in_use_survives_the_turnover(table: Callable[[int], Table]) -> None:
    cache = KnownIds(100, recent=20, table=table)
    popular, fresh = _links(1)[0], _links(5_000, seed=3)
    _remember(cache, [popular])
    for start in range(0, len(fresh), 40):
        assert _known(cache, popular)
        _remember(cache, fresh[start : start + 40])
    assert _known(cache, popular)


def test_the_cache_stays_within_its_capacity(table: Callable[[int], Table]) -> None:
    cache = KnownIds(1_000, recent=100, table=table)
    links = _links(50_000)
    for link in links:
        _remember(cache, [link])
        assert len(cache) <= 1_100
    assert sum(_known(cache, link) for link in links[-500:]) == 500
    assert sum(_known(cache, link) for link in links[:40_000]) == 0
    assert cache.nbytes <= 2 * 2 * 1024 * 8


def test_a_zero_capacity_cache_knows_nothing(table: Callable[[int], Table]) -> None:
    cache = KnownIds(0, table=table)
    link = _links(1)[0]
    _remember(cache, [link])
    assert not _known(cache, link)
    assert len(cache) == 0


def test_a_small_cache_starts_small_and_grows(table: Callable[[int], Table]) -> None:
    cache = KnownIds(1_400_000, recent=1_000, table=table)
    start = cache.nbytes
    assert start <= 2 * 1024 * 8 + 16
    links = _links(100_000)
    _remember(cache, links)
    unique, duplicates = cache.screen(links)
    assert (unique, duplicates) == ({}, len(links))
    assert start < cache.nbytes <= 2 * 2 * 262_144 * 8


def test_the_c_screen_answers_as_the_reference_does() -> None:
    if "c" not in TABLES:
        assert _screen_for(_Generation) is _screen
        return
    assert _screen_for(TABLES["c"]) is not _screen
    caches = [KnownIds(3_000, recent=200, table=make) for make in (TABLES["c"], _Generation)]
    rng = random.Random(11)
    pool = _links(6_000, seed=4)
    for _ in range(60):
        batch = [pool[int(len(pool) * rng.random() ** 2)] for _ in range(150)]
        batch += [_retext(link) for link in rng.sample(batch, 5)]
        answers = [cache.screen(batch) for cache in caches]
        assert answers[0] == answers[1]
        assert list(answers[0][0]) == list(answers[1][0])
        assert len(caches[0]) == len(caches[1])
        for cache in caches:
            _remember(cache, list(answers[0][0].values()))


@pytest.mark.skipif("c" not in TABLES, reason="TRAWL_PURE builds no C table")
def test_the_c_screen_refuses_what_it_cannot_read() -> None:
    from trawl.frontier._idtable import screen

    def c_screen(candidates: list[object], newer: object) -> object:
        return screen(candidates, {}, newer, c_table)  # type: ignore[arg-type]

    c_table = TABLES["c"](4)
    with pytest.raises(TypeError, match="IdTable"):
        c_screen([], _Generation(4))
    with pytest.raises(TypeError, match="candidate"):
        c_screen([(1,)], c_table)
    with pytest.raises(OverflowError):
        c_screen([(1 << 64, "x")], c_table)
    with pytest.raises(TypeError, match="unhashable"):
        c_screen([(1, ["x"])], c_table)


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
