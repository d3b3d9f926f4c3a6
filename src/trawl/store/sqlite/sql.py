"""The SQL of the embedded engine (trawl.store.sqlite), as named statements.

Each constant is one statement or a fragment of one, with its parameters named in its
docstring where their order is not plain from the text; the modules that run them hold
the logic. The tables are made by the migrations both engines share (trawl.store.schema).
"""

from __future__ import annotations

from trawl.frontier.priority import DEPTH_WEIGHT, LEVEL_STEP
from trawl.store.rows import CLAIM_COLUMNS, ITEM_COLUMNS, ITEM_PAGE_SIZE, export_columns
from trawl.store.values import BLOCKS, Kind, State

# The id index (trawl.store.sqlite.ids).

ROW_OF = "(SELECT seq FROM url_ids WHERE id = {})"
"""The ``seq`` of the row holding a URL id, given as a SQL parameter (``?``, ``?3``);
NULL when no row does. Both tables are searched by their keys."""


def row_of(parameter: str) -> str:
    """:data:`ROW_OF` for one parameter."""
    return ROW_OF.format(parameter)


def by_id(columns: str, where: str = "") -> str:
    """A query for ``urls`` rows in id order, each reached from its id.

    ``columns`` may name ``k.id`` (the URL id, which orders the result) and any column of
    ``urls`` as ``u``; ``where`` is extra conditions on them, joined with AND. The query
    reads both tables of ids in key order and merges them, without sorting; its
    parameters are the ones ``columns`` and ``where`` use, numbered (``?1``).
    """
    condition = f" WHERE {where}" if where else ""
    arms = (
        f"SELECT {columns} FROM {table} AS k JOIN urls AS u ON u.seq = k.seq{condition}"
        for table in ("ids", "ids_inbox")
    )
    return " UNION ALL ".join(arms) + " ORDER BY 1"


LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM urls"
FILE_SINCE = "INSERT INTO ids_inbox (id, seq) SELECT id, seq FROM urls WHERE seq > ?"
"""Files in the inbox the id of every row stored after a ``seq``."""
INBOX_SIZE = "SELECT COUNT(*) FROM ids_inbox"
MERGE_INBOX = "INSERT OR IGNORE INTO ids (id, seq) SELECT id, seq FROM ids_inbox ORDER BY id"
EMPTY_INBOX = "DELETE FROM ids_inbox"

# The frontier (trawl.store.sqlite.frontier).

STAGED = (
    "CREATE TEMP TABLE IF NOT EXISTS staged (host_id INTEGER NOT NULL, rank REAL NOT NULL, "
    "seq INTEGER NOT NULL, PRIMARY KEY (host_id, rank, seq)) WITHOUT ROWID"
)
"""The staged entries: ``ready``'s shape, in this connection's database in RAM."""
_STAGE = "INSERT INTO temp.staged (host_id, rank, seq) SELECT "
"""The start of a statement that stages rows of ``urls`` it selects."""
_NOT_READY = (
    "NOT EXISTS (SELECT 1 FROM ready AS r WHERE r.host_id = u.host_id "
    "AND r.rank = u.rank AND r.seq = u.seq)"
)
"""A QUEUED row ``u`` of ``urls`` that ``ready`` lacks: a staged one."""
STAGE_INBOX = (
    f"{_STAGE}u.host_id, u.rank, u.seq FROM ids_inbox AS i JOIN urls AS u "
    f"ON u.seq = i.seq WHERE u.state = 0 AND {_NOT_READY}"
)
"""Stages again the QUEUED rows stored since the last merge that ``ready`` lacks."""
STAGE_SINCE = f"{_STAGE}host_id, rank, seq FROM urls WHERE seq > ?"
"""Stages every row stored after a ``seq``."""
RESTAGE = (
    f"{_STAGE}u.host_id, u.rank, u.seq FROM urls AS u "
    f"WHERE u.seq = ? AND u.state = 0 AND {_NOT_READY}"
)
"""Stages a row again if it is QUEUED and ``ready`` lacks it (parameter: its seq)."""
UNSTAGE = "DELETE FROM temp.staged WHERE host_id = ? AND rank = ? AND seq = ?"
UNSTAGE_HOST = "DELETE FROM temp.staged WHERE host_id = ?"
STAGED_OF = (
    "SELECT s.host_id, s.rank, s.seq FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
    "JOIN temp.staged AS s ON s.host_id = u.host_id AND s.rank = u.rank "
    "AND s.seq = u.seq WHERE k.id IN"
)
"""The staged entries of some URL ids."""
MERGE_STAGED = (
    "INSERT OR IGNORE INTO ready (host_id, rank, seq) "
    "SELECT host_id, rank, seq FROM temp.staged ORDER BY host_id, rank, seq"
)
EMPTY_STAGED = "DELETE FROM temp.staged"

