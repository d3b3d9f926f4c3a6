"""The PostgreSQL engine's SQL, one named statement each: the code that runs them is in
trawl.store.postgres.store and its helpers.

Statements work on whole arrays (``unnest``), so one statement serves a whole batch.
Placeholders are psycopg's: ``%s`` by position, ``%(name)s`` by name. A statement that
judges a lease by the clock takes ``%(now)s``: NULL reads the database's clock, which
every worker shares, so clock skew between worker machines cannot break fencing.
"""

from __future__ import annotations

from psycopg.sql import SQL

from trawl.frontier.priority import DEPTH_WEIGHT, LEVEL_STEP
from trawl.store.rows import CLAIM_COLUMNS, ITEM_COLUMNS, ITEM_PAGE_SIZE, export_columns
from trawl.store.values import Kind, State

# States are written into the SQL, not passed as parameters, so the planner can match
# the partial indexes (``WHERE state = 0``) whatever plan it caches.
_QUEUED, _CLAIMED, _PARKED = int(State.QUEUED), int(State.CLAIMED), int(State.PARKED)
_DONE, _FAILED = int(State.DONE), int(State.FAILED)

MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
META_TABLE = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
SET_META = (
    "INSERT INTO meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
ADD_COUNTERS = (
    "INSERT INTO counters (name, value) SELECT * FROM unnest(%s::text[], %s::bigint[]) "
    "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value"
)
ADD_HOSTS = (
    "INSERT INTO hosts (name) SELECT unnest(%s::text[]) ORDER BY 1 ON CONFLICT (name) DO NOTHING"
)
LOCK_HOSTS = (
    "SELECT id, lease_generation FROM hosts "
    "WHERE id = ANY(%s::bigint[]) OR name = ANY(%s::text[]) ORDER BY id FOR UPDATE"
)
_DATABASE_NOW = "extract(epoch FROM now())"
"""The database's clock, which every worker shares."""
_NOW = f"coalesce(%(now)s::float8, {_DATABASE_NOW})"
"""The time leases are judged by: the ``now`` parameter, or the database's clock when
it is NULL."""
RECOVER = f"UPDATE urls SET state = {_QUEUED} WHERE state = {_CLAIMED}"
# A statement that changes several host rows takes their locks in whatever order it
# meets them; these lock the rows in id order first, as every commit does, so that two
# transactions never wait for each other's rows (a deadlock, seen between renewals and
# commits with three workers).
LOCK_HOST_IDS = "SELECT id FROM hosts WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE"
# A worker's own leases after its restart: their CLAIMED URLs return to the queue.
RECOVER_WORKER = f"""
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
      AND id NOT IN (SELECT unnest(%(holding)s::bigint[]))
      AND (address IS NULL OR NOT address = ANY(%(crowded)s::text[]))
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
ADDRESS_LOCK = "SELECT pg_advisory_xact_lock(hashtext('trawl leases ' || current_schema()))"
# Hosts' addresses, claimed together (each at its lease's generation): per host, in the
# order given, whether no other worker holds a live lease on a host of its address.
CLAIM_ADDRESSES = f"""
WITH c AS (
    SELECT * FROM unnest(%(hosts)s::bigint[], %(generations)s::bigint[], %(addresses)s::text[])
        WITH ORDINALITY AS c(host, generation, address, n)
), claimed AS (
    UPDATE hosts SET address = c.address FROM c
    WHERE hosts.id = c.host AND hosts.lease_owner = %(worker)s
      AND hosts.lease_generation = c.generation
)
SELECT NOT EXISTS (
    SELECT 1 FROM hosts WHERE address = c.address AND id <> c.host
    AND lease_owner <> %(worker)s AND lease_expires_at >= {_NOW})
FROM c ORDER BY c.n
"""
RENEW = f"""
UPDATE hosts SET lease_expires_at = {_NOW} + %(ttl)s
FROM unnest(%(ids)s::bigint[], %(generations)s::bigint[]) AS l(id, generation)
WHERE hosts.id = l.id AND hosts.lease_owner = %(worker)s
  AND hosts.lease_generation = l.generation
RETURNING hosts.id
"""
# Each release holds only at its generation; the host's CLAIMED URLs (buffered, never
# sent) return to the queue and the next owner waits until the time the release names.
RELEASE = f"""
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
PARKED_HOSTS = (
    "SELECT id, name, fetched FROM hosts WHERE id IN "
    f"(SELECT DISTINCT host_id FROM urls WHERE state = {_PARKED}) ORDER BY id FOR UPDATE"
)
"""The hosts with PARKED URLs, locked, with their names and fetches."""
UNPARK = f"""
WITH unparked AS (
    UPDATE urls SET state = {_QUEUED}, error = NULL
    WHERE state = {_PARKED} AND (%(budget)s::bigint IS NULL OR host_id IN
        (SELECT id FROM hosts WHERE fetched < %(budget)s::bigint))
      AND (%(hosts)s::bigint[] IS NULL OR host_id = ANY(%(hosts)s::bigint[]))
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
RECOUNT = (
    "UPDATE hosts SET inflight = 0, claimed = 0, queued = (SELECT COUNT(*) FROM urls "
    f"WHERE urls.host_id = hosts.id AND urls.state = {_QUEUED})"
)
PARK = f"""
WITH spent AS (
    SELECT h.id FROM hosts AS h
    JOIN unnest(%(hosts)s::bigint[], %(budgets)s::bigint[]) AS w(id, budget) ON h.id = w.id
    WHERE w.budget IS NOT NULL AND h.fetched >= w.budget
    ORDER BY h.id FOR UPDATE OF h
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
# the host rows are locked so concurrent claims see each other's counts. ``%(now)s`` is
# the time the URLs must be due by; a worker's leases are judged by the database's clock.
CLAIM = f"""
WITH wanted AS (
    SELECT h.id,
           CASE WHEN w.budget IS NULL THEN w.n
                ELSE LEAST(w.n, w.budget - h.fetched - h.claimed) END AS n
    FROM hosts AS h
    JOIN unnest(%(hosts)s::bigint[], %(limits)s::bigint[], %(budgets)s::bigint[])
        AS w(id, n, budget)
    ON h.id = w.id
    WHERE %(worker)s::text IS NULL
       OR (h.lease_owner = %(worker)s AND h.lease_expires_at >= {_DATABASE_NOW})
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
ANSWER = """
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
REVALIDATE = """
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
ANSWER_HOSTS = (
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
DUE = (
    f"SELECT id, host_id FROM urls WHERE state IN ({_DONE}, {_FAILED}) AND due_at <= %s "
    "ORDER BY due_at LIMIT %s"
)
ANSWERED = (
    f"SELECT id, host_id FROM urls WHERE state IN ({_DONE}, {_FAILED}) AND id >= %s "
    "ORDER BY id LIMIT %s"
)
SITEMAPS = (
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
REQUEUE = f"""
WITH moved AS (
    UPDATE urls SET state = {_QUEUED}, attempts = 0, next_fetch_at = 0,
        rank = LEAST(COALESCE(due_at, %(now)s), %(now)s) - priority * %(horizon)s
    WHERE id = ANY(%(ids)s::bigint[]) AND state IN ({_DONE}, {_FAILED})
    RETURNING host_id{_RECOUNT_MOVED}
SELECT count(*) FROM moved
"""
LOCK_FAILED_HOSTS = (
    "SELECT id FROM hosts WHERE id IN "
    f"(SELECT DISTINCT host_id FROM urls WHERE state = {_FAILED} AND error = %s) "
    "ORDER BY id FOR UPDATE"
)
REQUEUE_FAILED = f"""
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
RAISE_INLINKS = f"""
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
SHALLOWER = f"""
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
LASTMODS = """
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
SLOWEST_HOSTS = _HOST_FIGURES + "WHERE responses > 0 ORDER BY 3 DESC LIMIT %s"
MOST_BLOCKED_HOSTS = _HOST_FIGURES + "WHERE blocked > 0 ORDER BY 4 DESC, 1 LIMIT %s"
# New URLs, one statement for the whole batch. A host whose discovery budget has room
# for every candidate takes them all (insert-if-absent); otherwise its candidates are
# taken shallowest first, in the order found, and only new ones (not stored, not met
# earlier in the batch) use its room, until the room is used. What does not fit is left
# out (counted from the first candidate after the last one that fit). The statement
# adds the hosts' counts and the counters it decides, and returns per host:
# (host id, rows inserted, candidates left out). A URL met twice is stored as met at its
# smallest depth and fewest hops, the first so met (its label with it).
INSERT_URLS = """
WITH found AS (
    SELECT c.*, h.id AS host_id, count(*) OVER (PARTITION BY h.id) AS n,
           %(budget)s::bigint - h.discovered AS room
    FROM unnest(%(ids)s::bigint[], %(urls)s::text[], %(hosts)s::text[],
                %(depths)s::integer[], %(hops)s::smallint[], %(origins)s::text[],
                %(kinds)s::smallint[], %(priorities)s::float8[], %(labels)s::text[])
         WITH ORDINALITY AS c(id, url, host, depth, hops, origin, kind, priority, label, ord)
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
    INSERT INTO urls (id, url, host_id, depth, redirect_hops, origin, kind, priority, rank,
                      label)
    SELECT id, url, host_id, depth, hops, origin, kind, priority,
           %(at)s - priority * %(horizon)s, label FROM ranked
    WHERE room IS NULL OR room >= n OR (fresh AND nth <= room)
    ORDER BY id, depth, hops, ord
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
SET_ROBOTS = (
    "UPDATE hosts SET robots_status = r.status, robots_body = r.body, robots_fetched_at = r.at "
    "FROM unnest(%s::bigint[], %s::integer[], %s::bytea[], %s::float8[]) "
    "AS r(id, status, body, at) WHERE hosts.id = r.id"
)
SET_SOFT404 = (
    "UPDATE hosts SET soft404_fingerprint = p.fingerprint, soft404_checked_at = p.at "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS p(id, fingerprint, at) "
    "WHERE hosts.id = p.id"
)
_EXPORT_COLUMNS = export_columns("u.id", "(SELECT t.url FROM urls AS t WHERE t.id = {})")
"""The export columns of ``urls`` as ``u``; a column holding another URL's id reads that
URL by its key."""
EXPORT = f"SELECT {_EXPORT_COLUMNS} FROM urls AS u WHERE u.id >= %s ORDER BY u.id LIMIT %s"
URL_PAGE = (
    f"SELECT {_EXPORT_COLUMNS} FROM urls AS u WHERE u.id >= %(start)s "
    "AND (%(state)s::smallint IS NULL OR u.state = %(state)s::smallint) "
    "AND (%(host)s::text IS NULL "
    "OR u.host_id = (SELECT id FROM hosts WHERE name = %(host)s::text)) "
    "AND (%(status)s::integer IS NULL OR u.status = %(status)s::integer) "
    "AND (%(error)s::text IS NULL OR u.error = %(error)s::text) ORDER BY u.id LIMIT %(limit)s"
)
"""A page of ``urls`` from an id on (``start``), of one state, host name, status and
error (NULL: any), as export rows."""

# Connections, schemas and the crawls of a database. The composed statements take the
# schema as a quoted identifier (``psycopg.sql.Identifier``).
SET_SEARCH_PATH = SQL("SET search_path TO {}")
READ_ONLY = "SET default_transaction_read_only = on"
CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"
"""Every statement is planned for its own parameters and the tables as they are now.
psycopg prepares a statement it has run five times, and the server then keeps one
generic plan for it: one made for arrays of 10 elements and a crawl's tables as they were
in its first seconds, nearly empty, then used for the rest of the crawl (an ANALYZE would
replace it, which a crawl must not count on: the tables grow faster than autovacuum
looks). Such a plan of ``CLAIM`` walked every queued URL once for each host asked for,
taking seconds where the planned statement takes milliseconds."""
CREATE_SCHEMA = SQL("CREATE SCHEMA IF NOT EXISTS {}")
DROP_SCHEMA = SQL("DROP SCHEMA IF EXISTS {} CASCADE")
CRAWL_EXISTS = "SELECT to_regclass('meta') IS NOT NULL"
CRAWL_SCHEMAS = (
    "SELECT table_schema FROM information_schema.tables "
    "WHERE table_name = 'meta' AND starts_with(table_schema, %s)"
)
CRAWL_META = SQL("SELECT key, value FROM {}.meta")
GET_META = "SELECT value FROM meta WHERE key = %s"
LEASED = f"SELECT EXISTS (SELECT 1 FROM hosts WHERE lease_expires_at >= {_NOW})"

# Reads.
WORK_LEFT = "SELECT COALESCE(SUM(queued + claimed), 0) FROM hosts"
IDS = "SELECT id FROM urls WHERE id >= %s ORDER BY id LIMIT %s"
QUEUED_DEPTHS = (
    f"SELECT id, depth FROM urls WHERE id >= %s AND state IN ({_QUEUED}, {_PARKED}) "
    "ORDER BY id LIMIT %s"
)
EXISTING = "SELECT id, url FROM urls WHERE id = ANY(%s::bigint[])"
HOST_IDS = "SELECT name, id FROM hosts WHERE name = ANY(%s::text[])"
NEXT_DUE = f"SELECT min(due_at) FROM urls WHERE state IN ({_DONE}, {_FAILED})"
ROBOTS = (
    "SELECT id, robots_status, robots_body, robots_fetched_at FROM hosts "
    "WHERE id = ANY(%s::bigint[])"
)
SOFT404 = (
    "SELECT id, soft404_fingerprint, soft404_checked_at FROM hosts WHERE id = ANY(%s::bigint[])"
)
COUNTERS = (
    "SELECT name, value FROM counters UNION ALL SELECT NULL, COALESCE(SUM(queued), 0) FROM hosts"
)
"""The counters, and one row named NULL: the URLs queued, summed over the hosts."""

# The content tables (trawl.store.postgres.content).
OWNERS = "SELECT content_hash, url_id FROM content_owners WHERE content_hash = ANY(%s::text[])"
HASHES = "SELECT id, content_hash FROM urls WHERE content_hash IS NOT NULL AND id = ANY(%s)"
CANONICALS = "SELECT id, canonical FROM urls WHERE canonical IS NOT NULL AND id = ANY(%s)"
CANDIDATES = (
    "SELECT u.id, u.simhash FROM ("
    + " UNION ALL ".join(
        f"SELECT url_id, added FROM simhash_blocks WHERE block_no = {n} AND block_value = %s"
        for n in range(4)
    )
    + ") AS b JOIN urls AS u ON u.id = b.url_id "
    "WHERE u.simhash IS NOT NULL GROUP BY u.id ORDER BY MIN(b.added), u.id"
)
ADD_OWNERS = (
    "INSERT INTO content_owners (content_hash, url_id) "
    "SELECT h, i FROM unnest(%s::text[], %s::bigint[]) WITH ORDINALITY AS o(h, i, n) "
    "ORDER BY n ON CONFLICT (content_hash) DO NOTHING"
)
NEW_OWNERS = (
    "INSERT INTO content_owners (content_hash, url_id) "
    "SELECT DISTINCT ON (h) h, i FROM unnest(%s::text[], %s::bigint[]) "
    "WITH ORDINALITY AS o(h, i, n) ORDER BY h, n DESC "
    "ON CONFLICT (content_hash) DO UPDATE SET url_id = excluded.url_id"
)
ADD_BLOCKS = (
    "INSERT INTO simhash_blocks (url_id, block_no, block_value, added) "
    "SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::integer[], %s::float8[]) "
    "ON CONFLICT (url_id, block_no) DO UPDATE SET "
    "block_value = excluded.block_value, added = excluded.added"
)
ADD_VERSIONS = (
    "INSERT INTO versions (url_id, fetched_at, status, content_hash, simhash, "
    "warc_file, warc_offset, warc_length) "
    "SELECT * FROM unnest(%s::bigint[], %s::float8[], %s::smallint[], %s::text[], "
    "%s::bigint[], %s::text[], %s::bigint[], %s::bigint[]) "
    "ON CONFLICT (url_id, fetched_at) DO NOTHING"
)
UNINDEX = "DELETE FROM simhash_blocks WHERE url_id = ANY(%s::bigint[])"
LINK_DUPLICATES = (
    "UPDATE urls SET duplicate_of = d.exact, near_duplicate_of = d.near "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS d(id, exact, near) "
    "WHERE urls.id = d.id"
)

# Items (trawl.store.postgres.items).
DELETE_ITEMS = "DELETE FROM items WHERE url_id = ANY(%s::bigint[])"
ADD_ITEMS = (
    "INSERT INTO items (url_id, seq, fetched_at, data) "
    "SELECT * FROM unnest(%s::bigint[], %s::integer[], %s::float8[], %s::text[]) "
    "ON CONFLICT (url_id, seq) DO UPDATE SET fetched_at = excluded.fetched_at, data = excluded.data"
)
ITEM_PAGE = (
    f"SELECT {ITEM_COLUMNS} FROM items AS i JOIN urls AS u ON u.id = i.url_id "
    "WHERE (i.url_id, i.seq) > (%s::bigint, %s::integer) "
    f"ORDER BY i.url_id, i.seq LIMIT {ITEM_PAGE_SIZE}"
)
"""Items after a key (parameters: url_id, seq), in key order, with their URLs."""

# Uploads to an object store (schema migration 14).

UPLOADED = "SELECT object_key FROM uploads WHERE bucket = %s AND object_key = ANY(%s)"
"""Which of an array of keys are recorded as uploaded (parameters: bucket, keys)."""
RECORD_UPLOAD = (
    "INSERT INTO uploads (bucket, object_key, file, size, sha256, worker, uploaded_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (bucket, object_key) DO NOTHING"
)
