"""The embedded engine: one SQLite file per crawl, run on one thread of its own.

store (the engine, SQLiteStore), sql (its statements), batch (a commit's writes),
hosts (host rows shared by its operations), frontier (the queue of ready URLs), ids
(the id index), content (the content tables), checkpoint (WAL checkpoints off the
commit path), files (the database file's checks).
"""
