"""WAL checkpoints for the embedded store, off the commit path.

A checkpoint copies committed pages from the write-ahead log into the database file and
syncs both files (``synchronous=NORMAL``); the sync is what makes a checkpoint slow once
the database outgrows the page cache, because every insert dirties its own leaf page.
SQLite's automatic checkpoint runs inside the committing transaction, so the crawl's
single writer waited for it: about a third of its commit time at 2 M URLs.

Here the writer connection turns automatic checkpoints off and a :class:`Checkpointer`
thread, with a connection of its own, runs PASSIVE checkpoints while the writer goes on
(SQLite allows one checkpoint beside one writer). Nothing about durability changes:
every checkpoint still syncs the log before copying and the database after, and a commit
is durable against a process kill as soon as it is in the log.

Checkpoints are paced: at most one every ``pause`` seconds, unless ``rows`` rows have
been written since the last. A crawl commits tens to hundreds of small transactions a
second, each rewriting the same few hot pages (the hosts table, the upper levels of the
indexes); one checkpoint per commit copied those pages and synced both files every time,
and waking the thread cost the writer a condition variable per commit. Paced, a page
written by many commits is copied once, and a busy crawl syncs a few times a second, not
hundreds. Large transactions still get a checkpoint each (see ``CHECKPOINT_ROWS``).

A PASSIVE checkpoint never completes while the writer keeps appending, so the log would
never wrap. The writer bounds it: once the log file passes ``wal_limit`` bytes it runs a
TRUNCATE checkpoint itself; by then the thread has usually copied and synced nearly
everything, so that costs little (about 0.13 s per 256 MB of log in ``bench.store``).
It does not when one transaction alone fills the log: a merge of the id index and the
frontier (trawl.store.sqlite.ids, trawl.store.sqlite.frontier) writes most of both, about
34 bytes a known URL, so the bound sits above the merges of a 10 M URL crawl.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from trawl.resource import Resource
from trawl.store.sqlite import sql

WAL_LIMIT = 1024 * 1024 * 1024
"""Default size of the log file at which the writer checkpoints and truncates it. At 256
MB, every merge past 7 M URLs in ``bench.store`` (280-340 MB of log each) had the writer
copy the whole merge into the database itself before its next commit: 3.3-3.5 s of every
million URLs from 8 M to 10 M, on the commit path, which the thread does beside it."""
CHECKPOINT_PAUSE = 0.5
"""Default seconds between the end of one checkpoint and the start of the next."""
CHECKPOINT_ROWS = 2_000
"""Default rows written since the last checkpoint that end its pause early. A large
transaction dirties pages all over the indexes, which waiting does not coalesce; it only
lets the log grow, and every read then searches a longer log index: bench.store at 1 M
URLs (256 pages, thousands of rows, a transaction) commits in 23.3 s checkpointing after
every commit, 26.0 s paced by time alone, 22.0 s with this bound."""


class Checkpointer(Resource):
    """A thread that checkpoints ``path``'s WAL after :meth:`committed` calls, at most
    once every ``pause`` seconds unless ``rows`` rows were written since the last."""

    def __init__(
        self, path: Path, pause: float = CHECKPOINT_PAUSE, rows: int = CHECKPOINT_ROWS
    ) -> None:
        self._path = path
        self._pause = pause
        self._rows_limit = rows
        self._rows = 0
        self._wanted = threading.Event()
        self._hurry = threading.Event()
        self._stop = False
        self.checkpoints = 0
        """PASSIVE checkpoints run so far."""
        self._thread = threading.Thread(target=self._run, name="trawl-checkpoint", daemon=True)
        self._thread.start()

    def committed(self, rows: int) -> None:
        """Ask for a checkpoint: the writer committed a transaction that wrote ``rows``."""
        self._rows += rows
        if not self._wanted.is_set():
            self._wanted.set()
        if self._rows >= self._rows_limit and not self._hurry.is_set():
            self._hurry.set()

    def close(self) -> None:
        """Stop the thread after the checkpoint it may be running; idempotent."""
        self._stop = True
        self._wanted.set()
        self._hurry.set()
        self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(sql.SYNCHRONOUS_NORMAL)
            while True:
                self._wanted.wait()
                self._wanted.clear()
                self._hurry.clear()
                if self._stop:
                    return
                self._rows = 0
                conn.execute(sql.CHECKPOINT_PASSIVE).fetchall()
                self.checkpoints += 1
                self._hurry.wait(self._pause)
        except sqlite3.Error:
            # The writer's own bound on the log takes over; nothing is lost.
            return
        finally:
            conn.close()


def wal_bytes(path: Path) -> int:
    """Size of ``path``'s write-ahead log file (0 when there is none)."""
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


def truncate_wal(conn: sqlite3.Connection, attempts: int = 100) -> None:
    """Checkpoint everything and cut the log file to zero bytes. A checkpoint of the
    thread's in progress makes SQLite answer busy at once: wait for it a little and try
    again; a reader still in the way after that only postpones the cut."""
    for _ in range(attempts):
        (busy, _, _) = conn.execute(sql.CHECKPOINT_TRUNCATE).fetchone()
        if not busy:
            return
        time.sleep(0.005)
