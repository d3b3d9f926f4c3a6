"""The frontier on a real store: refills fill host buffers up to a share, and a host
asks for another refill only once its buffer runs low."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from trawl.config import Politeness
from trawl.extract.urls import url_hash
from trawl.frontier.queue import RECHECK, Frontier
from trawl.politeness.scheduler import HostScheduler
from trawl.politeness.slots import HostSlot
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, Lease, NewURL, QueuedURL


def discovered(host: str, count: int, path: str = "") -> CommitBatch:
    urls = [f"http://{host}/{path}{n}" for n in range(count)]
    return CommitBatch(new_urls=[NewURL(url_hash(u), u, host, 1) for u in urls])


async def test_a_host_runs_low_below_half_its_share(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path) as store:
        await store.commit(discovered("a.test", 20))
        scheduler = HostScheduler(Politeness())
        frontier = Frontier(store, scheduler, capacity=8)
        frontier.max_hosts = 4
        assert frontier.runs_low(None)
        assert await frontier.refill() == 8
        (slot,) = scheduler.slots()
        assert not frontier.runs_low(slot)
        # 8 free places for one host: its share is 8 once the buffer is empty.
        for _ in range(5):
            scheduler.take(slot)
        assert not frontier.runs_low(slot)  # 3 buffered, share of the room left 5
        scheduler.take(slot)
        assert frontier.runs_low(slot)  # 2 buffered, share 6
        assert await frontier.refill() == 4
        assert not frontier.runs_low(slot)
        assert scheduler.find(slot.id) is slot
        assert scheduler.find(slot.id + 1) is None


class CountingStore(SQLiteStore):
    """The real store, recording which hosts each claim asked for."""

    asked: list[set[int]]
    leases: int

    async def claim(
        self,
        wanted: Mapping[int, int],
        now: float,
        worker: str | None = None,
        budgets: Mapping[int, int] | None = None,
    ) -> Sequence[QueuedURL]:
        self.asked.append(set(wanted))
        return await super().claim(wanted, now, worker, budgets)

    async def lease_hosts(
        self, worker: str, limit: int, ttl: float, holding: Collection[int] = (), *,
        crowded: Collection[str] = (), now: float | None = None,
    ) -> Sequence[Lease]:  # fmt: skip
        self.leases += 1
        return await super().lease_hosts(worker, limit, ttl, holding, crowded=crowded, now=now)


def on_clock(store: SQLiteStore, now: list[float]) -> tuple[HostScheduler, Frontier]:
    """A scheduler and a frontier of 40 places (20 hosts at most) over ``store``, at the
    clock ``now[0]``."""
    scheduler = HostScheduler(Politeness(), lambda: now[0])
    frontier = Frontier(store, scheduler, capacity=40, clock=lambda: now[0])
    frontier.max_hosts = 20
    return scheduler, frontier


def empty(scheduler: HostScheduler, *slots: HostSlot) -> None:
    for slot in slots:
        while slot.queue:
            scheduler.take(slot)


async def test_a_host_whose_claim_came_back_short_is_asked_again_only_for_new_work(
    tmp_path: Path,
) -> None:
    now = [100.0]
    async with CountingStore(tmp_path) as store:
        store.asked, store.leases = [], 0
        await store.commit(discovered("a.test", 3))
        await store.commit(discovered("b.test", 30))
        scheduler, frontier = on_clock(store, now)
        assert await frontier.refill() == 23  # a's 3, b's share of 20
        a, b = sorted(scheduler.slots(), key=lambda slot: slot.name)
        empty(scheduler, a, b)
        assert await frontier.refill() == 10  # b's last 10; a came back short: not asked
        assert store.asked[-1] == {b.id}
        empty(scheduler, b)
        asked = len(store.asked)
        assert await frontier.refill() == 0
        assert len(store.asked) == asked  # both came back short: no claim at all
        # New URLs of a are committed: a is asked at the next refill.
        await store.commit(discovered("a.test", 6, path="new/"))
        frontier.new_work([a.id])
        assert await frontier.refill() == 6
        assert store.asked[-1] == {a.id}
        # Without new work, a host that came back short is asked again after RECHECK.
        empty(scheduler, a)
        now[0] += RECHECK
        assert await frontier.refill() == 0
        assert store.asked[-1] == {a.id, b.id}


async def test_after_a_lease_that_found_fewer_hosts_than_asked_hosts_are_leased_again_for_new_ones(
    tmp_path: Path,
) -> None:
    now = [100.0]
    async with CountingStore(tmp_path) as store:
        store.asked, store.leases = [], 0
        await store.commit(discovered("a.test", 3))
        scheduler, frontier = on_clock(store, now)
        await frontier.refill()
        assert (store.leases, frontier.holding) == (1, 1)  # 1 host of the 20 asked for
        await frontier.refill()
        assert store.leases == 1  # no other host to lease: not asked again at once
        await store.commit(discovered("b.test", 3))
        (a,) = scheduler.slots()
        frontier.new_work([a.id])  # a held host's new URLs: still no lease
        await frontier.refill()
        assert store.leases == 1
        b_id = (await store.host_ids(["b.test"]))["b.test"]
        frontier.new_work([b_id])  # a host not held has URLs: lease again
        await frontier.refill()
        assert (store.leases, frontier.holding) == (2, 2)
        now[0] += RECHECK
        await frontier.refill()
        assert store.leases == 3


def empty_buffers(frontier: Frontier) -> set[int]:
    """The held hosts whose buffer is empty, as the frontier keeps them; checked against
    every held host's buffer."""
    kept = set(frontier._empty)
    assert kept == {slot.id for slot in frontier.held if not slot.queue}
    return kept


