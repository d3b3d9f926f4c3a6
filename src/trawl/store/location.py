"""Where a crawl's state lives: the embedded SQLite file in the data dir (the default), or
a PostgreSQL database given by ``--store DSN``, one schema per crawl (``--crawl NAME``).

The data dir is used either way for the files a crawl writes (WARC, text).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trawl.errors import UsageError
from trawl.frontier.priority import DEFAULT_HORIZON
from trawl.store.process import StoreProcess
from trawl.store.protocols import Store
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import HostBudget

if TYPE_CHECKING:
    from trawl.store.postgres.store import PostgresStore

DEFAULT_CRAWL = "default"
SCHEMA_PREFIX = "trawl_"
"""A crawl named ``NAME`` lives in the PostgreSQL schema ``trawl_NAME``."""
_CRAWL_NAME = re.compile(r"[a-z0-9_]{1,40}")
_DSN_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A crawl's store: SQLite in ``data_dir`` unless ``dsn`` names a PostgreSQL database."""

    data_dir: Path
    dsn: str | None = None
    crawl: str = DEFAULT_CRAWL

    def __post_init__(self) -> None:
        if self.dsn is not None and not self.dsn.startswith(_DSN_SCHEMES):
            raise UsageError("--store wants a postgresql:// connection string")
        if not _CRAWL_NAME.fullmatch(self.crawl):
            raise UsageError(f"--crawl {self.crawl!r}: use 1 to 40 lower-case letters, digits or _")

    @property
    def schema(self) -> str:
        """The PostgreSQL schema of the crawl."""
        return SCHEMA_PREFIX + self.crawl

    def open(
        self,
        *,
        readonly: bool = False,
        checked: bool = False,
        page_budget: int | None = None,
        discovery_budget: int | None = None,
        horizon: float = DEFAULT_HORIZON,
        host_budget: HostBudget | None = None,
        child: bool = False,
    ) -> contextlib.AbstractAsyncContextManager[Store]:
        """The store, to be opened with ``async with``. ``checked`` (SQLite) reads the
        whole database through on opening, to refuse a damaged one there; PostgreSQL
        keeps its own pages sound. ``host_budget`` gives hosts a tighter page budget of
        their own (their site's), which a recovery does not unpark past. ``child`` runs
        a SQLite store in a process of its own (trawl.store.process)."""
        if self.dsn is None:
            options: dict[str, Any] = {
                "readonly": readonly,
                "checked": checked,
                "page_budget": page_budget,
                "discovery_budget": discovery_budget,
                "horizon": horizon,
                "host_budget": host_budget,
            }
            if child:
                return StoreProcess(self.data_dir, **options)
            return SQLiteStore(self.data_dir, **options)
        return self._postgres(
            readonly=readonly,
            page_budget=page_budget,
            discovery_budget=discovery_budget,
            horizon=horizon,
            host_budget=host_budget,
        )

    async def leased(self) -> bool:
        """Whether a worker is at work on this PostgreSQL crawl (holds a live lease)."""
        return await self._postgres().leased()

    def _postgres(
        self,
        *,
        readonly: bool = False,
        page_budget: int | None = None,
        discovery_budget: int | None = None,
        horizon: float = DEFAULT_HORIZON,
        host_budget: HostBudget | None = None,
    ) -> PostgresStore:
        # Imported here: psycopg adds about 65 ms to the start of every process that
        # imports it, crawls on SQLite and their extract workers included.
        from trawl.store.postgres.store import PostgresStore

        assert self.dsn is not None
        return PostgresStore(
            self.dsn,
            schema=self.schema,
            readonly=readonly,
            page_budget=page_budget,
            discovery_budget=discovery_budget,
            horizon=horizon,
            host_budget=host_budget,
        )

    async def remove(self) -> None:
        """Delete the crawl's stored state (``--fresh``)."""
        if self.dsn is not None:
            await self._postgres().drop()
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.data_dir / f"{DB_NAME}{suffix}")


async def newest_unfinished(dsn: str) -> str:
    """The name of the newest crawl in the ``dsn`` database that is not done."""
    from trawl.store.postgres.crawls import crawls

    unfinished = [c for c in await crawls(dsn, SCHEMA_PREFIX) if c.state != "done"]
    if not unfinished:
        raise UsageError("no unfinished crawl to join in that database")
    return max(unfinished, key=lambda c: (c.created, c.name)).name
