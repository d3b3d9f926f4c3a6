"""The PostgreSQL engine's items: what page handlers yielded, per fetched URL (schema
migration 13), queued in a commit's pipelined transaction as two statements over
arrays, and read back in key order."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from trawl.store.postgres import sql
from trawl.store.postgres.content import columns
from trawl.store.rows import Row, item_rows
from trawl.store.values import CommitBatch


async def write_items(conn: AsyncConnection[Any], batch: CommitBatch) -> None:
    """Queue the replacement of the stored items of every URL the batch carries items
    for: the earlier ones deleted, the new ones inserted. Runs inside the commit's
    transaction, after the fenced parts are settled (a refused part's items are gone
    by then)."""
    if not batch.items:
        return
    replaced, rows = item_rows(batch)
    await conn.execute(sql.DELETE_ITEMS, (replaced,))
    if rows:
        await conn.execute(sql.ADD_ITEMS, columns(rows, 4))


async def item_page(conn: AsyncConnection[Any], url_id: int, seq: int) -> list[Row]:
    """The next page of items after the key (``url_id``, ``seq``)."""
    cursor = await conn.execute(sql.ITEM_PAGE, (url_id, seq))
    return await cursor.fetchall()
