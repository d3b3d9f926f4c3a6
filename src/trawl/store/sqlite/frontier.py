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

from trawl.store.sqlite import sql
from trawl.store.sqlite.content import select_in


def open_staging(db: sqlite3.Connection) -> None:
    """Create ``temp.staged`` and stage again the QUEUED rows stored since the last
    merge that ``ready`` lacks."""
    db.execute(sql.STAGED)
    db.execute(sql.STAGE_INBOX)


def stage_since(db: sqlite3.Connection, seq: int) -> None:
    """Stage every row stored after ``seq`` (a commit's new URLs)."""
    db.execute(sql.STAGE_SINCE, (seq,))


def claim_rows(
    db: sqlite3.Connection, host_id: int, now: float, limit: int
) -> list[tuple[Any, ...]]:
    """Up to ``limit`` of a host's due QUEUED rows, best rank first, from ``ready`` and
    the staged ones, each as (seq, ``CLAIM_COLUMNS``...). The staged ones taken leave
    ``temp.staged``; the caller marks them all CLAIMED, and the trigger takes the others
    out of ``ready``."""
    parameters = (host_id, now, limit)
    rows = db.execute(sql.CLAIM_READY, parameters).fetchall()
    staged = db.execute(sql.CLAIM_STAGED, parameters).fetchall()
    if staged:
        from_staging = {row[1] for row in staged}
        rows = sorted(rows + staged, key=itemgetter(0, 1))[:limit]  # rank, seq
        db.executemany(
            sql.UNSTAGE, [(host_id, row[0], row[1]) for row in rows if row[1] in from_staging]
        )
    return [row[1:] for row in rows]


def unstage_host(db: sqlite3.Connection, host_id: int) -> None:
    """Forget a host's staged rows, which left the queue."""
    db.execute(sql.UNSTAGE_HOST, (host_id,))


def lift(db: sqlite3.Connection, ids: Sequence[int]) -> list[int]:
    """Take the staged rows of the URL ``ids`` out of ``temp.staged`` before their rank
    may change: the trigger files the ones that change in ``ready`` at their new rank,
    and :func:`restore` stages the others again. Returns their ``seq``s."""
    places = list(select_in(db, sql.STAGED_OF, ids))
    db.executemany(sql.UNSTAGE, places)
    return [int(place[2]) for place in places]


def restore(db: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Stage again the rows :func:`lift` took out that are still QUEUED and that the
    trigger did not file in ``ready`` (their rank did not change)."""
    db.executemany(sql.RESTAGE, [(seq,) for seq in seqs])


def merge_staged(db: sqlite3.Connection) -> None:
    """Move the staged entries into ``ready`` in its key order, each of its leaves
    written once. Runs inside a transaction.

    ``OR IGNORE`` changes nothing (no entry is in both) but spares the statement its
    journal (trawl.store.sqlite.ids.merge_inbox)."""
    db.execute(sql.MERGE_STAGED)
    db.execute(sql.EMPTY_STAGED)
