"""The store schema, kept to SQL that SQLite and PostgreSQL both accept.

Migrations are numbered; ``meta.schema_version`` records the last one applied, so an
older crawl directory is upgraded in place when a newer trawl opens it. A migration is
never edited once released: a change is a new migration appended to the list.

Identity: ``urls.id`` is the signed 64-bit hash of the normalised URL (trawl.extract.urls.url_hash).
In PostgreSQL it is the primary key, so the key is the exact insert-if-absent check. In
SQLite, from migration 10, ``urls`` is keyed by ``seq``, the order rows were stored in,
and ids lead to rows through the id index of trawl.store.sqlite.ids: a large table of
ids merged from a small inbox. Before it,
the id was a unique index beside the rowid (and, in the first crawls, the rowid itself),
written at a random leaf for every new URL.
The frontier reads a partial index holding only QUEUED rows, per host, in rank order
(migration 6; shallowest first before it).

Migration 2 adds the per-host budgets' counts (``discovered``: URLs stored for the host;
``fetched``: its URLs that reached DONE or FAILED; ``claimed``: its URLs handed out and
not yet answered), filled in from the ``urls`` table for a crawl made before them, a
partial index over URLs held back by the page budget, and the soft-404 probe's answer.

Migration 3 adds what the content outputs need (``--text``, ``--events``, ``--warc``):
per URL, the fingerprints of its latest content (``content_hash``, ``simhash``), the
page it duplicates exactly or nearly, the known URL its ``<link rel=canonical>`` names
(``alias_of``), and ``origin``, the first URL of the redirect chain that led to it; the
table of the owners of each content hash; the four-block SimHash index
(trawl.content.neardup); and ``versions``, one row per fetch whose content was fingerprinted or
archived, keyed by URL hash and fetch time, so versions are added and never overwritten.

Migration 4 adds the address a host resolved to, so that workers sharing a crawl never
hold hosts on one server address at once (the per-address limit across workers).

Migration 5 adds per-host figures for the dashboard: URLs robots.txt blocked (counted
from ``urls`` for an older crawl), and answered requests with their summed response
time (from then on).

Migration 6 is for freshness (trawl.freshness.recrawl, trawl.frontier.priority,
trawl.freshness.sitemap_parser): a URL's
``kind`` (0 a page, 1 a sitemap), its ``priority`` and queue ``rank`` (the frontier's
partial index now orders each host's QUEUED rows by rank instead of depth; rows queued
before it keep their depth as rank, so they come first), the response's validators
(``etag``, ``last_modified``) for conditional requests, the page's ``revisit_interval``
and ``due_at`` (when it is due again; a partial index over DONE and FAILED rows finds
the due ones), ``lastmod``, the latest change time a sitemap gave, ``inlink_level``, the
in-link level its priority includes (trawl.frontier.inlinks), and ``change_hash``, which tells
whether the next fetch found the page changed. Pages fetched before it
are due one initial interval (a day) after their fetch.

Migration 7 indexes the CLAIMED rows by host, so that ending a lease (a release, a
takeover) returns the host's handed-out URLs to the queue without reading the whole
``urls`` table: the index holds no more rows than the workers' buffers.

Migration 8 indexes the hosts with work by when they may next be asked.

Migration 9 narrows the frontier index in SQLite to ``(host_id, rank)``: every SQLite
index entry ends with the rowid anyway, and rows are appended as they are stored (a
commit's URLs in hash order), so claims take a host's URLs by rank and then in that
order, read straight from the index without the 64-bit URL hash in each entry (at 3 M
URLs in bench.store: about 5% less time, 6% less disk). PostgreSQL has no row order
that lasts, so its key keeps ``id`` as the tie-break and the migration rebuilds the
same index there once.

Migration 10 is SQLite's alone (:class:`PerEngine`): it copies ``urls`` into a table
keyed by ``seq`` in the order the rows were stored, builds ``ids`` from it, and adds the
inbox, the view ``url_ids`` over both, and the four partial indexes again. The copy
reads and writes the whole table once, in one transaction; its two copies say ``OR
IGNORE`` (no row can break a constraint the old table kept) so that SQLite keeps no
statement journal of them (trawl.store.sqlite.ids.merge_inbox). Dropping the old table
keeps one of all its pages, so the store migrates with its temporary files on disk, not
in RAM: a 10 M URL crawl peaked at 1.8 GB of RSS while it migrated (95 s) before.

Migration 11 is SQLite's alone too: the frontier becomes the table ``ready`` kept by a
trigger, in place of the partial index, so that new URLs can wait for it in RAM and join
it in merges (trawl.store.sqlite.frontier).

Migration 12 records revalidations: ``revalidated_at``, when a recrawl last answered,
and ``revalidation``, what it found (``not_modified``, ``unchanged``, ``changed``;
trawl.store.values.Revalidation). A 304 writes these and leaves the columns of the last
full answer as they were, ``fetched_at`` included.

Migration 13 is for page handlers (trawl.handlers): a URL's ``label``, which names the
handler of its page (NULL: the default one), and ``items``, the items a page's handler
yielded, keyed by URL hash and their place in the page's yield order (``seq``), with the
fetch time. A page's items are replaced whole when it is committed again.

Migration 14 records the output files uploaded to an object store (``--output``,
trawl.outputs.uploader): one ``uploads`` row per object, keyed by bucket and key, with
the local file's name, size and SHA-256, the worker that put it and when. A row is
written once the store confirmed the object, so a file without one is uploaded (again)
by the next run that finds it.
"""

