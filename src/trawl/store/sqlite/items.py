"""The SQLite engine's items: what page handlers yielded, per fetched URL (schema
migration 13), written inside a commit's transaction and read back in key order."""

from __future__ import annotations

import sqlite3

from trawl.store.rows import Row, item_rows
from trawl.store.sqlite import sql
from trawl.store.values import CommitBatch


def write_items(db: sqlite3.Connection, batch: CommitBatch) -> None:
    """Replace the stored items of every URL the batch carries items for: the earlier
    ones deleted, the new ones inserted. Runs inside the commit's transaction, after
    the fenced parts are settled (a refused part's items are gone by then)."""
    if not batch.items:
        return
    replaced, rows = item_rows(batch)
    db.executemany(sql.DELETE_ITEMS, [(url_id,) for url_id in replaced])
    db.executemany(sql.ADD_ITEM, rows)


def item_page(db: sqlite3.Connection, url_id: int, seq: int) -> list[Row]:
    """The next page of items after the key (``url_id``, ``seq``)."""
    return db.execute(sql.ITEM_PAGE, (url_id, seq)).fetchall()
