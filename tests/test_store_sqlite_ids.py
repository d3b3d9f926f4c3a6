"""The SQLite store's id index: a URL id leads to its row whether its id sits in the
inbox or has been merged into ``ids``, nothing is stored twice across a merge, a crawl
reopened counts the inbox it left, no look-up by id reads a whole table, and migrating an
older crawl to the index does not hold its old table in RAM."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from test_store import insert, rows, url
from trawl.store.schema import SQLITE_TYPES, migration_statements
from trawl.store.sqlite.sql import STAGED
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import CommitBatch, Duplicates, NewURL, Outcome, State, UrlFilter, blocks

INBOX = 5
"""The inbox limit of these tests' stores: a merge after every five new URLs or so."""


def tables(path: Path) -> tuple[int, int, int]:
    """How many rows ``urls``, ``ids`` and ``ids_inbox`` hold; every row is indexed once."""
    with contextlib.closing(sqlite3.connect(path / DB_NAME)) as db:
        counts = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES]
        unindexed = db.execute(
            "SELECT COUNT(*) FROM urls AS u WHERE (SELECT COUNT(*) FROM url_ids AS k "
            "WHERE k.id = u.id AND k.seq = u.seq) <> 1"
        ).fetchone()[0]
    assert unindexed == 0
    return counts[0], counts[1], counts[2]


TABLES = ("urls", "ids", "ids_inbox")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path, inbox_limit=INBOX) as opened:
        yield opened


async def test_urls_are_found_and_kept_once_on_both_sides_of_a_merge(
    store: SQLiteStore, tmp_path: Path
) -> None:
    first = [url("a.test", n) for n in range(3)]
    assert await insert(store, *first) == 3
    assert tables(tmp_path) == (3, 0, 3)
    second = [url("b.test", n) for n in range(3)]
    assert await insert(store, *second, *first, second[0]) == 3
    assert tables(tmp_path) == (6, 6, 0)
    third = [url("c.test", n) for n in range(2)]
    assert await insert(store, *third, *second) == 2
    assert tables(tmp_path) == (8, 6, 2)
    every = [*first, *second, *third]
    assert await insert(store, *every) == 0
    assert await store.existing([u.id for u in every] + [1, 2]) == {u.id: u.url for u in every}
    listed = [i async for batch in store.iter_ids(batch=3) for i in batch]
    assert listed == sorted(u.id for u in every)
    exported = [row.url async for row in store.export()]
    assert exported == [u.url for u in sorted(every, key=lambda u: u.id)]
    assert (await store.counters())["discovered"] == 8


async def test_a_url_page_filters_by_state_in_id_order(store: SQLiteStore) -> None:
    await insert(store, *(url("a.test", n) for n in range(4)))
    await insert(store, *(url("a.test", n) for n in range(4, 12)))
    host = (await store.host_ids(["a.test"]))["a.test"]
    done = sorted(u.id for u in await store.claim({host: 5}, now=1000.0))
    await store.commit(
        CommitBatch(outcomes=[Outcome(i, host, State.DONE, 1, status=200) for i in done])
    )
    page = await store.url_page(done[1], 3, UrlFilter(state=State.DONE))
    assert [i for i, _ in page] == done[1:4]
    assert {row.state for _, row in page} == {State.DONE}
    assert len(await store.url_page(-(2**63), 100)) == 12


async def test_every_update_by_id_reaches_rows_in_the_inbox_and_in_ids(
    store: SQLiteStore,
) -> None:
    merged = [url("a.test", n) for n in range(INBOX)]
    await insert(store, *merged)
    fresh = url("a.test", 99)
    await insert(store, fresh)
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = {u.id for u in await store.claim({host: INBOX + 1}, now=1000.0)}
    assert claimed == {u.id for u in [*merged, fresh]}
    old, new = merged[0], fresh
    outcomes = [
        Outcome(
            u.id, host, State.DONE, 1, status=200, fetched_at=1000.0, canonical=target.url,
            content_hash=f"hash-{u.id}", simhash=0x0123456789ABCDEF,
        )
        for u, target in ((old, new), (new, old))
    ]  # fmt: skip
    await store.commit(
        CommitBatch(
            outcomes=outcomes,
            duplicates=[Duplicates(new.id, None, old.id)],
            lastmods=[(old.id, 2000.0), (new.id, 2000.0)],
            inlinks=[(old.id, 2), (new.id, 3)],
        )
    )
    assert await store.content_hashes([old.id, new.id, merged[1].id]) == {
        old.id: f"hash-{old.id}",
        new.id: f"hash-{new.id}",
    }
    candidates = await store.simhash_candidates(blocks(0x0123456789ABCDEF))
    assert {i for i, _ in candidates} == {old.id, new.id}
    exported = await rows(store)
    assert exported[old.url].state == exported[new.url].state == State.DONE
    with contextlib.closing(sqlite3.connect(store.path)) as db:
        stored = db.execute(
            "SELECT id, alias_of, near_duplicate_of, lastmod, inlink_level FROM urls "
            "WHERE id IN (?, ?) ORDER BY seq",
            (old.id, new.id),
        ).fetchall()
    assert stored == [(old.id, new.id, None, 2000.0, 2), (new.id, old.id, old.id, 2000.0, 3)]