from __future__ import annotations

from typing import NamedTuple


class PerEngine(NamedTuple):
    """A migration that differs by engine: each one's statements."""

    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


_URL_COLUMNS = (
    "id, url, host_id, state, depth, redirect_hops, next_fetch_at, attempts, status, "
    "content_type, length, fetched_at, redirect_to, error, truncated, canonical, "
    "content_hash, simhash, duplicate_of, near_duplicate_of, alias_of, origin, kind, "
    "priority, rank, etag, last_modified, revisit_interval, due_at, lastmod, "
    "inlink_level, change_hash"
)
"""Every column of ``urls`` as migrations 1 to 9 made it."""

_SQLITE_ID_INDEX = (
    """CREATE TABLE urls_by_seq (
        seq INTEGER PRIMARY KEY,
        id BIGINT NOT NULL,
        url TEXT NOT NULL,
        host_id INTEGER NOT NULL,
        state SMALLINT NOT NULL DEFAULT 0,
        depth INTEGER NOT NULL,
        redirect_hops SMALLINT NOT NULL DEFAULT 0,
        next_fetch_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        attempts SMALLINT NOT NULL DEFAULT 0,
        status SMALLINT,
        content_type TEXT,
        length BIGINT,
        fetched_at DOUBLE PRECISION,
        redirect_to TEXT,
        error TEXT,
        truncated SMALLINT NOT NULL DEFAULT 0,
        canonical TEXT,
        content_hash TEXT,
        simhash BIGINT,
        duplicate_of BIGINT,
        near_duplicate_of BIGINT,
        alias_of BIGINT,
        origin TEXT,
        kind SMALLINT NOT NULL DEFAULT 0,
        priority DOUBLE PRECISION NOT NULL DEFAULT 0.5,
        rank DOUBLE PRECISION NOT NULL DEFAULT 0,
        etag TEXT,
        last_modified TEXT,
        revisit_interval DOUBLE PRECISION,
        due_at DOUBLE PRECISION,
        lastmod DOUBLE PRECISION,
        inlink_level SMALLINT NOT NULL DEFAULT 0,
        change_hash BIGINT
    )""",
    f"INSERT OR IGNORE INTO urls_by_seq ({_URL_COLUMNS}) "
    f"SELECT {_URL_COLUMNS} FROM urls ORDER BY rowid",
    "DROP TABLE urls",
    "ALTER TABLE urls_by_seq RENAME TO urls",
    "CREATE TABLE ids (id BIGINT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT OR IGNORE INTO ids (id, seq) SELECT id, seq FROM urls ORDER BY id",
    "CREATE TABLE ids_inbox (id BIGINT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID",
    """CREATE VIEW url_ids (id, seq) AS
        SELECT id, seq FROM ids UNION ALL SELECT id, seq FROM ids_inbox""",
    "CREATE INDEX urls_ready ON urls (host_id, rank) WHERE state = 0",
    "CREATE INDEX urls_parked ON urls (host_id) WHERE state = 5",
    "CREATE INDEX urls_due ON urls (due_at) WHERE state IN (2, 3)",
    "CREATE INDEX urls_claimed ON urls (host_id) WHERE state = 1",
)
"""Migration 10 in SQLite: ``urls`` rebuilt around ``seq``, with the id index of
trawl.store.sqlite.ids beside it."""

