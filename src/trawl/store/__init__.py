"""Durable crawl state behind one protocol (see base.Store).

The PostgreSQL engine is ``trawl.store.postgres.store.PostgresStore``; it is imported
only by crawls that use it (psycopg adds about 65 ms to a process's start)."""

from trawl.store.base import Store
from trawl.store.sqlite import SQLiteStore

__all__ = ["SQLiteStore", "Store"]
