"""The SQLite frontier (trawl.store.sqlite.frontier): the ``ready`` table kept by its
trigger, and new URLs staged in RAM until a merge.

Whatever a crawl does to its rows (new URLs, claims, answers, retries, requeues,
in-link raises, merges, parking, reopening), every QUEUED row is in exactly one of
``ready`` and ``temp.staged``, at its current host and rank, and claims hand out a
host's best-ranked due rows across both."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from test_store import insert, url
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, Outcome, State

Place = tuple[int, int, float]
"""A queued row's (seq, host_id, rank)."""


def places(db: sqlite3.Connection, table: str) -> list[Place]:
    return [tuple(row) for row in db.execute(f"SELECT seq, host_id, rank FROM {table}")]


def check_frontier(store: SQLiteStore) -> tuple[int, int]:
    """Assert that ``ready`` and ``temp.staged`` split the QUEUED rows between them, each
    at its row's host and rank, and that each host's ``queued`` count is right; return
    how many rows each holds."""
    db = store._conn
    assert db is not None
    queued = places(db, "urls WHERE state = 0")
    ready = places(db, "ready")
    staged = places(db, "temp.staged")
    assert sorted(ready + staged) == sorted(queued)
    counts = dict(db.execute("SELECT id, queued FROM hosts").fetchall())
    for host_id, count in counts.items():
        assert count == sum(1 for _, host, _ in queued if host == host_id)
    return len(ready), len(staged)


def best_due(store: SQLiteStore, host_id: int, now: float, limit: int) -> list[int]:
    """The ids a claim of ``limit`` from ``host_id`` must hand out, read from ``urls``."""
    db = store._conn
    assert db is not None
    rows = db.execute(
        "SELECT id FROM urls WHERE host_id = ? AND state = 0 AND next_fetch_at <= ? "
        "ORDER BY rank, seq LIMIT ?",
        (host_id, now, limit),
    )
    return [row[0] for row in rows]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path, inbox_limit=7) as opened:
        yield opened


async def test_new_urls_wait_in_ram_until_a_merge_and_are_claimed_meanwhile(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path, inbox_limit=6) as store:
        assert await insert(store, *(url("a.test", n, depth=2) for n in range(4))) == 4
        assert check_frontier(store) == (0, 4)
        # A shallower URL stored later still goes first: claims read both tables.
        assert await insert(store, url("a.test", 9, depth=0)) == 1
        host = (await store.host_ids(["a.test"]))["a.test"]
        (first,) = await store.claim({host: 1}, now=1000.0)
        assert first.url == url("a.test", 9).url
        assert check_frontier(store) == (0, 4)
        assert await insert(store, *(url("a.test", n, depth=1) for n in range(10, 12))) == 2
        assert check_frontier(store) == (6, 0)  # seven stored since the last merge: merged
        claimed = await store.claim({host: 5}, now=1000.0)
        assert [u.depth for u in claimed] == [1, 1, 2, 2, 2]
        assert check_frontier(store) == (1, 0)


async def test_staged_urls_are_staged_again_when_the_crawl_is_opened_again(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path, inbox_limit=100) as store:
        await insert(store, *(url("a.test", n, depth=n % 3) for n in range(5)))
        host = (await store.host_ids(["a.test"]))["a.test"]
        await store.claim({host: 1}, now=1000.0)
        assert check_frontier(store) == (0, 4)
    async with SQLiteStore(tmp_path, inbox_limit=100) as store:
        assert check_frontier(store) == (0, 4)
        assert await store.recover() == 1  # the claimed URL is queued again, in ready
        assert check_frontier(store) == (1, 4)
        claimed = await store.claim({host: 10}, now=1000.0)
        assert sorted(u.url for u in claimed) == sorted(url("a.test", n).url for n in range(5))
        assert [u.depth for u in claimed] == sorted(u.depth for u in claimed)


async def test_an_in_link_raise_moves_a_staged_url_up_once(store: SQLiteStore) -> None:
    deep = url("a.test", 1, depth=6)
    await insert(store, deep, *(url("a.test", n, depth=1) for n in range(2, 5)))
    await store.commit(CommitBatch(inlinks=[(deep.id, 64)]))
    assert check_frontier(store) == (1, 3)  # the raised URL left RAM for ready
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = await store.claim({host: 10}, now=1000.0)
    assert claimed[0].url == deep.url
    assert len(claimed) == len({u.id for u in claimed}) == 4


async def test_a_raise_that_changes_nothing_leaves_a_staged_url_staged(
    store: SQLiteStore,
) -> None:
    staged = url("a.test", 1)
    await insert(store, staged, url("a.test", 2))
    await store.commit(CommitBatch(inlinks=[(staged.id, 0)]))  # no level it lacks
    assert check_frontier(store) == (0, 2)
    host = (await store.host_ids(["a.test"]))["a.test"]
    assert len(await store.claim({host: 5}, now=1000.0)) == 2


async def test_the_page_budget_parks_staged_and_ready_urls(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path, inbox_limit=4, page_budget=1) as store:
        await insert(store, *(url("a.test", n) for n in range(5)))  # merged: in ready
        await insert(store, *(url("a.test", n) for n in range(5, 8)))  # staged
        host = (await store.host_ids(["a.test"]))["a.test"]
        (first,) = await store.claim({host: 1}, now=1000.0)
        done = Outcome(first.id, host, State.DONE, 1, status=200, fetched_at=1000.0)
        await store.commit(CommitBatch(outcomes=[done]))
        assert check_frontier(store) == (4, 3)
        assert await store.claim({host: 5}, now=1000.0) == []
        assert check_frontier(store) == (0, 0)
        assert (await store.counters())["over_host_page_budget"] == 7


async def test_every_queued_url_is_in_one_place_through_a_random_crawl(
    store: SQLiteStore,
) -> None:
    rng = random.Random(7)
    hosts = ["a.test", "b.test", "c.test"]
    made = 0
    now = 1000.0
    for step in range(60):
        new = []
        for _ in range(rng.randrange(6)):
            new.append(url(rng.choice(hosts), made, depth=rng.randrange(5)))
            made += 1
        await insert(store, *new)
        check_frontier(store)
        ids = await store.host_ids(hosts)
        wanted = {ids[h]: rng.randrange(1, 3) for h in hosts if h in ids}
        expected = {h: best_due(store, h, now, n) for h, n in wanted.items()}
        claimed = await store.claim(wanted, now=now)
        for host_id, best in expected.items():
            assert [u.id for u in claimed if u.host_id == host_id] == best
        check_frontier(store)
        outcomes = []
        for u in claimed:
            state = rng.choice((State.DONE, State.QUEUED, State.FAILED))
            outcomes.append(
                Outcome(
                    u.id, u.host_id, state, u.attempts + 1, status=200, fetched_at=now,
                    next_fetch_at=now + rng.choice((0.0, 5.0)),
                    due_at=now + 3.0 if state is State.DONE else None,
                )
            )  # fmt: skip
        stored = [u for u in new if rng.random() < 0.5]
        raises = [(u.id, rng.choice((8, 64))) for u in stored]
        await store.commit(CommitBatch(outcomes=outcomes, inlinks=raises))
        check_frontier(store)
        if step % 10 == 9:
            await store.requeue_due(now, 100)
            check_frontier(store)
        now += 1.0
    ready, staged = check_frontier(store)
    assert ready > 0
    assert staged > 0
