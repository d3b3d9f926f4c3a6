"""The world benchmark on a shared PostgreSQL crawl: the crawl's schema, its policy, its
leases and its URLs, read with psycopg beside the workers.

`SharedCrawl` names a fresh crawl (``--crawl world_<random>``, schema ``trawl_world_...``)
in the database of ``--store``, waits until the first process has stored the crawl's
policy (the other workers read it at start), reads the URLs back for the audit and drops
the schema at the end. `HostsReader` is what the monitor samples every interval, on
either store: hosts leased, hosts with URLs queued, and the sum of every host's lease
generation, which grows by one at every lease taken (trawl.store.postgres.sql), so its
step over an interval is the leases taken in it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg import sql

from bench.procstat import TICKS, read_stat
from bench.world_log import StoredURL
from trawl.policy import POLICY_KEY
from trawl.store.location import SCHEMA_PREFIX

__all__ = ["HostsReader", "Leases", "SharedCrawl", "SqliteHosts"]

_LEASES = (
    "SELECT COUNT(lease_owner), COUNT(*) FILTER (WHERE queued > 0), "
    "COALESCE(SUM(lease_generation), 0), COUNT(DISTINCT lease_owner) FROM hosts"
)
"""Hosts leased, hosts with URLs queued, leases ever taken, workers holding a lease."""


@dataclass(frozen=True, slots=True)
class Leases:
    """The store's hosts at one moment; all -1 when the store could not be read."""

    held: int
    queued: int
    generations: int
    owners: int


UNKNOWN = Leases(-1, -1, -1, -1)


class HostsReader(Protocol):
    """Reads the hosts' leases from a store; cheap enough to call every few seconds."""

    def read(self) -> Leases: ...


class SqliteHosts:
    """The leases of a one-process crawl's SQLite store, read-only."""

    def __init__(self, data: Path) -> None:
        self.uri = f"file:{data / 'crawl.db'}?mode=ro"

    def read(self) -> Leases:
        with (
            contextlib.suppress(sqlite3.Error),
            contextlib.closing(sqlite3.connect(self.uri, uri=True, timeout=1)) as db,
        ):
            query = _LEASES.replace("COUNT(*) FILTER (WHERE queued > 0)", "SUM(queued > 0)")
            held, queued, generations, owners = db.execute(query).fetchone()
            return Leases(int(held), int(queued or 0), int(generations), int(owners))
        return UNKNOWN


class SharedCrawl:
    """One fresh crawl in the PostgreSQL database at ``dsn``; `drop` removes it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.crawl = f"world_{uuid.uuid4().hex[:10]}"
        self.schema = SCHEMA_PREFIX + self.crawl
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._backend_ticks = 0

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        return conn

    def check(self) -> None:
        """Fail with psycopg.OperationalError now when the server does not answer."""
        psycopg.connect(self.dsn, connect_timeout=5).close()

    def wait_for_policy(self, alive: Callable[[], bool], timeout: float = 120.0) -> None:
        """Return once the first process stored the policy; ``alive()`` false (it
        exited) or ``timeout`` seconds: RuntimeError."""
        deadline = time.monotonic() + timeout
        while alive() and time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error), self._connect() as conn:
                found = conn.execute("SELECT 1 FROM meta WHERE key = %s", (POLICY_KEY,))
                if found.fetchone() is not None:
                    return
            time.sleep(0.1)
        raise RuntimeError("the first trawl process never stored the crawl's policy")

    def read(self) -> Leases:
        """The hosts' leases now, on one connection kept open (its backend's CPU is
        told apart by `sampler_cpu`)."""
        try:
            if self._conn is None:
                self._conn = self._connect()
                (pid,) = self._conn.execute("SELECT pg_backend_pid()").fetchone() or (0,)
                self._backend = f"/proc/{pid}/stat"
                stat = read_stat(self._backend)
                self._backend_ticks = 0 if stat is None else stat[1] + stat[2]
            held, queued, generations, owners = self._conn.execute(_LEASES).fetchone() or (
                -1, -1, -1, -1,
            )  # fmt: skip
            return Leases(int(held), int(queued), int(generations), int(owners))
        except psycopg.Error:
            return UNKNOWN

    def sampler_cpu(self) -> float:
        """CPU seconds the server spent on `read` so far; closes its connection."""
        if self._conn is None:
            return 0.0
        stat = read_stat(self._backend)
        self._conn.close()
        self._conn = None
        return 0.0 if stat is None else (stat[1] + stat[2] - self._backend_ticks) / TICKS

    def urls(self) -> dict[str, StoredURL]:
        """Every URL of the crawl with its state, status and error (as
        world_log.read_store)."""
        with self._connect() as conn:
            rows = conn.execute("SELECT url, state, status, error FROM urls")
            return {url: (state, status, error) for url, state, status, error in rows}

    def drop(self) -> None:
        """Drop the crawl's schema with everything in it."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SET lock_timeout = '10s'")
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(self.schema)))  # fmt: skip
