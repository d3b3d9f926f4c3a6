"""The shared store: PostgreSQL, for crawls whose workers share one database.

psycopg 3 (async) over a small connection pool. Every connection runs with the store's
schema as its ``search_path``, so several crawls (and the tests) can share a database,
one schema each. Migrations run in one transaction under an advisory lock, so two
processes opening the same schema at once apply them once.

A commit is one pipeline: every statement of the batch is queued, then sent with the
transaction's COMMIT in one round trip. Each statement works on whole arrays
(``unnest``), so its cost does not grow with round trips as the batch grows. The per-host
budgets are checked where the rows change, as in SQLite: ``claim`` locks the hosts it
hands out for and takes no more than their page budget leaves room for, and the insert
of new URLs stops at each host's discovery budget inside the insert statement itself.
Host rows a transaction will change are locked first, in id order, so concurrent
commits wait for each other instead of deadlocking, and a discovery budget holds across
them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from trawl.errors import StoreError
from trawl.frontier.priority import DEFAULT_HORIZON, DEPTH_WEIGHT, LEVEL_STEP, priority
from trawl.resource import AsyncResource
from trawl.store.postgres_content import (
    apply_content,
    canonicals,
    columns,
    content_hashes,
    content_owners,
    simhash_candidates,
)
from trawl.store.rows import (
    CLAIM_COLUMNS,
    MAX_ID,
    MIN_ID,
    Row,
    export_columns,
    export_row,
    host_tallies,
    pages_by_id,
    settle_fences,
    shallowest,
)
from trawl.store.schema import POSTGRES_TYPES, SCHEMA_VERSION, migration_statements
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
    Outcome,
    QueuedURL,
    RobotsRecord,
    Soft404Record,
    State,
)

_POOL_SIZE = 4
_CONNECT_TIMEOUT = 10
_EXPORT_PAGE = 5000
# States are written into the SQL, not passed as parameters, so the planner can match
# the partial indexes (``WHERE state = 0``) whatever plan it caches.
_QUEUED, _CLAIMED, _PARKED = int(State.QUEUED), int(State.CLAIMED), int(State.PARKED)
_DONE, _FAILED = int(State.DONE), int(State.FAILED)
_REQUEUE_CHUNK = 10_000

_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_META_TABLE = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_SET_META = (
    "INSERT INTO meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_ADD_COUNTERS = (
    "INSERT INTO counters (name, value) SELECT * FROM unnest(%s::text[], %s::bigint[]) "
    "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value"
)
_ADD_HOSTS = (
    "INSERT INTO hosts (name) SELECT unnest(%s::text[]) ORDER BY 1 ON CONFLICT (name) DO NOTHING"
)
_LOCK_HOSTS = (
    "SELECT id, lease_generation FROM hosts "
    "WHERE id = ANY(%s::bigint[]) OR name = ANY(%s::text[]) ORDER BY id FOR UPDATE"
)
_NOW = "extract(epoch FROM now())"
"""The database's clock, which every worker shares: lease expiry is judged by it."""
_RECOVER = f"UPDATE urls SET state = {_QUEUED} WHERE state = {_CLAIMED}"
# A statement that changes several host rows takes their locks in whatever order it
# meets them; these lock the rows in id order first, as every commit does, so that two
# transactions never wait for each other's rows (a deadlock, seen between renewals and
# commits with three workers).
_LOCK_HOST_IDS = "SELECT id FROM hosts WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE"
_LOCK_PARKED_HOSTS = (
    "SELECT id FROM hosts WHERE id IN "
    f"(SELECT DISTINCT host_id FROM urls WHERE state = {_PARKED}) ORDER BY id FOR UPDATE"
)
# A worker's own leases after its restart: their CLAIMED URLs return to the queue.
_RECOVER_WORKER = f"""
WITH mine AS (
    SELECT id FROM hosts WHERE lease_owner = %(worker)s ORDER BY id FOR UPDATE
), requeued AS (
    UPDATE urls SET state = {_QUEUED} FROM mine
    WHERE urls.host_id = mine.id AND urls.state = {_CLAIMED} RETURNING urls.host_id
), per_host AS (
    SELECT host_id, count(*) AS n FROM requeued GROUP BY host_id
), ended AS (
    UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL, claimed = 0,
        queued = hosts.queued + COALESCE(per_host.n, 0)
    FROM mine LEFT JOIN per_host ON per_host.host_id = mine.id
    WHERE hosts.id = mine.id
)
SELECT count(*) FROM requeued
"""
# Free hosts with work (no lease, an expired one, or one of this worker's that it no
# longer holds: a release still on its way), soonest eligible first; rows another leaser
# holds locked are skipped, not waited for. A host taken over from an expired lease gets
# its CLAIMED URLs back in the queue.
LEASE = f"""
WITH free AS (
    SELECT id, lease_owner IS NOT NULL AS taken_over FROM hosts
    WHERE (queued > 0 OR claimed > 0)
      AND (lease_owner IS NULL OR lease_expires_at < {_NOW} OR lease_owner = %(worker)s)
      AND id <> ALL(%(holding)s::bigint[])
      AND (address IS NULL OR NOT EXISTS (
          SELECT 1 FROM hosts AS o WHERE o.address = hosts.address
          AND o.lease_owner <> %(worker)s AND o.lease_expires_at >= {_NOW}))
    ORDER BY next_eligible_at, id LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), requeued AS (
    UPDATE urls SET state = {_QUEUED} FROM free
    WHERE free.taken_over AND urls.host_id = free.id AND urls.state = {_CLAIMED}
    RETURNING urls.host_id
), per_host AS (
    SELECT host_id, count(*) AS n FROM requeued GROUP BY host_id
)
UPDATE hosts SET lease_owner = %(worker)s, lease_generation = hosts.lease_generation + 1,
    lease_expires_at = {_NOW} + %(ttl)s,
    queued = hosts.queued + COALESCE(per_host.n, 0),
    claimed = CASE WHEN free.taken_over THEN 0 ELSE hosts.claimed END
FROM free LEFT JOIN per_host ON per_host.host_id = free.id
WHERE hosts.id = free.id
RETURNING hosts.id, hosts.name, hosts.lease_generation, hosts.next_eligible_at
"""
# Leases and addresses change under one lock per crawl, so that two workers never take
# hosts on one address at once (each sees the other's leases).
_ADDRESS_LOCK = "SELECT pg_advisory_xact_lock(hashtext('trawl leases ' || current_schema()))"
_CLAIM_ADDRESS = f"""
WITH claimed AS (
    UPDATE hosts SET address = %(address)s
    WHERE id = %(host)s AND lease_owner = %(worker)s AND lease_generation = %(generation)s
)
SELECT NOT EXISTS (
    SELECT 1 FROM hosts WHERE address = %(address)s AND id <> %(host)s
    AND lease_owner <> %(worker)s AND lease_expires_at >= {_NOW})
"""
_RENEW = f"""
UPDATE hosts SET lease_expires_at = {_NOW} + %(ttl)s
FROM unnest(%(ids)s::bigint[], %(generations)s::bigint[]) AS l(id, generation)
WHERE hosts.id = l.id AND hosts.lease_owner = %(worker)s
  AND hosts.lease_generation = l.generation
RETURNING hosts.id
"""
# Each release holds only at its generation; the host's CLAIMED URLs (buffered, never
# sent) return to the queue and the next owner waits until the time the release names.
_RELEASE = f"""
WITH held AS (
    SELECT r.id, r.next FROM hosts
    JOIN unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS r(id, generation, next)
      ON hosts.id = r.id AND hosts.lease_generation = r.generation
    WHERE hosts.lease_owner IS NOT NULL
), requeued AS (
    UPDATE urls SET state = {_QUEUED} FROM held
    WHERE urls.host_id = held.id AND urls.state = {_CLAIMED} RETURNING urls.host_id
), per_host AS (
    SELECT host_id, count(*) AS n FROM requeued GROUP BY host_id
)
UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL, next_eligible_at = held.next,
    claimed = 0, queued = hosts.queued + COALESCE(per_host.n, 0)
FROM held LEFT JOIN per_host ON per_host.host_id = held.id
WHERE hosts.id = held.id
"""
_UNPARK = f"""
WITH unparked AS (
    UPDATE urls SET state = {_QUEUED}, error = NULL
    WHERE state = {_PARKED} AND (%(budget)s::bigint IS NULL OR host_id IN
        (SELECT id FROM hosts WHERE fetched < %(budget)s::bigint))
    RETURNING host_id
), per_host AS (
    SELECT host_id, count(*) AS n FROM unparked GROUP BY host_id
), recounted AS (
    UPDATE hosts SET queued = hosts.queued + per_host.n
    FROM per_host WHERE hosts.id = per_host.host_id
)
INSERT INTO counters (name, value) SELECT %(counter)s, -count(*) FROM unparked
HAVING count(*) > 0
ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value
"""
_RECOUNT = (
    "UPDATE hosts SET inflight = 0, claimed = 0, queued = (SELECT COUNT(*) FROM urls "
    f"WHERE urls.host_id = hosts.id AND urls.state = {_QUEUED})"
)
_PARK = f"""
WITH spent AS (
    SELECT id FROM hosts WHERE id = ANY(%(hosts)s::bigint[]) AND fetched >= %(budget)s
    ORDER BY id FOR UPDATE
), parked AS (
    UPDATE urls SET state = {_PARKED}, error = %(error)s FROM spent
    WHERE urls.host_id = spent.id AND urls.state = {_QUEUED} RETURNING urls.host_id
), per_host AS (
    SELECT host_id, count(*) AS n FROM parked GROUP BY host_id
), recounted AS (
    UPDATE hosts SET queued = hosts.queued - per_host.n
    FROM per_host WHERE hosts.id = per_host.host_id
)
INSERT INTO counters (name, value) SELECT %(counter)s, count(*) FROM parked
HAVING count(*) > 0
ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value
"""
_CLAIM_RETURNING = ", ".join(f"urls.{column.strip()}" for column in CLAIM_COLUMNS.split(","))
# Room per host is what the page budget leaves (its answered plus handed-out URLs);
# the host rows are locked so concurrent claims see each other's counts.
_CLAIM = f"""
WITH wanted AS (
    SELECT h.id,
           CASE WHEN %(budget)s::bigint IS NULL THEN w.n
                ELSE LEAST(w.n, %(budget)s::bigint - h.fetched - h.claimed) END AS n
    FROM hosts AS h JOIN unnest(%(hosts)s::bigint[], %(limits)s::bigint[]) AS w(id, n)
    ON h.id = w.id
    WHERE %(worker)s::text IS NULL
       OR (h.lease_owner = %(worker)s AND h.lease_expires_at >= {_NOW})
    ORDER BY h.id FOR UPDATE OF h
), picked AS (
    SELECT u.id FROM wanted CROSS JOIN LATERAL (
        SELECT urls.id FROM urls
        WHERE urls.host_id = wanted.id AND urls.state = {_QUEUED}
          AND urls.next_fetch_at <= %(now)s
        ORDER BY urls.rank, urls.id LIMIT GREATEST(wanted.n, 0)
    ) AS u
), taken AS (
    UPDATE urls SET state = {_CLAIMED} FROM picked
    WHERE urls.id = picked.id AND urls.state = {_QUEUED}
    RETURNING {_CLAIM_RETURNING}, urls.rank
), per_host AS (
    SELECT host_id, count(*) AS n FROM taken GROUP BY host_id
), recounted AS (
    UPDATE hosts SET queued = hosts.queued - per_host.n, claimed = hosts.claimed + per_host.n
    FROM per_host WHERE hosts.id = per_host.host_id
)
SELECT {CLAIM_COLUMNS}, rank FROM taken
"""
_ANSWER = """
UPDATE urls SET state = o.state, attempts = o.attempts, status = o.status,
    content_type = o.content_type, length = o.length,
    fetched_at = COALESCE(o.fetched_at, urls.fetched_at),
    redirect_to = o.redirect_to, error = o.error, truncated = o.truncated,
    next_fetch_at = o.next_fetch_at, canonical = o.canonical,
    alias_of = (SELECT a.id FROM urls AS a WHERE a.id = o.alias_of),
    content_hash = COALESCE(o.content_hash, urls.content_hash),
    simhash = COALESCE(o.simhash, urls.simhash),
    etag = COALESCE(o.etag, urls.etag),
    last_modified = COALESCE(o.last_modified, urls.last_modified),
    revisit_interval = COALESCE(o.revisit_interval, urls.revisit_interval),
    due_at = COALESCE(o.due_at, urls.due_at),
    change_hash = COALESCE(o.change_hash, urls.change_hash),
    revalidation = COALESCE(o.revalidation, urls.revalidation),
    revalidated_at = COALESCE(o.revalidated_at, urls.revalidated_at)
FROM unnest(%s::bigint[], %s::smallint[], %s::smallint[], %s::smallint[], %s::text[],
            %s::bigint[], %s::float8[], %s::text[], %s::text[], %s::smallint[], %s::float8[],
            %s::text[], %s::bigint[], %s::text[], %s::bigint[], %s::text[], %s::text[],
            %s::float8[], %s::float8[], %s::bigint[], %s::text[], %s::float8[])
    AS o(id, state, attempts, status, content_type, length, fetched_at, redirect_to, error,
         truncated, next_fetch_at, canonical, alias_of, content_hash, simhash, etag,
         last_modified, revisit_interval, due_at, change_hash, revalidation, revalidated_at)
WHERE urls.id = o.id
"""
# A 304's outcome: the last full answer's columns stand.
_REVALIDATE = """
UPDATE urls SET state = o.state, attempts = o.attempts, next_fetch_at = o.next_fetch_at,
    etag = COALESCE(o.etag, urls.etag),
    last_modified = COALESCE(o.last_modified, urls.last_modified),
    revisit_interval = COALESCE(o.revisit_interval, urls.revisit_interval),
    due_at = COALESCE(o.due_at, urls.due_at),
    revalidation = o.revalidation, revalidated_at = o.revalidated_at
FROM unnest(%s::bigint[], %s::smallint[], %s::smallint[], %s::float8[], %s::text[],
            %s::text[], %s::float8[], %s::float8[], %s::text[], %s::float8[])
    AS o(id, state, attempts, next_fetch_at, etag, last_modified, revisit_interval, due_at,
         revalidation, revalidated_at)
WHERE urls.id = o.id
"""
_ANSWER_HOSTS = (
    "UPDATE hosts SET queued = hosts.queued + c.requeued, fetched = hosts.fetched + c.answered, "
    "claimed = GREATEST(hosts.claimed - c.returned, 0), blocked = hosts.blocked + c.blocked, "
    "responses = hosts.responses + c.responses, "
    "response_seconds = hosts.response_seconds + c.seconds "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], "
    "%s::bigint[], %s::float8[]) "
    "AS c(id, requeued, answered, returned, blocked, responses, seconds) WHERE hosts.id = c.id"
)
# Answered pages queued again for a recrawl (their hosts locked first, in id order),
# ranked by their due time (now at the latest) and priority.
_DUE = (
    f"SELECT id, host_id FROM urls WHERE state IN ({_DONE}, {_FAILED}) AND due_at <= %s "
    "ORDER BY due_at LIMIT %s"
)
_ANSWERED = (
    f"SELECT id, host_id FROM urls WHERE state IN ({_DONE}, {_FAILED}) AND id >= %s "
    "ORDER BY id LIMIT %s"
)
_SITEMAPS = (
    f"SELECT id, host_id FROM urls WHERE state IN ({_DONE}, {_FAILED}) AND id >= %s "
    f"AND kind = {int(Kind.SITEMAP)} ORDER BY id LIMIT %s"
)
_RECOUNT_MOVED = """
), per_host AS (
    SELECT host_id, count(*) AS n FROM moved GROUP BY host_id
), recounted AS (
    UPDATE hosts SET queued = hosts.queued + per_host.n,
        fetched = GREATEST(hosts.fetched - per_host.n, 0)
    FROM per_host WHERE hosts.id = per_host.host_id
)"""
"""The common tail of a requeue's CTEs: the URLs ``moved`` back to the queue move from
their hosts' fetched counts to their queued counts."""
_REQUEUE = f"""
WITH moved AS (
    UPDATE urls SET state = {_QUEUED}, attempts = 0, next_fetch_at = 0,
        rank = LEAST(COALESCE(due_at, %(now)s), %(now)s) - priority * %(horizon)s
    WHERE id = ANY(%(ids)s::bigint[]) AND state IN ({_DONE}, {_FAILED})
    RETURNING host_id{_RECOUNT_MOVED}
SELECT count(*) FROM moved
"""
_LOCK_FAILED_HOSTS = (
    "SELECT id FROM hosts WHERE id IN "
    f"(SELECT DISTINCT host_id FROM urls WHERE state = {_FAILED} AND error = %s) "
    "ORDER BY id FOR UPDATE"
)
_REQUEUE_FAILED = f"""
WITH moved AS (
    UPDATE urls SET state = {_QUEUED}, attempts = 0, next_fetch_at = 0, error = NULL
    WHERE state = {_FAILED} AND error = %(error)s
    RETURNING host_id{_RECOUNT_MOVED}, counted AS (
    INSERT INTO counters (name, value)
    SELECT name, -(SELECT count(*) FROM moved) FROM unnest(%(counters)s::text[]) AS name
    WHERE EXISTS (SELECT 1 FROM moved)
    ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value
)
SELECT count(*) FROM moved
"""
"""Queues the FAILED URLs with one error again (its parameters: ``error``, and the
``counters`` they leave); their hosts are locked first, in id order."""
# In-link levels and sitemap lastmods touch URLs of any host, held by any worker: rows
# another transaction has locked are skipped, never waited for (no lock order to keep,
# so no deadlock); a hint skipped now comes again with the next links or sitemap read.
_RAISE_INLINKS = f"""
WITH l AS (
    SELECT * FROM unnest(%s::bigint[], %s::smallint[]) AS l(id, level)
), locked AS (
    SELECT urls.id FROM urls JOIN l ON urls.id = l.id
    WHERE urls.inlink_level < l.level FOR UPDATE OF urls SKIP LOCKED
)
UPDATE urls SET priority = LEAST(1.0, urls.priority + {LEVEL_STEP} * (l.level - urls.inlink_level)),
    rank = urls.rank - CASE WHEN urls.state = {_QUEUED}
        THEN {LEVEL_STEP} * (l.level - urls.inlink_level) * %s ELSE 0 END,
    inlink_level = l.level
FROM l JOIN locked ON locked.id = l.id
WHERE urls.id = l.id
"""
_SHALLOWER = f"""
WITH s AS (
    SELECT * FROM unnest(%s::bigint[], %s::integer[]) AS s(id, depth)
), locked AS (
    SELECT urls.id FROM urls JOIN s ON urls.id = s.id
    WHERE urls.depth > s.depth AND urls.state IN ({_QUEUED}, {_CLAIMED}, {_PARKED})
    FOR UPDATE OF urls SKIP LOCKED
), raised AS (
    SELECT urls.id, s.depth, LEAST(1.0, urls.priority + {DEPTH_WEIGHT} / (1.0 + s.depth)
        - {DEPTH_WEIGHT} / (1.0 + urls.depth)) AS priority
    FROM urls JOIN s ON urls.id = s.id JOIN locked ON locked.id = s.id
)
UPDATE urls SET depth = raised.depth, priority = raised.priority,
    rank = urls.rank - CASE WHEN urls.state = {_QUEUED}
        THEN (raised.priority - urls.priority) * %s ELSE 0 END
FROM raised WHERE urls.id = raised.id
RETURNING urls.host_id, urls.id, urls.depth, urls.state
"""
"""A URL not fetched yet found at a smaller depth takes it, with the priority of that
depth (trawl.frontier.priority) and, while queued, the rank that priority gives (its parameters:
the ids and depths, each id once, and the horizon). Returns the rows it changed."""
_LASTMODS = """
WITH l AS (
    SELECT * FROM unnest(%s::bigint[], %s::float8[]) AS l(id, lastmod)
), locked AS (
    SELECT urls.id FROM urls JOIN l ON urls.id = l.id FOR UPDATE OF urls SKIP LOCKED
)
UPDATE urls SET lastmod = l.lastmod,
    due_at = CASE WHEN GREATEST(urls.fetched_at, urls.revalidated_at) < l.lastmod
                  THEN LEAST(COALESCE(urls.due_at, %s), %s) ELSE urls.due_at END
FROM l JOIN locked ON locked.id = l.id
WHERE urls.id = l.id
"""
_HOST_FIGURES = (
    "SELECT name, responses, response_seconds / GREATEST(responses, 1), blocked FROM hosts "
)
# New URLs, one statement for the whole batch. A host whose discovery budget has room
# for every candidate takes them all (insert-if-absent); otherwise its candidates are
# taken shallowest first, in the order found, and only new ones (not stored, not met
# earlier in the batch) use its room, until the room is used. What does not fit is left
# out (counted from the first candidate after the last one that fit). The statement
# adds the hosts' counts and the counters it decides, and returns per host:
# (host id, rows inserted, candidates left out).
_INSERT_URLS = """
WITH found AS (
    SELECT c.*, h.id AS host_id, count(*) OVER (PARTITION BY h.id) AS n,
           %(budget)s::bigint - h.discovered AS room
    FROM unnest(%(ids)s::bigint[], %(urls)s::text[], %(hosts)s::text[],
                %(depths)s::integer[], %(hops)s::smallint[], %(origins)s::text[],
                %(kinds)s::smallint[], %(priorities)s::float8[])
         WITH ORDINALITY AS c(id, url, host, depth, hops, origin, kind, priority, ord)
    JOIN hosts AS h ON h.name = c.host
), marked AS (
    SELECT found.*,
           CASE WHEN room < n THEN
               row_number() OVER (PARTITION BY id ORDER BY depth, ord) = 1
               AND NOT EXISTS (SELECT 1 FROM urls WHERE urls.id = found.id)
           ELSE true END AS fresh
    FROM found
), ranked AS (
    SELECT marked.*,
           count(*) FILTER (WHERE fresh) OVER (PARTITION BY host_id ORDER BY depth, ord) AS nth,
           row_number() OVER (PARTITION BY host_id ORDER BY depth, ord) AS pos
    FROM marked
), inserted AS (
    INSERT INTO urls (id, url, host_id, depth, redirect_hops, origin, kind, priority, rank)
    SELECT id, url, host_id, depth, hops, origin, kind, priority,
           %(at)s - priority * %(horizon)s FROM ranked
    WHERE room IS NULL OR room >= n OR (fresh AND nth <= room)
    ORDER BY id, depth, hops
    ON CONFLICT (id) DO NOTHING
    RETURNING host_id
), added AS (
    SELECT host_id, count(*) AS n FROM inserted GROUP BY host_id
), left_out AS (
    SELECT host_id,
           CASE WHEN max(room) IS NULL OR max(room) >= max(n) THEN 0
                WHEN max(room) <= 0 THEN max(n)
                ELSE max(n) - COALESCE(min(pos) FILTER (WHERE fresh AND nth = room), max(n))
           END AS n
    FROM ranked GROUP BY host_id
), totals AS (
    SELECT (SELECT COALESCE(sum(n), 0) FROM added) AS added,
           (SELECT COALESCE(sum(n), 0) FROM left_out) AS left_out
), counted AS (
    INSERT INTO counters (name, value)
    SELECT name, value FROM totals CROSS JOIN LATERAL (VALUES
        ('discovered', totals.added),
        ('duplicates', %(candidates)s - totals.added - totals.left_out),
        (%(over)s, totals.left_out)) AS t(name, value)
    WHERE value <> 0
    ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value
), recounted AS (
    UPDATE hosts SET queued = hosts.queued + added.n, discovered = hosts.discovered + added.n
    FROM added WHERE hosts.id = added.host_id
)
SELECT left_out.host_id, COALESCE(added.n, 0), left_out.n
FROM left_out LEFT JOIN added ON added.host_id = left_out.host_id
"""
_SET_ROBOTS = (
    "UPDATE hosts SET robots_status = r.status, robots_body = r.body, robots_fetched_at = r.at "
    "FROM unnest(%s::bigint[], %s::integer[], %s::bytea[], %s::float8[]) "
    "AS r(id, status, body, at) WHERE hosts.id = r.id"
)
_SET_SOFT404 = (
    "UPDATE hosts SET soft404_fingerprint = p.fingerprint, soft404_checked_at = p.at "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS p(id, fingerprint, at) "
    "WHERE hosts.id = p.id"
)
_EXPORT_COLUMNS = export_columns("u.id", "(SELECT t.url FROM urls AS t WHERE t.id = {})")
"""The export columns of ``urls`` as ``u``; a column holding another URL's id reads that
URL by its key."""
_EXPORT = f"SELECT {_EXPORT_COLUMNS} FROM urls AS u WHERE u.id >= %s ORDER BY u.id LIMIT %s"


