"""Two workers' commits that lock counters in opposite orders deadlock: the server rolls
one back, and the PostgreSQL store tries that commit again."""

from __future__ import annotations

import asyncio

import pytest

from pg import DSN as PG_DSN
from pg import connect as pg_connect
from pg import pg_schema
from trawl.store.postgres.store import PostgresStore
from trawl.store.rows import settle_fences, unsettle
from trawl.store.values import CommitBatch, Fence, Outcome, State

__all__ = ["pg_schema"]

ADD = (
    "INSERT INTO counters (name, value) VALUES (%s, %s) "
    "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value"
)


async def _blocked_by(pid: int, schema: str) -> None:
    """Wait until some backend waits for a lock that backend ``pid`` holds."""
    with pg_connect(schema) as watcher:
        for _ in range(250):
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (pid,),
            ).fetchone()
            if row is not None and row[0]:
                return
            await asyncio.sleep(0.02)
    pytest.fail("the store's commit never waited for the other transaction's lock")


async def test_a_commit_rolled_back_for_a_deadlock_is_tried_again(pg_schema: str) -> None:
    async with PostgresStore(PG_DSN, schema=pg_schema) as store:
        batch = CommitBatch()
        batch.count("test_a")
        batch.count("test_b")
        with pg_connect(pg_schema) as other:
            other.execute("BEGIN")
            other.execute(ADD, ("test_b", 10))  # holds test_b
            task = asyncio.create_task(store.commit(batch))
            # The commit holds test_a and waits for test_b; taking test_a closes the
            # cycle. The commit waited first, so its backend finds the deadlock.
            await _blocked_by(other.info.backend_pid, pg_schema)
            other.execute(ADD, ("test_a", 100))
            other.execute("COMMIT")
        result = await task
        counters = await store.counters()
    assert result.counters == {"test_a": 1, "test_b": 1}
    assert (counters["test_a"], counters["test_b"]) == (101, 11)


def test_a_batch_tried_again_settles_its_fenced_parts_anew() -> None:
    kept = CommitBatch(fence=Fence(1, 1), outcomes=[Outcome(10, 1, State.DONE, 1)])
    stale = CommitBatch(fence=Fence(2, 1), outcomes=[Outcome(20, 2, State.DONE, 1)])
    kept.count("fetched")
    stale.count("fetched")
    batch = CommitBatch(fenced=[kept, stale])
    batch.count("robots_fetches")
    undo = unsettle(batch)
    assert settle_fences(batch, {1: 1, 2: 2}) == 1  # host 2's lease moved on
    assert [o.url_id for o in batch.outcomes] == [10]
    undo()
    assert batch.outcomes == []
    assert batch.fenced == [kept, stale]
    assert batch.counters == {"robots_fetches": 1}
    assert settle_fences(batch, {1: 1, 2: 1}) == 0  # tried again: both leases hold now
    assert sorted(o.url_id for o in batch.outcomes) == [10, 20]
    assert batch.counters == {"robots_fetches": 1, "fetched": 2}
