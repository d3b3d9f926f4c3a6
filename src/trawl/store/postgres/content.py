"""The PostgreSQL engine's content tables: the owners of content hashes, the SimHash
block index, fetch versions, and the duplicate links between pages (schema migration 3).

The same rules as trawl.store.sqlite.content, written as one statement per table over
arrays (``unnest``, their text in trawl.store.postgres.sql), so a commit's content rows
cost no extra round trip: the statements are queued in the commit's pipeline. Rows
that name the same key twice in a batch are reduced to the last one, as a row-by-row
write would leave them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from trawl.store.postgres import sql
from trawl.store.rows import content_rows, version_row
from trawl.store.values import Blocks, CommitBatch, blocks


async def content_owners(conn: AsyncConnection[Any], hashes: Sequence[str]) -> dict[str, int]:
    """``{content_hash: url_id}`` of the owner of each known hash."""
    cursor = await conn.execute(sql.OWNERS, (list(hashes),))
    return {row[0]: row[1] for row in await cursor.fetchall()}


async def content_hashes(conn: AsyncConnection[Any], url_ids: Sequence[int]) -> dict[int, str]:
    """The latest content hash of each given URL that has one."""
    cursor = await conn.execute(sql.HASHES, (list(url_ids),))
    return {row[0]: row[1] for row in await cursor.fetchall()}


async def canonicals(conn: AsyncConnection[Any], url_ids: Sequence[int]) -> dict[int, str]:
    """The URL each given page's canonical link names, where it names one."""
    cursor = await conn.execute(sql.CANONICALS, (list(url_ids),))
    return {row[0]: row[1] for row in await cursor.fetchall()}


async def simhash_candidates(conn: AsyncConnection[Any], wanted: Blocks) -> list[tuple[int, int]]:
    """Indexed pages sharing a block with ``wanted``, earliest indexed first."""
    cursor = await conn.execute(sql.CANDIDATES, wanted)
    return [(row[0], row[1]) for row in await cursor.fetchall()]


async def apply_content(conn: AsyncConnection[Any], batch: CommitBatch) -> None:
    """Queue a batch's content rows: hash owners, versions, the block index, duplicates.

    Runs inside the commit's transaction, after the outcomes' own columns are written.
    The first page committed with a content hash owns it, until the batch hands the hash
    to another page (``CommitBatch.owners``); a page that duplicates another exactly is not put
    in the block index (its owner is).
    """
    fingerprinted, versions, exact, owners = content_rows(batch)
    if fingerprinted:
        await conn.execute(
            sql.ADD_OWNERS,
            ([o.content_hash for o in fingerprinted], [o.url_id for o in fingerprinted]),
        )
    if owners:
        await conn.execute(sql.NEW_OWNERS, columns(owners, 2))
    if fingerprinted:
        indexed = {
            o.url_id: (o.simhash, o.fetched_at or 0.0)
            for o in fingerprinted
            if o.simhash is not None and o.url_id not in exact
        }
        if indexed:
            rows = [
                (url_id, n, value, added)
                for url_id, (simhash, added) in indexed.items()
                for n, value in enumerate(blocks(simhash))
            ]
            await conn.execute(sql.ADD_BLOCKS, columns(rows, 4))
    if versions:
        await conn.execute(sql.ADD_VERSIONS, columns([version_row(o) for o in versions], 8))
    if exact:
        await conn.execute(sql.UNINDEX, (sorted(exact),))
    if batch.duplicates:
        links = {
            d.url_id: (d.url_id, d.duplicate_of, d.near_duplicate_of) for d in batch.duplicates
        }
        await conn.execute(sql.LINK_DUPLICATES, columns(list(links.values()), 3))


def columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows turned into ``width`` column lists, one ``unnest`` argument each."""
    return [[row[i] for row in rows] for i in range(width)]
