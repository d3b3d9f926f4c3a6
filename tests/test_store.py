"""The store contract: what every engine behind ``trawl.store.protocols.Store`` must do.

Each test takes ``open_store``, parametrised by engine name, so a new engine joins by
adding one entry to :data:`ENGINES`. Failures are provoked for real (a NOT NULL column
given no value), never by mocking.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from pg import DSN as PG_DSN
from pg import connect as pg_connect
from pg import pg_schema
from trawl.errors import StoreError
from trawl.extract.urls import url_hash
from trawl.frontier.priority import priority
from trawl.store.postgres.store import PostgresStore
from trawl.store.process import StoreProcess
from trawl.store.protocols import Store
from trawl.store.schema import (
    POSTGRES_TYPES,
    SCHEMA_VERSION,
    SQLITE_TYPES,
    migration_statements,
)
from trawl.store.sqlite.sql import CLAIM_QUEUED
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import (
    CommitBatch,
    Duplicates,
    ExportRow,
    HostUpdate,
    NewURL,
    Outcome,
    QueuedURL,
    RobotsRecord,
    Soft404Record,
    State,
    UploadRecord,
    UrlFilter,
)

__all__ = ["pg_schema"]


class Engine(Store, contextlib.AbstractAsyncContextManager[Any]):
    """A store engine as the tests use it: the protocol plus ``async with``."""


Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class EngineKind:
    """How the tests open one engine: ``place`` names the fixture that gives a store's
    place (a data dir, a schema), ``make`` opens a store there with the per-host budgets
    ``pages`` and ``discovered``, and ``query`` reads its database directly with SQL."""

    place: str
    make: Callable[[Any, int | None, int | None], Engine]
    query: Callable[[Any, str], Rows]


def sqlite_query(data_dir: Path, statement: str) -> Rows:
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        return db.execute(statement).fetchall()


def postgres_query(schema: str, statement: str) -> Rows:
    """The rows of the first of ``statement``'s statements that returns rows."""
    with pg_connect(schema) as db:
        cursor = db.execute(statement)
        while cursor.description is None and cursor.nextset():
            pass
        return cursor.fetchall()


ENGINES: dict[str, EngineKind] = {
    "sqlite": EngineKind(
        "tmp_path",
        lambda path, pages, discovered: cast(
            Engine, SQLiteStore(path, page_budget=pages, discovery_budget=discovered)
        ),
        sqlite_query,
    ),
    # The same SQLite store run in a process of its own, as a crawl on two cores runs it.
    "sqlite-process": EngineKind(
        "tmp_path",
        lambda path, pages, discovered: cast(
            Engine, StoreProcess(path, page_budget=pages, discovery_budget=discovered)
        ),
        sqlite_query,
    ),
    "postgresql": EngineKind(
        "pg_schema",
        lambda schema, pages, discovered: cast(
            Engine,
            PostgresStore(PG_DSN, schema=schema, page_budget=pages, discovery_budget=discovered),
        ),
        postgres_query,
    ),
}


class OpenStore:
    """Opens (and on exit closes) an engine's store at one place; call it again to reopen.

    Takes the per-host budgets ``pages`` and ``discovered`` (default None).
    """

    def __init__(self, kind: EngineKind, place: Any) -> None:
        self._kind = kind
        self._place = place

    @contextlib.asynccontextmanager
    async def __call__(
        self, *, pages: int | None = None, discovered: int | None = None
    ) -> AsyncIterator[Engine]:
        async with self._kind.make(self._place, pages, discovered) as store:
            yield store

    @property
    def postgres(self) -> bool:
        """Whether the store is a PostgreSQL one (else SQLite)."""
        return self._kind.place == "pg_schema"

    def query(self, statement: str) -> Rows:
        """The rows of ``statement``, read from the store's database directly."""
        return self._kind.query(self._place, statement)


@pytest.fixture(params=sorted(ENGINES))
def open_store(request: pytest.FixtureRequest) -> OpenStore:
    """Opens the engine's store at one place (a data dir, a schema)."""
    kind = ENGINES[request.param]
    return OpenStore(kind, request.getfixturevalue(kind.place))


@pytest.fixture
async def store(open_store: OpenStore) -> AsyncIterator[Engine]:
    async with open_store() as opened:
        yield opened


def url(host: str, n: int, depth: int = 0) -> NewURL:
    """A discovered URL, identified by its hash as the engine does."""
    text = f"http://{host}/{n}"
    return NewURL(id=url_hash(text), url=text, host=host, depth=depth)


async def insert(store: Store, *urls: NewURL) -> int:
    """Commit ``urls`` as one batch; return how many were new."""
    return (await store.commit(CommitBatch(new_urls=list(urls)))).inserted


async def rows(store: Store) -> dict[str, ExportRow]:
    return {row.url: row async for row in store.export()}


def queued(open_store: OpenStore) -> dict[str, int]:
    """Each host's count of queued URLs, as stored in its row (hosts with none left out)."""
    rows = open_store.query("SELECT name, queued FROM hosts WHERE queued > 0")
    return dict(rows)


async def test_insert_if_absent_keeps_one_row_and_an_exact_count(store: Engine) -> None:
    first = url("a.test", 1)
    result = await store.commit(CommitBatch(new_urls=[first, url("a.test", 2), first]))
    assert result.inserted == 2
    assert await insert(store, first, url("b.test", 1)) == 1
    assert await insert(store, first) == 0

    counters = await store.counters()
    assert counters["discovered"] == 3
    assert counters["duplicates"] == 3
    assert counters["queued"] == 3
    assert sorted(await rows(store)) == ["http://a.test/1", "http://a.test/2", "http://b.test/1"]
    assert await store.existing([first.id, 12345]) == {first.id: first.url}