class PostgresStore(AsyncResource):
    """Store engine on a PostgreSQL database, in ``schema`` (None: the server's default).

    ``page_budget`` and ``discovery_budget`` are the per-host budgets (None: unbounded);
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
    ) -> None:
        self._horizon = horizon
        self._dsn = dsn
        self._schema = schema
        self._page_budget = page_budget
        self._discovery_budget = discovery_budget
        self._readonly = readonly
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._closed = False
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
            self._dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
        ) as conn:
            await self._configure(conn)
            if self._readonly:
                await self._check_exists(conn)
            else:
                await self._migrate(conn)
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=_POOL_SIZE,
            kwargs={"autocommit": True, "connect_timeout": _CONNECT_TIMEOUT},
            configure=self._configure,
            open=False,
        )
        await pool.open(wait=True, timeout=_CONNECT_TIMEOUT)
        self._pool = pool

    async def close(self) -> None:
        """Close the pool; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            await self._pool.close()

    async def drop(self) -> None:
        """Delete the crawl kept in this store's schema, everything in it (``--fresh``);
        the store need not be open."""
        if self._schema is None:
            raise StoreError(f"store {self.name}: no schema to drop")
        statement = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self._schema))
        with self._guard():
            async with await AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
            ) as conn:
                await conn.execute(statement)

    async def leased(self) -> bool:
        """Whether any worker holds a live lease on a host of this crawl (a worker is at
        work on it); the store need not be open."""
        with self._guard():
            async with await AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
            ) as conn:
                await self._configure(conn)
                cursor = await conn.execute(
                    f"SELECT EXISTS (SELECT 1 FROM hosts WHERE lease_expires_at >= {_NOW})"
                )
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
        if self._schema is not None:
            await conn.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema))
            )
        if self._readonly:
            await conn.execute("SET default_transaction_read_only = on")

    async def _check_exists(self, conn: AsyncConnection[Any]) -> None:
        cursor = await conn.execute("SELECT to_regclass('meta') IS NOT NULL")
        row = await cursor.fetchone()
        if row is None or not row[0]:
            raise StoreError(f"no crawl found in {self.name}")

    async def _migrate(self, conn: AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await conn.execute(_MIGRATION_LOCK, (f"trawl.migrate:{self._schema or ''}",))
            if self._schema is not None:
                await conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
                )
            await conn.execute(_META_TABLE)
            cursor = await conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            row = await cursor.fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.name} was written by a newer trawl "
                    f"(schema {current} > {SCHEMA_VERSION})"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in migration_statements(version, POSTGRES_TYPES):
                    await conn.execute(statement)
            await conn.execute(_SET_META, ("schema_version", str(SCHEMA_VERSION)))

    async def recover(self, worker: str | None = None, *, now: float | None = None) -> int:
        unpark = {"budget": self._page_budget, "counter": PAGE_BUDGET_COUNTER}
        async with self._transaction() as conn:
            if worker is None:
                moved = await conn.execute(_RECOVER)
                await conn.execute(_UNPARK, unpark)
                await conn.execute(_RECOUNT)
            else:
                requeued = await conn.execute(_RECOVER_WORKER, {"worker": worker})
                await conn.execute(_LOCK_PARKED_HOSTS)
                await conn.execute(_UNPARK, unpark)
        if worker is None:
            return moved.rowcount
        row = await requeued.fetchone()
        return int(row[0]) if row else 0

    async def lease_hosts(
        self,
        worker: str,
        limit: int,
        ttl: float,
        holding: Collection[int] = (),
        *,
        now: float | None = None,
    ) -> Sequence[Lease]:
        params = {"worker": worker, "limit": limit, "ttl": ttl, "holding": sorted(holding)}
        async with self._transaction() as conn:
            await conn.execute(_ADDRESS_LOCK)
            cursor = await conn.execute(LEASE, params)
        rows = await cursor.fetchall()
        return [Lease(*row) for row in sorted(rows, key=lambda r: (r[3], r[0]))]

    async def claim_address(
        self,
        worker: str,
        host_id: int,
        generation: int,
        address: str,
        *,
        now: float | None = None,
    ) -> bool:
        params = {"worker": worker, "host": host_id, "generation": generation, "address": address}
        async with self._transaction() as conn:
            await conn.execute(_ADDRESS_LOCK)
            cursor = await conn.execute(_CLAIM_ADDRESS, params)
        row = await cursor.fetchone()
        return bool(row and row[0])

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
        }
        async with self._transaction() as conn:
            await conn.execute(_LOCK_HOST_IDS, (sorted(leases),))
            cursor = await conn.execute(_RENEW, params)
        return frozenset(row[0] for row in await cursor.fetchall())

    async def work_left(self) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT COALESCE(SUM(queued + claimed), 0) FROM hosts")
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        async def page(start: int) -> list[Row]:
            async with self._connection() as conn:
                query = "SELECT id FROM urls WHERE id >= %s ORDER BY id LIMIT %s"
                cursor = await conn.execute(query, (start, batch))
                return await cursor.fetchall()

        async for rows in pages_by_id(page):
            yield [row[0] for row in rows]

    async def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        async def page(start: int) -> list[Row]:
            async with self._connection() as conn:
                cursor = await conn.execute(
                    f"SELECT id, depth FROM urls WHERE id >= %s AND state IN ({_QUEUED}, "
                    f"{_PARKED}) ORDER BY id LIMIT %s",
                    (start, batch),
                )
                return await cursor.fetchall()

        async for rows in pages_by_id(page):
            yield [(row[0], row[1]) for row in rows]

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT id, url FROM urls WHERE id = ANY(%s::bigint[])", (list(ids),)
            )
            return {row[0]: row[1] for row in await cursor.fetchall()}

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        async with self._transaction() as conn:
            await conn.execute(_ADD_HOSTS, (list(names),))
            cursor = await conn.execute(
                "SELECT name, id FROM hosts WHERE name = ANY(%s::text[])", (list(names),)
            )
        return {row[0]: row[1] for row in await cursor.fetchall()}

    async def claim(
        self, wanted: Mapping[int, int], now: float, worker: str | None = None
    ) -> Sequence[QueuedURL]:
        if not wanted:
            return []
        hosts, limits = list(wanted), list(wanted.values())
        async with self._transaction() as conn:
            await conn.execute(_LOCK_HOST_IDS, (sorted(hosts),))
            if self._page_budget is not None:
                await conn.execute(
                    _PARK,
                    {
                        "hosts": hosts,
                        "budget": self._page_budget,
                        "error": PAGE_BUDGET_ERROR,
                        "counter": PAGE_BUDGET_COUNTER,
                    },
                )
            cursor = await conn.execute(
                _CLAIM,
                {
                    "hosts": hosts,
                    "limits": limits,
                    "budget": self._page_budget,
                    "now": now,
                    "worker": worker,
                },
            )
        order = {host: n for n, host in enumerate(hosts)}
        rows = sorted(await cursor.fetchall(), key=lambda r: (order[r[2]], r[-1], r[0]))
        return [QueuedURL(*row[:-1]) for row in rows]

    async def commit(self, batch: CommitBatch) -> CommitResult:
        names = sorted({u.host for u in batch.new_urls})
        touched = sorted(
            {o.host_id for o in batch.outcomes}
            | {h.host_id for h in batch.hosts}
            | {r.host_id for r in batch.releases}
            | set(batch.fence_hosts())
        )
        async with self._transaction() as conn:
            if names:
                await conn.execute(_ADD_HOSTS, (names,))
            if names or touched:
                locked = await conn.execute(_LOCK_HOSTS, (touched, names))
                if batch.fenced:
                    # The one extra round trip of a fenced batch: the generations are
                    # read under the lock, so no lease changes before the commit.
                    settle_fences(batch, dict(await locked.fetchall()))
            if batch.outcomes:
                await self._answer(conn, batch.outcomes)
            inserted = None
            handed_out: tuple[tuple[int, int, int], ...] = ()
            if batch.new_urls:
                inserted = await self._insert_urls(conn, batch)
            await self._update_hosts(conn, batch)
            if batch.inlinks:
                ids, levels = columns(batch.inlinks, 2)
                await conn.execute(_RAISE_INLINKS, (ids, levels, self._horizon))
            # Another worker may have stored a new URL of the batch first, deeper: the
            # insert leaves its row alone, so the new URLs are checked too.
            hints = [*batch.shallower, *((u.id, u.depth) for u in batch.new_urls)]
            if hints:
                ids, depths = columns(shallowest(hints), 2)
                lowered = await conn.execute(_SHALLOWER, (ids, depths, self._horizon))
                handed_out = tuple(
                    (host_id, url_id, depth)
                    for host_id, url_id, depth, state in await lowered.fetchall()
                    if state == _CLAIMED
                )
            if batch.lastmods:
                ids, lastmods = columns(batch.lastmods, 2)
                await conn.execute(_LASTMODS, (ids, lastmods, batch.at, batch.at))
            await apply_content(conn, batch)
            if batch.releases:
                rows = [(r.host_id, r.generation, r.next_eligible_at) for r in batch.releases]
                await conn.execute(_RELEASE, columns(rows, 3))
            changed = {name: value for name, value in batch.counters.items() if value}
            if changed:
                await conn.execute(_ADD_COUNTERS, (list(changed), list(changed.values())))
        counters = dict(batch.counters)
        added = left_out = 0
        hosts_with_new_work: set[int] = set()
        if inserted is not None:
            for host_id, host_added, host_left_out in await inserted.fetchall():
                added += host_added
                left_out += host_left_out
                if host_added:
                    hosts_with_new_work.add(host_id)
            counters["discovered"] = counters.get("discovered", 0) + added
            duplicates = len(batch.new_urls) - added - left_out
            counters["duplicates"] = counters.get("duplicates", 0) + duplicates
        if left_out:
            counters[DISCOVERY_BUDGET_COUNTER] = (
                counters.get(DISCOVERY_BUDGET_COUNTER, 0) + left_out
            )
        return CommitResult(
            inserted=added,
            hosts_with_new_work=frozenset(hosts_with_new_work),
            counters=counters,
            released=frozenset(r.host_id for r in batch.releases),
            handed_out=handed_out,
        )

    async def _answer(self, conn: AsyncConnection[Any], outcomes: Sequence[Outcome]) -> None:
        """Queue the outcomes' writes: each URL's columns (the last outcome of a URL
        wins) and per host the URLs queued again, answered, and no longer handed out."""
        latest = {o.url_id: o for o in outcomes}.values()
        rows = [
            (
                o.url_id, o.state, o.attempts, o.status, o.content_type, o.length, o.fetched_at,
                o.redirect_to, o.error, int(o.truncated), o.next_fetch_at, o.canonical,
                o.alias_of(), o.content_hash, o.simhash, o.etag, o.last_modified,
                o.revisit_interval, o.due_at, o.change_hash, *o.revalidated,
            )
            for o in latest
            if not o.not_modified
        ]  # fmt: skip
        if rows:
            await conn.execute(_ANSWER, columns(rows, 22))
        kept = [
            (
                o.url_id, o.state, o.attempts, o.next_fetch_at, o.etag, o.last_modified,
                o.revisit_interval, o.due_at, *o.revalidated,
            )
            for o in latest
            if o.not_modified
        ]  # fmt: skip
        if kept:
            await conn.execute(_REVALIDATE, columns(kept, 10))
        tallies = [(host, *tally) for host, tally in host_tallies(outcomes).items()]
        await conn.execute(_ANSWER_HOSTS, columns(tallies, 7))

    async def _insert_urls(
        self, conn: AsyncConnection[Any], batch: CommitBatch
    ) -> psycopg.AsyncCursor[Any]:
        """Queue the insert of the batch's new URLs; its cursor gives, per host, the rows
        inserted and the candidates left out by the discovery budget."""
        urls = batch.new_urls
        return await conn.execute(
            _INSERT_URLS,
            {
                "ids": [u.id for u in urls],
                "urls": [u.url for u in urls],
                "hosts": [u.host for u in urls],
                "depths": [u.depth for u in urls],
                "hops": [u.redirect_hops for u in urls],
                "origins": [u.origin for u in urls],
                "kinds": [batch.listed[u.id].kind if u.id in batch.listed else 0 for u in urls],
                "priorities": [
                    priority(u.depth, batch.listed[u.id].priority if u.id in batch.listed else None)
                    for u in urls
                ],
                "at": batch.at,
                "horizon": self._horizon,
                "budget": self._discovery_budget,
                "candidates": len(urls),
                "over": DISCOVERY_BUDGET_COUNTER,
            },
        )

    async def _update_hosts(self, conn: AsyncConnection[Any], batch: CommitBatch) -> None:
        """Queue the batch's host state: robots.txt records and soft-404 answers (the
        last one of a host wins)."""
        robots = {u.host_id: u.robots for u in batch.hosts if u.robots is not None}
        if robots:
            await conn.execute(
                _SET_ROBOTS,
                columns([(h, r.status, r.body, r.fetched_at) for h, r in robots.items()], 4),
            )
        probes = {u.host_id: u.soft404 for u in batch.hosts if u.soft404 is not None}
        if probes:
            await conn.execute(
                _SET_SOFT404,
                columns([(h, p.fingerprint, p.checked_at) for h, p in probes.items()], 3),
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
                    chosen = _SITEMAPS if sitemaps else _ANSWERED
                    cursor = await conn.execute(chosen, (start, _REQUEUE_CHUNK))
                else:
                    cursor = await conn.execute(_DUE, (now, limit))
                picked = await cursor.fetchall()
                if not picked:
                    break
                await conn.execute(_LOCK_HOST_IDS, (sorted({host for _, host in picked}),))
                ids = [uid for uid, _ in picked]
                cursor = await conn.execute(
                    _REQUEUE, {"ids": ids, "now": now, "horizon": self._horizon}
                )
                row = await cursor.fetchone()
                assert row is not None
                await conn.execute(_ADD_COUNTERS, (["recrawls_queued"], [row[0]]))
            moved += row[0]
            if not every or max(ids) == MAX_ID:
                break
            start = max(ids) + 1
        return moved

    async def requeue_failed(self, error: str) -> int:
        async with self._transaction() as conn:
            await conn.execute(_LOCK_FAILED_HOSTS, (error,))
            cursor = await conn.execute(
                _REQUEUE_FAILED, {"error": error, "counters": ["failed", f"error:{error}"]}
            )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def next_due(self) -> float | None:
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"SELECT min(due_at) FROM urls WHERE state IN ({_DONE}, {_FAILED})"
            )
            row = await cursor.fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def robots(self, host_id: int) -> RobotsRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT robots_status, robots_body, robots_fetched_at FROM hosts WHERE id = %s",
                (host_id,),
            )
            row = await cursor.fetchone()
        if row is None or row[2] is None:
            return None
        return RobotsRecord(status=row[0], body=bytes(row[1] or b""), fetched_at=row[2])

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
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT soft404_fingerprint, soft404_checked_at FROM hosts WHERE id = %s",
                (host_id,),
            )
            row = await cursor.fetchone()
        if row is None or row[1] is None:
            return None
        return Soft404Record(fingerprint=row[0], checked_at=row[1])

    async def counters(self) -> Mapping[str, int]:
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT name, value FROM counters "
                "UNION ALL SELECT NULL, COALESCE(SUM(queued), 0) FROM hosts"
            )
            rows = await cursor.fetchall()
        values = {name: int(value) for name, value in rows if name is not None}
        values["queued"] = next(int(value) for name, value in rows if name is None)
        values.setdefault("discovered", 0)
        return values

    async def get_meta(self, key: str) -> str | None:
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT value FROM meta WHERE key = %s", (key,))
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def set_meta(self, key: str, value: str) -> None:
        async with self._connection() as conn:
            await conn.execute(_SET_META, (key, value))

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        async with self._connection() as conn:
            slowest = await conn.execute(
                _HOST_FIGURES + "WHERE responses > 0 ORDER BY 3 DESC LIMIT %s", (limit,)
            )
            slow_rows = await slowest.fetchall()
            blocked = await conn.execute(
                _HOST_FIGURES + "WHERE blocked > 0 ORDER BY 4 DESC, 1 LIMIT %s", (limit,)
            )
            blocked_rows = await blocked.fetchall()
        return [HostFigures(*r) for r in slow_rows], [HostFigures(*r) for r in blocked_rows]

    async def url_page(
        self, start: int, limit: int, state: State | None = None
    ) -> list[tuple[int, ExportRow]]:
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"SELECT {_EXPORT_COLUMNS} FROM urls AS u WHERE u.id >= %s "
                "AND (%s::smallint IS NULL OR u.state = %s::smallint) ORDER BY u.id LIMIT %s",
                (start, state, state, limit),
            )
            rows = await cursor.fetchall()
        return [(row[0], export_row(row)) for row in rows]

    async def export(self) -> AsyncIterator[ExportRow]:
        async def page(start: int) -> list[Row]:
            async with self._connection() as conn:
                cursor = await conn.execute(_EXPORT, (start, _EXPORT_PAGE))
                return await cursor.fetchall()

        async for rows in pages_by_id(page):
            for row in rows:
                yield export_row(row)


@dataclass(frozen=True, slots=True)
class CrawlEntry:
    """A crawl kept in a database: its name, state and creation time (wall clock)."""

    name: str
    state: str | None
    created: float


async def crawls(dsn: str, prefix: str) -> list[CrawlEntry]:
    """Every crawl of the ``dsn`` database: the schemas named ``prefix`` + NAME that hold
    a crawl's ``meta`` table."""
    found: list[CrawlEntry] = []
    try:
        async with await AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
        ) as conn:
            cursor = await conn.execute(
                "SELECT table_schema FROM information_schema.tables "
                "WHERE table_name = 'meta' AND starts_with(table_schema, %s)",
                (prefix,),
            )
            for (schema,) in await cursor.fetchall():
                meta = sql.SQL("SELECT key, value FROM {}.meta").format(sql.Identifier(schema))
                values: dict[str, str] = dict(await (await conn.execute(meta)).fetchall())
                found.append(
                    CrawlEntry(
                        schema.removeprefix(prefix),
                        values.get("state"),
                        float(values.get("created_at") or 0.0),
                    )
                )
    except psycopg.Error as exc:
        raise StoreError(f"store: {' '.join(str(exc).split())}") from exc
    return found
