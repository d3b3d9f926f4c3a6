"""Durable crawl state behind one protocol (see base.Store)."""

from trawl.store.base import Store
from trawl.store.postgres import PostgresStore
from trawl.store.sqlite import SQLiteStore

__all__ = ["PostgresStore", "SQLiteStore", "Store"]