async def test_commit_reports_hosts_that_got_new_work(store: Engine) -> None:
    await insert(store, url("a.test", 1))
    result = await store.commit(CommitBatch(new_urls=[url("a.test", 1), url("b.test", 1)]))
    ids = await store.host_ids(["a.test", "b.test"])
    assert result.hosts_with_new_work == frozenset({ids["b.test"]})


async def test_host_ids_are_stable_and_created_on_demand(store: Engine) -> None:
    first = await store.host_ids(["a.test", "b.test"])
    again = await store.host_ids(["b.test", "c.test", "a.test"])
    assert again["a.test"] == first["a.test"]
    assert again["b.test"] == first["b.test"]
    assert len(set(again.values())) == 3


async def test_claim_takes_the_shallowest_due_urls_per_host(
    store: Engine, open_store: OpenStore
) -> None:
    a = [url("a.test", n, depth) for n, depth in enumerate([2, 0, 1, 0, 3])]
    b = [url("b.test", n, 1) for n in range(3)]
    await insert(store, *a, *b)
    ids = await store.host_ids(["a.test", "b.test"])

    claimed = await store.claim({ids["a.test"]: 3}, now=1000.0)
    assert [c.depth for c in claimed] == [0, 0, 1]
    assert {c.host_id for c in claimed} == {ids["a.test"]}
    assert {c.url for c in claimed} == {a[1].url, a[3].url, a[2].url}
    states = await rows(store)
    assert {u for u, r in states.items() if r.state == State.CLAIMED} == {c.url for c in claimed}
    assert queued(open_store) == {"a.test": 2, "b.test": 3}

    again = await store.claim({ids["a.test"]: 10, ids["b.test"]: 1}, now=1000.0)
    assert sorted(c.depth for c in again if c.host_id == ids["a.test"]) == [2, 3]
    assert len([c for c in again if c.host_id == ids["b.test"]]) == 1
    assert queued(open_store) == {"b.test": 2}
    assert await store.claim({ids["a.test"]: 5}, now=1000.0) == []


async def test_equal_ranks_are_claimed_in_a_stable_order(
    store: Engine, open_store: OpenStore
) -> None:
    # Two commits at one time and one depth: every URL has the same rank. SQLite hands
    # them out as they were stored (the rowid: commit by commit, each commit's URLs in
    # hash order, as it inserts them); PostgreSQL by URL hash alone.
    first = [url("a.test", n) for n in range(6)]
    second = [url("a.test", n) for n in range(6, 12)]
    for part in (first, second):
        await store.commit(CommitBatch(new_urls=part, at=500.0))
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = [u.url for _ in range(3) for u in await store.claim({host: 4}, now=1000.0)]

    def by_hash(urls: list[NewURL]) -> list[str]:
        return [u.url for u in sorted(urls, key=lambda u: u.id)]

    assert by_hash(first) + by_hash(second) != by_hash(first + second)
    expected = by_hash(first + second) if open_store.postgres else by_hash(first) + by_hash(second)
    assert claimed == expected


def claim_plan(data_dir: Path) -> list[str]:
    """SQLite's query plan for a claim, one line per step."""
    claim = CLAIM_QUEUED.format(table="ready").replace("?", "1")
    rows = sqlite_query(data_dir, "EXPLAIN QUERY PLAN " + claim)
    return [row[-1] for row in rows]


async def test_a_sqlite_claim_reads_the_frontier_index_in_order(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path) as store:
        await insert(store, *(url("a.test", n, n % 3) for n in range(50)))
    plan = claim_plan(tmp_path)
    assert any("SEARCH r USING PRIMARY KEY (host_id=?)" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
    assert ready_key(tmp_path) == ["host_id", "rank", "seq"]


def ready_key(data_dir: Path) -> list[str]:
    """The key columns of the SQLite frontier's ``ready`` table, in order."""
    columns = sqlite_query(data_dir, "PRAGMA table_info(ready)")
    return [row[1] for row in sorted(columns, key=lambda row: row[5]) if row[5]]


async def test_claim_respects_next_fetch_at(store: Engine, open_store: OpenStore) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2, depth=1))
    host = (await store.host_ids(["a.test"]))["a.test"]
    first, second = await store.claim({host: 2}, now=1000.0)
    retry = Outcome(first.id, host, State.QUEUED, attempts=1, status=503, next_fetch_at=1100.0)
    done = Outcome(second.id, host, State.DONE, attempts=1, status=200, fetched_at=1000.0)
    await store.commit(CommitBatch(outcomes=[retry, done]))
    assert queued(open_store) == {"a.test": 1}

    assert await store.claim({host: 5}, now=1099.0) == []
    later = await store.claim({host: 5}, now=1100.0)
    assert [c.id for c in later] == [first.id]
    assert later[0].attempts == 1


async def test_recover_returns_claimed_urls_and_fixes_host_counts(
    store: Engine, open_store: OpenStore
) -> None:
    await insert(store, *(url("a.test", n) for n in range(4)), url("b.test", 1))
    ids = await store.host_ids(["a.test", "b.test"])
    claimed = await store.claim({ids["a.test"]: 3, ids["b.test"]: 1}, now=1000.0)
    done = claimed[0]
    await store.commit(
        CommitBatch(outcomes=[Outcome(done.id, done.host_id, State.DONE, 1, status=200)])
    )
    assert queued(open_store) == {"a.test": 1}

    assert await store.recover() == 3
    states = {r.url: r.state for r in (await rows(store)).values()}
    assert list(states.values()).count(State.QUEUED) == 4
    assert states[done.url] == State.DONE
    assert queued(open_store) == {"a.test": 3, "b.test": 1}
    assert (await store.counters())["queued"] == 4
    assert await store.recover() == 0


