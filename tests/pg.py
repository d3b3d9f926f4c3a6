"""The PostgreSQL server the tests use: 127.0.0.1:5432, user postgres (trust), database
``test``, and a fresh schema per test, dropped after it.

The PostgreSQL engine is never skipped: when the server does not answer, the test fails
and says how to start it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from trawl.store.location import SCHEMA_PREFIX

SERVER = "host=127.0.0.1 port=5432 user=postgres connect_timeout=5"
DATABASE = "test"
DSN = f"{SERVER} dbname={DATABASE}"
"""The test database's connection string."""
URL = f"postgresql://postgres@127.0.0.1:5432/{DATABASE}"
"""The same database as a URL, as ``--store`` takes it."""


def connect(schema: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection to the test database (with ``schema`` as its search_path);
    fails the test with a clear message when the server does not answer."""
    try:
        conn = psycopg.connect(DSN, autocommit=True)
    except psycopg.OperationalError as exc:
        if f'database "{DATABASE}" does not exist' not in str(exc):
            pytest.fail(
                f"no PostgreSQL server answers on 127.0.0.1:5432 ({exc}); start it with "
                "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
                "or .ci/postgres-up",
                pytrace=False,
            )
        _create_database()
        conn = psycopg.connect(DSN, autocommit=True)
    if schema is not None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn


def _create_database() -> None:
    with (
        psycopg.connect(f"{SERVER} dbname=postgres", autocommit=True) as admin,
        contextlib.suppress(psycopg.errors.DuplicateDatabase),
    ):
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """The name of a schema of the test database no other test uses; dropped afterwards
    with everything in it. The schema itself does not exist yet: the store creates it."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    with connect():
        pass
    yield name
    drop_schema(name)


def drop_schema(name: str) -> None:
    """Drop schema ``name`` of the test database with everything in it, if it exists."""
    with connect() as conn:
        # A store a failed test left open must not make the drop wait for ever.
        conn.execute("SET lock_timeout = '10s'")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def crawl_name() -> Iterator[str]:
    """A crawl name (``--crawl``) no other test uses; its schema is dropped afterwards."""
    name = f"t{uuid.uuid4().hex[:12]}"
    with connect():
        pass
    yield name
    drop_schema(SCHEMA_PREFIX + name)