_SQLITE_READY = (
    """CREATE TABLE ready (
        host_id INTEGER NOT NULL,
        rank DOUBLE PRECISION NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (host_id, rank, seq)
    ) WITHOUT ROWID""",
    "INSERT OR IGNORE INTO ready (host_id, rank, seq) "
    "SELECT host_id, rank, seq FROM urls WHERE state = 0 ORDER BY host_id, rank, seq",
    "DROP INDEX urls_ready",
    """CREATE TRIGGER urls_ready AFTER UPDATE OF state, rank ON urls
        WHEN old.state = 0 OR new.state = 0
        BEGIN
            DELETE FROM ready WHERE old.state = 0
                AND host_id = old.host_id AND rank = old.rank AND seq = old.seq;
            INSERT OR IGNORE INTO ready (host_id, rank, seq)
                SELECT new.host_id, new.rank, new.seq WHERE new.state = 0;
        END""",
)
"""Schema migration 11 in SQLite: ``ready`` filled from the queue, in place of the
partial index ``urls_ready``, and the trigger that keeps it (one trigger, so that a row
that stays QUEUED leaves its old place before it takes the new one)."""

MIGRATIONS: tuple[tuple[str, ...] | PerEngine, ...] = (
    (
        """CREATE TABLE IF NOT EXISTS meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS hosts (
            id {serial_pk},
            name TEXT NOT NULL UNIQUE,
            queued INTEGER NOT NULL DEFAULT 0,
            next_eligible_at DOUBLE PRECISION NOT NULL DEFAULT 0,
            inflight INTEGER NOT NULL DEFAULT 0,
            robots_status INTEGER,
            robots_body {blob},
            robots_fetched_at DOUBLE PRECISION,
            error_count INTEGER NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_generation BIGINT NOT NULL DEFAULT 0,
            lease_expires_at DOUBLE PRECISION
        )""",
        """CREATE TABLE IF NOT EXISTS urls (
            id {hash_pk},
            url TEXT NOT NULL,
            host_id INTEGER NOT NULL,
            state SMALLINT NOT NULL DEFAULT 0,
            depth INTEGER NOT NULL,
            redirect_hops SMALLINT NOT NULL DEFAULT 0,
            next_fetch_at DOUBLE PRECISION NOT NULL DEFAULT 0,
            attempts SMALLINT NOT NULL DEFAULT 0,
            status SMALLINT,
            content_type TEXT,
            length BIGINT,
            fetched_at DOUBLE PRECISION,
            redirect_to TEXT,
            error TEXT,
            truncated SMALLINT NOT NULL DEFAULT 0,
            canonical TEXT
        )""",
        """CREATE INDEX IF NOT EXISTS urls_queue
            ON urls (host_id, depth, id) WHERE state = 0""",
        """CREATE TABLE IF NOT EXISTS counters (
            name TEXT PRIMARY KEY,
            value BIGINT NOT NULL
        )""",
    ),
    (
        "ALTER TABLE hosts ADD COLUMN discovered BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE hosts ADD COLUMN fetched BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE hosts ADD COLUMN claimed INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE hosts ADD COLUMN soft404_fingerprint BIGINT",
        "ALTER TABLE hosts ADD COLUMN soft404_checked_at DOUBLE PRECISION",
        """UPDATE hosts SET discovered = counts.stored, fetched = counts.answered
            FROM (SELECT host_id, COUNT(*) AS stored,
                         SUM(CASE WHEN state IN (2, 3) THEN 1 ELSE 0 END) AS answered
                  FROM urls GROUP BY host_id) AS counts
            WHERE counts.host_id = hosts.id""",
        "CREATE INDEX IF NOT EXISTS urls_parked ON urls (host_id) WHERE state = 5",
    ),
    (
        "ALTER TABLE urls ADD COLUMN content_hash TEXT",
        "ALTER TABLE urls ADD COLUMN simhash BIGINT",
        "ALTER TABLE urls ADD COLUMN duplicate_of BIGINT",
        "ALTER TABLE urls ADD COLUMN near_duplicate_of BIGINT",
        "ALTER TABLE urls ADD COLUMN alias_of BIGINT",
        "ALTER TABLE urls ADD COLUMN origin TEXT",
        """CREATE TABLE IF NOT EXISTS content_owners (
            content_hash TEXT PRIMARY KEY,
            url_id BIGINT NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS simhash_blocks (
            url_id BIGINT NOT NULL,
            block_no SMALLINT NOT NULL,
            block_value INTEGER NOT NULL,
            added DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (url_id, block_no)
        )""",
        """CREATE INDEX IF NOT EXISTS simhash_blocks_by_block
            ON simhash_blocks (block_no, block_value)""",
        """CREATE TABLE IF NOT EXISTS versions (
            url_id BIGINT NOT NULL,
            fetched_at DOUBLE PRECISION NOT NULL,
            status SMALLINT,
            content_hash TEXT,
            simhash BIGINT,
            warc_file TEXT,
            warc_offset BIGINT,
            warc_length BIGINT,
            PRIMARY KEY (url_id, fetched_at)
        )""",
    ),
    (
        "ALTER TABLE hosts ADD COLUMN address TEXT",
        "CREATE INDEX IF NOT EXISTS hosts_by_address ON hosts (address)",
    ),
    (
        "ALTER TABLE hosts ADD COLUMN blocked BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE hosts ADD COLUMN responses BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE hosts ADD COLUMN response_seconds DOUBLE PRECISION NOT NULL DEFAULT 0",
        """UPDATE hosts SET blocked = (SELECT COUNT(*) FROM urls
            WHERE urls.host_id = hosts.id AND urls.state = 4)""",
    ),
    (
        "ALTER TABLE urls ADD COLUMN kind SMALLINT NOT NULL DEFAULT 0",
        "ALTER TABLE urls ADD COLUMN priority DOUBLE PRECISION NOT NULL DEFAULT 0.5",
        "ALTER TABLE urls ADD COLUMN rank DOUBLE PRECISION NOT NULL DEFAULT 0",
        "ALTER TABLE urls ADD COLUMN etag TEXT",
        "ALTER TABLE urls ADD COLUMN last_modified TEXT",
        "ALTER TABLE urls ADD COLUMN revisit_interval DOUBLE PRECISION",
        "ALTER TABLE urls ADD COLUMN due_at DOUBLE PRECISION",
        "ALTER TABLE urls ADD COLUMN lastmod DOUBLE PRECISION",
        "ALTER TABLE urls ADD COLUMN inlink_level SMALLINT NOT NULL DEFAULT 0",
        "ALTER TABLE urls ADD COLUMN change_hash BIGINT",
        "UPDATE urls SET rank = depth WHERE state = 0",
        """UPDATE urls SET revisit_interval = 86400, due_at = fetched_at + 86400
            WHERE state = 2 AND fetched_at IS NOT NULL""",
        "DROP INDEX IF EXISTS urls_queue",
        """CREATE INDEX IF NOT EXISTS urls_ready
            ON urls (host_id, rank, id) WHERE state = 0""",
        "CREATE INDEX IF NOT EXISTS urls_due ON urls (due_at) WHERE state IN (2, 3)",
    ),
    ("CREATE INDEX IF NOT EXISTS urls_claimed ON urls (host_id) WHERE state = 1",),
    (
        """CREATE INDEX IF NOT EXISTS hosts_with_work ON hosts (next_eligible_at, id)
            WHERE queued > 0 OR claimed > 0""",
    ),
    (
        "DROP INDEX IF EXISTS urls_ready",
        "CREATE INDEX IF NOT EXISTS urls_ready ON urls ({ready_key}) WHERE state = 0",
    ),
    PerEngine(sqlite=_SQLITE_ID_INDEX, postgres=()),
    PerEngine(sqlite=_SQLITE_READY, postgres=()),
    (
        "ALTER TABLE urls ADD COLUMN revalidated_at DOUBLE PRECISION",
        "ALTER TABLE urls ADD COLUMN revalidation TEXT",
    ),
    (
        "ALTER TABLE urls ADD COLUMN label TEXT",
        """CREATE TABLE IF NOT EXISTS items (
            url_id BIGINT NOT NULL,
            seq INTEGER NOT NULL,
            fetched_at DOUBLE PRECISION NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (url_id, seq)
        )""",
    ),
    (
        """CREATE TABLE IF NOT EXISTS uploads (
            bucket TEXT NOT NULL,
            object_key TEXT NOT NULL,
            file TEXT NOT NULL,
            size BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            worker TEXT NOT NULL,
            uploaded_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (bucket, object_key)
        )""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)

# Each engine's spelling of the few types engines do not share.
SQLITE_TYPES = {
    "engine": "sqlite",
    "serial_pk": "INTEGER PRIMARY KEY",
    "hash_pk": "BIGINT PRIMARY KEY",
    "blob": "BLOB",
    "ready_key": "host_id, rank",
}
POSTGRES_TYPES = {
    "engine": "postgres",
    "serial_pk": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    "hash_pk": "BIGINT PRIMARY KEY",
    "blob": "BYTEA",
    "ready_key": "host_id, rank, id",
}


def migration_statements(version: int, types: dict[str, str]) -> list[str]:
    """The statements of migration ``version`` (1-based) in one engine's spelling."""
    step = MIGRATIONS[version - 1]
    if isinstance(step, PerEngine):
        return list(getattr(step, types["engine"]))
    return [statement.format(**types) for statement in step]