_COLUMNS = ", ".join(f"u.{name.strip()}" for name in CLAIM_COLUMNS.split(","))

CLAIM_QUEUED = (
    f"SELECT r.rank, r.seq, {_COLUMNS} FROM {{table}} AS r JOIN urls AS u ON u.seq = r.seq "
    "WHERE r.host_id = ? AND u.next_fetch_at <= ? ORDER BY r.rank, r.seq LIMIT ?"
)
"""A host's due QUEUED URLs in ``{table}`` (``ready`` or ``temp.staged``), best rank
first and equal ranks as they were stored (commit by commit, a commit's URLs in hash
order), each as (rank, seq, ``CLAIM_COLUMNS``...): read in key order, with no sort."""
CLAIM_READY = CLAIM_QUEUED.format(table="ready")
CLAIM_STAGED = CLAIM_QUEUED.format(table="temp.staged")

QUEUED_COUNT = (
    "(SELECT COUNT(*) FROM ready WHERE ready.host_id = hosts.id) "
    "+ (SELECT COUNT(*) FROM temp.staged WHERE staged.host_id = hosts.id)"
)
"""A host's QUEUED rows (an expression on ``hosts``)."""


def queued_seqs(host_id: str) -> str:
    """SQL for the ``seq`` of every QUEUED row of the host given as ``host_id`` (a
    parameter), in ``ready`` or staged."""
    return (
        f"SELECT seq FROM ready WHERE host_id = {host_id} "
        f"UNION ALL SELECT seq FROM temp.staged WHERE host_id = {host_id}"
    )


# The content tables (trawl.store.sqlite.content).

SIMHASH_CANDIDATES = (
    "SELECT b.url_id, u.simhash FROM ("
    + " UNION ALL ".join(
        f"SELECT url_id, added FROM simhash_blocks WHERE block_no = {n} AND block_value = ?"
        for n in range(BLOCKS)
    )
    + f") AS b JOIN urls AS u ON u.seq = {row_of('b.url_id')} "
    "WHERE u.simhash IS NOT NULL GROUP BY b.url_id ORDER BY MIN(b.added), b.url_id"
)
"""Indexed pages sharing a block with the given ones (parameters: the four blocks),
each once, earliest indexed first."""
CONTENT_OWNERS = "SELECT content_hash, url_id FROM content_owners WHERE content_hash IN"
CONTENT_HASHES = (
    "SELECT k.id, u.content_hash FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
    "WHERE u.content_hash IS NOT NULL AND k.id IN"
)
CANONICALS = (
    "SELECT k.id, u.canonical FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
    "WHERE u.canonical IS NOT NULL AND k.id IN"
)
ADD_OWNER = (
    "INSERT INTO content_owners (content_hash, url_id) VALUES (?, ?) "
    "ON CONFLICT (content_hash) DO NOTHING"
)
"""Makes a page the owner of a content hash nobody owns yet."""
HAND_OVER = (
    "INSERT INTO content_owners (content_hash, url_id) VALUES (?, ?) "
    "ON CONFLICT (content_hash) DO UPDATE SET url_id = excluded.url_id"
)
"""Makes a page the owner of a content hash, whoever owned it."""
INDEX_BLOCK = (
    "INSERT INTO simhash_blocks (url_id, block_no, block_value, added) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (url_id, block_no) DO UPDATE SET "
    "block_value = excluded.block_value, added = excluded.added"
)
ADD_VERSION = (
    "INSERT INTO versions (url_id, fetched_at, status, content_hash, simhash, "
    "warc_file, warc_offset, warc_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (url_id, fetched_at) DO NOTHING"
)
UNINDEX = "DELETE FROM simhash_blocks WHERE url_id = ?"
SET_DUPLICATES = (
    f"UPDATE urls SET duplicate_of = ?, near_duplicate_of = ? WHERE seq = {row_of('?')}"
)

