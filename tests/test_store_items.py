"""Items and labels in the store, on both engines: a page's items are committed with its
outcome and replace what the URL had, a fenced part whose lease was lost leaves none,
a URL keeps the label it was first stored with, and the items read back in key order."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import cast

import pytest

from pg import DSN as PG_DSN
from test_store import (
    Engine,
    insert,
    make_version_1_crawl,
    make_version_1_schema,
    open_store,
    pg_schema,
    postgres_columns,
    postgres_query,
    rows,
    store,
    url,
)
from test_store_leases import A, B, Clock, clock, merged
from trawl.errors import StoreError
from trawl.store.postgres.store import PostgresStore
from trawl.store.rows import ITEM_PAGE_SIZE
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import (
    STALE_COUNTER,
    CommitBatch,
    Fence,
    ItemRow,
    NewURL,
    Outcome,
    PageItems,
    QueuedURL,
    State,
)

__all__ = ["clock", "open_store", "pg_schema", "store"]


async def claim_all(store: Engine, host: str = "a.test") -> list[QueuedURL]:
    """Claim every queued URL of ``host``."""
    host_id = (await store.host_ids([host]))[host]
    return list(await store.claim({host_id: 10_000}, now=1e12))


def done(page: QueuedURL, fetched_at: float = 100.0) -> Outcome:
    return Outcome(page.id, page.host_id, State.DONE, 1, status=200, fetched_at=fetched_at)


async def items(store: Engine) -> list[ItemRow]:
    return [item async for item in store.items()]


async def test_items_are_stored_with_their_pages_outcome_in_one_commit(store: Engine) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2))
    first, second = await claim_all(store)
    yielded = ('{"title": "One"}', '{"title": "Two"}')
    await store.commit(
        CommitBatch(outcomes=[done(first)], items=[PageItems(first.id, 100.0, yielded)])
    )
    assert [(i.url, i.url_id, i.seq, i.fetched_at, i.data) for i in await items(store)] == [
        (first.url, first.id, 0, 100.0, yielded[0]),
        (first.url, first.id, 1, 100.0, yielded[1]),
    ]
    # An item the store cannot write (no text) fails the commit: the page's outcome is
    # not stored either, and it stays CLAIMED to be fetched again.
    broken = PageItems(second.id, 100.0, cast(tuple[str, ...], (None,)))
    with pytest.raises(StoreError):
        await store.commit(CommitBatch(outcomes=[done(second)], items=[broken]))
    assert (await rows(store))[second.url].state == State.CLAIMED
    assert [i.url_id for i in await items(store)] == [first.id, first.id]


async def test_a_page_committed_again_replaces_its_items(store: Engine) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2))
    page, other = await claim_all(store)
    three = tuple(f'{{"n": {n}}}' for n in range(3))
    await store.commit(
        CommitBatch(
            outcomes=[done(page), done(other)],
            items=[PageItems(page.id, 100.0, three), PageItems(other.id, 100.0, ('{"o": 1}',))],
        )
    )
    # Fetched again (a recrawl, or a resume after a crash): fewer items this time.
    await store.commit(CommitBatch(items=[PageItems(page.id, 200.0, ('{"n": 9}',))]))
    assert [(i.url_id, i.seq, i.fetched_at, i.data) for i in await items(store)] == sorted(
        [(page.id, 0, 200.0, '{"n": 9}'), (other.id, 0, 100.0, '{"o": 1}')]
    )
    # Twice in one batch (merged from two parts): the last one wins.
    await store.commit(
        CommitBatch(items=[PageItems(page.id, 300.0, three), PageItems(page.id, 301.0, three[:2])])
    )
    assert [(i.seq, i.fetched_at) for i in await items(store) if i.url_id == page.id] == [
        (0, 301.0),
        (1, 301.0),
    ]
    # A fetch that yielded nothing leaves the page no items.
    await store.commit(CommitBatch(items=[PageItems(page.id, 400.0, ())]))
    assert [i.url_id for i in await items(store)] == [other.id]


async def test_a_fenced_part_whose_lease_was_lost_leaves_no_items(
    store: Engine, clock: Clock
) -> None:
    await insert(store, url("a.test", 1))
    (old,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    (page,) = await store.claim({old.host_id: 1}, now=1e12, worker=A)
    clock.advance(61)
    (new,) = await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    await store.claim({new.host_id: 1}, now=1e12, worker=B)

    stale = merged(
        CommitBatch(
            outcomes=[done(page, 1.0)],
            items=[PageItems(page.id, 1.0, ('{"from": "a"}',))],
            fence=Fence(old.host_id, old.generation),
        )
    )
    result = await store.commit(stale)
    assert result.counters[STALE_COUNTER] == 1
    assert stale.items == []
    assert await items(store) == []

    fresh = merged(
        CommitBatch(
            outcomes=[done(page, 2.0)],
            items=[PageItems(page.id, 2.0, ('{"from": "b"}',))],
            fence=Fence(new.host_id, new.generation),
        )
    )
    await store.commit(fresh)
    # The committed batch holds the items the store accepted.
    assert fresh.items == [PageItems(page.id, 2.0, ('{"from": "b"}',))]
    assert [(i.fetched_at, i.data) for i in await items(store)] == [(2.0, '{"from": "b"}')]


def labelled(n: int, label: str | None, *, hops: int = 0, origin: str | None = None) -> NewURL:
    """A URL of a.test with a label, and as a redirect target with ``hops`` and ``origin``."""
    return url("a.test", n)._replace(label=label, redirect_hops=hops, origin=origin)


async def test_a_label_goes_from_the_new_url_to_its_claim(store: Engine) -> None:
    await insert(
        store,
        labelled(1, "book"),
        labelled(2, None),
        labelled(3, "book", hops=1, origin="http://a.test/0"),
    )
    claimed = {u.url: u.label for u in await claim_all(store)}
    assert claimed == {
        "http://a.test/1": "book",
        "http://a.test/2": None,
        "http://a.test/3": "book",
    }


async def test_a_known_url_keeps_the_label_it_was_stored_with(store: Engine) -> None:
    await insert(store, labelled(1, "book"), labelled(2, None))
    assert await insert(store, labelled(1, "author"), labelled(2, "book")) == 0
    # In one batch, the URL is stored once, with the first label found.
    result = await store.commit(CommitBatch(new_urls=[labelled(3, "book"), labelled(3, "author")]))
    assert result.inserted == 1
    claimed = {u.url: u.label for u in await claim_all(store)}
    assert claimed == {
        "http://a.test/1": "book",
        "http://a.test/2": None,
        "http://a.test/3": "book",
    }


async def test_items_read_back_in_key_order_with_their_keys(store: Engine) -> None:
    pages = [url("a.test", n) for n in range(4)]
    await insert(store, *pages)
    claimed = await claim_all(store)
    negative = [u.id for u in claimed if u.id < 0]
    positive = sorted(u.id for u in claimed if u.id > 0)
    # More items than one read takes, on a URL whose id is negative: it comes first.
    counts = {positive[0]: 3, negative[0]: ITEM_PAGE_SIZE - 1, positive[-1]: 1}
    await store.commit(
        CommitBatch(
            outcomes=[done(u) for u in claimed],
            items=[
                PageItems(uid, 100.0, tuple(f'{{"n": {n}}}' for n in range(count)))
                for uid, count in counts.items()
            ],
        )
    )
    read = await items(store)
    assert [(i.url_id, i.seq) for i in read] == [
        (uid, seq) for uid in sorted(counts) for seq in range(counts[uid])
    ]
    by_id = {u.id: u.url for u in claimed}
    assert all(i.url == by_id[i.url_id] for i in read)
    assert all(i.data == f'{{"n": {i.seq}}}' for i in read)
    for item in read[:5]:
        assert item.key == f"{item.url_id % 2**64:016x}:{item.seq}"
    first = read[0]
    assert first.url_id < 0
    assert int(first.key.split(":")[0], 16) == first.url_id + 2**64
    assert read[-1].key == f"{read[-1].url_id:016x}:0"


async def test_an_older_sqlite_crawl_gains_labels_and_items(tmp_path: Path) -> None:
    data_dir = tmp_path / "crawl"
    make_version_1_crawl(data_dir)
    async with SQLiteStore(data_dir) as store:
        assert [i async for i in store.items()] == []
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(urls)")}
        item_columns = [row[1] for row in db.execute("PRAGMA table_info(items)")]
        labels = db.execute("SELECT DISTINCT label FROM urls").fetchall()
    assert "label" in columns
    assert item_columns == ["url_id", "seq", "fetched_at", "data"]
    assert labels == [(None,)]


async def test_an_older_postgresql_schema_gains_labels_and_items(pg_schema: str) -> None:
    make_version_1_schema(pg_schema)
    async with PostgresStore(PG_DSN, schema=pg_schema) as store:
        assert [i async for i in store.items()] == []
    assert "label" in postgres_columns(pg_schema, "urls")
    assert postgres_columns(pg_schema, "items") == {"url_id", "seq", "fetched_at", "data"}
    assert postgres_query(pg_schema, "SELECT DISTINCT label FROM urls") == [(None,)]
