"""The SQLite engine's id index: which row of ``urls`` holds a URL id (schema migration 10).

A ``urls`` row is found by ``seq``, its place in storage order (the table's integer key).
A URL id leads to it through one of two ``WITHOUT ROWID`` tables of (id, seq): ``ids``,
which holds nearly every id, and ``ids_inbox``, which holds the ids stored since the
last merge. The view ``url_ids`` reads both. The store is their one writer: a commit
reads which of its new URLs the index holds already (the insert-if-absent check),
appends the others to ``urls``, and files their ids in the inbox with one statement.
Triggers on ``urls`` did the same for any writer, at about 2.5 us more a row.

Why an inbox: a new URL's id belongs at a random place in a large index. Written in
place, every new URL dirtied one random leaf of it, which the commit and the checkpoint
then wrote out whole. The inbox stays small and in the page cache, and a merge moves it
into ``ids`` in id order, each leaf of ``ids`` written once for all the ids it gains
(bench.id_index models both layouts; bench.store measures the store).
"""

from __future__ import annotations

import sqlite3

from trawl.store.sqlite import sql

MERGE_ROWS = 200_000
"""Ids the inbox holds before the store merges it into ``ids``."""


def last_seq(db: sqlite3.Connection) -> int:
    """The ``seq`` of the row stored last (0: none yet)."""
    return int(db.execute(sql.LAST_SEQ).fetchone()[0])


def file_since(db: sqlite3.Connection, seq: int) -> None:
    """File in the inbox the id of every row stored after ``seq``: the rows a commit
    has just appended, read from the end of ``urls`` in one statement."""
    db.execute(sql.FILE_SINCE, (seq,))


def inbox_size(db: sqlite3.Connection) -> int:
    """How many ids the inbox holds."""
    return int(db.execute(sql.INBOX_SIZE).fetchone()[0])


def merge_inbox(db: sqlite3.Connection) -> int:
    """Move the inbox's ids into ``ids``, in id order; return how many moved. Runs
    inside a transaction.

    ``OR IGNORE`` changes nothing here (the store never files one id in both tables)
    but spares the statement its journal: a statement that may abort inside a
    transaction keeps, in memory, the old content of every page it changes, and a merge
    changes most of ``ids``. With it, peak RSS grew by the size of ``ids`` (at 7 M URLs
    in bench.store, 339 MB instead of about 210)."""
    moved: int = db.execute(sql.MERGE_INBOX).rowcount
    db.execute(sql.EMPTY_INBOX)
    return moved