async def test_with_many_hosts_held_the_hosts_with_an_empty_buffer_are_asked(
    tmp_path: Path,
) -> None:
    """Held past a share of two URLs a host, a refill asks exactly the held hosts whose
    buffer is empty (taken to its end, or drained by a refusal) and whose last claim did
    not come back short; a host given back is not asked."""
    now = [100.0]
    async with CountingStore(tmp_path) as store:
        store.asked, store.leases = [], 0
        await store.commit(discovered("h00.test", 2))
        for n in range(1, 30):
            await store.commit(discovered(f"h{n:02}.test", 10))
        scheduler, frontier = on_clock(store, now)
        frontier.max_hosts = 30  # 60 places (two a host): a share of 2, then of 1
        assert await frontier.refill() == 60
        assert empty_buffers(frontier) == set()
        slots = sorted(scheduler.slots(), key=lambda slot: slot.name)
        empty(scheduler, slots[0], slots[1])
        scheduler.drain(slots[2])  # as a refusal does
        await frontier.release(slots[3])
        assert empty_buffers(frontier) == {slots[0].id, slots[1].id, slots[2].id}
        assert await frontier.refill() == 2  # h00 had no more
        assert store.asked[-1] == {slots[0].id, slots[1].id, slots[2].id}
        assert empty_buffers(frontier) == {slots[0].id}
        empty(scheduler, slots[1], slots[4])
        assert await frontier.refill() == 2
        assert store.asked[-1] == {slots[1].id, slots[4].id}  # h00 came back short
        now[0] += RECHECK
        empty(scheduler, slots[5])
        assert await frontier.refill() == 1
        assert store.asked[-1] == {slots[0].id, slots[5].id}
        assert empty_buffers(frontier) == {slots[0].id}


async def test_hosts_that_hold_the_buffer_do_not_stop_the_others_turning_over(
    tmp_path: Path,
) -> None:
    """Held hosts whose URLs wait in the buffer (a shared address's turn, a long delay)
    once filled it, and then no claim ran: the held hosts with nothing left were never
    given back and no other host was leased. The buffer holds two URLs a host the limit
    allows."""
    now = [100.0]
    async with SQLiteStore(tmp_path) as store:
        for host in ("a.test", "b.test", "c.test"):
            await store.commit(discovered(host, 5 if host != "c.test" else 1))
        scheduler = HostScheduler(Politeness(), lambda: now[0])
        frontier = Frontier(store, scheduler, capacity=2, clock=lambda: now[0])
        frontier.max_hosts = 3
        assert frontier.capacity == 6
        assert await frontier.refill() == 5  # a share of 2: a's and b's are not asked for
        by_name = {slot.name: slot for slot in scheduler.slots()}
        empty(scheduler, by_name["c.test"])  # c's only URL was taken
        await store.commit(discovered("d.test", 3))
        now[0] += RECHECK
        await frontier.refill()  # c has nothing left: given back
        assert frontier.holding == 2
        frontier.released([by_name["c.test"].id])
        assert await frontier.refill() > 0  # and another host is leased and claimed
        assert frontier.holding == 3


async def test_held_hosts_past_a_shrunk_limit_are_given_back_as_they_run_out(
    tmp_path: Path,
) -> None:
    """When the host limit shrinks below the hosts held (trawl.crawl.capacity), a refill
    gives back held hosts with nothing buffered and nothing out, down to the limit,
    instead of claiming more for them; a host with URLs buffered or a request out stays."""
    now = [100.0]
    async with SQLiteStore(tmp_path) as store:
        for n in range(6):
            await store.commit(discovered(f"h{n}.test", 4))
        await store.commit(discovered("h0.test", 4, path="more/"))
        scheduler, frontier = on_clock(store, now)
        frontier.max_hosts = 6
        await frontier.refill()
        slots = sorted(scheduler.slots(), key=lambda slot: slot.name)
        assert frontier.holding == 6
        empty(scheduler, slots[0], slots[1], slots[2])
        scheduler.started(slots[2])  # its last URL is being fetched
        frontier.max_hosts = 4
        await frontier.refill()
        assert {slot.name for slot in frontier.held} == {"h2.test", "h3.test", "h4.test", "h5.test"}
        assert not slots[0].queue  # h0 had URLs left: they stay in the store
        frontier.released([slots[0].id, slots[1].id])
        empty(scheduler, slots[3])
        frontier.max_hosts = 5
        await frontier.refill()
        assert frontier.holding == 5  # room again: h0 is leased back for its URLs
        assert "h0.test" in {slot.name for slot in frontier.held}
