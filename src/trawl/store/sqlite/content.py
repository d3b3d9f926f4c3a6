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
from trawl.store.sqlite.ids import row_of
from trawl.store.values import Blocks, CommitBatch, blocks

_IN_CHUNK = 500
"""Values per ``IN (...)`` list, below SQLite's variable limit."""

_CANDIDATES = (
    "SELECT b.url_id, u.simhash FROM ("
    + " UNION ALL ".join(
        f"SELECT url_id, added FROM simhash_blocks WHERE block_no = {n} AND block_value = ?"
        for n in range(4)
    )
    + f") AS b JOIN urls AS u ON u.seq = {row_of('b.url_id')} "
    "WHERE u.simhash IS NOT NULL GROUP BY b.url_id ORDER BY MIN(b.added), b.url_id"
)


def select_in(
    db: sqlite3.Connection, query: str, values: Sequence[Any]
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``query IN (values)``, asked in chunks below SQLite's variable limit."""
    for start in range(0, len(values), _IN_CHUNK):
        chunk = values[start : start + _IN_CHUNK]
        yield from db.execute(f"{query} ({','.join('?' * len(chunk))})", chunk)


def content_owners(db: sqlite3.Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``{content_hash: url_id}`` of the owner of each known hash."""
    return dict(
        select_in(
            db, "SELECT content_hash, url_id FROM content_owners WHERE content_hash IN", hashes
        )
    )


def content_hashes(db: sqlite3.Connection, url_ids: Sequence[int]) -> dict[int, str]:
    """The latest content hash of each given URL that has one."""
    query = (
        "SELECT k.id, u.content_hash FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
        "WHERE u.content_hash IS NOT NULL AND k.id IN"
    )
    return dict(select_in(db, query, url_ids))


def canonicals(db: sqlite3.Connection, url_ids: Sequence[int]) -> dict[int, str]:
    """The URL each given page's canonical link names, where it names one."""
    query = (
        "SELECT k.id, u.canonical FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
        "WHERE u.canonical IS NOT NULL AND k.id IN"
    )
    return dict(select_in(db, query, url_ids))


def simhash_candidates(db: sqlite3.Connection, wanted: Blocks) -> list[tuple[int, int]]:
    """Indexed pages sharing a block with ``wanted``, earliest indexed first."""
    return [(row[0], row[1]) for row in db.execute(_CANDIDATES, wanted)]


def apply_content(db: sqlite3.Connection, batch: CommitBatch) -> None:
    """Write a batch's content rows: hash owners, versions, the block index, duplicates.

    Runs inside the commit's transaction, after the outcomes' own columns are written.
    The first page committed with a content hash owns it, until the batch hands the hash
    to another page (``CommitBatch.owners``); a page that duplicates another exactly is not put
    in the block index (its owner is).
    """
    fingerprinted, versions, exact, owners = content_rows(batch)
    if fingerprinted:
        db.executemany(
            "INSERT INTO content_owners (content_hash, url_id) VALUES (?, ?) "
            "ON CONFLICT (content_hash) DO NOTHING",
            [(o.content_hash, o.url_id) for o in fingerprinted],
        )
    if owners:
        db.executemany(
            "INSERT INTO content_owners (content_hash, url_id) VALUES (?, ?) "
            "ON CONFLICT (content_hash) DO UPDATE SET url_id = excluded.url_id",
            owners,
        )
    if fingerprinted:
        db.executemany(
            "INSERT INTO simhash_blocks (url_id, block_no, block_value, added) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (url_id, block_no) DO UPDATE SET "
            "block_value = excluded.block_value, added = excluded.added",
            [
                (o.url_id, n, value, o.fetched_at or 0.0)
                for o in fingerprinted
                if o.simhash is not None and o.url_id not in exact
                for n, value in enumerate(blocks(o.simhash))
            ],
        )
    if versions:
        db.executemany(
            "INSERT INTO versions (url_id, fetched_at, status, content_hash, simhash, "
            "warc_file, warc_offset, warc_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (url_id, fetched_at) DO NOTHING",
            [version_row(o) for o in versions],
        )
    if exact:
        db.executemany("DELETE FROM simhash_blocks WHERE url_id = ?", [(i,) for i in exact])
    if batch.duplicates:
        db.executemany(
            f"UPDATE urls SET duplicate_of = ?, near_duplicate_of = ? WHERE seq = {row_of('?')}",
            [(d.duplicate_of, d.near_duplicate_of, d.url_id) for d in batch.duplicates],
        )