# Checkpoints (trawl.store.sqlite.checkpoint).

SYNCHRONOUS_NORMAL = "PRAGMA synchronous = NORMAL"
CHECKPOINT_PASSIVE = "PRAGMA wal_checkpoint(PASSIVE)"
CHECKPOINT_TRUNCATE = "PRAGMA wal_checkpoint(TRUNCATE)"

# Opening the database.

BUSY_TIMEOUT = "PRAGMA busy_timeout = 10000"
WAL_MODE = "PRAGMA journal_mode = WAL"
WRITER_PRAGMAS = (
    WAL_MODE,
    SYNCHRONOUS_NORMAL,
    "PRAGMA cache_size = -65536",
    "PRAGMA wal_autocheckpoint = 0",
)
"""The writer's settings, after the busy timeout: WAL with ``synchronous=NORMAL``, a 64 MB
page cache, and no automatic checkpoints: they run on their own thread
(trawl.store.sqlite.checkpoint)."""
TEMP_STORE_MEMORY = "PRAGMA temp_store = MEMORY"
"""Set only after migrating: a migration that drops a table keeps the table's pages in a
statement journal, which must go to a file, not to RAM."""
META_TABLE = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
"""The table every crawl's database has (migration 1 makes it if a new one lacks it)."""
SCHEMA_VERSION_OF = "SELECT value FROM meta WHERE key = 'schema_version'"
READ_SCHEMA = "SELECT COUNT(*) FROM sqlite_master"
"""Reads the database's schema: where a database that cannot be read fails."""
SCHEMA_OBJECTS = (
    "SELECT type, name, tbl_name, sql FROM sqlite_master "
    "WHERE type IN ('table', 'index') AND rootpage > 0"
)
"""Every table and index that has pages of its own."""

# Settings and counters.

GET_META = "SELECT value FROM meta WHERE key = ?"
SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
ADD_COUNTER = (
    "INSERT INTO counters (name, value) VALUES (?, ?) "
    "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value"
)
COUNTERS = "SELECT name, value FROM counters"
QUEUED_TOTAL = "SELECT COALESCE(SUM(queued), 0) FROM hosts"
WORK_LEFT = "SELECT COALESCE(SUM(queued + claimed), 0) FROM hosts"

# Hosts.

ENSURE_HOST = "INSERT INTO hosts (name) VALUES (?) ON CONFLICT (name) DO NOTHING"
HOST_IDS = "SELECT name, id FROM hosts WHERE name IN"
"""Host ids by name, for a list of names (trawl.store.sqlite.content.select_in)."""
ROBOTS = "SELECT robots_status, robots_body, robots_fetched_at FROM hosts WHERE id = ?"
SOFT404 = "SELECT soft404_fingerprint, soft404_checked_at FROM hosts WHERE id = ?"
SET_ROBOTS = (
    "UPDATE hosts SET robots_status = ?, robots_body = ?, robots_fetched_at = ? WHERE id = ?"
)
SET_SOFT404 = "UPDATE hosts SET soft404_fingerprint = ?, soft404_checked_at = ? WHERE id = ?"
_FIGURES = "SELECT name, responses, response_seconds / MAX(responses, 1), blocked FROM hosts"
SLOWEST_HOSTS = f"{_FIGURES} WHERE responses > 0 ORDER BY 3 DESC LIMIT ?"
"""Hosts by mean response time, highest first (parameter: limit)."""
MOST_BLOCKED_HOSTS = f"{_FIGURES} WHERE blocked > 0 ORDER BY 4 DESC, 1 LIMIT ?"
"""Hosts by robots-blocked URLs, most first (parameter: limit)."""

# Leases.

ADDRESS_FREE = (
    "(h.address IS NULL OR NOT EXISTS (SELECT 1 FROM hosts AS o WHERE o.address = h.address "
    "AND o.lease_owner <> ? AND o.lease_expires_at >= ?))"
)
"""A host's address is not held by another worker (its parameters: worker, now)."""

