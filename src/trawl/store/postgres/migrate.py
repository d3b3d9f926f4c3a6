"""The PostgreSQL engine's schema migrations, and the check a read-only store makes.

Migrations run in one transaction under an advisory lock named for the schema, so two
processes opening the same schema at once apply them once.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.sql import Identifier

from trawl.errors import StoreError
from trawl.store.postgres import sql
from trawl.store.schema import POSTGRES_TYPES, SCHEMA_VERSION, migration_statements


async def migrate(conn: AsyncConnection[Any], schema: str | None, name: str) -> None:
    """Create ``schema`` (None: the server's default) if absent and bring its tables to
    the current schema version; refuse one written by a newer trawl. ``name`` names the
    store in messages."""
    async with conn.transaction():
        await conn.execute(sql.MIGRATION_LOCK, (f"trawl.migrate:{schema or ''}",))
        if schema is not None:
            await conn.execute(sql.CREATE_SCHEMA.format(Identifier(schema)))
        await conn.execute(sql.META_TABLE)
        cursor = await conn.execute(sql.GET_META, ("schema_version",))
        row = await cursor.fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{name} was written by a newer trawl (schema {current} > {SCHEMA_VERSION})"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in migration_statements(version, POSTGRES_TYPES):
                await conn.execute(statement)
        await conn.execute(sql.SET_META, ("schema_version", str(SCHEMA_VERSION)))


async def check_exists(conn: AsyncConnection[Any], name: str) -> None:
    """Refuse a store that holds no crawl (``name`` names it in the message)."""
    cursor = await conn.execute(sql.CRAWL_EXISTS)
    row = await cursor.fetchone()
    if row is None or not row[0]:
        raise StoreError(f"no crawl found in {name}")