async def test_requeue_failed_queues_one_error_again_with_exact_counts(
    store: Engine, open_store: OpenStore
) -> None:
    await insert(store, *(url("a.test", n) for n in range(3)), url("b.test", 1))
    ids = await store.host_ids(["a.test", "b.test"])
    claimed = await store.claim({ids["a.test"]: 3, ids["b.test"]: 1}, now=1000.0)
    refused = {c.url for c in claimed if c.url != "http://a.test/2"}
    batch = CommitBatch()
    for c in claimed:
        error = "blocked_address" if c.url in refused else "timeout"
        batch.outcomes.append(Outcome(c.id, c.host_id, State.FAILED, 2, error=error))
        batch.count("failed")
        batch.count(f"error:{error}")
    await store.commit(batch)
    assert queued(open_store) == {}

    assert await store.requeue_failed("blocked_address") == 3
    counters = await store.counters()
    assert (counters["failed"], counters["error:blocked_address"]) == (1, 0)
    assert (counters["error:timeout"], counters["queued"]) == (1, 3)
    assert queued(open_store) == {"a.test": 2, "b.test": 1}
    answered = open_store.query("SELECT name, fetched FROM hosts ORDER BY name")
    assert [tuple(row) for row in answered] == [("a.test", 1), ("b.test", 0)]
    states = await rows(store)
    assert {u for u, r in states.items() if r.state == State.QUEUED} == refused
    assert all(states[u].error is None for u in refused)
    assert states["http://a.test/2"].error == "timeout"

    again = await store.claim({ids["a.test"]: 5, ids["b.test"]: 5}, now=1000.0)
    assert {c.url for c in again} == refused
    assert {c.attempts for c in again} == {0}
    assert await store.requeue_failed("blocked_address") == 0


async def test_a_failing_batch_leaves_nothing_behind(store: Engine, open_store: OpenStore) -> None:
    await insert(store, url("a.test", 1))
    host = (await store.host_ids(["a.test"]))["a.test"]
    (claimed,) = await store.claim({host: 1}, now=1000.0)
    before_rows = await rows(store)
    before_counters = await store.counters()

    batch = CommitBatch(
        outcomes=[Outcome(claimed.id, host, State.DONE, 1, status=200, fetched_at=1000.0)],
        new_urls=[
            url("a.test", 2),
            url("c.test", 1),
            # The url column is NOT NULL: the database itself refuses this row.
            NewURL(id=99, url=cast(str, None), host="a.test", depth=1),
        ],
        hosts=[HostUpdate(host, robots=RobotsRecord(200, b"", 1.0))],
    )
    batch.count("fetched")
    with pytest.raises(StoreError):
        await store.commit(batch)

    assert await rows(store) == before_rows
    assert await store.counters() == before_counters
    assert await store.robots(host) is None
    assert queued(open_store) == {}
    # The store is still usable after the failed transaction.
    assert await insert(store, url("a.test", 2)) == 1


async def test_robots_record_round_trip(store: Engine) -> None:
    ids = await store.host_ids(["a.test", "b.test", "c.test"])
    body = b"User-agent: *\nDisallow: /private/\n\x00\xff"
    records = {
        "a.test": RobotsRecord(status=200, body=body, fetched_at=1234.5),
        "b.test": RobotsRecord(status=None, body=b"", fetched_at=99.0),
    }
    await store.commit(
        CommitBatch(hosts=[HostUpdate(ids[name], robots=rec) for name, rec in records.items()])
    )
    assert await store.robots(ids["a.test"]) == records["a.test"]
    assert await store.robots(ids["b.test"]) == records["b.test"]
    assert await store.robots(ids["c.test"]) is None


async def test_meta_get_and_set(store: Engine) -> None:
    assert await store.get_meta("seeds") is None
    await store.set_meta("seeds", "http://a.test/")
    await store.set_meta("seeds", "http://b.test/")
    assert await store.get_meta("seeds") == "http://b.test/"
    assert await store.get_meta("schema_version") == str(SCHEMA_VERSION)


async def test_uploads_are_recorded_once_per_object(store: Engine) -> None:
    first = UploadRecord("b1", "p/c/warc/f.warc.gz", "f.warc.gz", 10, "ab" * 32, "w1", 1.0)
    assert await store.uploaded("b1", [first.key]) == set()
    await store.record_upload(first)
    # A second record of one object (a re-upload after a crash) changes nothing.
    await store.record_upload(dataclasses.replace(first, worker="w2", uploaded_at=2.0))
    await store.record_upload(dataclasses.replace(first, bucket="b2"))
    assert await store.uploaded("b1", [first.key, "p/c/text/t.jsonl.gz"]) == {first.key}
    assert await store.uploaded("b2", [first.key]) == {first.key}
    assert await store.uploaded("b3", [first.key]) == set()
    assert await store.uploaded("b1", []) == set()


async def test_counters_add_up_across_commits(store: Engine) -> None:
    for _ in range(3):
        batch = CommitBatch()
        batch.count("fetched", 2)
        batch.count("status_2xx")
        await store.commit(batch)
    counters = await store.counters()
    assert counters["fetched"] == 6
    assert counters["status_2xx"] == 3
    assert counters["discovered"] == 0
    assert counters["queued"] == 0


