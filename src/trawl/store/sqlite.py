"""The embedded store: one SQLite file in WAL mode, no setup.

All SQL runs on one dedicated thread (SQLite connections are not shared across threads),
so the event loop never blocks on disk. WAL lets ``trawl status`` read while a crawl
writes. ``synchronous=NORMAL`` in WAL mode keeps every committed transaction across a
process kill (only an OS crash can lose the last few), which is the guarantee trawl gives.

The per-host budgets are checked where the rows change: ``claim`` hands out no more than
a host's page budget leaves room for (its ``fetched`` plus ``claimed`` count), and the
insert of new URLs stops at a host's discovery budget (its ``discovered`` count).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from trawl.errors import StoreError
from trawl.frontier.priority import DEFAULT_HORIZON, DEPTH_WEIGHT, LEVEL_STEP, priority
from trawl.resource import AsyncResource
from trawl.store.checkpoint import WAL_LIMIT, Checkpointer, truncate_wal, wal_bytes
from trawl.store.rows import (
    Row,
    export_columns,
    export_row,
    host_tallies,
    pages_by_id,
    settle_fences,
    shallowest,
)
from trawl.store.schema import SCHEMA_VERSION, SQLITE_TYPES, migration_statements
from trawl.store.sqlite_content import (
    apply_content,
    canonicals,
    content_hashes,
    content_owners,
    select_in,
    simhash_candidates,
)
from trawl.store.sqlite_frontier import (
    QUEUED_COUNT,
    claim_rows,
    lift,
    merge_staged,
    open_staging,
    queued_seqs,
    restore,
    stage_since,
    unstage_host,
)
from trawl.store.sqlite_ids import (
    MERGE_ROWS,
    ROW_OF,
    by_id,
    file_since,
    inbox_size,
    last_seq,
    merge_inbox,
    row_of,
)
from trawl.store.values import (
    DISCOVERY_BUDGET_COUNTER,
    PAGE_BUDGET_COUNTER,
    PAGE_BUDGET_ERROR,
    Blocks,
    CommitBatch,
    CommitResult,
    ExportRow,
    HostFigures,
    Kind,
    Lease,
    Listed,
    NewURL,
    QueuedURL,
    Release,
    RobotsRecord,
    Soft404Record,
    State,
)

T = TypeVar("T")

DB_NAME = "crawl.db"

_EXPORT_BY_ID = export_columns("k.id", "(SELECT t.url FROM urls AS t WHERE t.seq = " + ROW_OF + ")")
"""The export columns read through the id index (trawl.store.sqlite_ids), the URL id
taken from it so that the rows come in its order; a column holding another URL's id
reads that URL through the index too."""


class SQLiteStore(AsyncResource):
    """Store engine on a local SQLite database in ``data_dir``.

    ``page_budget`` and ``discovery_budget`` are the per-host budgets (None: unbounded).
    ``wal_limit`` bounds the write-ahead log file (trawl.store.checkpoint); ``horizon``
    is the queue time the priority range is worth (trawl.frontier.priority); ``inbox_limit`` is
    how many ids the id index's inbox gathers before a merge (trawl.store.sqlite_ids).

    A ``readonly`` store changes nothing, and reads a crawl in a directory it may not
    write to (:func:`_open_readonly`); ``checked`` also reads every table and index
    through (:func:`_read_through`), so that damage a crawl or an export would meet is
    met on opening.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        readonly: bool = False,
        checked: bool = False,
        page_budget: int | None = None,
        discovery_budget: int | None = None,
        wal_limit: int = WAL_LIMIT,
        horizon: float = DEFAULT_HORIZON,
        inbox_limit: int = MERGE_ROWS,
    ) -> None:
        self._horizon = horizon
        self._inbox_limit = inbox_limit
        self.path = data_dir / DB_NAME
        self._wal_limit = wal_limit
        self._checkpointer: Checkpointer | None = None
        self._readonly = readonly
        self._checked = checked
        self._page_budget = page_budget
        self._discovery_budget = discovery_budget
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trawl-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._host_ids: dict[str, int] = {}
        """Committed host ids by name, read and written on the store thread only."""
        self._inbox = 0
        """Ids in the id index's inbox (trawl.store.sqlite_ids), on the store thread."""

    async def _acquire(self) -> None:
        await self._run(self._open)

    async def close(self) -> None:
        """Close the connection; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        if self._checkpointer is not None:
            await loop.run_in_executor(self._executor, self._checkpointer.close)
        if self._conn is not None:
            await loop.run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=True)

    async def _run(self, func: Callable[[], T]) -> T:
        def guarded() -> T:
            try:
                return func()
            except (sqlite3.Error, OverflowError) as exc:
                raise StoreError(f"store {self.path}: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(self._executor, guarded)

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("store is not open")
        return self._conn

    def _open(self) -> None:
        if self._readonly:
            self._conn = _open_readonly(self.path)
            self._check_version()
            if self._checked:
                _read_through(self._conn)
            return
        self._create()
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        if _schema_version(conn) is None:
            conn.close()
            raise StoreError(_NO_META.format(path=self.path))
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA cache_size = -65536")
        # Checkpoints run on their own thread (trawl.store.checkpoint).
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        self._conn = conn
        self._migrate()
        # Only after migrating: a migration that drops a table keeps the table's
        # pages in a statement journal, which must go to a file, not to RAM.
        conn.execute("PRAGMA temp_store = MEMORY")
        self._inbox = inbox_size(conn)
        open_staging(conn)
        self._checkpointer = Checkpointer(self.path)

    def _create(self) -> None:
        """Make the data dir and, for a new crawl, its database; refuse a database file
        that holds no crawl.

        A new database is made under another name and renamed into place once it holds
        the ``meta`` table, so that ``crawl.db`` either holds a crawl or does not exist:
        a process killed while creating it leaves no empty file to be taken for one.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create data dir {self.path.parent}: {exc.strerror}") from exc
        if self.path.exists():
            check_header(self.path)
            return
        new = self.path.with_name(f"{DB_NAME}.new")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{new}{suffix}").unlink(missing_ok=True)
        conn = sqlite3.connect(new, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(_META_TABLE)
        finally:
            conn.close()
        new.replace(self.path)

    def _check_version(self) -> None:
        """A read-only store migrates nothing, so it reads only a crawl at this trawl's
        schema: an older one is upgraded by opening it for writing once."""
        current = _schema_version(self._db)
        if current is None:
            raise StoreError(_NO_META.format(path=self.path))
        if current < SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by an older trawl (schema {current} < "
                f"{SCHEMA_VERSION}): resume it with trawl crawl once to upgrade it"
            )
        self._refuse_newer(current)

    def _refuse_newer(self, current: int) -> None:
        """Stop before touching a crawl a newer trawl wrote (schema ``current``)."""
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer trawl (schema {current} > {SCHEMA_VERSION})"
            )

    def _migrate(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            current = _schema_version(db) or 0
            self._refuse_newer(current)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in migration_statements(version, SQLITE_TYPES):
                    db.execute(statement)
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        changes = db.total_changes
        try:
            result = work(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        if self._checkpointer is not None:
            if wal_bytes(self.path) > self._wal_limit:
                truncate_wal(db)
            self._checkpointer.committed(db.total_changes - changes)
        return result

    async def recover(self, worker: str | None = None, *, now: float | None = None) -> int:
        # The data dir's lock makes a SQLite crawl exclusive: every lease in it was
        # this process's or a dead one's, whatever ``worker`` says, live or not at ``now``.
        def work(db: sqlite3.Connection) -> int:
            moved = db.execute(
                "UPDATE urls SET state = ? WHERE state = ?", (State.QUEUED, State.CLAIMED)
            ).rowcount
            _unpark(db, self._page_budget)
            db.execute(
                "UPDATE hosts SET inflight = 0, claimed = 0, lease_owner = NULL, "
                f"lease_expires_at = NULL, queued = {QUEUED_COUNT}"
            )
            return moved

        return await self._run(lambda: self._transaction(work))

    async def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        def page(start: int) -> list[Row]:
            query = "SELECT id FROM url_ids WHERE id >= ? ORDER BY id LIMIT ?"
            return self._db.execute(query, (start, batch)).fetchall()

        async for rows in pages_by_id(lambda start: self._run(lambda: page(start))):
            yield [row[0] for row in rows]

    async def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        def page(after: int) -> list[Row]:
            # In storage order: one pass over the table, no look-up through the id index.
            query = (
                "SELECT seq, id, depth FROM urls WHERE seq > ? AND state IN (?, ?) "
                "ORDER BY seq LIMIT ?"
            )
            return self._db.execute(query, (after, State.QUEUED, State.PARKED, batch)).fetchall()

        rows = await self._run(functools.partial(page, 0))
        while rows:
            yield [(row[1], row[2]) for row in rows]
            rows = await self._run(functools.partial(page, rows[-1][0]))

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        query = "SELECT k.id, u.url FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq WHERE k.id IN"
        return await self._run(lambda: dict(select_in(self._db, query, sorted(ids))))

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        return await self._run(lambda: self._transaction(lambda db: _ensure_hosts(db, names)))

    async def lease_hosts(
        self,
        worker: str,
        limit: int,
        ttl: float,
        holding: Collection[int] = (),
        *,
        now: float | None = None,
    ) -> Sequence[Lease]:
        def work(db: sqlite3.Connection) -> list[Lease]:
            at = time.time() if now is None else now
            rows = db.execute(
                LEASABLE, (at, worker, json.dumps(sorted(holding)), worker, at, limit)
            )
            leases: list[Lease] = []
            for host_id, name, previous, next_eligible_at in rows.fetchall():
                if previous is not None:
                    _requeue_claimed(db, host_id)
                (generation,) = db.execute(
                    "UPDATE hosts SET lease_owner = ?, lease_generation = lease_generation + 1, "
                    "lease_expires_at = ? WHERE id = ? RETURNING lease_generation",
                    (worker, at + ttl, host_id),
                ).fetchone()
                leases.append(Lease(host_id, name, generation, next_eligible_at))
            return leases

        return await self._run(lambda: self._transaction(work))

    async def claim_address(
        self,
        worker: str,
        host_id: int,
        generation: int,
        address: str,
        *,
        now: float | None = None,
    ) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            db.execute(
                "UPDATE hosts SET address = ? "
                "WHERE id = ? AND lease_owner = ? AND lease_generation = ?",
                (address, host_id, worker, generation),
            )
            (taken,) = db.execute(
                "SELECT EXISTS (SELECT 1 FROM hosts WHERE address = ? AND id <> ? "
                "AND lease_owner <> ? AND lease_expires_at >= ?)",
                (address, host_id, worker, time.time() if now is None else now),
            ).fetchone()
            return not taken

        return await self._run(lambda: self._transaction(work))

    async def renew_leases(
        self, worker: str, leases: Mapping[int, int], ttl: float, *, now: float | None = None
    ) -> frozenset[int]:
        def work(db: sqlite3.Connection) -> frozenset[int]:
            expires = (time.time() if now is None else now) + ttl
            held = set()
            for host_id, generation in leases.items():
                if db.execute(
                    "UPDATE hosts SET lease_expires_at = ? "
                    "WHERE id = ? AND lease_owner = ? AND lease_generation = ?",
                    (expires, host_id, worker, generation),
                ).rowcount:
                    held.add(host_id)
            return frozenset(held)

        return await self._run(lambda: self._transaction(work))

    async def work_left(self) -> int:
        def work() -> int:
            row = self._db.execute("SELECT COALESCE(SUM(queued + claimed), 0) FROM hosts")
            return int(row.fetchone()[0])

        return await self._run(work)

    async def claim(
        self, wanted: Mapping[int, int], now: float, worker: str | None = None
    ) -> Sequence[QueuedURL]:
        budget = self._page_budget

        def work(db: sqlite3.Connection) -> list[QueuedURL]:
            claimed: list[QueuedURL] = []
            parked = 0
            leased = None if worker is None else _leased_to(db, worker, list(wanted))
            for host_id, limit in wanted.items():
                if leased is not None and host_id not in leased:
                    continue
                if budget is not None:
                    fetched, out = db.execute(
                        "SELECT fetched, claimed FROM hosts WHERE id = ?", (host_id,)
                    ).fetchone()
                    if fetched >= budget:
                        parked += _park(db, host_id)
                        continue
                    # URLs handed out may still come back unfetched (retry, robots), so
                    # the rest wait while the budget is only spoken for.
                    limit = min(limit, budget - fetched - out)
                    if limit <= 0:
                        continue
                rows = claim_rows(db, host_id, now, limit)
                if not rows:
                    continue
                db.executemany(_CLAIM_URL, [(row[0],) for row in rows])
                db.execute(
                    "UPDATE hosts SET queued = queued - ?, claimed = claimed + ? WHERE id = ?",
                    (len(rows), len(rows), host_id),
                )
                claimed.extend(QueuedURL(*row[1:]) for row in rows)
            _add_counters(db, {PAGE_BUDGET_COUNTER: parked})
            return claimed

        return await self._run(lambda: self._transaction(work))

    async def commit(self, batch: CommitBatch) -> CommitResult:
        budget, horizon = self._discovery_budget, self._horizon
        known = self._host_ids

        def work() -> CommitResult:
            found: dict[str, int] = {}
            result = self._transaction(lambda db: _apply(db, batch, budget, horizon, known, found))
            # Only now are the hosts this transaction inserted sure to exist.
            if len(known) + len(found) > HOST_ID_CACHE:
                known.clear()
            known.update(found)
            self._inbox += result.inserted
            if self._inbox >= self._inbox_limit:
                self._transaction(_merge)
                self._inbox = 0
            return result

        return await self._run(work)

    async def requeue_due(
        self, now: float, limit: int, *, every: bool = False, sitemaps: bool = False
    ) -> int:
        horizon = self._horizon

        def work(db: sqlite3.Connection) -> int:
            if sitemaps:
                picked = f"state IN (2, 3) AND kind = {int(Kind.SITEMAP)}"
            elif every:
                picked = "state IN (2, 3)"
            else:
                picked = (
                    "seq IN (SELECT seq FROM urls WHERE state IN (2, 3) AND due_at <= :now "
                    "ORDER BY due_at LIMIT :limit)"
                )
            hosts = db.execute(
                "UPDATE urls SET state = 0, attempts = 0, next_fetch_at = 0, "
                f"rank = MIN(COALESCE(due_at, :now), :now) - priority * :horizon WHERE {picked} "
                "RETURNING host_id",
                {"now": now, "limit": limit, "horizon": horizon},
            ).fetchall()
            per_host: dict[int, int] = {}
            for (host_id,) in hosts:
                per_host[host_id] = per_host.get(host_id, 0) + 1
            db.executemany(
                "UPDATE hosts SET queued = queued + ?, fetched = MAX(fetched - ?, 0) WHERE id = ?",
                [(n, n, host_id) for host_id, n in per_host.items()],
            )
            _add_counters(db, {"recrawls_queued": len(hosts)})
            return len(hosts)

        return await self._run(lambda: self._transaction(work))

    async def requeue_failed(self, error: str) -> int:
        def work(db: sqlite3.Connection) -> int:
            hosts = db.execute(
                f"UPDATE urls SET state = {int(State.QUEUED)}, attempts = 0, next_fetch_at = 0, "
                f"error = NULL WHERE state = {int(State.FAILED)} AND error = ? RETURNING host_id",
                (error,),
            ).fetchall()
            per_host = Counter(host_id for (host_id,) in hosts)
            db.executemany(
                "UPDATE hosts SET queued = queued + ?, fetched = MAX(fetched - ?, 0) WHERE id = ?",
                [(n, n, host_id) for host_id, n in sorted(per_host.items())],
            )
            _add_counters(db, {"failed": -len(hosts), f"error:{error}": -len(hosts)})
            return len(hosts)

        return await self._run(lambda: self._transaction(work))

    async def next_due(self) -> float | None:
        def work() -> float | None:
            row = self._db.execute("SELECT MIN(due_at) FROM urls WHERE state IN (2, 3)").fetchone()
            return None if row[0] is None else float(row[0])

        return await self._run(work)

    async def robots(self, host_id: int) -> RobotsRecord | None:
        def work() -> RobotsRecord | None:
            row = self._db.execute(
                "SELECT robots_status, robots_body, robots_fetched_at FROM hosts WHERE id = ?",
                (host_id,),
            ).fetchone()
            if row is None or row[2] is None:
                return None
            return RobotsRecord(status=row[0], body=bytes(row[1] or b""), fetched_at=row[2])

        return await self._run(work)

    async def content_owners(self, hashes: Sequence[str]) -> Mapping[str, int]:
        return await self._run(lambda: content_owners(self._db, hashes))

    async def content_hashes(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        return await self._run(lambda: content_hashes(self._db, url_ids))

    async def canonicals(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        return await self._run(lambda: canonicals(self._db, url_ids))

    async def simhash_candidates(self, blocks: Blocks) -> list[tuple[int, int]]:
        return await self._run(lambda: simhash_candidates(self._db, blocks))

    async def soft404(self, host_id: int) -> Soft404Record | None:
        def work() -> Soft404Record | None:
            row = self._db.execute(
                "SELECT soft404_fingerprint, soft404_checked_at FROM hosts WHERE id = ?",
                (host_id,),
            ).fetchone()
            if row is None or row[1] is None:
                return None
            return Soft404Record(fingerprint=row[0], checked_at=row[1])

        return await self._run(work)

    async def counters(self) -> Mapping[str, int]:
        def work() -> dict[str, int]:
            values = dict(self._db.execute("SELECT name, value FROM counters").fetchall())
            queued = self._db.execute("SELECT COALESCE(SUM(queued), 0) FROM hosts").fetchone()[0]
            values["queued"] = int(queued)
            values.setdefault("discovered", 0)
            return values

        return await self._run(work)

    async def get_meta(self, key: str) -> str | None:
        def work() -> str | None:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(work)

    async def set_meta(self, key: str, value: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

        await self._run(lambda: self._transaction(work))

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        def work() -> tuple[list[HostFigures], list[HostFigures]]:
            columns = "name, responses, response_seconds / MAX(responses, 1), blocked"
            slowest = self._db.execute(
                f"SELECT {columns} FROM hosts WHERE responses > 0 ORDER BY 3 DESC LIMIT ?",
                (limit,),
            ).fetchall()
            blocked = self._db.execute(
                f"SELECT {columns} FROM hosts WHERE blocked > 0 ORDER BY 4 DESC, 1 LIMIT ?",
                (limit,),
            ).fetchall()
            return [HostFigures(*r) for r in slowest], [HostFigures(*r) for r in blocked]

        return await self._run(work)

    async def url_page(
        self, start: int, limit: int, state: State | None = None
    ) -> list[tuple[int, ExportRow]]:
        def work() -> list[tuple[int, ExportRow]]:
            query = by_id(_EXPORT_BY_ID, "k.id >= ?1 AND (?2 IS NULL OR u.state = ?2)")
            rows = self._db.execute(f"{query} LIMIT ?3", (start, state, limit)).fetchall()
            return [(row[0], export_row(row)) for row in rows]

        return await self._run(work)

    async def export(self) -> AsyncIterator[ExportRow]:
        def page(start: int) -> list[Row]:
            query = by_id(_EXPORT_BY_ID, "k.id >= ?1") + " LIMIT 5000"
            return self._db.execute(query, (start,)).fetchall()

        async for rows in pages_by_id(lambda start: self._run(lambda: page(start))):
            for row in rows:
                yield export_row(row)


_META_TABLE = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
"""The table every crawl's database has (migration 1 makes it if a new one lacks it)."""
_NO_META = "{path} holds no trawl crawl (a SQLite database without trawl's meta table)"
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


def _open_readonly(path: Path) -> sqlite3.Connection:
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
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _read_through(db: sqlite3.Connection) -> None:
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
        schema = db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE type IN ('table', 'index') AND rootpage > 0"
        ).fetchall()
        for kind, name, table, sql in schema:
            if kind == "table":
                db.execute(f"SELECT COUNT(*) FROM {_quoted(name)} NOT INDEXED").fetchone()
                continue
            column = _quoted(db.execute(f"PRAGMA index_info({_quoted(name)})").fetchone()[2])
            condition = f"({column} IS NULL OR {column} IS NOT NULL)"
            partial = _PARTIAL.search(sql or "")
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


def _schema_version(db: sqlite3.Connection) -> int | None:
    """The schema version a crawl's database records (None: it has no ``meta`` table,
    so holds no crawl)."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:
        return None
    return int(row[0]) if row else 0


def _ensure_hosts(db: sqlite3.Connection, names: Sequence[str]) -> dict[str, int]:
    """Ids of the named hosts, inserting those not yet known."""
    db.executemany(
        "INSERT INTO hosts (name) VALUES (?) ON CONFLICT (name) DO NOTHING",
        [(name,) for name in names],
    )
    return dict(select_in(db, "SELECT name, id FROM hosts WHERE name IN", names))


HOST_ID_CACHE = 100_000
"""Host ids a store keeps by name (emptied when full): a commit's new URLs name hundreds
of hosts, and asking the database for each id took about a tenth of a commit."""


def _batch_host_ids(
    db: sqlite3.Connection, names: set[str], known: Mapping[str, int], found: dict[str, int]
) -> dict[str, int]:
    """Ids of the named hosts: from ``known`` (committed ids), else from the database,
    inserting those not yet there; the ones read here are added to ``found``."""
    ids = {name: known[name] for name in names if name in known}
    if len(ids) < len(names):
        fresh = _ensure_hosts(db, sorted(names - ids.keys()))
        found.update(fresh)
        ids.update(fresh)
    return ids


def _leased_to(db: sqlite3.Connection, worker: str, host_ids: Sequence[int]) -> set[int]:
    """Which of ``host_ids`` are leased to ``worker`` now."""
    rows = select_in(
        db,
        "SELECT id, lease_owner, lease_expires_at FROM hosts WHERE id IN",
        sorted(host_ids),
    )
    now = time.time()
    return {host_id for host_id, owner, expires in rows if owner == worker and expires >= now}


_CLAIM_URL = f"UPDATE urls SET state = {int(State.CLAIMED)} WHERE seq = ?"
"""Marks a URL handed out; the state is spelled in the SQL, not bound as an enum member
(sqlite3 binds an ``int`` subclass only after looking for an adapter)."""

REQUEUE_CLAIMED = (
    f"UPDATE urls SET state = {int(State.QUEUED)} "
    f"WHERE host_id = ? AND state = {int(State.CLAIMED)}"
)
"""Returns a host's CLAIMED URLs to the queue, reading the partial index of CLAIMED rows
(migration 7), not the table."""


def _requeue_claimed(db: sqlite3.Connection, host_id: int) -> None:
    """Return a host's CLAIMED URLs to the queue (its lease ended with them unanswered)."""
    moved = db.execute(REQUEUE_CLAIMED, (host_id,)).rowcount
    db.execute("UPDATE hosts SET queued = queued + ?, claimed = 0 WHERE id = ?", (moved, host_id))


def _release(db: sqlite3.Connection, releases: Sequence[Release]) -> None:
    """Give leased hosts back, each only if its lease is still at the release's generation."""
    for r in releases:
        if db.execute(
            "UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL, next_eligible_at = ? "
            "WHERE id = ? AND lease_generation = ? AND lease_owner IS NOT NULL",
            (r.next_eligible_at, r.host_id, r.generation),
        ).rowcount:
            _requeue_claimed(db, r.host_id)


def _add_counters(db: sqlite3.Connection, counters: Mapping[str, int]) -> None:
    """Add ``counters`` to the stored ones (zeros are skipped)."""
    changed = [(name, value) for name, value in counters.items() if value]
    if changed:
        db.executemany(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
            changed,
        )


def _park(db: sqlite3.Connection, host_id: int) -> int:
    """Hold back every QUEUED URL of a host that used up its page budget; return how many."""
    parked: int = db.execute(
        f"UPDATE urls SET state = ?1, error = ?2 WHERE seq IN ({queued_seqs('?3')})",
        (State.PARKED, PAGE_BUDGET_ERROR, host_id),
    ).rowcount
    unstage_host(db, host_id)
    if parked:
        db.execute("UPDATE hosts SET queued = queued - ? WHERE id = ?", (parked, host_id))
    return parked


def _unpark(db: sqlite3.Connection, page_budget: int | None) -> None:
    """Queue again the PARKED URLs of hosts that the page budget now leaves room for
    (a run with a larger ``--max-pages-per-host``); they leave the counter too."""
    if page_budget is None:
        cursor = db.execute(
            "UPDATE urls SET state = ?, error = NULL WHERE state = ?", (State.QUEUED, State.PARKED)
        )
    else:
        cursor = db.execute(
            "UPDATE urls SET state = ?, error = NULL WHERE state = ? "
            "AND host_id IN (SELECT id FROM hosts WHERE fetched < ?)",
            (State.QUEUED, State.PARKED, page_budget),
        )
    _add_counters(db, {PAGE_BUDGET_COUNTER: -cursor.rowcount})


_ADDRESS_FREE = (
    "(h.address IS NULL OR NOT EXISTS (SELECT 1 FROM hosts AS o WHERE o.address = h.address "
    "AND o.lease_owner <> ? AND o.lease_expires_at >= ?))"
)
"""A host's address is not held by another worker (its parameters: worker, now)."""

LEASABLE = (
    "SELECT id, name, lease_owner, next_eligible_at FROM hosts AS h "
    "WHERE (queued > 0 OR claimed > 0) "
    "AND (lease_owner IS NULL OR lease_expires_at < ? OR lease_owner = ?) "
    "AND id NOT IN (SELECT value FROM json_each(?)) "
    f"AND {_ADDRESS_FREE} ORDER BY next_eligible_at, id LIMIT ?"
)
"""Hosts with work that a worker may lease (parameters: now, worker, the ids it holds as
a JSON array, worker, now, limit), soonest eligible first. The held ones are left out
here, not skipped after the query: a worker holding 1,024 hosts read them all back on
every refill."""

_RAISE_INLINKS = (
    f"UPDATE urls SET priority = MIN(1.0, priority + {LEVEL_STEP} * (?1 - inlink_level)), "
    f"rank = rank - CASE WHEN state = 0 THEN {LEVEL_STEP} * (?1 - inlink_level) * ?2 ELSE 0 END, "
    f"inlink_level = ?1 WHERE seq = {row_of('?3')} AND inlink_level < ?1"
)
"""A URL gains ``LEVEL_STEP`` of priority per in-link level it reached (trawl.frontier.inlinks)."""
_SHALLOWER = (
    f"UPDATE urls SET depth = ?1, priority = MIN(1.0, priority + {DEPTH_WEIGHT} / (1.0 + ?1) "
    f"- {DEPTH_WEIGHT} / (1.0 + depth)), rank = rank - CASE WHEN state = 0 THEN (MIN(1.0, "
    f"priority + {DEPTH_WEIGHT} / (1.0 + ?1) - {DEPTH_WEIGHT} / (1.0 + depth)) - priority) "
    f"* ?2 ELSE 0 END WHERE seq = {row_of('?3')} AND depth > ?1 AND state IN (0, 1, 5)"
)
"""A URL not fetched yet found at a smaller depth takes it, with the priority of that
depth (trawl.frontier.priority) and, while queued, the rank that priority gives."""
_HANDED_OUT = (
    "SELECT u.host_id, k.id, u.depth FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
    "WHERE u.state = 1 AND k.id IN"
)
"""The handed-out URLs among some ids, with their hosts and depths."""
_INSERT_URL = (
    "INSERT INTO urls (id, url, host_id, depth, redirect_hops, origin, kind, priority, rank) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""The insert of a new URL (one the store does not hold: :func:`_unstored`)."""
InsertRow = tuple[int, str, int, int, int, str | None, int, float, float]
_INSERT_LINK = (
    "INSERT INTO urls (id, url, host_id, depth, priority, rank) VALUES (?, ?, ?, ?, ?, ?)"
)
"""The insert of a plain link (a page, no redirect hops, no origin: the columns'
defaults). Six parameters instead of nine, and no None, which sqlite3 binds only after
looking for an adapter: 3.5 -> 1.5 us a row inserting into an in-memory table, and 29.1
-> 28.0 s of commit for 1 M URLs of inserts."""
LinkRow = tuple[int, str, int, int, float, float]
_PLAIN_LINK = Listed(Kind.PAGE, None)


def _insert_urls(
    db: sqlite3.Connection,
    urls: Sequence[tuple[int, NewURL]],
    queued_at: float,
    horizon: float,
    listed: Mapping[int, Listed],
) -> None:
    """Insert new URLs, each with its host's id, queued at ``queued_at`` (their rank,
    trawl.frontier.priority). ``urls`` are URLs the store does not hold, each once
    (:func:`_unstored`).

    One statement for the whole commit, not one a host: a commit's new URLs belong to
    hundreds of hosts, a few each, and each ``executemany`` costs its own setup. In hash
    order, so that a host's URLs of one commit are claimed in that order at equal rank.
    """
    links: list[LinkRow] = []
    rows: list[InsertRow] = []
    for hid, u in urls:
        kind, hint = listed.get(u.id, _PLAIN_LINK) if listed else _PLAIN_LINK
        value = priority(u.depth, hint)
        rank = queued_at - value * horizon
        if kind is Kind.PAGE and not u.redirect_hops and u.origin is None:
            links.append((u.id, u.url, hid, u.depth, value, rank))
        else:
            rows.append(
                (u.id, u.url, hid, u.depth, u.redirect_hops, u.origin, int(kind), value, rank)
            )
    links.sort()
    rows.sort()
    db.executemany(_INSERT_LINK, links)
    if rows:
        db.executemany(_INSERT_URL, rows)


def _within_budget(
    db: sqlite3.Connection, urls: Sequence[tuple[int, NewURL]], budget: int
) -> list[tuple[int, NewURL]]:
    """The URLs of ``urls`` (host id, URL) that their hosts' discovery budget leaves room
    for: where a host's do not all fit, the shallowest, in the order they were found."""
    by_host: dict[int, list[NewURL]] = {}
    for hid, u in urls:
        by_host.setdefault(hid, []).append(u)
    kept: list[tuple[int, NewURL]] = []
    for hid, found in by_host.items():
        (known,) = db.execute("SELECT discovered FROM hosts WHERE id = ?", (hid,)).fetchone()
        room = max(budget - known, 0)
        if len(found) > room:
            found = sorted(found, key=_depth_of)[:room]
        kept.extend((hid, u) for u in found)
    return kept


def _merge(db: sqlite3.Connection) -> None:
    """Merge the id index's inbox and the staged rows (one transaction)."""
    merge_inbox(db)
    merge_staged(db)


def _unstored(
    db: sqlite3.Connection, urls: Sequence[NewURL]
) -> tuple[list[NewURL], list[tuple[int, int]]]:
    """The URLs of ``urls`` whose id the store does not hold, each id once (the first
    found at the smallest depth): the store's own insert-if-absent check, a read of the
    id index and no write. With them, (id, depth) of the others, which may be stored
    deeper (:attr:`CommitBatch.shallower`)."""
    wanted = sorted({u.id for u in urls})
    held = {row[0] for row in select_in(db, "SELECT id FROM url_ids WHERE id IN", wanted)}
    fresh: dict[int, NewURL] = {}
    known: list[tuple[int, int]] = []
    for u in urls:
        if u.id in held:
            known.append((u.id, u.depth))
            continue
        first = fresh.setdefault(u.id, u)
        if u.depth < first.depth:
            fresh[u.id] = u
    return list(fresh.values()), known


def _depth_of(url: NewURL) -> int:
    """Sort key: the depth of a URL."""
    return url.depth


_ANSWER = (
    "UPDATE urls SET state = ?, attempts = ?, status = ?, content_type = ?, "
    "length = ?, fetched_at = COALESCE(?, fetched_at), redirect_to = ?, error = ?, "
    "truncated = ?, "
    "next_fetch_at = ?, canonical = ?, alias_of = (SELECT id FROM url_ids WHERE id = ?), "
    "content_hash = COALESCE(?, content_hash), simhash = COALESCE(?, simhash), "
    "etag = COALESCE(?, etag), last_modified = COALESCE(?, last_modified), "
    "revisit_interval = COALESCE(?, revisit_interval), due_at = COALESCE(?, due_at), "
    "change_hash = COALESCE(?, change_hash), revalidation = COALESCE(?, revalidation), "
    f"revalidated_at = COALESCE(?, revalidated_at) WHERE seq = {row_of('?')}"
)
"""Writes an outcome that carries an answer (or a failure) into its URL's row."""
_REVALIDATE = (
    "UPDATE urls SET state = ?, attempts = ?, next_fetch_at = ?, "
    "etag = COALESCE(?, etag), last_modified = COALESCE(?, last_modified), "
    "revisit_interval = COALESCE(?, revisit_interval), due_at = COALESCE(?, due_at), "
    f"revalidation = ?, revalidated_at = ? WHERE seq = {row_of('?')}"
)
"""Writes a 304's outcome: the last full answer's columns stand."""


def _apply(
    db: sqlite3.Connection,
    batch: CommitBatch,
    discovery_budget: int | None,
    horizon: float,
    known_hosts: Mapping[str, int],
    found_hosts: dict[str, int],
) -> CommitResult:
    """Write one batch; runs inside a transaction on the store thread. Host ids come
    from ``known_hosts`` where it has them; those read or made here go to
    ``found_hosts``."""
    if batch.fenced:
        generations = select_in(
            db, "SELECT id, lease_generation FROM hosts WHERE id IN", batch.fence_hosts()
        )
        settle_fences(batch, dict(generations))
    if batch.outcomes:
        # The last outcome of a URL wins (a batch merged from several may hold two).
        latest = {o.url_id: o for o in batch.outcomes}.values()
        db.executemany(
            _ANSWER,
            [
                (
                    int(o.state), o.attempts, o.status, o.content_type, o.length, o.fetched_at,
                    o.redirect_to, o.error, int(o.truncated), o.next_fetch_at, o.canonical,
                    o.alias_of(), o.content_hash, o.simhash, o.etag, o.last_modified,
                    o.revisit_interval, o.due_at, o.change_hash, *o.revalidated, o.url_id,
                )
                for o in latest
                if not o.not_modified
            ],
        )  # fmt: skip
        db.executemany(
            _REVALIDATE,
            [
                (
                    int(o.state), o.attempts, o.next_fetch_at, o.etag, o.last_modified,
                    o.revisit_interval, o.due_at, *o.revalidated, o.url_id,
                )
                for o in latest
                if o.not_modified
            ],
        )  # fmt: skip
        db.executemany(
            "UPDATE hosts SET queued = queued + ?, fetched = fetched + ?, "
            "claimed = MAX(claimed - ?, 0), blocked = blocked + ?, "
            "responses = responses + ?, response_seconds = response_seconds + ? WHERE id = ?",
            [(*tally, host) for host, tally in host_tallies(batch.outcomes).items()],
        )
    inserted = left_out = 0
    hosts_with_new_work: set[int] = set()
    fresh, known = _unstored(db, batch.new_urls) if batch.new_urls else ([], [])
    if fresh:
        filed_after = last_seq(db)
        host_id = _batch_host_ids(db, {u.host for u in fresh}, known_hosts, found_hosts)
        placed = [(host_id[u.host], u) for u in fresh]
        if discovery_budget is not None:
            placed = _within_budget(db, placed, discovery_budget)
            left_out = len(fresh) - len(placed)
        _insert_urls(db, placed, batch.at, horizon, batch.listed)
        gained = Counter(hid for hid, _ in placed)
        hosts_with_new_work = set(gained)
        inserted = len(placed)
        file_since(db, filed_after)
        stage_since(db, filed_after)
        db.executemany(
            "UPDATE hosts SET queued = queued + ?, discovered = discovered + ? WHERE id = ?",
            [(gained[hid], gained[hid], hid) for hid in sorted(hosts_with_new_work)],
        )
    counters = dict(batch.counters)
    if batch.new_urls:
        counters["discovered"] = counters.get("discovered", 0) + inserted
        duplicates = len(batch.new_urls) - inserted - left_out
        counters["duplicates"] = counters.get("duplicates", 0) + duplicates
    if left_out:
        counters[DISCOVERY_BUDGET_COUNTER] = counters.get(DISCOVERY_BUDGET_COUNTER, 0) + left_out
    robots = [
        (u.robots.status, u.robots.body, u.robots.fetched_at, u.host_id)
        for u in batch.hosts
        if u.robots is not None
    ]
    if robots:
        db.executemany(
            "UPDATE hosts SET robots_status = ?, robots_body = ?, robots_fetched_at = ? "
            "WHERE id = ?",
            robots,
        )
    probes = [
        (u.soft404.fingerprint, u.soft404.checked_at, u.host_id)
        for u in batch.hosts
        if u.soft404 is not None
    ]
    if probes:
        db.executemany(
            "UPDATE hosts SET soft404_fingerprint = ?, soft404_checked_at = ? WHERE id = ?",
            probes,
        )
    if batch.lastmods:
        # A page last answered (fetched, or confirmed by a 304) before a sitemap's
        # lastmod is due now.
        db.executemany(
            "UPDATE urls SET lastmod = ?, due_at = "
            "CASE WHEN MAX(fetched_at, COALESCE(revalidated_at, fetched_at)) < ? "
            f"THEN MIN(COALESCE(due_at, ?), ?) ELSE due_at END WHERE seq = {row_of('?')}",
            [(lastmod, lastmod, batch.at, batch.at, uid) for uid, lastmod in batch.lastmods],
        )
    if batch.inlinks:
        lifted = lift(db, [uid for uid, _ in batch.inlinks])
        db.executemany(_RAISE_INLINKS, [(level, horizon, uid) for uid, level in batch.inlinks])
        restore(db, lifted)
    handed_out: tuple[tuple[int, int, int], ...] = ()
    if batch.shallower or known:
        found = shallowest([*batch.shallower, *known])
        wanted = dict(found)
        handed_out = tuple(
            (host_id, uid, wanted[uid])
            for host_id, uid, depth in select_in(db, _HANDED_OUT, list(wanted))
            if depth > wanted[uid]
        )
        lifted = lift(db, list(wanted))
        db.executemany(_SHALLOWER, [(depth, horizon, uid) for uid, depth in found])
        restore(db, lifted)
    apply_content(db, batch)
    _release(db, batch.releases)
    _add_counters(db, counters)
    return CommitResult(
        inserted=inserted,
        hosts_with_new_work=frozenset(hosts_with_new_work),
        counters=counters,
        handed_out=handed_out,
        released=frozenset(r.host_id for r in batch.releases),
    )