LEASABLE = (
    "SELECT id, name, lease_owner, next_eligible_at FROM hosts AS h "
    "WHERE (queued > 0 OR claimed > 0) "
    "AND (lease_owner IS NULL OR lease_expires_at < ? OR lease_owner = ?) "
    "AND id NOT IN (SELECT value FROM json_each(?)) "
    "AND (address IS NULL OR address NOT IN (SELECT value FROM json_each(?))) "
    f"AND {ADDRESS_FREE} ORDER BY next_eligible_at, id LIMIT ?"
)
"""Hosts with work that a worker may lease (parameters: now, worker, the ids it holds as
a JSON array, its crowded addresses as a JSON array, worker, now, limit), soonest
eligible first. The held ones are left out here, not skipped after the query: a worker
holding 1,024 hosts read them all back on every refill."""
TAKE_LEASE = (
    "UPDATE hosts SET lease_owner = ?, lease_generation = lease_generation + 1, "
    "lease_expires_at = ? WHERE id = ? RETURNING lease_generation"
)
"""Leases a host (parameters: worker, expiry, host id), returning the new generation."""
SET_ADDRESS = (
    "UPDATE hosts SET address = ? WHERE id = ? AND lease_owner = ? AND lease_generation = ?"
)
ADDRESS_TAKEN = (
    "SELECT EXISTS (SELECT 1 FROM hosts WHERE address = ? AND id <> ? "
    "AND lease_owner <> ? AND lease_expires_at >= ?)"
)
"""Whether another worker holds a live lease on a host at an address (parameters:
address, host id, worker, now)."""
RENEW_LEASE = (
    "UPDATE hosts SET lease_expires_at = ? "
    "WHERE id = ? AND lease_owner = ? AND lease_generation = ?"
)
LEASES_OF = "SELECT id, lease_owner, lease_expires_at FROM hosts WHERE id IN"
FENCE_GENERATIONS = "SELECT id, lease_generation FROM hosts WHERE id IN"
RELEASE = (
    "UPDATE hosts SET lease_owner = NULL, lease_expires_at = NULL, next_eligible_at = ? "
    "WHERE id = ? AND lease_generation = ? AND lease_owner IS NOT NULL"
)
"""Gives a host back (parameters: next eligible time, host id, generation), only if its
lease is still at that generation."""
RECOVER_URLS = "UPDATE urls SET state = ? WHERE state = ?"
"""Moves every URL in one state to another (parameters: new state, old state)."""
END_LEASES = (
    "UPDATE hosts SET inflight = 0, claimed = 0, lease_owner = NULL, "
    f"lease_expires_at = NULL, queued = {QUEUED_COUNT}"
)
"""Ends every host's lease and counts its queue afresh."""

# Claims and the queue.

CLAIM_URL = f"UPDATE urls SET state = {int(State.CLAIMED)} WHERE seq = ?"
"""Marks a URL handed out; the state is spelled in the SQL, not bound as an enum member
(sqlite3 binds an ``int`` subclass only after looking for an adapter)."""

REQUEUE_CLAIMED = (
    f"UPDATE urls SET state = {int(State.QUEUED)} "
    f"WHERE host_id = ? AND state = {int(State.CLAIMED)}"
)
"""Returns a host's CLAIMED URLs to the queue, reading the partial index of CLAIMED rows
(migration 7), not the table."""

HOST_REQUEUED = "UPDATE hosts SET queued = queued + ?, claimed = 0 WHERE id = ?"
PAGE_BUDGET_USE = "SELECT fetched, claimed FROM hosts WHERE id = ?"
HOST_CLAIMED = "UPDATE hosts SET queued = queued - ?, claimed = claimed + ? WHERE id = ?"
PARK = f"UPDATE urls SET state = ?1, error = ?2 WHERE seq IN ({queued_seqs('?3')})"
"""Holds back every QUEUED URL of a host (parameters: PARKED, its error, host id)."""
HOST_PARKED = "UPDATE hosts SET queued = queued - ? WHERE id = ?"
UNPARK = "UPDATE urls SET state = ?, error = NULL WHERE state = ?"
"""Queues every PARKED URL again (parameters: QUEUED, PARKED)."""
PARKED_HOSTS = (
    "SELECT id, name, fetched FROM hosts WHERE id IN (SELECT host_id FROM urls WHERE state = ?)"
)
"""Hosts with PARKED URLs, their names and fetches (parameter: PARKED)."""
UNPARK_HOST = "UPDATE urls SET state = ?, error = NULL WHERE state = ? AND host_id = ?"
"""Queues again the PARKED URLs of one host (parameters: QUEUED, PARKED, host id)."""
UNPARK_WITHIN = (
    "UPDATE urls SET state = ?, error = NULL WHERE state = ? "
    "AND host_id IN (SELECT id FROM hosts WHERE fetched < ?)"
)
"""Queues again the PARKED URLs of hosts below a page budget (parameters: QUEUED,
PARKED, the budget)."""


