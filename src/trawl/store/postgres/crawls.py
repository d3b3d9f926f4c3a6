"""The crawls a PostgreSQL database keeps, one schema each."""

from __future__ import annotations

import math
from dataclasses import dataclass

import psycopg
from psycopg import AsyncConnection
from psycopg.sql import Identifier

from trawl.errors import StoreError
from trawl.store.postgres import sql
from trawl.store.postgres.store import CONNECT_TIMEOUT


@dataclass(frozen=True, slots=True)
class CrawlEntry:
    """A crawl kept in a database: its name, state and creation time (wall clock)."""

    name: str
    state: str | None
    created: float


async def crawls(dsn: str, prefix: str) -> list[CrawlEntry]:
    """Every crawl of the ``dsn`` database: the schemas named ``prefix`` + NAME that hold
    a ``meta`` table. A schema whose ``meta`` cannot be read as a crawl's is listed all
    the same (no state, created at 0), so that one damaged crawl hides no other; reading
    it as a crawl then fails with its own error. `StoreError` when the database cannot
    be read at all."""
    found: list[CrawlEntry] = []
    try:
        async with await AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            cursor = await conn.execute(sql.CRAWL_SCHEMAS, (prefix,))
            for (schema,) in await cursor.fetchall():
                meta = sql.CRAWL_META.format(Identifier(schema))
                try:
                    rows = await (await conn.execute(meta)).fetchall()
                except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                    continue  # dropped since the schemas were listed
                except psycopg.Error:
                    rows = []  # not a crawl's meta: listed, unreadable
                values = {str(key): str(value) for key, value in rows}
                found.append(
                    CrawlEntry(schema.removeprefix(prefix), values.get("state"), _time(values))
                )
    except psycopg.Error as exc:
        raise StoreError(f"store: {' '.join(str(exc).split())}") from exc
    return found


def _time(values: dict[str, str]) -> float:
    """The crawl's creation time from its meta values; 0 when it is not a number."""
    try:
        created = float(values.get("created_at") or 0.0)
    except ValueError:
        return 0.0
    return created if math.isfinite(created) else 0.0
