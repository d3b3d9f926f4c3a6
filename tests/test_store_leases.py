"""Host leases and fencing, on both engines: a host belongs to one worker at a time, each
lease raises its generation, an expired lease is taken over with its unanswered URLs,
and the store refuses writes made under a lease that has since passed to another.

The leases run on a virtual clock: every lease method is given ``now``, and time passes
when a test moves the clock on, never by sleeping. The clock starts at the wall clock's
time, because ``claim`` judges a worker's leases by the store's own clock: a lease made
at the clock's start is live to it, and one made after the clock moved on lives on."""

from __future__ import annotations

import time

import pytest

from test_store import Engine, OpenStore, insert, open_store, pg_schema, queued, rows, store, url
from trawl.crawl.commit import merge
from trawl.store.postgres.sql import LEASE
from trawl.store.sqlite.sql import LEASABLE, REQUEUE_CLAIMED
from trawl.store.values import (
    STALE_COUNTER,
    CommitBatch,
    Fence,
    HostUpdate,
    Outcome,
    Release,
    RobotsRecord,
    State,
)

__all__ = ["open_store", "pg_schema", "store"]

A, B = "worker-a", "worker-b"


class Clock:
    """The time the tests give the lease methods: the wall clock's at the start, then
    moved on only by :meth:`advance`."""

    def __init__(self) -> None:
        self.now = time.time()

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def test_each_host_is_leased_to_one_worker_at_a_time(store: Engine, clock: Clock) -> None:
    await insert(store, *(url(f"h{n}.test", 1) for n in range(5)))
    first = await store.lease_hosts(A, limit=3, ttl=60, now=clock.now)
    second = await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    assert len(first) == 3
    assert len(second) == 2
    assert {lease.host_id for lease in first}.isdisjoint(lease.host_id for lease in second)
    assert all(lease.generation == 1 for lease in [*first, *second])
    held_by_a = {lease.host_id for lease in first}
    held_by_b = {lease.host_id for lease in second}
    assert await store.lease_hosts(B, limit=10, ttl=60, holding=held_by_b, now=clock.now) == []
    assert await store.lease_hosts(A, limit=10, ttl=60, holding=held_by_a, now=clock.now) == []