async def test_export_rows_carry_the_latest_result(store: Engine) -> None:
    page, moved, blocked = url("a.test", 1), url("a.test", 2, 1), url("a.test", 3, 2)
    await insert(store, page, moved, blocked)
    host = (await store.host_ids(["a.test"]))["a.test"]
    await store.claim({host: 3}, now=1000.0)
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(
                    page.id, host, State.DONE, 1, status=200, content_type="text/html",
                    length=512, fetched_at=1700000000.0,
                ),
                Outcome(
                    moved.id, host, State.DONE, 1, status=301, fetched_at=1700000001.0,
                    redirect_to="http://a.test/new",
                ),
                Outcome(blocked.id, host, State.BLOCKED, 0, error="robots_unavailable"),
            ]
        )
    )  # fmt: skip
    exported = await rows(store)
    assert exported[page.url] == ExportRow(
        url=page.url, status=200, content_type="text/html", length=512,
        fetched_at=1700000000.0, depth=0, redirect_to=None, error=None, state=State.DONE,
    )  # fmt: skip
    assert exported[moved.url].redirect_to == "http://a.test/new"
    assert exported[moved.url].depth == 1
    assert exported[blocked.url].state == State.BLOCKED
    assert exported[blocked.url].error == "robots_unavailable"


async def test_export_names_duplicates_and_aliases_by_url_with_content_hash(
    store: Engine,
) -> None:
    owner, copy, near, alias, lone = (url("a.test", n) for n in range(1, 6))
    await insert(store, owner, copy, near, alias, lone)
    host = (await store.host_ids(["a.test"]))["a.test"]
    await store.claim({host: 5}, now=1000.0)
    hash_a, hash_b = "a" * 64, "b" * 64

    def done(page: NewURL, **fields: Any) -> Outcome:
        return Outcome(page.id, host, State.DONE, 1, status=200, fetched_at=1.0, **fields)

    await store.commit(
        CommitBatch(
            outcomes=[
                done(owner, content_hash=hash_a),
                done(copy, content_hash=hash_a),
                done(near, content_hash=hash_b),
                done(alias, canonical=owner.url),
                done(lone, canonical="http://elsewhere.test/"),
            ],
            duplicates=[
                Duplicates(copy.id, owner.id, None),
                Duplicates(near.id, None, owner.id),
            ],
        )
    )
    exported = await rows(store)
    linked = {
        u: (r.duplicate_of, r.near_duplicate_of, r.alias_of, r.canonical, r.content_hash)
        for u, r in exported.items()
    }
    assert linked == {
        owner.url: (None, None, None, None, hash_a),
        copy.url: (owner.url, None, None, None, hash_a),
        near.url: (None, owner.url, None, None, hash_b),
        alias.url: (None, None, owner.url, owner.url, None),
        lone.url: (None, None, None, "http://elsewhere.test/", None),
    }
    # The API's pages of URLs read the same rows.
    paged = {row.url: row for _, row in await store.url_page(-(2**63), 10)}
    assert paged == exported


async def test_a_url_found_shallower_before_its_fetch_takes_the_smaller_depth(
    store: Engine,
) -> None:
    waiting, sibling, answered, handed, parked = (url("a.test", n, depth=5) for n in range(5))
    await insert(store, waiting, sibling, answered, handed)
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = {q.id for q in await store.claim({host: 2}, now=1e12)}
    # Of the two claimed, one is answered and one stays handed out; two stay queued.
    first, second = sorted(claimed)
    await store.commit(
        CommitBatch(outcomes=[Outcome(first, host, State.DONE, 1, status=200, fetched_at=1.0)])
    )
    queued = [u for u in (waiting, sibling, answered, handed) if u.id not in claimed]
    low, other = queued
    result = await store.commit(
        CommitBatch(
            new_urls=[parked],
            shallower=[(low.id, 3), (low.id, 2), (other.id, 7), (first, 1), (second, 1)],
        )
    )
    assert result.handed_out == ((host, second, 1),)
    stored = await rows(store)
    depths = {url_hash(u): row.depth for u, row in stored.items() if u != parked.url}
    assert depths == {low.id: 2, other.id: 5, first: 5, second: 1}
    # The shallower URL has the priority of its depth, so it is claimed first.
    (next_up,) = await store.claim({host: 1}, now=1e12)
    assert (next_up.id, next_up.depth) == (low.id, 2)
    assert next_up.priority == pytest.approx(priority(2))
    waiting_now = {uid: depth async for batch in store.queued_depths() for uid, depth in batch}
    assert waiting_now == {other.id: 5, parked.id: 5}


async def test_a_url_inserted_again_at_a_smaller_depth_takes_it(store: Engine) -> None:
    """Another worker, whose seen-set did not know the URL, inserts it again: the store
    keeps one row, at the smaller depth, and counts the candidate as a duplicate."""
    await insert(store, url("a.test", 1, depth=6))
    assert await insert(store, url("a.test", 1, depth=2), url("a.test", 1, depth=4)) == 0
    assert (await rows(store))["http://a.test/1"].depth == 2
    assert (await store.counters())["duplicates"] == 2


async def test_ids_cover_the_whole_64_bit_range(store: Engine) -> None:
    extremes = [
        NewURL(id=-(2**63), url="http://a.test/min", host="a.test", depth=0),
        NewURL(id=2**63 - 1, url="http://a.test/max", host="a.test", depth=0),
        NewURL(id=0, url="http://a.test/zero", host="a.test", depth=0),
    ]
    many = [url("a.test", n) for n in range(250)]
    await insert(store, *extremes, *many)
    seen = [i async for ids in store.iter_ids(batch=100) for i in ids]
    assert sorted(seen) == sorted(u.id for u in [*extremes, *many])
    assert len(await rows(store)) == 253


