"""The shared store: PostgreSQL, for crawls whose workers share one database.

psycopg 3 (async) over a small connection pool. Every connection runs with the store's
schema as its ``search_path``, so several crawls (and the tests) can share a database,
one schema each. The statements are in trawl.store.postgres.sql.

A commit is one pipeline: every statement of the batch is queued, then sent with the
transaction's COMMIT in one round trip (trawl.store.postgres.commit). The per-host
budgets are checked where the rows change, as in SQLite: ``claim`` locks the hosts it
hands out for and takes no more than their page budget leaves room for, and the insert
of new URLs stops at each host's discovery budget inside the insert statement itself.

The single-host requests of hosts' first turns (address claims, robots.txt and soft-404
records) that arrive while one of their kind is being served go together in the next
statement (trawl.store.postgres.gather); every statement is planned for its own
parameters (``sql.CUSTOM_PLANS``).

Leases are judged by the database's clock, which every worker shares, so clock skew
between worker machines cannot break fencing; a lease method given ``now`` judges by
that time instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.sql import Identifier
from psycopg_pool import AsyncConnectionPool

from trawl.errors import StoreError
from trawl.frontier.priority import DEFAULT_HORIZON
from trawl.resource import AsyncResource
from trawl.store.host_table import host_page_sql, host_rows, host_states_sql, state_name
from trawl.store.postgres import commit, sql
from trawl.store.postgres.content import (
    canonicals,
    content_hashes,
    content_owners,
    simhash_candidates,
)
from trawl.store.postgres.gather import Gathered
from trawl.store.postgres.items import item_page
from trawl.store.postgres.migrate import check_exists, migrate
from trawl.store.rows import MAX_ID, MIN_ID, Row, export_row, item_pages, pages_by_id
from trawl.store.values import (
    ANY_URL,
    PAGE_BUDGET_COUNTER,
    PAGE_BUDGET_ERROR,
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
    UploadRecord,
    UrlFilter,
    least_budget,
    within_budget,
)

CONNECT_TIMEOUT = 10
"""Seconds to wait for a connection to the server."""
_POOL_SIZE = 4
_EXPORT_PAGE = 5000
_REQUEUE_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class _AddressClaim:
    """One host's address claim, waiting to be sent with others."""

    worker: str
    host_id: int
    generation: int
    address: str
    now: float | None


