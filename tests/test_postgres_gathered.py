"""The PostgreSQL store under a crawl's load of single-host requests and growing tables.

A worker starting hundreds of hosts a second asks about each one alone (its address,
robots.txt, soft-404 answer): requests made while one of their kind is being served go
to the server together, and each still gets its own answer. And the store's statements
are planned for their own parameters every time, never by a plan the server kept from a
crawl's first seconds: counted against the real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from pg import URL, connect, pg_schema
from test_store import insert, url
from trawl.store.postgres.gather import Gathered
from trawl.store.postgres.store import PostgresStore
from trawl.store.values import CommitBatch, HostUpdate, RobotsRecord

__all__ = ["pg_schema"]

A, B = "worker-a", "worker-b"
HOSTS = 40


@pytest.fixture
async def store(pg_schema: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(URL, schema=pg_schema) as opened:
        yield opened


def count_updates_of_hosts(schema: str) -> None:
    """Have the server count the statements that update ``hosts`` (table ``updates``)."""
    with connect(schema) as conn:
        conn.execute("CREATE TABLE updates (n INTEGER NOT NULL)")
        conn.execute("INSERT INTO updates VALUES (0)")
        conn.execute(
            "CREATE FUNCTION count_update() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN UPDATE updates SET n = n + 1; RETURN NULL; END$$"
        )
        conn.execute(
            "CREATE TRIGGER counted AFTER UPDATE ON hosts "
            "FOR EACH STATEMENT EXECUTE FUNCTION count_update()"
        )


def updates_of_hosts(schema: str) -> int:
    with connect(schema) as conn:
        row = conn.execute("SELECT n FROM updates").fetchone()
    assert row is not None
    return int(row[0])


async def test_addresses_claimed_together_take_one_statement_and_keep_each_answer(
    store: PostgresStore, pg_schema: str
) -> None:
    await insert(store, *(url(f"h{n}.test", 1) for n in range(HOSTS)), url("other.test", 1))
    (other,) = await store.lease_hosts(B, limit=1, ttl=60)
    assert await store.claim_address(B, other.host_id, other.generation, "192.0.2.1")
    leases = await store.lease_hosts(A, limit=HOSTS, ttl=60, holding={other.host_id})
    assert len(leases) == HOSTS
    count_updates_of_hosts(pg_schema)
    # Every fourth host is on B's address; one claim is made under a stale generation.
    addresses = ["192.0.2.1" if n % 4 == 0 else f"198.51.100.{n}" for n in range(HOSTS)]
    stale = leases[1]
    claims = [
        store.claim_address(
            A,
            lease.host_id,
            lease.generation - 1 if lease is stale else lease.generation,
            address,
        )
        for lease, address in zip(leases, addresses, strict=True)
    ]
    answers = await asyncio.gather(*claims)
    assert answers == [n % 4 != 0 for n in range(HOSTS)]
    # One statement, or two when the first claim went alone and the others waited for it.
    assert updates_of_hosts(pg_schema) <= 2
    with connect(pg_schema) as conn:
        stored = dict(conn.execute("SELECT id, address FROM hosts").fetchall())
    assert stored[stale.host_id] is None
    for lease, address in zip(leases, addresses, strict=True):
        if lease is not stale:
            assert stored[lease.host_id] == address


async def test_host_records_read_together_go_to_their_hosts(store: PostgresStore) -> None:
    await insert(store, *(url(f"h{n}.test", 1) for n in range(HOSTS)))
    ids = await store.host_ids([f"h{n}.test" for n in range(HOSTS)])
    kept = {
        ids[f"h{n}.test"]: RobotsRecord(200, f"# {n}".encode(), 1000.0 + n)
        for n in range(0, HOSTS, 3)
    }
    await store.commit(
        CommitBatch(hosts=[HostUpdate(host_id, robots=record) for host_id, record in kept.items()])
    )
    asked = [*ids.values(), 10**9]
    answers = await asyncio.gather(*(store.robots(host_id) for host_id in asked))
    assert answers == [kept.get(host_id) for host_id in asked]
    assert await asyncio.gather(*(store.soft404(host_id) for host_id in asked)) == [None] * len(
        asked
    )


async def test_a_statement_is_planned_for_its_parameters_after_the_tables_grow(
    store: PostgresStore,
) -> None:
    # While the tables are nearly empty the claim runs often enough for the driver to
    # prepare it and the server to consider keeping one plan for it...
    await insert(store, url("first.test", 1))
    (lease,) = await store.lease_hosts(A, limit=1, ttl=60)
    for _ in range(10):
        await store.claim({lease.host_id: 1}, now=1e12, worker=A)
    # ...and the crawl grows: every execution is still planned for what it is given (a
    # statement without parameters has only the one plan).
    await insert(store, *(url(f"h{n}.test", k) for n in range(200) for k in range(5)))
    leases = await store.lease_hosts(A, limit=200, ttl=60, holding={lease.host_id})
    claimed = await store.claim({x.host_id: 5 for x in leases}, now=1e12, worker=A)
    assert len(claimed) == 1000
    async with store._connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*), COALESCE(sum(generic_plans), 0), COALESCE(sum(custom_plans), 0) "
            "FROM pg_prepared_statements WHERE cardinality(parameter_types) > 0"
        )
        row = await cursor.fetchone()
    assert row is not None
    prepared, generic, custom = row
    assert prepared > 0
    assert custom > 0
    assert generic == 0


async def test_gathered_requests_wait_for_the_batch_being_served() -> None:
    batches: list[list[int]] = []
    release = asyncio.Event()

    async def serve(requests: Sequence[int]) -> list[int]:
        batches.append(list(requests))
        await release.wait()
        return [2 * n for n in requests]

    gathered: Gathered[int, int] = Gathered(serve)
    first = asyncio.ensure_future(gathered.ask(1))
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(gathered.ask(n)) for n in range(2, 6)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(first, *rest) == [2, 4, 6, 8, 10]
    assert batches == [[1], [2, 3, 4, 5]]
    await gathered.close()


async def test_a_failed_batch_fails_its_requests_and_the_next_is_served() -> None:
    async def serve(requests: Sequence[int]) -> list[int]:
        if 0 in requests:
            raise ValueError("no zero")
        return list(requests)

    gathered: Gathered[int, int] = Gathered(serve)
    with pytest.raises(ValueError, match="no zero"):
        await gathered.ask(0)
    assert await gathered.ask(7) == 7
    await gathered.close()