async def test_reopening_keeps_data_and_migrates_idempotently(open_store: OpenStore) -> None:
    async with open_store() as store:
        await insert(store, url("a.test", 1))
        await store.set_meta("seeds", "http://a.test/")
    for _ in range(2):
        async with open_store() as store:
            assert await store.get_meta("schema_version") == str(SCHEMA_VERSION)
            assert await store.get_meta("seeds") == "http://a.test/"
            assert (await store.counters())["discovered"] == 1
            assert list(await rows(store)) == ["http://a.test/1"]


async def test_a_store_from_a_newer_trawl_is_refused(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match="newer"):
        async with open_store():
            pass


async def test_close_is_idempotent(open_store: OpenStore) -> None:
    async with open_store() as store:
        await insert(store, url("a.test", 1))
    await store.__aexit__(None, None, None)


async def test_readonly_sqlite_store_needs_an_existing_crawl(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    with pytest.raises(StoreError, match="no crawl found"):
        async with SQLiteStore(missing, readonly=True):
            pass
    assert not missing.exists()


# -- per-host budgets ------------------------------------------------------------------------


async def answer(store: Store, urls: Sequence[QueuedURL], state: State = State.DONE) -> None:
    """Commit an outcome in ``state`` for each claimed URL."""
    outcomes = [Outcome(u.id, u.host_id, state, 1, status=200, fetched_at=1.0) for u in urls]
    await store.commit(CommitBatch(outcomes=outcomes))


async def test_discovery_budget_stores_exactly_the_budget(open_store: OpenStore) -> None:
    async with open_store(discovered=5) as store:
        assert await insert(store, *(url("a.test", n) for n in range(3))) == 3
        # Crossing the budget: a known URL takes no room, the shallowest new ones take it.
        batch = [url("a.test", 0), url("a.test", 10, 3), url("a.test", 11, 1), url("a.test", 12, 2)]
        result = await store.commit(CommitBatch(new_urls=[*batch, url("b.test", 1)]))
        assert result.inserted == 3
        assert result.counters["over_host_discovery_budget"] == 1
        assert result.counters["duplicates"] == 1
        assert await insert(store, url("a.test", 20), url("a.test", 21)) == 0
        counters = await store.counters()
        assert counters["over_host_discovery_budget"] == 3
        assert counters["discovered"] == 6
        assert counters["duplicates"] == 1
        stored = await rows(store)
        assert sorted(u for u in stored if u.startswith("http://a.test/")) == [
            "http://a.test/0", "http://a.test/1", "http://a.test/11", "http://a.test/12",
            "http://a.test/2",
        ]  # fmt: skip
        assert "http://b.test/1" in stored


async def test_discovery_budget_holds_across_reopening(open_store: OpenStore) -> None:
    async with open_store(discovered=4) as store:
        assert await insert(store, *(url("a.test", n) for n in range(3))) == 3
    async with open_store(discovered=4) as store:
        await store.recover()
        assert await insert(store, *(url("a.test", n) for n in range(3, 9))) == 1
        assert (await store.counters())["over_host_discovery_budget"] == 5
    async with open_store(discovered=6) as store:
        assert await insert(store, *(url("a.test", n) for n in range(3, 9))) == 2


async def test_page_budget_limits_what_claim_hands_out(open_store: OpenStore) -> None:
    async with open_store(pages=3) as store:
        await insert(store, *(url("a.test", n) for n in range(8)), url("b.test", 1))
        ids = await store.host_ids(["a.test", "b.test"])
        host = ids["a.test"]
        first = await store.claim({host: 10, ids["b.test"]: 10}, now=1000.0)
        assert len([u for u in first if u.host_id == host]) == 3
        assert await store.claim({host: 10}, now=1000.0) == []
        # A retry and a robots block give their room back; an answer keeps it.
        retry = Outcome(first[0].id, host, State.QUEUED, 1, status=503, next_fetch_at=2000.0)
        blocked = Outcome(first[1].id, host, State.BLOCKED, 0)
        await store.commit(CommitBatch(outcomes=[retry, blocked]))
        await answer(store, [first[2]])
        second = await store.claim({host: 10}, now=1000.0)
        assert len(second) == 2
        await answer(store, second)
        # The budget is used: what is still queued is parked, and the crawl has no work.
        assert await store.claim({host: 10}, now=3000.0) == []
        assert queued(open_store) == {}
        counters = await store.counters()
        assert counters["over_host_page_budget"] == 4
        stored = await rows(store)
        parked = [r for r in stored.values() if r.state == State.PARKED]
        assert len(parked) == 4
        assert {r.error for r in parked} == {"host_page_budget"}
        answered = [r for r in stored.values() if r.state == State.DONE and "a.test" in r.url]
        assert len(answered) == 3


async def test_page_budget_holds_across_a_stop_and_grows_with_a_new_budget(
    open_store: OpenStore,
) -> None:
    async with open_store(pages=4) as store:
        await insert(store, *(url("a.test", n) for n in range(10)))
        host = (await store.host_ids(["a.test"]))["a.test"]
        claimed = await store.claim({host: 3}, now=1000.0)
        await answer(store, claimed[:2])
    # Stopped with one URL handed out: on restart it is queued again and may be fetched.
    async with open_store(pages=4) as store:
        assert await store.recover() == 1
        again = await store.claim({host: 10}, now=1000.0)
        assert len(again) == 2
        await answer(store, again)
        assert await store.claim({host: 10}, now=1000.0) == []
        assert (await store.counters())["over_host_page_budget"] == 6
    # A later run with a larger budget queues the parked URLs again.
    async with open_store(pages=6) as store:
        await store.recover()
        assert (await store.counters())["queued"] == 6
        assert (await store.counters())["over_host_page_budget"] == 0
        more = await store.claim({host: 10}, now=1000.0)
        assert len(more) == 2
        assert {r.error for r in (await rows(store)).values() if r.state == State.QUEUED} == {None}


async def test_soft404_record_round_trip(store: Engine) -> None:
    ids = await store.host_ids(["a.test", "b.test", "c.test"])
    await store.commit(
        CommitBatch(
            hosts=[
                HostUpdate(ids["a.test"], soft404=Soft404Record(-(2**63), 10.0)),
                HostUpdate(ids["b.test"], soft404=Soft404Record(None, 11.0)),
                HostUpdate(ids["b.test"], robots=RobotsRecord(404, b"", 12.0)),
            ]
        )
    )
    assert await store.soft404(ids["a.test"]) == Soft404Record(-(2**63), 10.0)
    assert await store.soft404(ids["b.test"]) == Soft404Record(None, 11.0)
    assert await store.soft404(ids["c.test"]) is None
    assert await store.robots(ids["b.test"]) == RobotsRecord(404, b"", 12.0)
    assert await store.robots(ids["a.test"]) is None


def write_version_1(execute: Callable[[str, tuple[object, ...]], object], mark: str) -> None:
    """The rows of a crawl as trawl wrote it at schema version 1 (two hosts, URLs in every
    state), written with ``execute`` into tables of that version; ``mark`` is the engine's
    parameter placeholder."""
    execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')", ())
    execute("INSERT INTO hosts (name, queued) VALUES ('a.test', 2), ('b.test', 1)", ())
    states = [State.DONE, State.DONE, State.FAILED, State.BLOCKED, State.CLAIMED, State.QUEUED]
    rows = [(f"http://a.test/{n}", 1, int(state)) for n, state in enumerate(states)]
    rows.append(("http://b.test/0", 2, int(State.QUEUED)))
    insert = (
        "INSERT INTO urls (id, url, host_id, state, depth) "
        f"VALUES ({mark}, {mark}, {mark}, {mark}, 0)"
    )
    for text, host, state in rows:
        execute(insert, (url_hash(text), text, host, state))


ROWID_TYPES = {**SQLITE_TYPES, "hash_pk": "INTEGER PRIMARY KEY"}
"""SQLite types as trawl had them when it wrote version 1: the URL hash was the rowid."""


def make_version_1_crawl(data_dir: Path) -> None:
    """A data dir as trawl wrote it at schema version 1."""
    data_dir.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db, db:
        for statement in migration_statements(1, ROWID_TYPES):
            db.execute(statement)
        write_version_1(db.execute, "?")


async def assert_version_1_upgraded(store: Engine, open_store: OpenStore) -> None:
    """What a version-1 crawl opened with page budget 5 and discovery budget 8 holds."""
    assert await store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert await store.recover() == 1
    assert queued(open_store) == {"a.test": 2, "b.test": 1}
    # a.test has 6 URLs stored (budget 8) and 3 answered (budget 5).
    assert await insert(store, *(url("a.test", n) for n in range(10, 15))) == 2
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = await store.claim({host: 10}, now=1000.0)
    # URLs queued before migration 6 keep their depth as rank: they come first.
    assert {u.url for u in claimed} == {"http://a.test/4", "http://a.test/5"}
    assert await store.soft404(host) is None


async def test_a_version_1_crawl_upgrades_with_its_budget_counts(tmp_path: Path) -> None:
    data_dir = tmp_path / "crawl"
    make_version_1_crawl(data_dir)
    async with SQLiteStore(data_dir, page_budget=5, discovery_budget=8) as store:
        await assert_version_1_upgraded(cast(Engine, store), OpenStore(ENGINES["sqlite"], data_dir))
        # Migration 10 indexed every id the crawl had: none is stored twice.
        assert await insert(store, url("b.test", 0)) == 0
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        # Seven ids merged by migration 10, the two URLs inserted since in the inbox.
        tables = ("urls", "ids", "ids_inbox")
        sizes = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables]
        assert sizes == [9, 7, 2]
        (indexed,) = db.execute("SELECT COUNT(*) FROM urls JOIN url_ids USING (id, seq)").fetchone()
        assert indexed == 9
        columns = {row[1] for row in db.execute("PRAGMA table_info(hosts)")}
        assert {"discovered", "fetched", "claimed", "soft404_fingerprint"} <= columns
        counts = db.execute("SELECT name, discovered, fetched FROM hosts ORDER BY name").fetchall()
        assert counts == [("a.test", 8, 3), ("b.test", 1, 0)]
        (ready,) = db.execute("SELECT COUNT(*) FROM ready").fetchone()
        (queued,) = db.execute("SELECT COUNT(*) FROM urls WHERE state = 0").fetchone()
        assert ready == queued - 2  # the two inserted since are staged, not yet merged
    assert ready_key(data_dir) == ["host_id", "rank", "seq"]
    assert not any("TEMP B-TREE" in step for step in claim_plan(data_dir))


