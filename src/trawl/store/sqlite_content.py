"""The SQLite engine's content tables: first owners of content hashes, the SimHash block
index, fetch versions, and the duplicate links between pages (schema migration 3).

Plain functions over a connection, called on the store thread: the look-ups by the
content stage before a commit, the writes inside the commit's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from trawl.neardup import Blocks, blocks
from trawl.store.base import CommitBatch, Outcome

_IN_CHUNK = 500

_CANDIDATES = (
    "SELECT b.url_id, u.simhash FROM ("
    + " UNION ALL ".join(
        f"SELECT url_id, added FROM simhash_blocks WHERE block_no = {n} AND block_value = ?"
        for n in range(4)
    )
    + ") AS b JOIN urls AS u ON u.id = b.url_id "
    "WHERE u.simhash IS NOT NULL GROUP BY b.url_id ORDER BY MIN(b.added), b.url_id"
)


def _chunks(values: Sequence[object]) -> list[Sequence[object]]:
    return [values[i : i + _IN_CHUNK] for i in range(0, len(values), _IN_CHUNK)]


def content_owners(db: sqlite3.Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``{content_hash: url_id}`` of the first owner of each known hash."""
    found: dict[str, int] = {}
    for chunk in _chunks(hashes):
        marks = ",".join("?" * len(chunk))
        found.update(
            db.execute(
                f"SELECT content_hash, url_id FROM content_owners WHERE content_hash IN ({marks})",
                chunk,
            ).fetchall()
        )
    return found


def content_hashes(db: sqlite3.Connection, url_ids: Sequence[int]) -> dict[int, str]:
    """The latest content hash of each given URL that has one."""
    found: dict[int, str] = {}
    for chunk in _chunks(url_ids):
        marks = ",".join("?" * len(chunk))
        found.update(
            db.execute(
                f"SELECT id, content_hash FROM urls WHERE content_hash IS NOT NULL "
                f"AND id IN ({marks})",
                chunk,
            ).fetchall()
        )
    return found


def simhash_candidates(db: sqlite3.Connection, wanted: Blocks) -> list[tuple[int, int]]:
    """Indexed pages sharing a block with ``wanted``, earliest indexed first."""
    return [(row[0], row[1]) for row in db.execute(_CANDIDATES, wanted)]


def apply_content(db: sqlite3.Connection, batch: CommitBatch) -> None:
    """Write a batch's content rows: hash owners, versions, the block index, duplicates.

    Runs inside the commit's transaction, after the outcomes' own columns are written.
    The first page committed with a content hash owns it; a page that duplicates another
    exactly is not put in the block index (its owner is).
    """
    fingerprinted = [o for o in batch.outcomes if o.content_hash is not None]
    versions = [
        o
        for o in batch.outcomes
        if o.fetched_at is not None and (o.storage is not None or o.content_hash is not None)
    ]
    exact = {d.url_id for d in batch.duplicates if d.duplicate_of is not None}
    if fingerprinted:
        db.executemany(
            "INSERT INTO content_owners (content_hash, url_id) VALUES (?, ?) "
            "ON CONFLICT (content_hash) DO NOTHING",
            [(o.content_hash, o.url_id) for o in fingerprinted],
        )
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
            [_version(o) for o in versions],
        )
    if exact:
        db.executemany("DELETE FROM simhash_blocks WHERE url_id = ?", [(i,) for i in exact])
    if batch.duplicates:
        db.executemany(
            "UPDATE urls SET duplicate_of = ?, near_duplicate_of = ? WHERE id = ?",
            [(d.duplicate_of, d.near_duplicate_of, d.url_id) for d in batch.duplicates],
        )


def _version(o: Outcome) -> tuple[object, ...]:
    key = o.storage
    return (
        o.url_id, o.fetched_at, o.status, o.content_hash, o.simhash,
        key.file if key else None, key.offset if key else None, key.length if key else None,
    )  # fmt: skip