async def test_a_host_whose_release_is_on_its_way_can_be_leased_again(
    store: Engine, clock: Clock
) -> None:
    await insert(store, url("a.test", 1))
    (first,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    # A gave the host back locally, then found new work for it before the release
    # reached the store: leasing it again starts a new generation...
    (again,) = await store.lease_hosts(A, limit=10, ttl=60, holding=(), now=clock.now)
    assert again.generation == first.generation + 1
    # ...so the late release changes nothing.
    await store.commit(CommitBatch(releases=[Release(first.host_id, first.generation, 0.0)]))
    assert await store.lease_hosts(B, limit=10, ttl=60, now=clock.now) == []
    assert len(await store.claim({again.host_id: 5}, now=1e12, worker=A)) == 1


async def test_hosts_without_work_are_not_leased(store: Engine, clock: Clock) -> None:
    await insert(store, url("a.test", 1))
    (lease,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    (claimed,) = await store.claim({lease.host_id: 5}, now=1e12, worker=A)
    done = Outcome(claimed.id, lease.host_id, State.DONE, 1, status=200, fetched_at=1.0)
    release = Release(lease.host_id, lease.generation, next_eligible_at=5.0)
    await store.commit(CommitBatch(outcomes=[done], releases=[release]))
    assert await store.work_left() == 0
    assert await store.lease_hosts(B, limit=10, ttl=60, now=clock.now) == []


async def test_only_the_leaseholder_claims_a_hosts_urls(store: Engine, clock: Clock) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2))
    (lease,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    assert await store.claim({lease.host_id: 5}, now=1e12, worker=B) == []
    assert len(await store.claim({lease.host_id: 5}, now=1e12, worker=A)) == 2


async def test_an_expired_lease_is_taken_over_with_its_claimed_urls(
    store: Engine, open_store: OpenStore, clock: Clock
) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2), url("a.test", 3))
    (old,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    claimed = await store.claim({old.host_id: 2}, now=1e12, worker=A)
    assert len(claimed) == 2
    clock.advance(59)
    assert await store.lease_hosts(B, limit=10, ttl=60, now=clock.now) == []

    clock.advance(2)
    (new,) = await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    assert new.host_id == old.host_id
    assert new.generation == old.generation + 1
    # A never answered its two URLs: they are queued again for B.
    assert queued(open_store) == {"a.test": 3}
    assert all(r.state == State.QUEUED for r in (await rows(store)).values())
    assert len(await store.claim({new.host_id: 10}, now=1e12, worker=B)) == 3
    assert await store.claim({old.host_id: 10}, now=1e12, worker=A) == []


async def test_renewal_keeps_a_lease_and_fails_once_it_is_lost(store: Engine, clock: Clock) -> None:
    await insert(store, url("a.test", 1))
    (lease,) = await store.lease_hosts(A, limit=10, ttl=0.4, now=clock.now)
    for _ in range(3):
        clock.advance(0.2)
        assert await store.renew_leases(
            A, {lease.host_id: lease.generation}, ttl=0.4, now=clock.now
        ) == {lease.host_id}
        assert await store.lease_hosts(B, limit=10, ttl=60, now=clock.now) == []
    clock.advance(0.5)
    (taken,) = await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    assert (
        await store.renew_leases(A, {lease.host_id: lease.generation}, ttl=60, now=clock.now)
        == frozenset()
    )
    assert await store.renew_leases(
        B, {taken.host_id: taken.generation}, ttl=60, now=clock.now
    ) == {taken.host_id}


async def test_a_stale_completion_is_refused_and_counted(store: Engine, clock: Clock) -> None:
    await insert(store, url("a.test", 1))
    (old,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    (page,) = await store.claim({old.host_id: 1}, now=1e12, worker=A)
    clock.advance(61)
    (new,) = await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    (again,) = await store.claim({new.host_id: 1}, now=1e12, worker=B)
    assert again.id == page.id

    # A wakes up and reports its fetch, with a link it found and new robots rules.
    stale = CommitBatch(
        outcomes=[Outcome(page.id, old.host_id, State.DONE, 1, status=500, fetched_at=1.0)],
        new_urls=[url("a.test", 2)],
        hosts=[HostUpdate(old.host_id, robots=RobotsRecord(200, b"Disallow: /", 1.0))],
        fence=Fence(old.host_id, old.generation),
    )
    stale.count("fetched")
    result = await store.commit(merged(stale))
    assert result.counters[STALE_COUNTER] == 1
    assert "fetched" not in result.counters
    counters = await store.counters()
    assert counters[STALE_COUNTER] == 1
    assert counters.get("fetched", 0) == 0
    assert await store.robots(old.host_id) is None
    state = await rows(store)
    assert state[page.url].state == State.CLAIMED
    assert state[page.url].status is None
    # The link is real whoever found it: it is kept.
    assert url("a.test", 2).url in state

    fresh = CommitBatch(
        outcomes=[Outcome(page.id, new.host_id, State.DONE, 1, status=200, fetched_at=2.0)],
        fence=Fence(new.host_id, new.generation),
    )
    fresh.count("fetched")
    await store.commit(merged(fresh))
    assert (await rows(store))[page.url].status == 200
    assert (await store.counters())["fetched"] == 1


async def test_a_stale_release_changes_nothing(
    store: Engine, open_store: OpenStore, clock: Clock
) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2))
    (old,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    clock.advance(61)
    (new,) = await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    await store.claim({new.host_id: 1}, now=1e12, worker=B)

    await store.commit(CommitBatch(releases=[Release(old.host_id, old.generation, 9e9)]))
    assert queued(open_store) == {"a.test": 1}
    assert await store.lease_hosts(A, limit=10, ttl=60, now=clock.now) == []
    assert await store.lease_hosts(B, limit=10, ttl=60, holding={new.host_id}, now=clock.now) == []

    await store.commit(CommitBatch(releases=[Release(new.host_id, new.generation, 123.0)]))
    # B's buffered URL is queued again and the next owner inherits B's politeness time.
    assert queued(open_store) == {"a.test": 2}
    (after,) = await store.lease_hosts(A, limit=10, ttl=60, now=clock.now)
    assert after.next_eligible_at == 123.0
    assert after.generation == new.generation + 1


async def test_recover_ends_a_workers_own_leases(
    store: Engine, open_store: OpenStore, clock: Clock
) -> None:
    await insert(store, url("a.test", 1), url("b.test", 1))
    leases = await store.lease_hosts(A, limit=10, ttl=600, now=clock.now)
    for lease in leases:
        await store.claim({lease.host_id: 1}, now=1e12, worker=A)
    assert await store.work_left() == 2
    assert await store.recover(A, now=clock.now) == 2
    assert queued(open_store) == {"a.test": 1, "b.test": 1}
    assert len(await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)) == 2


def merged(part: CommitBatch) -> CommitBatch:
    """``part`` as the committer hands it to the store: merged into a batch."""
    batch = CommitBatch()
    merge(batch, part)
    return batch


async def test_hosts_at_an_address_another_worker_holds_are_left_alone(
    store: Engine, clock: Clock
) -> None:
    await insert(store, url("a.test", 1), url("b.test", 1), url("c.test", 1))
    (a,) = await store.lease_hosts(A, limit=1, ttl=60, now=clock.now)
    assert await store.claim_address(A, a.host_id, a.generation, "192.0.2.1", now=clock.now)
    # B may lease hosts whose address nobody knows yet...
    leased = {
        lease.name: lease for lease in await store.lease_hosts(B, limit=10, ttl=60, now=clock.now)
    }
    b, c = leased["b.test"], leased["c.test"]
    # ...but learns on resolving b.test that A serves its address.
    assert not await store.claim_address(B, b.host_id, b.generation, "192.0.2.1", now=clock.now)
    assert await store.claim_address(B, c.host_id, c.generation, "192.0.2.2", now=clock.now)
    await store.commit(CommitBatch(releases=[Release(b.host_id, b.generation, 0.0)]))
    assert await store.lease_hosts(B, limit=10, ttl=60, holding={c.host_id}, now=clock.now) == []
    (taken,) = await store.lease_hosts(A, limit=10, ttl=60, holding={a.host_id}, now=clock.now)
    assert taken.name == "b.test"