async def test_a_readonly_store_asks_for_an_older_crawl_to_be_upgraded(tmp_path: Path) -> None:
    data_dir = tmp_path / "crawl"
    make_version_1_crawl(data_dir)
    with pytest.raises(StoreError, match=r"older trawl \(schema 1 < \d+\).*trawl crawl"):
        async with SQLiteStore(data_dir, readonly=True):
            pass
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == ("1",)
    async with SQLiteStore(data_dir):
        pass
    async with SQLiteStore(data_dir, readonly=True) as store:
        assert len([row async for row in store.export()]) == 7


@pytest.mark.parametrize("readonly", [False, True])
async def test_a_crawl_a_newer_trawl_wrote_is_left_alone(tmp_path: Path, readonly: bool) -> None:
    async with SQLiteStore(tmp_path) as store:
        await insert(store, url("a.test", 1))
        await store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match=rf"newer trawl \(schema {SCHEMA_VERSION + 1} >"):
        async with SQLiteStore(tmp_path, readonly=readonly):
            pass
    with contextlib.closing(sqlite3.connect(tmp_path / DB_NAME)) as db:
        assert db.execute("SELECT COUNT(*) FROM urls").fetchone() == (1,)
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION + 1),)


def foreign_database(path: Path) -> None:
    """A SQLite database at ``path`` that trawl did not write (no ``meta`` table)."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")


@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "reader"])
@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda p: p.write_bytes(b""), r"is empty \(0 bytes\)", id="empty"),
        pytest.param(lambda p: p.write_bytes(b"notes\n" * 1000), "not a SQLite", id="text"),
        pytest.param(foreign_database, "holds no trawl crawl", id="foreign"),
    ],
)
async def test_a_database_file_that_holds_no_crawl_is_refused_and_left_alone(
    tmp_path: Path, readonly: bool, make: Callable[[Path], object], message: str
) -> None:
    path = tmp_path / DB_NAME
    make(path)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=message) as refused:
        async with SQLiteStore(tmp_path, readonly=readonly):
            pass
    assert str(path) in str(refused.value)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [DB_NAME]


def make_version_1_schema(schema: str) -> None:
    """The PostgreSQL twin of :func:`make_version_1_crawl`: a schema at version 1."""
    with pg_connect() as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        db.execute(f'SET search_path TO "{schema}"')
        for statement in migration_statements(1, POSTGRES_TYPES):
            db.execute(statement)
        write_version_1(db.execute, "%s")


def postgres_columns(schema: str, table: str) -> set[str]:
    """The column names of ``table`` in ``schema``."""
    rows = postgres_query(
        schema,
        "SELECT column_name FROM information_schema.columns "
        f"WHERE table_schema = '{schema}' AND table_name = '{table}'",
    )
    return {row[0] for row in rows}


async def test_a_version_1_postgresql_schema_upgrades_with_its_budget_counts(
    pg_schema: str,
) -> None:
    make_version_1_schema(pg_schema)
    async with PostgresStore(PG_DSN, schema=pg_schema, page_budget=5, discovery_budget=8) as store:
        postgres = OpenStore(ENGINES["postgresql"], pg_schema)
        await assert_version_1_upgraded(cast(Engine, store), postgres)
    columns = postgres_columns(pg_schema, "hosts")
    assert {"discovered", "fetched", "claimed", "soft404_fingerprint"} <= columns
    counts = postgres_query(pg_schema, "SELECT name, discovered, fetched FROM hosts ORDER BY name")
    assert counts == [("a.test", 8, 3), ("b.test", 1, 0)]
    index = postgres_query(
        pg_schema,
        f"SELECT indexdef FROM pg_indexes WHERE schemaname = '{pg_schema}' "
        "AND indexname = 'urls_ready'",
    )
    assert "(host_id, rank, id) WHERE (state = 0)" in index[0][0]


async def test_readonly_postgresql_store_needs_an_existing_crawl(pg_schema: str) -> None:
    with pytest.raises(StoreError, match="no crawl found"):
        async with PostgresStore(PG_DSN, schema=pg_schema, readonly=True):
            pass
    namespaces = postgres_query(
        pg_schema, f"SELECT 1 FROM pg_namespace WHERE nspname = '{pg_schema}'"
    )
    assert namespaces == []
    async with PostgresStore(PG_DSN, schema=pg_schema) as store:
        await insert(store, url("a.test", 1))
    async with PostgresStore(PG_DSN, schema=pg_schema, readonly=True) as store:
        assert list(await rows(store)) == ["http://a.test/1"]
        with pytest.raises(StoreError, match="read-only"):
            await store.set_meta("seeds", "http://a.test/")


async def test_postgresql_processes_opening_one_schema_at_once_migrate_it_once(
    pg_schema: str,
) -> None:
    async def open_and_count() -> str | None:
        async with PostgresStore(PG_DSN, schema=pg_schema) as store:
            return await store.get_meta("schema_version")

    async with asyncio.TaskGroup() as group:
        opened = [group.create_task(open_and_count()) for _ in range(6)]
    assert [task.result() for task in opened] == [str(SCHEMA_VERSION)] * 6


async def test_a_postgresql_error_is_one_line_without_the_password() -> None:
    store = PostgresStore("postgresql://postgres:s3cret-word@127.0.0.1:1/test", schema="x")
    with pytest.raises(StoreError) as failure:
        async with store:
            pass
    message = str(failure.value)
    assert message.startswith("store postgresql://127.0.0.1:1/test schema x: ")
    assert "s3cret-word" not in message
    assert "\n" not in message


async def test_hosts_are_ranked_by_response_time_and_blocked_urls(store: Engine) -> None:
    await insert(
        store, *(url("a.test", n) for n in range(3)), *(url("b.test", n) for n in range(3))
    )
    ids = await store.host_ids(["a.test", "b.test"])
    claimed = await store.claim({ids["a.test"]: 3, ids["b.test"]: 3}, now=1000.0)
    a = [c for c in claimed if c.host_id == ids["a.test"]]
    b = [c for c in claimed if c.host_id == ids["b.test"]]
    outcomes = [
        Outcome(a[0].id, a[0].host_id, State.DONE, 1, status=200, elapsed=0.2),
        Outcome(a[1].id, a[1].host_id, State.FAILED, 1, error="timeout", elapsed=0.4),
        Outcome(a[2].id, a[2].host_id, State.BLOCKED, 0),
        Outcome(b[0].id, b[0].host_id, State.DONE, 1, status=200, elapsed=0.05),
        Outcome(b[1].id, b[1].host_id, State.BLOCKED, 0),
        Outcome(b[2].id, b[2].host_id, State.BLOCKED, 0),
    ]
    await store.commit(CommitBatch(outcomes=outcomes))
    slowest, blocked = await store.host_figures(10)
    assert [(h.name, h.responses, round(h.mean_seconds, 3)) for h in slowest] == [
        ("a.test", 2, 0.3),
        ("b.test", 1, 0.05),
    ]
    assert [(h.name, h.blocked) for h in blocked] == [("b.test", 2), ("a.test", 1)]
    assert (await store.host_figures(1))[0][0].name == "a.test"


async def test_the_host_table_gives_each_host_its_figures_and_state(store: Engine) -> None:
    names = ["a.test", "b.test", "c.test", "e.test", "f.test"]
    await insert(store, *(url(name, n) for name in names[:4] for n in range(2)))
    ids = await store.host_ids(names[:4])
    claimed = await store.claim({ids[name]: 2 for name in names[:4]}, now=1000.0)
    by_host = {name: [c for c in claimed if c.host_id == ids[name]] for name in names[:4]}
    a, b, c, e = (by_host[name] for name in names[:4])
    outcomes = [
        Outcome(a[0].id, a[0].host_id, State.DONE, 1, status=200, elapsed=0.2),
        Outcome(a[1].id, a[1].host_id, State.FAILED, 1, error="host_failing"),
        Outcome(b[0].id, b[0].host_id, State.FAILED, 1, error="timeout", elapsed=0.5),
        Outcome(b[1].id, b[1].host_id, State.QUEUED, 1, error="timeout", next_fetch_at=9e9),
        Outcome(c[0].id, c[0].host_id, State.BLOCKED, 0),
        Outcome(c[1].id, c[1].host_id, State.BLOCKED, 0),
        Outcome(e[0].id, e[0].host_id, State.DONE, 1, status=200, elapsed=0.1),
        Outcome(e[1].id, e[1].host_id, State.DONE, 1, status=404, elapsed=0.3),
    ]
    await store.commit(CommitBatch(outcomes=outcomes))
    await insert(store, url("f.test", 1))
    leases = await store.lease_hosts("w1", 10, 30.0, now=1000.0)
    assert "f.test" in {lease.name for lease in leases}

    total, rows = await store.host_page("name", False, 10, 0, now=1001.0)
    assert total == 5
    assert [(h.name, h.state, h.queued, h.errors, h.blocked) for h in rows] == [
        ("a.test", "broken", 0, 1, 0),
        ("b.test", "backing off", 1, 1, 0),
        ("c.test", "robots-blocked", 0, 0, 2),
        ("e.test", "idle", 0, 0, 0),
        ("f.test", "leased", 1, 0, 0),
    ]
    e_row = rows[3]
    assert (e_row.fetched, e_row.responses, round(e_row.mean_seconds, 3)) == (2, 2, 0.2)
    assert await store.host_states(1001.0) == {
        "broken": 1, "backing off": 1, "robots-blocked": 1, "idle": 1, "leased": 1
    }  # fmt: skip
    # The lease ran out: the host waits for a worker.
    _, later = await store.host_page("name", False, 10, 0, now=2000.0)
    assert later[4].state == "waiting"

    _, by_errors = await store.host_page("errors", True, 2, 0, now=1001.0)
    assert [h.name for h in by_errors] == ["a.test", "b.test"]
    total, second = await store.host_page("errors", True, 2, 2, now=1001.0)
    assert (total, [h.name for h in second]) == (5, ["c.test", "e.test"])
    _, by_state = await store.host_page("state", False, 5, 0, now=1001.0)
    assert [h.state for h in by_state][:2] == ["broken", "backing off"]
    _, slowest = await store.host_page("responseTime", True, 1, 0, now=1001.0)
    assert slowest[0].name == "b.test"
    assert await store.host_page("name", False, 10, 10, now=1001.0) == (0, [])


async def test_a_page_of_urls_is_filtered_by_state_host_status_and_error(store: Engine) -> None:
    await insert(store, *(url(name, n) for name in ("a.test", "b.test") for n in range(3)))
    ids = await store.host_ids(["a.test", "b.test"])
    claimed = await store.claim({ids["a.test"]: 3, ids["b.test"]: 3}, now=1000.0)
    answers = [(State.DONE, 200, None), (State.DONE, 404, None), (State.FAILED, None, "timeout")]
    outcomes = [
        Outcome(c.id, c.host_id, state, 1, status=status, error=error)
        for c, (state, status, error) in zip(claimed, answers * 2, strict=True)
    ]
    await store.commit(CommitBatch(outcomes=outcomes))
    start = -(2**63)

    async def urls(**wanted: Any) -> set[str]:
        return {row.url for _, row in await store.url_page(start, 100, UrlFilter(**wanted))}

    everything = await urls()
    assert len(everything) == 6
    a_urls = {u for u in everything if "a.test" in u}
    assert await urls(host="a.test") == a_urls
    assert await urls(host="nowhere.test") == set()
    found = await urls(status=404)
    assert len(found) == 2
    assert await urls(status=404, host="b.test") == found - a_urls
    assert len(await urls(error="timeout")) == 2
    assert await urls(error="timeout", state=State.DONE) == set()
    assert len(await urls(state=State.DONE)) == 4
    assert len(await store.url_page(start, 1, UrlFilter(host="a.test"))) == 1
