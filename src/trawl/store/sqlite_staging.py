"""The SQLite engine's frontier staging: new URLs reach the frontier index in merges.

The frontier index ``urls_ready`` orders each host's QUEUED rows by rank. A commit's new
URLs belong to hundreds of hosts, so inserting them into the index dirtied a leaf of it
for every one or two URLs, and the commit and the checkpoint wrote each of those leaves
out whole. Instead a new row is stored with ``staged = 1``, which keeps it out of the
index (whose condition is ``state = 0 AND staged = 0``), and its (host, rank, seq) goes
to ``temp.staged``, a table in RAM that the log never sees. A merge, beside the id
index's (trawl.store.sqlite_ids), clears the flag on every staged row in the index's
key order, so that each leaf is written once for all the rows it gains.

A staged row is as QUEUED as any other: claims read ``temp.staged`` beside the index,
a claim clears the flag, and a host's page budget parks staged rows too. The durable
truth is the flag: the table in RAM is rebuilt on opening from the rows the id index's
inbox holds (every staged row was stored since the last merge, so its id is there).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from trawl.store.sqlite_content import select_in

CREATE = (
    "CREATE TEMP TABLE IF NOT EXISTS staged (host_id INTEGER NOT NULL, rank REAL NOT NULL, "
    "seq INTEGER NOT NULL, PRIMARY KEY (host_id, rank, seq)) WITHOUT ROWID"
)
"""Each staged row's place in the frontier: host, rank, ``seq``."""


def open_staging(db: sqlite3.Connection) -> None:
    """Create ``temp.staged`` and fill it with the rows stored staged since the last
    merge (all of them are in the id index's inbox)."""
    db.execute(CREATE)
    db.execute(
        "INSERT INTO temp.staged (host_id, rank, seq) SELECT u.host_id, u.rank, u.seq "
        "FROM ids_inbox AS i JOIN urls AS u ON u.seq = i.seq WHERE u.staged = 1"
    )


def stage_since(db: sqlite3.Connection, seq: int) -> None:
    """Stage every row stored after ``seq`` (a commit's new URLs, stored staged)."""
    db.execute(
        "INSERT INTO temp.staged (host_id, rank, seq) "
        "SELECT host_id, rank, seq FROM urls WHERE seq > ?",
        (seq,),
    )


def claim_staged(
    db: sqlite3.Connection, columns: str, host_id: int, now: float, limit: int
) -> list[tuple[Any, ...]]:
    """A host's due staged rows, best rank first: (rank, seq, ``columns``...)."""
    return db.execute(
        f"SELECT s.rank, s.seq, {columns} FROM temp.staged AS s JOIN urls AS u "
        "ON u.seq = s.seq WHERE s.host_id = ? AND u.next_fetch_at <= ? "
        "ORDER BY s.rank, s.seq LIMIT ?",
        (host_id, now, limit),
    ).fetchall()


def unstage(db: sqlite3.Connection, host_id: int, places: Sequence[tuple[float, int]]) -> None:
    """Forget the staged places (rank, seq) of ``host_id`` whose rows left the queue."""
    db.executemany(
        "DELETE FROM temp.staged WHERE host_id = ? AND rank = ? AND seq = ?",
        [(host_id, rank, seq) for rank, seq in places],
    )


def park_staged(db: sqlite3.Connection, host_id: int, state: int, error: str) -> int:
    """Move a host's staged rows to ``state`` with ``error``; return how many."""
    moved: int = db.execute(
        "UPDATE urls SET state = ?, error = ?, staged = 0 "
        "WHERE seq IN (SELECT seq FROM temp.staged WHERE host_id = ?)",
        (state, error, host_id),
    ).rowcount
    db.execute("DELETE FROM temp.staged WHERE host_id = ?", (host_id,))
    return moved


def lift(db: sqlite3.Connection, ids: Sequence[int]) -> list[int]:
    """Take the staged rows of the URL ``ids`` out of ``temp.staged`` (before their rank
    changes); return their ``seq``s, for :func:`restore`."""
    places = list(
        select_in(
            db,
            "SELECT u.host_id, u.rank, u.seq FROM url_ids AS k JOIN urls AS u "
            "ON u.seq = k.seq WHERE u.staged = 1 AND k.id IN",
            ids,
        )
    )
    db.executemany("DELETE FROM temp.staged WHERE host_id = ? AND rank = ? AND seq = ?", places)
    return [int(place[2]) for place in places]


def restore(db: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Stage again, at their rank now, the rows :func:`lift` took out."""
    db.executemany(
        "INSERT INTO temp.staged (host_id, rank, seq) SELECT host_id, rank, seq FROM urls "
        "WHERE seq = ?",
        [(seq,) for seq in seqs],
    )


def merge_staged(db: sqlite3.Connection) -> int:
    """Clear the flag of every staged row in the frontier index's key order, so that
    each of its leaves is written once; return how many rows. Runs inside a
    transaction."""
    seqs = db.execute("SELECT seq FROM temp.staged ORDER BY host_id, rank, seq").fetchall()
    db.executemany("UPDATE urls SET staged = 0 WHERE seq = ?", seqs)
    db.execute("DELETE FROM temp.staged")
    return len(seqs)
