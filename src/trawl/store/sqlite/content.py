"""The SQLite engine's content tables: the owners of content hashes, the SimHash block
index, fetch versions, and the duplicate links between pages (schema migration 3).

Plain functions over a connection, called on the store thread: the look-ups by the
content stage before a commit, the writes inside the commit's transaction, and
:func:`select_in`, the chunked ``IN (...)`` query the engine uses for every look-up by key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from trawl.store.rows import content_rows, version_row
from trawl.store.sqlite import sql
from trawl.store.values import Blocks, CommitBatch, blocks

_IN_CHUNK = 500
"""Values per ``IN (...)`` list, below SQLite's variable limit."""


def select_in(
    db: sqlite3.Connection, query: str, values: Sequence[Any]
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``query IN (values)``, asked in chunks below SQLite's variable limit."""
    for start in range(0, len(values), _IN_CHUNK):
        chunk = values[start : start + _IN_CHUNK]
        yield from db.execute(f"{query} ({','.join('?' * len(chunk))})", chunk)


def content_owners(db: sqlite3.Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``{content_hash: url_id}`` of the owner of each known hash."""
    return dict(select_in(db, sql.CONTENT_OWNERS, hashes))


def content_hashes(db: sqlite3.Connection, url_ids: Sequence[int]) -> dict[int, str]:
    """The latest content hash of each given URL that has one."""
    return dict(select_in(db, sql.CONTENT_HASHES, url_ids))


def canonicals(db: sqlite3.Connection, url_ids: Sequence[int]) -> dict[int, str]:
    """The URL each given page's canonical link names, where it names one."""
    return dict(select_in(db, sql.CANONICALS, url_ids))


def simhash_candidates(db: sqlite3.Connection, wanted: Blocks) -> list[tuple[int, int]]:
    """Indexed pages sharing a block with ``wanted``, earliest indexed first."""
    return [(row[0], row[1]) for row in db.execute(sql.SIMHASH_CANDIDATES, wanted)]


def apply_content(db: sqlite3.Connection, batch: CommitBatch) -> None:
    """Write a batch's content rows: hash owners, versions, the block index, duplicates.

    Runs inside the commit's transaction, after the outcomes' own columns are written.
    The first page committed with a content hash owns it, until the batch hands the hash
    to another page (``CommitBatch.owners``); a page that duplicates another exactly is not put
    in the block index (its owner is).
    """
    fingerprinted, versions, exact, owners = content_rows(batch)
    if fingerprinted:
        db.executemany(sql.ADD_OWNER, [(o.content_hash, o.url_id) for o in fingerprinted])
    if owners:
        db.executemany(sql.HAND_OVER, owners)
    if fingerprinted:
        db.executemany(
            sql.INDEX_BLOCK,
            [
                (o.url_id, n, value, o.fetched_at or 0.0)
                for o in fingerprinted
                if o.simhash is not None and o.url_id not in exact
                for n, value in enumerate(blocks(o.simhash))
            ],
        )
    if versions:
        db.executemany(sql.ADD_VERSION, [version_row(o) for o in versions])
    if exact:
        db.executemany(sql.UNINDEX, [(i,) for i in exact])
    if batch.duplicates:
        db.executemany(
            sql.SET_DUPLICATES,
            [(d.duplicate_of, d.near_duplicate_of, d.url_id) for d in batch.duplicates],
        )
