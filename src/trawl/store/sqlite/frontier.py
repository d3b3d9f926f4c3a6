"""The SQLite engine's frontier: the ``ready`` table, and new URLs staged for it in RAM.

``ready`` holds one entry (host_id, rank, seq) for every QUEUED row of ``urls``, so a
host's next URLs are read from it in rank order. A trigger on ``urls`` keeps it right
for every row that enters or leaves the queue or changes rank (claims, answers, retries,
requeues, parking, in-link raises) - every row but a new one.

A commit's new URLs belong to hundreds of hosts, and inserting each into ``ready`` (or,
before it, into a partial index on ``urls``) dirtied a leaf of it for every one or two
URLs, which the commit and then the checkpoint wrote out whole. So a new row waits in
``temp.staged``, a table of the same shape in RAM that the log never sees, and a merge,
run with the id index's (trawl.store.sqlite.ids), moves the staged entries into
``ready`` in its key order, each leaf written once for all the entries it gains. Claims
read both tables.

Nothing is lost with the RAM: a staged row is a QUEUED row of ``urls`` that ``ready``
lacks, and it was stored since the last merge, so the id index's inbox holds it. Opening
the store stages those rows again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from trawl.store.rows import CLAIM_COLUMNS
from trawl.store.sqlite.content import select_in

STAGED = (
    "CREATE TEMP TABLE IF NOT EXISTS staged (host_id INTEGER NOT NULL, rank REAL NOT NULL, "
    "seq INTEGER NOT NULL, PRIMARY KEY (host_id, rank, seq)) WITHOUT ROWID"
)
"""The staged entries: ``ready``'s shape, in this connection's database in RAM."""

_STAGE = "INSERT INTO temp.staged (host_id, rank, seq) SELECT "
"""The start of a statement that stages rows of ``urls`` it selects."""
_NOT_READY = (
    "NOT EXISTS (SELECT 1 FROM ready AS r WHERE r.host_id = u.host_id "
    "AND r.rank = u.rank AND r.seq = u.seq)"
)
"""A QUEUED row ``u`` of ``urls`` that ``ready`` lacks: a staged one."""
_UNSTAGE = "DELETE FROM temp.staged WHERE host_id = ? AND rank = ? AND seq = ?"

_COLUMNS = ", ".join(f"u.{name.strip()}" for name in CLAIM_COLUMNS.split(","))

CLAIM_QUEUED = (
    f"SELECT r.rank, r.seq, {_COLUMNS} FROM {{table}} AS r JOIN urls AS u ON u.seq = r.seq "
    "WHERE r.host_id = ? AND u.next_fetch_at <= ? ORDER BY r.rank, r.seq LIMIT ?"
)
"""A host's due QUEUED URLs in ``{table}`` (``ready`` or ``temp.staged``), best rank
first and equal ranks as they were stored (commit by commit, a commit's URLs in hash
order), each as (rank, seq, ``CLAIM_COLUMNS``...): read in key order, with no sort."""

QUEUED_COUNT = (
    "(SELECT COUNT(*) FROM ready WHERE ready.host_id = hosts.id) "
    "+ (SELECT COUNT(*) FROM temp.staged WHERE staged.host_id = hosts.id)"
)
"""A host's QUEUED rows (an expression on ``hosts``)."""


def open_staging(db: sqlite3.Connection) -> None:
    """Create ``temp.staged`` and stage again the QUEUED rows stored since the last
    merge that ``ready`` lacks."""
    db.execute(STAGED)
    db.execute(
        f"{_STAGE}u.host_id, u.rank, u.seq FROM ids_inbox AS i JOIN urls AS u "
        f"ON u.seq = i.seq WHERE u.state = 0 AND {_NOT_READY}"
    )


def stage_since(db: sqlite3.Connection, seq: int) -> None:
    """Stage every row stored after ``seq`` (a commit's new URLs)."""
    db.execute(f"{_STAGE}host_id, rank, seq FROM urls WHERE seq > ?", (seq,))


def claim_rows(
    db: sqlite3.Connection, host_id: int, now: float, limit: int
) -> list[tuple[Any, ...]]:
    """Up to ``limit`` of a host's due QUEUED rows, best rank first, from ``ready`` and
    the staged ones, each as (seq, ``CLAIM_COLUMNS``...). The staged ones taken leave
    ``temp.staged``; the caller marks them all CLAIMED, and the trigger takes the others
    out of ``ready``."""
    parameters = (host_id, now, limit)
    rows = db.execute(CLAIM_QUEUED.format(table="ready"), parameters).fetchall()
    staged = db.execute(CLAIM_QUEUED.format(table="temp.staged"), parameters).fetchall()
    if staged:
        from_staging = {row[1] for row in staged}
        rows = sorted(rows + staged, key=itemgetter(0, 1))[:limit]  # rank, seq
        db.executemany(
            _UNSTAGE, [(host_id, row[0], row[1]) for row in rows if row[1] in from_staging]
        )
    return [row[1:] for row in rows]


def queued_seqs(host_id: str) -> str:
    """SQL for the ``seq`` of every QUEUED row of the host given as ``host_id`` (a
    parameter), in ``ready`` or staged."""
    return (
        f"SELECT seq FROM ready WHERE host_id = {host_id} "
        f"UNION ALL SELECT seq FROM temp.staged WHERE host_id = {host_id}"
    )


def unstage_host(db: sqlite3.Connection, host_id: int) -> None:
    """Forget a host's staged rows, which left the queue."""
    db.execute("DELETE FROM temp.staged WHERE host_id = ?", (host_id,))


def lift(db: sqlite3.Connection, ids: Sequence[int]) -> list[int]:
    """Take the staged rows of the URL ``ids`` out of ``temp.staged`` before their rank
    may change: the trigger files the ones that change in ``ready`` at their new rank,
    and :func:`restore` stages the others again. Returns their ``seq``s."""
    places = list(
        select_in(
            db,
            "SELECT s.host_id, s.rank, s.seq FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
            "JOIN temp.staged AS s ON s.host_id = u.host_id AND s.rank = u.rank "
            "AND s.seq = u.seq WHERE k.id IN",
            ids,
        )
    )
    db.executemany(_UNSTAGE, places)
    return [int(place[2]) for place in places]


def restore(db: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Stage again the rows :func:`lift` took out that are still QUEUED and that the
    trigger did not file in ``ready`` (their rank did not change)."""
    db.executemany(
        f"{_STAGE}u.host_id, u.rank, u.seq FROM urls AS u "
        f"WHERE u.seq = ? AND u.state = 0 AND {_NOT_READY}",
        [(seq,) for seq in seqs],
    )


def merge_staged(db: sqlite3.Connection) -> None:
    """Move the staged entries into ``ready`` in its key order, each of its leaves
    written once. Runs inside a transaction.

    ``OR IGNORE`` changes nothing (no entry is in both) but spares the statement its
    journal (trawl.store.sqlite.ids.merge_inbox)."""
    db.execute(
        "INSERT OR IGNORE INTO ready (host_id, rank, seq) "
        "SELECT host_id, rank, seq FROM temp.staged ORDER BY host_id, rank, seq"
    )
    db.execute("DELETE FROM temp.staged")