def _requeue(picked: str) -> str:
    """Queues again the answered URLs ``picked`` selects, each ranked by its due time and
    priority (parameters by name: now, limit, horizon), returning their hosts."""
    return (
        "UPDATE urls SET state = 0, attempts = 0, next_fetch_at = 0, "
        f"rank = MIN(COALESCE(due_at, :now), :now) - priority * :horizon WHERE {picked} "
        "RETURNING host_id"
    )


REQUEUE_SITEMAPS = _requeue(f"state IN (2, 3) AND kind = {int(Kind.SITEMAP)}")
REQUEUE_EVERY = _requeue("state IN (2, 3)")
REQUEUE_DUE = _requeue(
    "seq IN (SELECT seq FROM urls WHERE state IN (2, 3) AND due_at <= :now "
    "ORDER BY due_at LIMIT :limit)"
)
REQUEUE_FAILED = (
    f"UPDATE urls SET state = {int(State.QUEUED)}, attempts = 0, next_fetch_at = 0, "
    f"error = NULL WHERE state = {int(State.FAILED)} AND error = ? RETURNING host_id"
)
HOSTS_REQUEUED = "UPDATE hosts SET queued = queued + ?, fetched = MAX(fetched - ?, 0) WHERE id = ?"
"""Moves requeued URLs of a host from its answered count to its queued one."""
NEXT_DUE = "SELECT MIN(due_at) FROM urls WHERE state IN (2, 3)"

# Known URLs.

ID_PAGE = "SELECT id FROM url_ids WHERE id >= ? ORDER BY id LIMIT ?"
QUEUED_DEPTHS = (
    "SELECT seq, id, depth FROM urls WHERE seq > ? AND state IN (?, ?) ORDER BY seq LIMIT ?"
)
"""URLs waiting to be fetched in storage order: one pass over the table, no look-up
through the id index (parameters: after seq, QUEUED, PARKED, limit)."""
EXISTING = "SELECT k.id, u.url FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq WHERE k.id IN"
HELD_IDS = "SELECT id FROM url_ids WHERE id IN"

# A commit's writes.