class PostgresStore(AsyncResource):
    """Store engine on a PostgreSQL database, in ``schema`` (None: the server's default).

    ``page_budget`` and ``discovery_budget`` are the per-host budgets (None: unbounded),
    ``host_budget`` the tighter page budgets of some hosts (their sites');
    ``horizon`` is the queue time the priority range is worth (trawl.frontier.priority).
    A ``readonly`` store neither creates nor migrates anything. Any number of processes
    may open one store: they share its hosts through leases.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        page_budget: int | None = None,
        discovery_budget: int | None = None,
        readonly: bool = False,
        horizon: float = DEFAULT_HORIZON,
        host_budget: HostBudget | None = None,
    ) -> None:
        self._horizon = horizon
        self._host_budget = host_budget
        self._dsn = dsn
        self._schema = schema
        self._page_budget = page_budget
        self._discovery_budget = discovery_budget
        self._readonly = readonly
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._closed = False
        self._addresses: Gathered[_AddressClaim, bool] = Gathered(self._claim_addresses)
        self._robots: Gathered[int, RobotsRecord | None] = Gathered(self._read_robots)
        self._soft404: Gathered[int, Soft404Record | None] = Gathered(self._read_soft404)
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error:
            raise StoreError("store: not a valid PostgreSQL connection string") from None
        self._password = str(params.get("password") or "")
        where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        self.name = f"postgresql://{where}/{params.get('dbname') or ''}" + (
            f" schema {schema}" if schema else ""
        )
        """Where the store is, for messages: no user, no password."""

    async def _acquire(self) -> None:
        with self._guard():
            await self._open()

    async def _open(self) -> None:
        async with await AsyncConnection.connect(
            self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            await self._configure(conn)
            if self._readonly:
                await check_exists(conn, self.name)
            else:
                await migrate(conn, self._schema, self.name)
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=_POOL_SIZE,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
            configure=self._configure,
            open=False,
        )
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        self._pool = pool

    async def close(self) -> None:
        """Close the pool; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        for gathered in (self._addresses, self._robots, self._soft404):
            await gathered.close()
        if self._pool is not None:
            await self._pool.close()

    async def drop(self) -> None:
        """Delete the crawl kept in this store's schema, everything in it (``--fresh``);
        the store need not be open."""
        if self._schema is None:
            raise StoreError(f"store {self.name}: no schema to drop")
        statement = sql.DROP_SCHEMA.format(Identifier(self._schema))
        with self._guard():
            async with await AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            ) as conn:
                await conn.execute(statement)

    async def leased(self, *, now: float | None = None) -> bool:
        """Whether any worker holds a live lease on a host of this crawl (a worker is at
        work on it) at ``now`` (None: the database's clock); the store need not be open."""
        with self._guard():
            async with await AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            ) as conn:
                await self._configure(conn)
                cursor = await conn.execute(sql.LEASED, {"now": now})
                row = await cursor.fetchone()
        return row is not None and bool(row[0])

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn a database error into a one-line StoreError naming the store."""
        try:
            yield
        except (psycopg.Error, OverflowError) as exc:
            text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            if self._password:
                text = text.replace(self._password, "***")
            raise StoreError(f"store {self.name}: {text or type(exc).__name__}") from exc

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        if self._pool is None or self._closed:
            raise StoreError("store is not open")
        with self._guard():
            async with self._pool.connection() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection in one pipelined transaction: the statements are queued between a
        BEGIN and a COMMIT, and all sent in one round trip when the block ends; read their
        cursors after it. (psycopg's own ``transaction()`` waits for the server at BEGIN
        and again before COMMIT: three more round trips.)"""
        async with self._connection() as conn:
            try:
                async with conn.pipeline():
                    await conn.execute("BEGIN")
                    yield conn
                    await conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
                raise

    async def _configure(self, conn: AsyncConnection[Any]) -> None:
        await conn.execute(sql.CUSTOM_PLANS)
        if self._schema is not None:
            await conn.execute(sql.SET_SEARCH_PATH.format(Identifier(self._schema)))
        if self._readonly:
            await conn.execute(sql.READ_ONLY)

    async def recover(self, worker: str | None = None, *, now: float | None = None) -> int:
        # Recovery ends leases by their owner, not by their expiry: ``now`` is taken as
        # every lease method takes it, and not read.
        async with self._transaction() as conn:
            if worker is None:
                moved = await conn.execute(sql.RECOVER)
                await conn.execute(sql.UNPARK, await self._unparked(conn))
                await conn.execute(sql.RECOUNT)
            else:
                requeued = await conn.execute(sql.RECOVER_WORKER, {"worker": worker})
                await conn.execute(sql.UNPARK, await self._unparked(conn))
        if worker is None:
            return moved.rowcount
        row = await requeued.fetchone()
        return int(row[0]) if row else 0

    async def _unparked(self, conn: AsyncConnection[Any]) -> dict[str, Any]:
        """``UNPARK``'s parameters, the hosts with PARKED URLs locked: with ``host_budget``,
        only those their own budget leaves room for."""
        cursor = await conn.execute(sql.PARKED_HOSTS)
        hosts, own = None, self._host_budget
        if own is not None:
            budget = self._page_budget
            rows = await cursor.fetchall()
            hosts = [i for i, name, n in rows if within_budget(n, least_budget(budget, own(name)))]
        return {"budget": self._page_budget, "counter": PAGE_BUDGET_COUNTER, "hosts": hosts}

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
        params = {
            "worker": worker,
            "limit": limit,
            "ttl": ttl,
            "holding": sorted(holding),
            "crowded": sorted(crowded),
            "now": now,
        }
        async with self._transaction() as conn:
            await conn.execute(sql.ADDRESS_LOCK)
            cursor = await conn.execute(sql.LEASE, params)
        rows = await cursor.fetchall()
        return [Lease(*row) for row in sorted(rows, key=lambda r: (r[3], r[0]))]

    async def claim_address(
        self, worker: str, host_id: int, generation: int, address: str, *, now: float | None = None
    ) -> bool:
        return await self._addresses.ask(_AddressClaim(worker, host_id, generation, address, now))

    async def _claim_addresses(self, claims: Sequence[_AddressClaim]) -> list[bool]:
        """Claim the addresses of hosts together, under one taking of the lease lock
        (their rows locked in id order first, as a commit locks them): one statement
        for each worker and time judged by (one, in a crawl process)."""
        groups: dict[tuple[str, float | None], list[int]] = {}
        for n, claim in enumerate(claims):
            groups.setdefault((claim.worker, claim.now), []).append(n)
        async with self._transaction() as conn:
            await conn.execute(sql.ADDRESS_LOCK)
            await conn.execute(sql.LOCK_HOST_IDS, (sorted({c.host_id for c in claims}),))
            cursors = [
                (
                    members,
                    await conn.execute(
                        sql.CLAIM_ADDRESSES,
                        {
                            "worker": worker,
                            "hosts": [claims[n].host_id for n in members],
                            "generations": [claims[n].generation for n in members],
                            "addresses": [claims[n].address for n in members],
                            "now": now,
                        },
                    ),
                )
                for (worker, now), members in groups.items()
            ]
        free = [False] * len(claims)
        for members, cursor in cursors:
            for n, (ok,) in zip(members, await cursor.fetchall(), strict=True):
                free[n] = bool(ok)
        return free

    async def renew_leases(
        self, worker: str, leases: Mapping[int, int], ttl: float, *, now: float | None = None
    ) -> frozenset[int]:
        if not leases:
            return frozenset()
        params = {
            "worker": worker,
            "ttl": ttl,
            "ids": list(leases),
            "generations": list(leases.values()),
            "now": now,
        }
        async with self._transaction() as conn:
            await conn.execute(sql.LOCK_HOST_IDS, (sorted(leases),))
            cursor = await conn.execute(sql.RENEW, params)
        return frozenset(row[0] for row in await cursor.fetchall())

    async def work_left(self) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.WORK_LEFT)
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        async def page(start: int) -> list[Row]:
            async with self._connection() as conn:
                cursor = await conn.execute(sql.IDS, (start, batch))
                return await cursor.fetchall()

        async for rows in pages_by_id(page):
            yield [row[0] for row in rows]

    async def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        async def page(start: int) -> list[Row]:
            async with self._connection() as conn:
                cursor = await conn.execute(sql.QUEUED_DEPTHS, (start, batch))
                return await cursor.fetchall()

        async for rows in pages_by_id(page):
            yield [(row[0], row[1]) for row in rows]

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.EXISTING, (list(ids),))
            return {row[0]: row[1] for row in await cursor.fetchall()}

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        async with self._transaction() as conn:
            await conn.execute(sql.ADD_HOSTS, (list(names),))
            cursor = await conn.execute(sql.HOST_IDS, (list(names),))
        return {row[0]: row[1] for row in await cursor.fetchall()}

    async def claim(
        self,
        wanted: Mapping[int, int],
        now: float,
        worker: str | None = None,
        budgets: Mapping[int, int] | None = None,
    ) -> Sequence[QueuedURL]:
        if not wanted:
            return []
        hosts, limits = list(wanted), list(wanted.values())
        spent = [least_budget(self._page_budget, (budgets or {}).get(host)) for host in hosts]
        async with self._transaction() as conn:
            await conn.execute(sql.LOCK_HOST_IDS, (sorted(hosts),))
            if any(budget is not None for budget in spent):
                await conn.execute(
                    sql.PARK,
                    {
                        "hosts": hosts,
                        "budgets": spent,
                        "error": PAGE_BUDGET_ERROR,
                        "counter": PAGE_BUDGET_COUNTER,
                    },
                )
            cursor = await conn.execute(
                sql.CLAIM,
                {
                    "hosts": hosts,
                    "limits": limits,
                    "budgets": spent,
                    "now": now,
                    "worker": worker,
                },
            )
        order = {host: n for n, host in enumerate(hosts)}
        rows = sorted(await cursor.fetchall(), key=lambda r: (order[r[2]], r[-1], r[0]))
        return [QueuedURL(*row[:-1]) for row in rows]

    async def commit(self, batch: CommitBatch) -> CommitResult:
        return await commit.committed(
            self._transaction, batch, horizon=self._horizon, discovery_budget=self._discovery_budget
        )

    async def requeue_due(
        self, now: float, limit: int, *, every: bool = False, sitemaps: bool = False
    ) -> int:
        moved = 0
        start = MIN_ID
        every = every or sitemaps
        while True:
            async with self._transaction() as conn:
                if every:
                    chosen = sql.SITEMAPS if sitemaps else sql.ANSWERED
                    cursor = await conn.execute(chosen, (start, _REQUEUE_CHUNK))
                else:
                    cursor = await conn.execute(sql.DUE, (now, limit))
                picked = await cursor.fetchall()
                if not picked:
                    break
                await conn.execute(sql.LOCK_HOST_IDS, (sorted({host for _, host in picked}),))
                ids = [uid for uid, _ in picked]
                cursor = await conn.execute(
                    sql.REQUEUE, {"ids": ids, "now": now, "horizon": self._horizon}
                )
                row = await cursor.fetchone()
                assert row is not None
                await conn.execute(sql.ADD_COUNTERS, (["recrawls_queued"], [row[0]]))
            moved += row[0]
            if not every or max(ids) == MAX_ID:
                break
            start = max(ids) + 1
        return moved

    async def requeue_failed(self, error: str) -> int:
        async with self._transaction() as conn:
            await conn.execute(sql.LOCK_FAILED_HOSTS, (error,))
            cursor = await conn.execute(
                sql.REQUEUE_FAILED, {"error": error, "counters": ["failed", f"error:{error}"]}
            )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def next_due(self) -> float | None:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.NEXT_DUE)
            row = await cursor.fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def robots(self, host_id: int) -> RobotsRecord | None:
        return await self._robots.ask(host_id)

    async def _read_robots(self, host_ids: Sequence[int]) -> list[RobotsRecord | None]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.ROBOTS, (list(set(host_ids)),))
            rows = await cursor.fetchall()
        records = {
            row[0]: RobotsRecord(status=row[1], body=bytes(row[2] or b""), fetched_at=row[3])
            for row in rows
            if row[3] is not None
        }
        return [records.get(host_id) for host_id in host_ids]

    async def content_owners(self, hashes: Sequence[str]) -> Mapping[str, int]:
        async with self._connection() as conn:
            return await content_owners(conn, hashes)

    async def content_hashes(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        async with self._connection() as conn:
            return await content_hashes(conn, url_ids)

    async def canonicals(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        async with self._connection() as conn:
            return await canonicals(conn, url_ids)

    async def simhash_candidates(self, blocks: Blocks) -> list[tuple[int, int]]:
        async with self._connection() as conn:
            return await simhash_candidates(conn, blocks)

    async def soft404(self, host_id: int) -> Soft404Record | None:
        return await self._soft404.ask(host_id)

    async def _read_soft404(self, host_ids: Sequence[int]) -> list[Soft404Record | None]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.SOFT404, (list(set(host_ids)),))
            rows = await cursor.fetchall()
        records = {
            row[0]: Soft404Record(fingerprint=row[1], checked_at=row[2])
            for row in rows
            if row[2] is not None
        }
        return [records.get(host_id) for host_id in host_ids]

    async def counters(self) -> Mapping[str, int]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.COUNTERS)
            rows = await cursor.fetchall()
        values = {name: int(value) for name, value in rows if name is not None}
        values["queued"] = next(int(value) for name, value in rows if name is None)
        values.setdefault("discovered", 0)
        return values

    async def get_meta(self, key: str) -> str | None:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.GET_META, (key,))
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def set_meta(self, key: str, value: str) -> None:
        async with self._connection() as conn:
            await conn.execute(sql.SET_META, (key, value))

    async def uploaded(self, bucket: str, keys: Collection[str]) -> set[str]:
        if not keys:
            return set()
        async with self._connection() as conn:
            cursor = await conn.execute(sql.UPLOADED, (bucket, list(keys)))
            rows = await cursor.fetchall()
        return {str(row[0]) for row in rows}

    async def record_upload(self, record: UploadRecord) -> None:
        async with self._connection() as conn:
            await conn.execute(
                sql.RECORD_UPLOAD,
                (
                    record.bucket, record.key, record.file, record.size, record.sha256,
                    record.worker, record.uploaded_at,
                ),
            )  # fmt: skip

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        async with self._connection() as conn:
            slowest = await conn.execute(sql.SLOWEST_HOSTS, (limit,))
            slow_rows = await slowest.fetchall()
            blocked = await conn.execute(sql.MOST_BLOCKED_HOSTS, (limit,))
            blocked_rows = await blocked.fetchall()
        return [HostFigures(*r) for r in slow_rows], [HostFigures(*r) for r in blocked_rows]

    async def url_page(
        self, start: int, limit: int, wanted: UrlFilter = ANY_URL
    ) -> list[tuple[int, ExportRow]]:
        parameters = {
            "start": start, "state": wanted.state, "host": wanted.host,
            "status": wanted.status, "error": wanted.error, "limit": limit,
        }  # fmt: skip
        async with self._connection() as conn:
            cursor = await conn.execute(sql.URL_PAGE, parameters)
            rows = await cursor.fetchall()
        return [(row[0], export_row(row)) for row in rows]

    async def host_page(
        self, order: str, descending: bool, limit: int, offset: int, now: float
    ) -> tuple[int, list[HostRow]]:
        async with self._connection() as conn:
            statement = host_page_sql("%s", order, descending)
            cursor = await conn.execute(statement, (now, now, limit, offset))
            rows = await cursor.fetchall()
        return host_rows(rows)

    async def host_states(self, now: float) -> dict[str, int]:
        async with self._connection() as conn:
            cursor = await conn.execute(host_states_sql("%s"), (now, now))
            rows = await cursor.fetchall()
        return {state_name(rank): int(count) for rank, count in rows}

    async def export(self) -> AsyncIterator[ExportRow]:
        async def page(start: int) -> list[Row]:
            async with self._connection() as conn:
                cursor = await conn.execute(sql.EXPORT, (start, _EXPORT_PAGE))
                return await cursor.fetchall()

        async for rows in pages_by_id(page):
            for row in rows:
                yield export_row(row)

    async def items(self) -> AsyncIterator[ItemRow]:
        async def page(url_id: int, seq: int) -> list[Row]:
            async with self._connection() as conn:
                return await item_page(conn, url_id, seq)

        async for item in item_pages(page):
            yield item
