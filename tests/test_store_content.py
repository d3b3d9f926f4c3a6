"""The store's content tables: hash owners, the SimHash block index, versions, aliases."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from pg import DSN as PG_DSN
from test_store import (
    ENGINES,
    Engine,
    OpenStore,
    insert,
    make_version_1_crawl,
    make_version_1_schema,
    open_store,
    pg_schema,
    postgres_columns,
    postgres_query,
    rows,
    store,
)
from trawl.extract.urls import url_hash
from trawl.store.postgres.store import PostgresStore
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import CommitBatch, Duplicates, NewURL, Outcome, State, StorageKey, blocks

__all__ = ["ENGINES", "open_store", "pg_schema", "store"]

HASH_A, HASH_B = "a" * 64, "b" * 64
CONTENT_COLUMNS = {
    "content_hash",
    "simhash",
    "duplicate_of",
    "near_duplicate_of",
    "alias_of",
    "origin",
}
"""The ``urls`` columns schema migration 3 adds."""
CONTENT_TABLES = {"content_owners", "simhash_blocks", "versions"}
"""The tables schema migration 3 adds."""


def page(n: int, origin: str | None = None) -> NewURL:
    text = f"http://a.test/{n}"
    return NewURL(id=url_hash(text), url=text, host="a.test", depth=0, origin=origin)


async def fetched(
    store: Engine,
    *outcomes: Outcome,
    duplicates: list[Duplicates] | None = None,
    owners: list[tuple[str, int]] | None = None,
) -> None:
    """Claim every queued URL of a.test, then commit ``outcomes`` in one batch."""
    host = (await store.host_ids(["a.test"]))["a.test"]
    await store.claim({host: 100}, now=1e12)
    batch = CommitBatch(outcomes=list(outcomes), duplicates=duplicates or [], owners=owners or [])
    await store.commit(batch)


def done(p: NewURL, at: float, **fields: object) -> Outcome:
    return Outcome(p.id, 1, State.DONE, 1, status=200, fetched_at=at, **fields)  # type: ignore[arg-type]


async def test_the_first_page_committed_owns_a_content_hash(store: Engine) -> None:
    first, second, other = page(1), page(2), page(3)
    await insert(store, first, second, other)
    await fetched(
        store,
        done(first, 10.0, content_hash=HASH_A),
        done(second, 11.0, content_hash=HASH_A),
        done(other, 12.0, content_hash=HASH_B),
    )
    assert await store.content_owners([HASH_A, HASH_B, "c" * 64]) == {
        HASH_A: first.id,
        HASH_B: other.id,
    }
    assert await store.content_hashes([first.id, second.id, other.id, 42]) == {
        first.id: HASH_A,
        second.id: HASH_A,
        other.id: HASH_B,
    }


async def test_a_batch_hands_a_content_hash_to_a_new_owner(store: Engine) -> None:
    first, canonical, other, named, lone = page(1), page(2), page(3), page(4), page(5)
    await insert(store, first, lone)
    await fetched(
        store,
        done(first, 10.0, content_hash=HASH_A, canonical=canonical.url),
        done(lone, 11.0, canonical=lone.url),
    )
    assert await store.canonicals([first.id, canonical.id, lone.id, 42]) == {
        first.id: canonical.url,
        lone.id: lone.url,
    }
    await insert(store, canonical, other, named)
    await fetched(
        store,
        done(canonical, 20.0, content_hash=HASH_A),
        done(other, 21.0, content_hash=HASH_B),
        done(named, 22.0, content_hash=HASH_B),
        duplicates=[Duplicates(first.id, canonical.id, None)],
        # Handed twice in one batch, a hash ends with the last owner; a page whose
        # fetch with the hash is not in the batch is handed nothing.
        owners=[(HASH_A, canonical.id), (HASH_B, other.id), (HASH_B, named.id), (HASH_A, lone.id)],
    )
    assert await store.content_owners([HASH_A, HASH_B]) == {
        HASH_A: canonical.id,
        HASH_B: named.id,
    }
    exported = await rows(store)
    assert exported[first.url].duplicate_of == canonical.url
    assert exported[canonical.url].duplicate_of is None


async def test_a_later_fetch_without_fingerprint_keeps_the_last_hash(store: Engine) -> None:
    p = page(1)
    await insert(store, p)
    await fetched(store, done(p, 10.0, content_hash=HASH_A, simhash=-5))
    await store.recover()
    await fetched(store, Outcome(p.id, 1, State.FAILED, 2, status=500, fetched_at=20.0))
    assert await store.content_hashes([p.id]) == {p.id: HASH_A}


async def test_simhash_candidates_share_a_block_earliest_first(store: Engine) -> None:
    early, late, far, copy = page(1), page(2), page(3), page(4)
    base = 0x1234_5678_9ABC_DEF0
    near = base ^ 0b101  # block 0 differs, blocks 1-3 equal
    unrelated = ~base & 0x7FFF_FFFF_FFFF_FFFF
    await insert(store, early, late, far, copy)
    await fetched(
        store,
        done(late, 20.0, content_hash=HASH_B, simhash=near),
        done(early, 10.0, content_hash=HASH_A, simhash=base),
        done(far, 30.0, content_hash="c" * 64, simhash=unrelated),
        done(copy, 40.0, content_hash=HASH_A, simhash=base),
        duplicates=[Duplicates(copy.id, early.id, None)],
    )
    found = await store.simhash_candidates(blocks(base))
    # The exact duplicate is not indexed: its owner stands for it.
    assert found == [(early.id, base), (late.id, near)]
    assert await store.simhash_candidates(blocks(unrelated)) == [(far.id, unrelated)]


async def test_a_refetch_replaces_a_pages_blocks(store: Engine) -> None:
    p = page(1)
    old, new = 0x0101_0101_0101_0101, 0x0202_0202_0202_0202
    await insert(store, p)
    await fetched(store, done(p, 10.0, content_hash=HASH_A, simhash=old))
    await store.recover()
    await fetched(store, done(p, 20.0, content_hash=HASH_B, simhash=new))
    assert await store.simhash_candidates(blocks(old)) == []
    assert await store.simhash_candidates(blocks(new)) == [(p.id, new)]


async def test_duplicates_aliases_and_versions_are_recorded(open_store: OpenStore) -> None:
    first, second, alias, lone = page(1), page(2), page(3), page(4)
    key = StorageKey("x.warc.gz", 100, 50)
    async with open_store() as store:
        await insert(store, first, second, alias, lone)
        await fetched(
            store,
            done(first, 10.0, content_hash=HASH_A, storage=key),
            done(second, 11.0, content_hash=HASH_A),
            done(alias, 12.0, canonical=first.url),
            done(lone, 13.0, canonical="http://a.test/unknown"),
            duplicates=[Duplicates(second.id, first.id, None)],
        )
        await store.recover()
        await fetched(store, done(first, 50.0, content_hash=HASH_B))
    links = {
        row[0]: row[1:]
        for row in open_store.query(
            "SELECT url, duplicate_of, near_duplicate_of, alias_of FROM urls"
        )
    }
    versions = open_store.query(
        "SELECT url_id, fetched_at, content_hash, warc_file, warc_offset, warc_length "
        "FROM versions ORDER BY fetched_at"
    )
    assert links[second.url] == (first.id, None, None)
    assert links[alias.url] == (None, None, first.id)
    assert links[lone.url] == (None, None, None)
    assert links[first.url] == (None, None, None)
    # Versions are added, never overwritten: the first page has two.
    assert versions == [
        (first.id, 10.0, HASH_A, "x.warc.gz", 100, 50),
        (second.id, 11.0, HASH_A, None, None, None),
        (first.id, 50.0, HASH_B, None, None, None),
    ]


async def test_a_redirect_targets_origin_comes_back_with_its_claim(store: Engine) -> None:
    target = page(1, origin="http://a.test/start")
    await insert(store, target, page(2))
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = {q.url: q.origin for q in await store.claim({host: 10}, now=1e12)}
    assert claimed == {target.url: "http://a.test/start", "http://a.test/2": None}


async def test_a_version_1_crawl_gets_the_content_tables(tmp_path: Path) -> None:
    data_dir = tmp_path / "crawl"
    make_version_1_crawl(data_dir)
    async with SQLiteStore(data_dir) as store:
        assert await store.content_owners([HASH_A]) == {}
        assert await store.simhash_candidates((1, 2, 3, 4)) == []
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(urls)")}
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        count = db.execute("SELECT COUNT(*) FROM urls").fetchone()[0]
    assert columns >= CONTENT_COLUMNS
    assert tables >= CONTENT_TABLES
    assert count == 7


async def test_a_version_1_postgresql_schema_gets_the_content_tables(pg_schema: str) -> None:
    make_version_1_schema(pg_schema)
    async with PostgresStore(PG_DSN, schema=pg_schema) as store:
        assert await store.content_owners([HASH_A]) == {}
        assert await store.simhash_candidates((1, 2, 3, 4)) == []
    columns = postgres_columns(pg_schema, "urls")
    tables = postgres_query(
        pg_schema,
        f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{pg_schema}'",
    )
    count = postgres_query(pg_schema, "SELECT COUNT(*) FROM urls")[0][0]
    assert columns >= CONTENT_COLUMNS
    assert {row[0] for row in tables} >= CONTENT_TABLES
    assert count == 7