async def test_hosts_last_seen_at_a_crowded_address_are_left_in_the_queue(
    store: Engine, clock: Clock
) -> None:
    await insert(store, *(url(f"{name}.test", 1) for name in "abcd"))
    leases = {lease.name: lease for lease in await store.lease_hosts(A, 10, 60, now=clock.now)}
    for name, address in [("a", "192.0.2.1"), ("b", "192.0.2.1"), ("c", "192.0.2.2")]:
        lease = leases[f"{name}.test"]
        claimed = await store.claim_address(
            A, lease.host_id, lease.generation, address, now=clock.now
        )
        assert claimed
    back = [Release(lease.host_id, lease.generation, 0.0) for lease in leases.values()]
    await store.commit(CommitBatch(releases=back))
    # The worker holds as many hosts of 192.0.2.1 as it can serve: a.test and b.test wait;
    # a host whose address is not known yet (d.test) may be on any.
    crowded = await store.lease_hosts(A, 10, 60, crowded={"192.0.2.1"}, now=clock.now)
    assert {lease.name for lease in crowded} == {"c.test", "d.test"}
    held = {lease.host_id for lease in crowded}
    later = await store.lease_hosts(A, 10, 60, holding=held, now=clock.now)
    assert {lease.name for lease in later} == {"a.test", "b.test"}


async def test_an_address_is_free_once_its_holders_lease_expires(
    store: Engine, clock: Clock
) -> None:
    await insert(store, url("a.test", 1), url("b.test", 1))
    (a,) = await store.lease_hosts(A, limit=1, ttl=60, now=clock.now)
    assert await store.claim_address(A, a.host_id, a.generation, "192.0.2.1", now=clock.now)
    (b,) = await store.lease_hosts(B, limit=10, ttl=600, now=clock.now)
    clock.advance(59)
    # A's lease is live until it expires...
    assert not await store.claim_address(B, b.host_id, b.generation, "192.0.2.1", now=clock.now)
    clock.advance(2)
    # ...and past that, the address is B's to take.
    assert await store.claim_address(B, b.host_id, b.generation, "192.0.2.1", now=clock.now)


def plan(open_store: OpenStore, statement: str) -> str:
    """The engine's plan for ``statement`` (PostgreSQL's without sequential scans where
    anything else can do, as on a table too large to scan)."""
    if open_store.postgres:
        rows = open_store.query(f"SET enable_seqscan = off; EXPLAIN {statement}")
    else:
        rows = open_store.query(f"EXPLAIN QUERY PLAN {statement}")
    return " ".join(str(row[-1]) for row in rows)


async def test_ending_a_lease_finds_its_claimed_urls_by_index(
    store: Engine, open_store: OpenStore, clock: Clock
) -> None:
    await insert(store, *(url("a.test", n) for n in range(50)), url("b.test", 1))
    (lease,) = await store.lease_hosts(A, limit=1, ttl=60, now=clock.now)
    assert len(await store.claim({lease.host_id: 5}, now=1e12, worker=A)) == 5
    await store.commit(CommitBatch(releases=[Release(lease.host_id, lease.generation, 0.0)]))
    assert queued(open_store)["a.test"] == 50
    # Returning claimed URLs reads only the claimed rows, however large the table grows.
    requeue = REQUEUE_CLAIMED.replace("?", str(lease.host_id))
    assert "urls_claimed" in plan(open_store, requeue)


def lease_statement(open_store: OpenStore, holding: list[int]) -> str:
    """The engine's statement that finds hosts to lease, with its parameters written in."""
    if open_store.postgres:
        return LEASE % {
            "worker": "'w'",
            "limit": 1,
            "ttl": 60,
            "holding": f"'{{{str(holding)[1:-1]}}}'",
            "crowded": "'{\"127.0.0.9\"}'",
            "now": "1e12",
        }
    values = ["1e12", "'w'", f"'{holding}'", """'["127.0.0.9"]'""", "'w'", "1e12", "1"]
    parts = LEASABLE.split("?")
    return "".join(part + value for part, value in zip(parts, values, strict=False)) + parts[-1]


async def test_leasing_walks_the_hosts_with_work_by_index(
    store: Engine, open_store: OpenStore, clock: Clock
) -> None:
    await insert(store, *(url(f"h{n}.test", 1) for n in range(20)))
    held = {lease.host_id for lease in await store.lease_hosts(A, limit=5, ttl=60, now=clock.now)}
    more = await store.lease_hosts(A, limit=5, ttl=60, holding=held, now=clock.now)
    assert len(more) == 5
    assert held.isdisjoint(lease.host_id for lease in more)
    # Finding hosts to lease reads the hosts that have work, soonest eligible first, up
    # to the limit: not every host the crawl knows, once per refill.
    assert "hosts_with_work" in plan(open_store, lease_statement(open_store, sorted(held)))
