"""The embedded store: one SQLite file in WAL mode, no setup.

All SQL runs on one dedicated thread (SQLite connections are not shared across threads),
so the event loop never blocks on disk. WAL lets ``trawl status`` read while a crawl
writes. ``synchronous=NORMAL`` in WAL mode keeps every committed transaction across a
process kill (only an OS crash can lose the last few), which is the guarantee trawl gives.

The per-host budgets are checked where the rows change: ``claim`` hands out no more than
a host's page budget leaves room for (its ``fetched`` plus ``claimed`` count), and the
insert of new URLs stops at a host's discovery budget (its ``discovered`` count).

This module holds the engine's logic; its statements are in trawl.store.sqlite.sql, a
commit's writes in trawl.store.sqlite.batch, and the database file's checks in
trawl.store.sqlite.files.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from trawl.errors import StoreError
from trawl.frontier.priority import DEFAULT_HORIZON
from trawl.resource import AsyncResource
from trawl.store.host_table import host_page_sql, host_rows, host_states_sql, state_name
from trawl.store.rows import Row, export_row, item_pages, pages_by_id
from trawl.store.schema import SCHEMA_VERSION, SQLITE_TYPES, migration_statements
from trawl.store.sqlite import sql
from trawl.store.sqlite.batch import apply
from trawl.store.sqlite.checkpoint import WAL_LIMIT, Checkpointer, truncate_wal, wal_bytes
from trawl.store.sqlite.content import (
    canonicals,
    content_hashes,
    content_owners,
    select_in,
    simhash_candidates,
)
from trawl.store.sqlite.files import (
    NO_META,
    check_header,
    open_readonly,
    read_through,
    schema_version,
)
from trawl.store.sqlite.frontier import claim_rows, merge_staged, open_staging
from trawl.store.sqlite.hosts import (
    HOST_ID_CACHE,
    add_counters,
    ensure_hosts,
    leased_to,
    park,
    requeue_claimed,
    unpark,
)
from trawl.store.sqlite.ids import MERGE_ROWS, inbox_size, merge_inbox
from trawl.store.sqlite.items import item_page
from trawl.store.values import (
    ANY_URL,
    PAGE_BUDGET_COUNTER,
    Blocks,
    CommitBatch,
    CommitResult,
    ExportRow,
    HostBudget,
    HostFigures,
    HostRow,
    ItemRow,
    Lease,
    QueuedURL,
    RobotsRecord,
    Soft404Record,
    State,
    UploadRecord,
    UrlFilter,
    least_budget,
)

T = TypeVar("T")

DB_NAME = "crawl.db"


class SQLiteStore(AsyncResource):
    """Store engine on a local SQLite database in ``data_dir``.

    ``page_budget`` and ``discovery_budget`` are the per-host budgets (None: unbounded),
    ``host_budget`` the tighter page budgets of some hosts (their sites').
    ``wal_limit`` bounds the write-ahead log file (trawl.store.sqlite.checkpoint);
    ``horizon`` is the queue time the priority range is worth (trawl.frontier.priority);
    ``inbox_limit`` is how many ids the id index's inbox gathers before a merge
    (trawl.store.sqlite.ids).

    A ``readonly`` store changes nothing, and reads a crawl in a directory it may not
    write to (trawl.store.sqlite.files.open_readonly); ``checked`` also reads every
    table and index through (trawl.store.sqlite.files.read_through), so that damage a
    crawl or an export would meet is met on opening. An ``inline`` store runs its
    statements on the event loop's own thread, blocking it: for a process that serves
    the store alone (trawl.store.process), where a thread would only add hand-overs.
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
        host_budget: HostBudget | None = None,
        inline: bool = False,
    ) -> None:
        self._horizon = horizon
        self._host_budget = host_budget
        self._inbox_limit = inbox_limit
        self.path = data_dir / DB_NAME
        self._wal_limit = wal_limit
        self._checkpointer: Checkpointer | None = None
        self._readonly = readonly
        self._checked = checked
        self._page_budget = page_budget
        self._discovery_budget = discovery_budget
        self._executor = (
            None if inline else ThreadPoolExecutor(max_workers=1, thread_name_prefix="trawl-sqlite")
        )
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._host_ids: dict[str, int] = {}
        """Committed host ids by name, read and written on the store thread only."""
        self._inbox = 0
        """Ids in the id index's inbox (trawl.store.sqlite.ids), on the store thread."""

    async def _acquire(self) -> None:
        await self._run(self._open)

    async def close(self) -> None:
        """Close the connection; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._checkpointer is not None:
            await self._run(self._checkpointer.close)
        if self._conn is not None:
            await self._run(self._conn.close)
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    async def _run(self, func: Callable[[], T]) -> T:
        def guarded() -> T:
            try:
                return func()
            except (sqlite3.Error, OverflowError) as exc:
                raise StoreError(f"store {self.path}: {exc}") from exc

        if self._executor is None:
            return guarded()
        return await asyncio.get_running_loop().run_in_executor(self._executor, guarded)

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("store is not open")
        return self._conn

    def _open(self) -> None:
        if self._readonly:
            self._conn = open_readonly(self.path)
            self._check_version()
            if self._checked:
                read_through(self._conn)
            return
        self._create()
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(sql.BUSY_TIMEOUT)
        if schema_version(conn) is None:
            conn.close()
            raise StoreError(NO_META.format(path=self.path))
        for pragma in sql.WRITER_PRAGMAS:
            conn.execute(pragma)
        self._conn = conn
        self._migrate()
        conn.execute(sql.TEMP_STORE_MEMORY)
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
            conn.execute(sql.WAL_MODE)
            conn.execute(sql.META_TABLE)
        finally:
            conn.close()
        new.replace(self.path)

    def _check_version(self) -> None:
        """A read-only store migrates nothing, so it reads only a crawl at this trawl's
        schema: an older one is upgraded by opening it for writing once."""
        current = schema_version(self._db)
        if current is None:
            raise StoreError(NO_META.format(path=self.path))
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
            current = schema_version(db) or 0
            self._refuse_newer(current)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in migration_statements(version, SQLITE_TYPES):
                    db.execute(statement)
            db.execute(sql.SET_META, ("schema_version", str(SCHEMA_VERSION)))
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
            moved = db.execute(sql.RECOVER_URLS, (State.QUEUED, State.CLAIMED)).rowcount
            unpark(db, self._page_budget, self._host_budget)
            db.execute(sql.END_LEASES)
            return moved

        return await self._run(lambda: self._transaction(work))

    async def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        def page(start: int) -> list[Row]:
            return self._db.execute(sql.ID_PAGE, (start, batch)).fetchall()

        async for rows in pages_by_id(lambda start: self._run(lambda: page(start))):
            yield [row[0] for row in rows]

    async def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        def page(after: int) -> list[Row]:
            parameters = (after, State.QUEUED, State.PARKED, batch)
            return self._db.execute(sql.QUEUED_DEPTHS, parameters).fetchall()

        rows = await self._run(functools.partial(page, 0))
        while rows:
            yield [(row[1], row[2]) for row in rows]
            rows = await self._run(functools.partial(page, rows[-1][0]))

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        return await self._run(lambda: dict(select_in(self._db, sql.EXISTING, sorted(ids))))

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        return await self._run(lambda: self._transaction(lambda db: ensure_hosts(db, names)))

    async def lease_hosts(
        self,
        worker: str,
        limit: int,
        ttl: float,
        holding: Collection[int] = (),
        *,
        crowded: Collection[str] = (),
        now: float | None = None,
    ) -> Sequence[Lease]:
        def work(db: sqlite3.Connection) -> list[Lease]:
            at = time.time() if now is None else now
            held, full = json.dumps(sorted(holding)), json.dumps(sorted(crowded))
            rows = db.execute(sql.LEASABLE, (at, worker, held, full, worker, at, limit))
            leases: list[Lease] = []
            for host_id, name, previous, next_eligible_at in rows.fetchall():
                if previous is not None:
                    requeue_claimed(db, host_id)
                (generation,) = db.execute(sql.TAKE_LEASE, (worker, at + ttl, host_id)).fetchone()
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
            db.execute(sql.SET_ADDRESS, (address, host_id, worker, generation))
            at = time.time() if now is None else now
            (taken,) = db.execute(sql.ADDRESS_TAKEN, (address, host_id, worker, at)).fetchone()
            return not taken

        return await self._run(lambda: self._transaction(work))

    async def renew_leases(
        self, worker: str, leases: Mapping[int, int], ttl: float, *, now: float | None = None
    ) -> frozenset[int]:
        def work(db: sqlite3.Connection) -> frozenset[int]:
            expires = (time.time() if now is None else now) + ttl
            held = set()
            for host_id, generation in leases.items():
                if db.execute(sql.RENEW_LEASE, (expires, host_id, worker, generation)).rowcount:
                    held.add(host_id)
            return frozenset(held)

        return await self._run(lambda: self._transaction(work))

    async def work_left(self) -> int:
        def work() -> int:
            return int(self._db.execute(sql.WORK_LEFT).fetchone()[0])

        return await self._run(work)

    async def claim(
        self,
        wanted: Mapping[int, int],
        now: float,
        worker: str | None = None,
        budgets: Mapping[int, int] | None = None,
    ) -> Sequence[QueuedURL]:
        default = self._page_budget

        def work(db: sqlite3.Connection) -> list[QueuedURL]:
            claimed: list[QueuedURL] = []
            parked = 0
            leased = None if worker is None else leased_to(db, worker, list(wanted))
            for host_id, limit in wanted.items():
                if leased is not None and host_id not in leased:
                    continue
                budget = least_budget(default, None if budgets is None else budgets.get(host_id))
                if budget is not None:
                    fetched, out = db.execute(sql.PAGE_BUDGET_USE, (host_id,)).fetchone()
                    if fetched >= budget:
                        parked += park(db, host_id)
                        continue
                    # URLs handed out may still come back unfetched (retry, robots), so
                    # the rest wait while the budget is only spoken for.
                    limit = min(limit, budget - fetched - out)
                    if limit <= 0:
                        continue
                rows = claim_rows(db, host_id, now, limit)
                if not rows:
                    continue
                db.executemany(sql.CLAIM_URL, [(row[0],) for row in rows])
                db.execute(sql.HOST_CLAIMED, (len(rows), len(rows), host_id))
                claimed.extend(QueuedURL(*row[1:]) for row in rows)
            add_counters(db, {PAGE_BUDGET_COUNTER: parked})
            return claimed

        return await self._run(lambda: self._transaction(work))

    async def commit(self, batch: CommitBatch) -> CommitResult:
        budget, horizon = self._discovery_budget, self._horizon
        known = self._host_ids

        def work() -> CommitResult:
            found: dict[str, int] = {}
            result = self._transaction(lambda db: apply(db, batch, budget, horizon, known, found))
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

        if sitemaps:
            statement = sql.REQUEUE_SITEMAPS
        elif every:
            statement = sql.REQUEUE_EVERY
        else:
            statement = sql.REQUEUE_DUE

        def work(db: sqlite3.Connection) -> int:
            parameters = {"now": now, "limit": limit, "horizon": horizon}
            hosts = db.execute(statement, parameters).fetchall()
            per_host: dict[int, int] = {}
            for (host_id,) in hosts:
                per_host[host_id] = per_host.get(host_id, 0) + 1
            db.executemany(sql.HOSTS_REQUEUED, [(n, n, host_id) for host_id, n in per_host.items()])
            add_counters(db, {"recrawls_queued": len(hosts)})
            return len(hosts)

        return await self._run(lambda: self._transaction(work))

    async def requeue_failed(self, error: str) -> int:
        def work(db: sqlite3.Connection) -> int:
            hosts = db.execute(sql.REQUEUE_FAILED, (error,)).fetchall()
            per_host = Counter(host_id for (host_id,) in hosts)
            db.executemany(
                sql.HOSTS_REQUEUED, [(n, n, host_id) for host_id, n in sorted(per_host.items())]
            )
            add_counters(db, {"failed": -len(hosts), f"error:{error}": -len(hosts)})
            return len(hosts)

        return await self._run(lambda: self._transaction(work))

    async def next_due(self) -> float | None:
        def work() -> float | None:
            row = self._db.execute(sql.NEXT_DUE).fetchone()
            return None if row[0] is None else float(row[0])

        return await self._run(work)

    async def robots(self, host_id: int) -> RobotsRecord | None:
        def work() -> RobotsRecord | None:
            row = self._db.execute(sql.ROBOTS, (host_id,)).fetchone()
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
            row = self._db.execute(sql.SOFT404, (host_id,)).fetchone()
            if row is None or row[1] is None:
                return None
            return Soft404Record(fingerprint=row[0], checked_at=row[1])

        return await self._run(work)

    async def counters(self) -> Mapping[str, int]:
        def work() -> dict[str, int]:
            values = dict(self._db.execute(sql.COUNTERS).fetchall())
            queued = self._db.execute(sql.QUEUED_TOTAL).fetchone()[0]
            values["queued"] = int(queued)
            values.setdefault("discovered", 0)
            return values

        return await self._run(work)

    async def get_meta(self, key: str) -> str | None:
        def work() -> str | None:
            row = self._db.execute(sql.GET_META, (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(work)

    async def set_meta(self, key: str, value: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(sql.SET_META, (key, value))

        await self._run(lambda: self._transaction(work))

    async def uploaded(self, bucket: str, keys: Collection[str]) -> set[str]:
        def work() -> set[str]:
            rows = self._db.execute(sql.UPLOADED, (bucket, json.dumps(list(keys))))
            return {str(row[0]) for row in rows}

        return await self._run(work) if keys else set()

    async def record_upload(self, record: UploadRecord) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(sql.RECORD_UPLOAD, _upload_row(record))

        await self._run(lambda: self._transaction(work))

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        def work() -> tuple[list[HostFigures], list[HostFigures]]:
            slowest = self._db.execute(sql.SLOWEST_HOSTS, (limit,)).fetchall()
            blocked = self._db.execute(sql.MOST_BLOCKED_HOSTS, (limit,)).fetchall()
            return [HostFigures(*r) for r in slowest], [HostFigures(*r) for r in blocked]

        return await self._run(work)

    async def url_page(
        self, start: int, limit: int, wanted: UrlFilter = ANY_URL
    ) -> list[tuple[int, ExportRow]]:
        def work() -> list[tuple[int, ExportRow]]:
            parameters = (start, wanted.state, limit, wanted.host, wanted.status, wanted.error)
            rows = self._db.execute(sql.URL_PAGE, parameters).fetchall()
            return [(row[0], export_row(row)) for row in rows]

        return await self._run(work)

    async def host_page(
        self, order: str, descending: bool, limit: int, offset: int, now: float
    ) -> tuple[int, list[HostRow]]:
        def work() -> tuple[int, list[HostRow]]:
            statement = host_page_sql("?", order, descending)
            rows = self._db.execute(statement, (now, now, limit, offset)).fetchall()
            return host_rows(rows)

        return await self._run(work)

    async def host_states(self, now: float) -> dict[str, int]:
        def work() -> dict[str, int]:
            rows = self._db.execute(host_states_sql("?"), (now, now)).fetchall()
            return {state_name(rank): int(count) for rank, count in rows}

        return await self._run(work)

    async def export(self) -> AsyncIterator[ExportRow]:
        def page(start: int) -> list[Row]:
            return self._db.execute(sql.EXPORT_PAGE, (start,)).fetchall()

        async for rows in pages_by_id(lambda start: self._run(lambda: page(start))):
            for row in rows:
                yield export_row(row)

    async def items(self) -> AsyncIterator[ItemRow]:
        async def page(url_id: int, seq: int) -> list[Row]:
            return await self._run(lambda: item_page(self._db, url_id, seq))

        async for item in item_pages(page):
            yield item


def _upload_row(record: UploadRecord) -> tuple[object, ...]:
    return (
        record.bucket, record.key, record.file, record.size, record.sha256, record.worker,
        record.uploaded_at,
    )  # fmt: skip


def _merge(db: sqlite3.Connection) -> None:
    """Merge the id index's inbox and the staged rows (one transaction)."""
    merge_inbox(db)
    merge_staged(db)
