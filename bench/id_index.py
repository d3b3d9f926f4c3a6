"""A model of the SQLite store's id index: written in place, or behind an inbox.

Raw SQLite, not trawl's store: it measures a schema before trawl is built on it. Each
transaction inserts ``--transaction`` new rows (random 64-bit ids, a URL text each, most
on a host that moves along as a crawl's pages do, the rest on one of ``--hosts`` at
random) into ``urls`` with the frontier's partial index, after looking up ``--lookups``
known ids and reading each one's URL text, as the seen-set's look-ups do. The settings
are the store's: WAL, ``synchronous = NORMAL``, a 64 MB page cache, and the store's own
checkpoints (trawl.store.sqlite.checkpoint: paced passive checkpoints on their own thread, a
truncating one past ``WAL_LIMIT`` of log).

Layouts:

- ``inplace``: ``urls.id`` is the primary key (trawl's schema); each new id dirties a
  random leaf of its index.
- ``inbox``: ``urls`` has no index on ``id``; ids go to a small ``ids_inbox`` table that
  stays in the page cache and is merged into ``ids`` in id order every ``--merge`` rows,
  so a merge writes each leaf of ``ids`` once for several new ids. Look-ups read both.

    python -m bench.id_index --layout inplace --rows 10000000
    python -m bench.id_index --layout inbox --rows 10000000 [--merge 200000]
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from trawl.store.sqlite.checkpoint import WAL_LIMIT, Checkpointer, truncate_wal, wal_bytes

LAYOUTS = ("inplace", "inbox")
REPORT_EVERY = 1_000_000
MAX_LOOKUPS = 16_000
"""Look-ups per transaction at most: the inbox layout binds each id twice, and SQLite
binds at most 32,766 parameters a statement."""

_COLUMNS = (
    "url TEXT NOT NULL, host_id INTEGER NOT NULL, depth INTEGER NOT NULL, "
    "priority REAL NOT NULL, rank REAL NOT NULL, state INTEGER NOT NULL DEFAULT 0"
)
_SCHEMA = {
    "inplace": (f"CREATE TABLE urls (id BIGINT PRIMARY KEY, {_COLUMNS})",),
    "inbox": (
        f"CREATE TABLE urls (id BIGINT NOT NULL, {_COLUMNS})",
        "CREATE TABLE ids (id INTEGER PRIMARY KEY, row INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE ids_inbox (id INTEGER PRIMARY KEY, row INTEGER NOT NULL) WITHOUT ROWID",
    ),
}
_READY = "CREATE INDEX urls_ready ON urls (host_id, rank) WHERE state = 0"
_INSERT = "INSERT INTO urls (id, url, host_id, depth, priority, rank) VALUES (?, ?, ?, ?, ?, ?)"
Row = tuple[int, str, int, int, float, float]


@dataclass(slots=True)
class Figures:
    """What a run measured."""

    layout: str
    rows: int = 0
    seconds: float = 0.0
    merge_seconds: float = 0.0
    lookups: int = 0
    found: int = 0
    last_million_rate: float = 0.0
    stored: int = 0
    """Rows in ``urls`` at the end; ``indexed`` counts the ids their index holds."""
    indexed: int = 0
    cpu: tuple[float, float] = (0.0, 0.0)
    db_bytes: int = 0


def _open(path: Path, layout: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    for pragma in (
        "journal_mode = WAL",
        "synchronous = NORMAL",
        "cache_size = -65536",
        "temp_store = MEMORY",
        "wal_autocheckpoint = 0",
    ):
        db.execute(f"PRAGMA {pragma}")
    for statement in (*_SCHEMA[layout], _READY):
        db.execute(statement)
    return db


def _new_rows(rng: random.Random, count: int, done: int, hosts: int) -> list[Row]:
    """``count`` new rows in id order after ``done`` rows: 70% on the host of the page
    being read; ranked later than every row before (queued now)."""
    rows: list[Row] = []
    for _ in range(count):
        uid = rng.getrandbits(64) - (1 << 63)
        host = rng.randrange(hosts) if rng.random() < 0.3 else (done // 8) % hosts
        url = f"https://h{host}.example.com/articles/{uid & 0xFFFFFF}"
        rows.append((uid, url, host, 3, 0.5, done - 1800.0))
    rows.sort()
    return rows


def _look_up(db: sqlite3.Connection, layout: str, ids: list[int]) -> int:
    """Read the URL text of each of ``ids``; return how many were found."""
    marks = ",".join("?" * len(ids))
    if layout == "inplace":
        query = f"SELECT id, url FROM urls WHERE id IN ({marks})"
        return len(db.execute(query, ids).fetchall())
    query = (
        f"SELECT i.id, u.url FROM (SELECT id, row FROM ids WHERE id IN ({marks}) "
        f"UNION ALL SELECT id, row FROM ids_inbox WHERE id IN ({marks})) AS i "
        "JOIN urls AS u ON u.rowid = i.row"
    )
    return len(db.execute(query, ids + ids).fetchall())


def _insert(db: sqlite3.Connection, layout: str, rows: list[Row]) -> None:
    db.execute("BEGIN IMMEDIATE")
    if layout == "inplace":
        db.executemany(_INSERT + " ON CONFLICT (id) DO NOTHING", rows)
    else:
        (first,) = db.execute("SELECT COALESCE(MAX(rowid), 0) + 1 FROM urls").fetchone()
        db.executemany(_INSERT, rows)
        db.executemany(
            "INSERT INTO ids_inbox (id, row) VALUES (?, ?)",
            [(row[0], first + at) for at, row in enumerate(rows)],
        )
    db.execute("COMMIT")


def _merge(db: sqlite3.Connection) -> float:
    """Move the inbox into ``ids`` in id order, in one transaction; return its seconds."""
    started = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT OR IGNORE INTO ids SELECT id, row FROM ids_inbox ORDER BY id")
    db.execute("DELETE FROM ids_inbox")
    db.execute("COMMIT")
    return time.perf_counter() - started


def run(
    layout: str,
    rows: int,
    data_dir: Path,
    *,
    transaction: int = 3_000,
    lookups: int = 1_800,
    hosts: int = 5_000,
    merge_every: int = 200_000,
    seed: int = 1,
    out: TextIO | None = None,
) -> Figures:
    """Insert ``rows`` rows in ``layout``, looking up known ids before each transaction;
    progress and figures go to ``out`` (default: standard output)."""
    out = out or sys.stdout
    path = data_dir / "model.db"
    db = _open(path, layout)
    checkpoints = Checkpointer(path)
    rng = random.Random(seed)
    known: list[int] = []
    figures = Figures(layout)
    clock = time.perf_counter
    started = clock()
    mark = (started, 0)
    staged = 0
    last_million_from: tuple[float, int] | None = None
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    try:
        while figures.rows < rows:
            if known:
                wanted = [known[int(len(known) * rng.random() ** 3)] for _ in range(lookups)]
                figures.found += _look_up(db, layout, wanted)
                figures.lookups += len(set(wanted))
            batch = _new_rows(rng, min(transaction, rows - figures.rows), figures.rows, hosts)
            _insert(db, layout, batch)
            checkpoints.committed(len(batch))
            staged += len(batch)
            if layout == "inbox" and staged >= merge_every:
                figures.merge_seconds += _merge(db)
                staged = 0
            if wal_bytes(path) > WAL_LIMIT:
                truncate_wal(db)
            known.extend(row[0] for row in batch[::8])
            before = figures.rows
            figures.rows += len(batch)
            now = clock()
            if last_million_from is None and figures.rows >= rows - REPORT_EVERY:
                last_million_from = (now, figures.rows)
            if figures.rows // REPORT_EVERY > before // REPORT_EVERY:
                print(
                    f"{layout} {figures.rows:>11,} rows  "
                    f"{(figures.rows - mark[1]) / max(now - mark[0], 1e-9):>9,.0f} rows/s  "
                    f"{now - started:7.1f} s in all, merges {figures.merge_seconds:6.1f} s",
                    file=out,
                    flush=True,
                )
                mark = (now, figures.rows)
        if layout == "inbox":
            figures.merge_seconds += _merge(db)
        figures.seconds = clock() - started
        if last_million_from is not None:
            span = max(figures.seconds - (last_million_from[0] - started), 1e-9)
            figures.last_million_rate = (figures.rows - last_million_from[1]) / span
        (figures.stored,) = db.execute("SELECT COUNT(*) FROM urls").fetchone()
        index = "urls" if layout == "inplace" else "ids"
        (figures.indexed,) = db.execute(f"SELECT COUNT(id) FROM {index}").fetchone()
    finally:
        checkpoints.close()
        db.close()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    figures.cpu = (cpu.ru_utime - cpu_start.ru_utime, cpu.ru_stime - cpu_start.ru_stime)
    figures.db_bytes = sum(p.stat().st_size for p in data_dir.iterdir() if p.is_file())
    report(figures, out)
    return figures


def report(figures: Figures, out: TextIO) -> None:
    """Print the end-of-run figures."""
    print(
        f"{figures.layout}: {figures.rows:,} rows in {figures.seconds:.1f} s, "
        f"{figures.last_million_rate:,.0f} rows/s over the last million, "
        f"merges {figures.merge_seconds:.1f} s, {figures.found:,} of {figures.lookups:,} "
        f"looked-up ids found, CPU {figures.cpu[0]:.1f} + {figures.cpu[1]:.1f} s "
        f"(user + system), database {figures.db_bytes / 1e6:,.0f} MB",
        file=out,
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m bench.id_index --layout inplace|inbox --rows N``."""
    parser = argparse.ArgumentParser(prog="python -m bench.id_index", description=__doc__)
    parser.add_argument("--layout", choices=LAYOUTS, required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--transaction", type=int, default=3_000, help="rows per transaction")
    parser.add_argument("--lookups", type=int, default=1_800, help="look-ups per transaction")
    parser.add_argument("--hosts", type=int, default=5_000)
    parser.add_argument("--merge", type=int, default=200_000, help="inbox rows per merge")
    parser.add_argument("--data-dir", type=Path, help="default: a temporary directory")
    args = parser.parse_args(argv)
    if min(args.rows, args.transaction, args.lookups, args.hosts, args.merge) < 1:
        parser.error("--rows, --transaction, --lookups, --hosts and --merge must be positive")
    if args.lookups > MAX_LOOKUPS:
        parser.error(f"--lookups must be at most {MAX_LOOKUPS:,}")
    with tempfile.TemporaryDirectory(prefix="trawl-id-index-") as scratch:
        data_dir = args.data_dir or Path(scratch)
        data_dir.mkdir(parents=True, exist_ok=True)
        if (data_dir / "model.db").exists():
            parser.error(f"{data_dir / 'model.db'} exists; give an empty --data-dir")
        figures = run(
            args.layout,
            args.rows,
            data_dir,
            transaction=args.transaction,
            lookups=args.lookups,
            hosts=args.hosts,
            merge_every=args.merge,
        )
    if figures.found != figures.lookups or not figures.rows == figures.stored == figures.indexed:
        print(
            f"wrong count: {figures.found:,} of {figures.lookups:,} look-ups found, "
            f"{figures.stored:,} rows stored and {figures.indexed:,} indexed of {figures.rows:,}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