async def test_a_reopened_crawl_counts_the_inbox_it_left(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path, inbox_limit=10) as store:
        await insert(store, *(url("a.test", n) for n in range(7)))
    assert tables(tmp_path) == (7, 0, 7)
    async with SQLiteStore(tmp_path, inbox_limit=10) as store:
        assert await insert(store, *(url("a.test", n) for n in range(10))) == 3
        assert tables(tmp_path) == (10, 10, 0)


MERGE = ("INSERT OR IGNORE INTO ids ", "DELETE FROM ids_inbox")
"""The merge's statements, which read the whole inbox by design."""

PLAN_READS_ALL = re.compile(r"^(SCAN|MATERIALIZE) (urls|u|ids|ids_inbox|k|url_ids)\b|AUTOMATIC")


IN_ID_ORDER = re.compile(r"ORDER BY (1|id) LIMIT")


def full_reads(db: sqlite3.Connection, statement: str) -> list[str]:
    """The steps of ``statement``'s plan that read all of ``urls`` or of the id index,
    or sort rows that a page in id order should read in order."""
    plan = [row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}")]
    sorts = IN_ID_ORDER.search(statement) is not None
    return [s for s in plan if PLAN_READS_ALL.search(s) or (sorts and "TEMP B-TREE" in s)]


async def test_no_statement_by_url_id_reads_a_whole_table(
    store: SQLiteStore, tmp_path: Path
) -> None:
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    urls = [url("a.test", n) for n in range(INBOX + 2)]
    await insert(store, *urls)
    host = (await store.host_ids(["a.test"]))["a.test"]
    claimed = await store.claim({host: 2}, now=1000.0)
    first, second = claimed
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(first.id, host, State.DONE, 1, status=200, fetched_at=1000.0,
                        canonical=second.url, content_hash="h", simhash=7),
                Outcome(second.id, host, State.DONE, 1, status=200, fetched_at=1000.0),
            ],
            duplicates=[Duplicates(second.id, first.id, None)],
            new_urls=[NewURL(id=url("a.test", 0).id, url=url("a.test", 0).url, host="a.test",
                             depth=1)],
            lastmods=[(first.id, 2000.0)],
            inlinks=[(second.id, 2)],
        )
    )  # fmt: skip
    await store.existing([u.id for u in urls])
    await store.content_hashes([first.id])
    await store.simhash_candidates(blocks(7))
    await store.url_page(0, 10, UrlFilter(state=State.DONE))
    [row async for row in store.export()]
    [batch async for batch in store.iter_ids()]
    reads = [s for s in statements if re.search(r"\b(SELECT|UPDATE|DELETE)\b", s)]
    assert len(reads) >= 20
    with contextlib.closing(sqlite3.connect(tmp_path / DB_NAME)) as db:
        db.execute(STAGED)
        scans = {s: full_reads(db, s) for s in reads if not s.startswith(MERGE)}
    assert {s: steps for s, steps in scans.items() if steps} == {}


OPEN_AND_MEASURE = """
import asyncio, sys
from pathlib import Path
from trawl.store.sqlite.store import SQLiteStore

def kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))

async def main():
    before = kib("VmRSS:")
    async with SQLiteStore(Path(sys.argv[1])):
        pass
    print(kib("VmHWM:") - before)

asyncio.run(main())
"""


def test_migration_10_does_not_hold_the_old_table_in_ram(tmp_path: Path) -> None:
    """Dropping the old ``urls`` keeps its pages in a statement journal, which must be a
    file: in RAM, a 3 M URL crawl peaked at 656 MB of RSS while it migrated, 163 MB
    without."""
    data_dir = tmp_path / "crawl"
    data_dir.mkdir()
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db, db:
        for version in range(1, 10):
            for statement in migration_statements(version, SQLITE_TYPES):
                db.execute(statement)
        db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '9')")
        db.execute("INSERT INTO hosts (name) VALUES ('a.test')")
        db.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) "
            "INSERT INTO urls (id, url, host_id, depth) "
            "SELECT i * 7919, printf('http://a.test/%d/%s', i, hex(randomblob(120))), 1, 1 FROM n"
        )
    table_kib = (data_dir / DB_NAME).stat().st_size // 1024
    assert table_kib > 50_000
    measured = subprocess.run(
        [sys.executable, "-c", OPEN_AND_MEASURE, str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    # The page cache (64 MB) may fill; a copy of the old table may not come on top (here
    # 75 MB grown with the journal in a file, 196 MB in RAM, for a 67 MB table).
    assert int(measured.stdout) < 64 * 1024 + table_kib // 2
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        assert db.execute("SELECT COUNT(*) FROM url_ids").fetchone() == (200_000,)
