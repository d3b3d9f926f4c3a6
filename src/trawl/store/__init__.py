"""Durable crawl state: the roles the crawl uses (protocols), the values it trades
(values), the rows both engines derive from them (rows), their shared schema (schema),
where a crawl's store is (location), and the two engines: sqlite, the embedded one, and
postgres, for many workers.

The PostgreSQL engine is ``trawl.store.postgres.store.PostgresStore``; it is imported
only by crawls that use it (psycopg adds about 65 ms to a process's start)."""
