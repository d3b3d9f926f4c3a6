"""The SQLite store's commit keeps every count exact with its host ids cached.

Host ids are kept by name once committed, so a host created by a transaction that
failed must be created again, not reused; each host's counts grow by exactly what its
URLs added, whatever part of a batch was already stored.

Plain links and the other new URLs of a host (redirect targets, sitemap entries) are
inserted by different statements; each row keeps its own columns.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import cast

import pytest

from test_seen import store
from test_store import url
from trawl.errors import StoreError
from trawl.frontier.priority import priority
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import CommitBatch, Kind, Listed, NewURL

__all__ = ["store"]


def host_counts(path: Path) -> dict[str, tuple[int, int]]:
    """Each host's (discovered, queued), and that every URL's host row exists."""
    with contextlib.closing(sqlite3.connect(path / DB_NAME)) as db:
        orphans = db.execute(
            "SELECT COUNT(*) FROM urls WHERE host_id NOT IN (SELECT id FROM hosts)"
        ).fetchone()[0]
        assert orphans == 0
        rows = db.execute("SELECT name, discovered, queued FROM hosts").fetchall()
    return {name: (discovered, queued) for name, discovered, queued in rows}


async def test_a_batch_with_known_urls_counts_each_host_exactly(
    store: SQLiteStore, tmp_path: Path
) -> None:
    await store.commit(CommitBatch(new_urls=[url("a.test", 1), url("b.test", 1)]))
    mixed = [url("a.test", 1), url("a.test", 2), url("b.test", 2), url("c.test", 1)]
    result = await store.commit(CommitBatch(new_urls=[*mixed, url("a.test", 2)]))
    assert result.inserted == 3
    assert host_counts(tmp_path) == {"a.test": (2, 2), "b.test": (2, 2), "c.test": (1, 1)}
    counters = await store.counters()
    assert (counters["discovered"], counters["duplicates"]) == (5, 2)


async def test_a_host_made_by_a_failed_commit_is_made_again(
    store: SQLiteStore, tmp_path: Path
) -> None:
    broken = NewURL(id=99, url=cast(str, None), host="new.test", depth=1)
    with pytest.raises(StoreError):
        await store.commit(CommitBatch(new_urls=[url("new.test", 1), broken]))
    result = await store.commit(CommitBatch(new_urls=[url("new.test", 1)]))
    assert result.inserted == 1
    assert host_counts(tmp_path) == {"new.test": (1, 1)}
    ids = await store.host_ids(["new.test"])
    assert result.hosts_with_new_work == frozenset(ids.values())


async def test_plain_links_redirect_targets_and_sitemap_entries_keep_their_columns(
    store: SQLiteStore, tmp_path: Path
) -> None:
    plain, sitemap = url("a.test", 1, depth=2), url("a.test", 2, depth=1)
    target = url("a.test", 3, depth=1)._replace(redirect_hops=2, origin="http://a.test/old")
    batch = CommitBatch(
        new_urls=[plain, target, sitemap, plain],
        listed={sitemap.id: Listed(Kind.SITEMAP, 0.9)},
    )
    assert (await store.commit(batch)).inserted == 3
    with contextlib.closing(sqlite3.connect(tmp_path / DB_NAME)) as db:
        rows = db.execute(
            "SELECT id, depth, redirect_hops, origin, kind, priority FROM urls"
        ).fetchall()
    assert sorted(rows) == sorted(
        [
            (plain.id, 2, 0, None, int(Kind.PAGE), priority(2)),
            (target.id, 1, 2, "http://a.test/old", int(Kind.PAGE), priority(1)),
            (sitemap.id, 1, 0, None, int(Kind.SITEMAP), priority(1, 0.9)),
        ]
    )
    assert host_counts(tmp_path) == {"a.test": (3, 3)}
