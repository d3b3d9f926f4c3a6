"""The crawls a PostgreSQL database keeps, one schema each."""

from __future__ import annotations

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
    a crawl's ``meta`` table."""
    found: list[CrawlEntry] = []
    try:
        async with await AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            cursor = await conn.execute(sql.CRAWL_SCHEMAS, (prefix,))
            for (schema,) in await cursor.fetchall():
                meta = sql.CRAWL_META.format(Identifier(schema))
                try:
                    values: dict[str, str] = dict(await (await conn.execute(meta)).fetchall())
                except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                    continue  # dropped since the schemas were listed
                found.append(
                    CrawlEntry(
                        schema.removeprefix(prefix),
                        values.get("state"),
                        float(values.get("created_at") or 0.0),
                    )
                )
    except psycopg.Error as exc:
        raise StoreError(f"store: {' '.join(str(exc).split())}") from exc
    return found