ANSWER = (
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
REVALIDATE = (
    "UPDATE urls SET state = ?, attempts = ?, next_fetch_at = ?, "
    "etag = COALESCE(?, etag), last_modified = COALESCE(?, last_modified), "
    "revisit_interval = COALESCE(?, revisit_interval), due_at = COALESCE(?, due_at), "
    f"revalidation = ?, revalidated_at = ? WHERE seq = {row_of('?')}"
)
"""Writes a 304's outcome: the last full answer's columns stand."""

HOST_TALLY = (
    "UPDATE hosts SET queued = queued + ?, fetched = fetched + ?, "
    "claimed = MAX(claimed - ?, 0), blocked = blocked + ?, "
    "responses = responses + ?, response_seconds = response_seconds + ? WHERE id = ?"
)
"""Adds a batch's outcomes to a host's row (a trawl.store.rows.HostTally, host id)."""
DISCOVERED_BY = "SELECT discovered FROM hosts WHERE id = ?"
HOST_DISCOVERED = "UPDATE hosts SET queued = queued + ?, discovered = discovered + ? WHERE id = ?"
RAISE_INLINKS = (
    f"UPDATE urls SET priority = MIN(1.0, priority + {LEVEL_STEP} * (?1 - inlink_level)), "
    f"rank = rank - CASE WHEN state = 0 THEN {LEVEL_STEP} * (?1 - inlink_level) * ?2 ELSE 0 END, "
    f"inlink_level = ?1 WHERE seq = {row_of('?3')} AND inlink_level < ?1"
)
"""A URL gains ``LEVEL_STEP`` of priority per in-link level it reached (trawl.frontier.inlinks)."""
SHALLOWER = (
    f"UPDATE urls SET depth = ?1, priority = MIN(1.0, priority + {DEPTH_WEIGHT} / (1.0 + ?1) "
    f"- {DEPTH_WEIGHT} / (1.0 + depth)), rank = rank - CASE WHEN state = 0 THEN (MIN(1.0, "
    f"priority + {DEPTH_WEIGHT} / (1.0 + ?1) - {DEPTH_WEIGHT} / (1.0 + depth)) - priority) "
    f"* ?2 ELSE 0 END WHERE seq = {row_of('?3')} AND depth > ?1 AND state IN (0, 1, 5)"
)
"""A URL not fetched yet found at a smaller depth takes it, with the priority of that
depth (trawl.frontier.priority) and, while queued, the rank that priority gives."""
HANDED_OUT = (
    "SELECT u.host_id, k.id, u.depth FROM url_ids AS k JOIN urls AS u ON u.seq = k.seq "
    "WHERE u.state = 1 AND k.id IN"
)
"""The handed-out URLs among some ids, with their hosts and depths."""
INSERT_URL = (
    "INSERT INTO urls (id, url, host_id, depth, redirect_hops, origin, kind, priority, rank, "
    "label) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""The insert of a new URL (one the store does not hold: trawl.store.sqlite.batch.unstored)."""
INSERT_LINK = "INSERT INTO urls (id, url, host_id, depth, priority, rank) VALUES (?, ?, ?, ?, ?, ?)"
"""The insert of a plain link (a page, no redirect hops, no origin, no label: the
columns' defaults). Six parameters instead of ten, and no None, which sqlite3 binds
only after looking for an adapter: 3.5 -> 1.5 us a row inserting into an in-memory table, and 29.1
-> 28.0 s of commit for 1 M URLs of inserts."""
SET_LASTMOD = (
    "UPDATE urls SET lastmod = ?, due_at = "
    "CASE WHEN MAX(fetched_at, COALESCE(revalidated_at, fetched_at)) < ? "
    f"THEN MIN(COALESCE(due_at, ?), ?) ELSE due_at END WHERE seq = {row_of('?')}"
)
"""Records a sitemap's lastmod: a page last answered (fetched, or confirmed by a 304)
before it is due now (parameters: lastmod, lastmod, now, now, url id)."""

# Reading rows back.

_EXPORT_BY_ID = export_columns("k.id", "(SELECT t.url FROM urls AS t WHERE t.seq = " + ROW_OF + ")")
"""The export columns read through the id index (trawl.store.sqlite.ids), the URL id
taken from it so that the rows come in its order; a column holding another URL's id
reads that URL through the index too."""
URL_PAGE = (
    by_id(
        _EXPORT_BY_ID,
        "k.id >= ?1 AND (?2 IS NULL OR u.state = ?2) "
        "AND (?4 IS NULL OR u.host_id = (SELECT id FROM hosts WHERE name = ?4)) "
        "AND (?5 IS NULL OR u.status = ?5) AND (?6 IS NULL OR u.error = ?6)",
    )
    + " LIMIT ?3"
)
"""Export rows from an id on (parameters: start, state, limit, host name, status,
error; NULL for any)."""
EXPORT_PAGE = by_id(_EXPORT_BY_ID, "k.id >= ?1") + " LIMIT 5000"
"""Export rows from an id on (parameter: start), a page at a time."""

# Items (trawl.store.sqlite.items).

DELETE_ITEMS = "DELETE FROM items WHERE url_id = ?"
ADD_ITEM = (
    "INSERT INTO items (url_id, seq, fetched_at, data) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (url_id, seq) DO UPDATE SET fetched_at = excluded.fetched_at, data = excluded.data"
)
ITEM_PAGE = (
    f"SELECT {ITEM_COLUMNS} FROM items AS i JOIN urls AS u ON u.seq = {row_of('i.url_id')} "
    f"WHERE (i.url_id, i.seq) > (?, ?) ORDER BY i.url_id, i.seq LIMIT {ITEM_PAGE_SIZE}"
)
"""Items after a key (parameters: url_id, seq), in key order, with their URLs."""

# Uploads to an object store (schema migration 14).

UPLOADED = (
    "SELECT object_key FROM uploads "
    "WHERE bucket = ? AND object_key IN (SELECT value FROM json_each(?))"
)
"""Which of a JSON array of keys are recorded as uploaded (parameters: bucket, keys)."""
RECORD_UPLOAD = (
    "INSERT INTO uploads (bucket, object_key, file, size, sha256, worker, uploaded_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (bucket, object_key) DO NOTHING"
)
