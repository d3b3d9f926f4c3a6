"""The embedded store's database file: telling a crawl's database from any other file,
opening one read-only where its directory cannot be written, and reading it through to
meet damage on opening.

The statements that read its schema are generated from the names in it (a table is
counted through itself, an index through a scan of it alone); the fixed ones are in
trawl.store.sqlite.sql.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from trawl.errors import StoreError
from trawl.store.sqlite import sql

NO_META = "{path} holds no trawl crawl (a SQLite database without trawl's meta table)"
_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""


def check_header(path: Path) -> None:
    """Refuse ``path`` unless it can be read and starts as a SQLite database does: an
    empty or foreign file is never taken for a crawl, nor started over as a new one."""
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from exc
    if not header:
        raise StoreError(
            f"{path} is empty (0 bytes) and holds no crawl: remove it, or start over "
            "with trawl crawl --fresh"
        )
    if header != _HEADER:
        raise StoreError(f"{path} is not a SQLite database, so holds no trawl crawl")


def open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that reads the crawl database at ``path`` and writes nothing.

    SQLite reads a database in WAL mode only where it may write the log's index
    (``-shm``) or where that index exists already. In a directory this process may not
    write to, a database whose log (``-wal``) is absent or empty is read as immutable
    instead: it is all in the database file. A log there that holds pages but no index
    describes cannot be read; the crawl must be opened once by a process that may write
    there.
    """
    if not path.exists():
        raise StoreError(f"no crawl found in {path.parent}")
    check_header(path)
    try:
        return _connect_readonly(path, "mode=ro")
    except sqlite3.OperationalError as exc:
        log = Path(f"{path}-wal")
        if log.exists() and log.stat().st_size:
            raise StoreError(
                f"cannot read {path}: {exc}; its log {path}-wal must first be merged by "
                "opening the crawl where its directory can be written"
            ) from exc
    return _connect_readonly(path, "immutable=1")


def _connect_readonly(path: Path, mode: str) -> sqlite3.Connection:
    """A connection to ``path`` opened with the URI parameter ``mode``, tried by reading
    the database's schema (which is where a database that cannot be read fails)."""
    uri = f"{path.absolute().as_uri()}?{mode}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(sql.BUSY_TIMEOUT)
        conn.execute(sql.READ_SCHEMA).fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def read_through(db: sqlite3.Connection) -> None:
    """Read every page of every table and index of the database, in one read
    transaction: a page SQLite cannot parse raises ``database disk image is malformed``
    here, as it would for a crawl or an export that reads it later.

    A table is counted through itself (``NOT INDEXED``), an index through a scan of it
    alone (``INDEXED BY``, with the condition of a partial one, and a condition on its
    first column that keeps SQLite from counting through a smaller index). 0.05 s for a
    store of 1 M URLs (163 MB) in the page cache, where ``PRAGMA quick_check``, which
    decodes every row as well, takes 0.50 s.
    """
    db.execute("BEGIN")
    try:
        schema = db.execute(sql.SCHEMA_OBJECTS).fetchall()
        for kind, name, table, made_by in schema:
            if kind == "table":
                db.execute(f"SELECT COUNT(*) FROM {_quoted(name)} NOT INDEXED").fetchone()
                continue
            column = _quoted(db.execute(f"PRAGMA index_info({_quoted(name)})").fetchone()[2])
            condition = f"({column} IS NULL OR {column} IS NOT NULL)"
            partial = _PARTIAL.search(made_by or "")
            if partial:
                condition += f" AND ({partial.group(1)})"
            db.execute(
                f"SELECT COUNT(*) FROM {_quoted(table)} INDEXED BY {_quoted(name)} "
                f"WHERE {condition}"
            ).fetchone()
    finally:
        db.execute("COMMIT")


_PARTIAL = re.compile(r"\bWHERE\b(.*)$", re.DOTALL | re.IGNORECASE)
"""The condition of a partial index, in the SQL that made it."""


def _quoted(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def schema_version(db: sqlite3.Connection) -> int | None:
    """The schema version a crawl's database records (None: it has no ``meta`` table,
    so holds no crawl)."""
    try:
        row = db.execute(sql.SCHEMA_VERSION_OF).fetchone()
    except sqlite3.OperationalError:
        return None
    return int(row[0]) if row else 0
