"""Durable crawl state behind one protocol (see base.Store)."""

from trawl.store.base import Store
from trawl.store.sqlite import SQLiteStore

__all__ = ["SQLiteStore", "Store"]
