"""The embedded store checkpoints its write-ahead log off the commit path, bounds the log
file, and loses no committed transaction when the process is killed meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from trawl.extract.urls import url_hash
from trawl.store.sqlite.checkpoint import Checkpointer, wal_bytes
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import CommitBatch, NewURL

PER_BATCH = 2000


def batch_of(start: int) -> CommitBatch:
    """``PER_BATCH`` new URLs with long paths, so each batch writes a few hundred KB."""
    urls = []
    for n in range(start, start + PER_BATCH):
        text = f"http://h{n % 50}.test/{'segment/' * 12}{n}"
        urls.append(NewURL(url_hash(text), text, f"h{n % 50}.test", 1))
    return CommitBatch(new_urls=urls)


async def test_the_log_file_stays_under_its_limit(tmp_path: Path) -> None:
    limit = 1024 * 1024
    async with SQLiteStore(tmp_path, wal_limit=limit) as store:
        sizes = []
        for start in range(0, 40 * PER_BATCH, PER_BATCH):
            await store.commit(batch_of(start))
            sizes.append(wal_bytes(store.path))
        assert max(sizes) <= limit
        assert (await store.counters())["discovered"] == 40 * PER_BATCH
    # Without the bound the log would have held every page written (tens of MB).
    assert (tmp_path / DB_NAME).stat().st_size > 10 * limit


async def test_committed_pages_reach_the_database_file_in_the_background(tmp_path: Path) -> None:
    path = tmp_path / DB_NAME
    async with SQLiteStore(tmp_path, wal_limit=1 << 40) as store:
        empty = path.stat().st_size
        for start in range(0, 10 * PER_BATCH, PER_BATCH):
            await store.commit(batch_of(start))
        # The writer never checkpoints below its limit: only the thread copies pages.
        for _ in range(100):
            if path.stat().st_size > empty + 1024 * 1024:
                break
            await asyncio.sleep(0.05)
        assert path.stat().st_size > empty + 1024 * 1024
        with contextlib.closing(sqlite3.connect(path)) as reader:
            assert reader.execute("SELECT COUNT(*) FROM urls").fetchone()[0] == 10 * PER_BATCH


def test_checkpoints_are_paced_whatever_the_commit_rate(tmp_path: Path) -> None:
    path = tmp_path / "paced.db"
    pause = 0.2
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as writer:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, text TEXT)")
        checkpointer = Checkpointer(path, pause=pause)
        started = time.monotonic()
        commits = 0
        while commits < 200 or checkpointer.checkpoints < 2:
            writer.execute("INSERT INTO t (text) VALUES (?)", ("x" * 2000,))
            checkpointer.committed(1)
            commits += 1
            time.sleep(0.002)
        elapsed = time.monotonic() - started
        checkpointer.close()
        # One checkpoint per commit would be about 200 of them; paced, at most one per pause.
        assert checkpointer.checkpoints <= elapsed / pause + 1
        # Pages reached the database file, not only the log.
        assert path.stat().st_size > 100 * 2000
        with contextlib.closing(sqlite3.connect(path)) as reader:
            assert reader.execute("SELECT COUNT(*) FROM t").fetchone()[0] == commits


def test_large_transactions_are_checkpointed_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / "large.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as writer:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, text TEXT)")
        checkpointer = Checkpointer(path, pause=60.0, rows=500)
        started = time.monotonic()
        while checkpointer.checkpoints < 4 and time.monotonic() - started < 30:
            writer.execute("BEGIN")
            writer.executemany("INSERT INTO t (text) VALUES (?)", [("y" * 100,)] * 1000)
            writer.execute("COMMIT")
            checkpointer.committed(1000)
            time.sleep(0.05)
        checkpointer.close()
        # Paced by time alone, a minute would pass between the first two.
        assert checkpointer.checkpoints >= 4


_WRITER = """
import asyncio, os, signal, sys
from pathlib import Path
from tests.test_checkpoint import batch_of, PER_BATCH
from trawl.store.sqlite.store import SQLiteStore

async def main():
    async with SQLiteStore(Path(sys.argv[1]), wal_limit=2 * 1024 * 1024) as store:
        for n in range(int(sys.argv[2])):
            await store.commit(batch_of(n * PER_BATCH))
            print(n + 1, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_a_kill_loses_no_committed_batch(tmp_path: Path) -> None:
    batches = 60
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(tmp_path), str(batches)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert done.returncode == -9, done.stderr
    assert done.stdout.split()[-1] == str(batches)
    with contextlib.closing(sqlite3.connect(tmp_path / DB_NAME)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT COUNT(*) FROM urls").fetchone()[0] == batches * PER_BATCH
