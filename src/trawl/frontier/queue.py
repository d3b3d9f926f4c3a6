"""The frontier: per-host queues live in the store; RAM holds a bounded buffer.

Hosts are the unit of ownership. The frontier leases hosts from the store (at most
``max_hosts`` at a time, a limit trawl.crawl.capacity moves; soonest eligible first) and
only ever claims URLs of hosts it holds, so whatever the number of workers sharing a
store, one host is served by one worker at a time; one crawl process is simply a single
worker. A lease lasts ``ttl`` seconds and is renewed by :meth:`Frontier.renew` while the
host is held. A host with nothing to do is given back when the worker holds its maximum
of hosts, or more (the limit shrank: it is given back rather than given more URLs), and
every held host when the worker stops (:class:`Release`, written through the committer
after the host's last results); the next owner inherits its politeness time. A host is
not leased again while its release is on its way. No host of a crowded address
(trawl.politeness.scheduler ``CROWD``) is leased, and a host leased onto one is given
back at once. Each host leased is announced to ``on_lease`` with the seconds until it
may first be asked: the engine has its name looked up ahead of that
(trawl.fetch.resolver).

:meth:`Frontier.refill` tops up the held hosts' slots in batches: each gets a fair share
of the free buffer space, claimed in one transaction, lowest queue rank first
(trawl.frontier.priority: high priority, without starving the rest). The buffer never holds more
than its capacity (``capacity``, or two URLs a host the host limit allows when that is
more) plus one batch, so memory stays flat however large the crawl grows.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

from trawl.config import START_HOSTS, LeasePolicy
from trawl.politeness.scheduler import Clock, HostScheduler
from trawl.politeness.slots import HostSlot
from trawl.store.protocols import LeasedFrontier
from trawl.store.values import QueuedURL, Release

MAX_BATCH = 256
BUFFER_PER_HOST = 2
"""URLs of buffer a held host is given at least (:attr:`Frontier.capacity`)."""
RECHECK = 2.0
"""Seconds a held host whose last claim came back short is not asked again (and hosts
are not leased after a lease that found fewer than asked), unless new URLs of it (of a
host not held) are committed meanwhile: its other URLs are due later (retries) or are being
found by other workers. With thousands of hosts held, asking each one at every refill
took a third of the crawl's time in the store's claim (``bench.world``)."""


OnRelease = Callable[[Release], Awaitable[None]]
OnLease = Callable[[HostSlot, float], None]
"""Hears of each host leased, and in how many seconds it may first be asked."""


def _nothing_committing(host_id: int) -> bool:
    return False


class Frontier:
    """Moves URLs of leased hosts from the store's queues into the scheduler's slots."""

    def __init__(
        self,
        store: LeasedFrontier,
        scheduler: HostScheduler,
        capacity: int,
        leases: LeasePolicy | None = None,
        *,
        on_release: OnRelease | None = None,
        on_lease: OnLease | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._store = store
        self._scheduler = scheduler
        self._memory_queue = capacity
        self._policy = leases or LeasePolicy()
        self.max_hosts = self._policy.max_hosts or START_HOSTS
        """Hosts held at most; the engine moves it (trawl.crawl.capacity)."""
        self._on_release = on_release
        self._on_lease = on_lease
        self._clock = clock
        self._held: dict[int, HostSlot] = {}
        self._empty: dict[int, None] = {}
        """The held hosts whose buffer is empty, kept as buffers change (the scheduler's
        ``on_emptied``, and this frontier's claims, leases and releases)."""
        scheduler.on_emptied = self._emptied
        self._drained: dict[int, float] = {}
        self._lease_again = 0.0
        """No host is leased before this clock time: the last lease found no more."""
        """Held hosts whose last claim came back short, and when to ask again."""
        self._releasing: set[int] = set()
        """Hosts given back whose release is not committed yet: not to be leased again
        before it is (the release would then end the new lease's claims)."""
        self.store_queued = 0
        """URLs queued or handed out in the store at the last periodic look."""
        self.refilling = False
        self.exhausted = False
        """The last refill found nothing to claim: the engine then asks again only when
        new URLs arrive, or on its periodic refill (retries coming due)."""
        self.lost = 0
        """Leases lost to another worker (this one paused or could not renew in time)."""
        self.committing: Callable[[int], bool] = _nothing_committing
        """Whether results of a host are on their way to the store (the engine's
        committer): such a host is not given back for having nothing left, as the URLs
        they found may be its own."""

    @property
    def held(self) -> list[HostSlot]:
        """The slots of the hosts this worker holds a lease on."""
        return list(self._held.values())

    @property
    def holding(self) -> int:
        """How many hosts this worker holds a lease on."""
        return len(self._held)

    def mostly_working(self) -> bool:
        """Whether at least half the held hosts have work: URLs buffered or a request
        out (not idle for want of claims)."""
        working = sum(1 for slot in self._held.values() if slot.queue or slot.inflight)
        return 2 * working >= len(self._held)

    @property
    def capacity(self) -> int:
        """URLs the buffer holds: ``capacity`` as given, or ``BUFFER_PER_HOST`` a host the
        host limit allows when that is more. Hosts that may not be asked for a while (a
        shared address's turn, a long delay) keep their buffered URLs; were the buffer no
        larger than the hosts held, they could fill it, and then no claim would run for
        the others, and no held host left without work would be given back."""
        return max(self._memory_queue, BUFFER_PER_HOST * self.max_hosts)

    @property
    def full(self) -> bool:
        """Every host slot is taken."""
        return len(self._held) >= self.max_hosts

    def _share(self) -> int:
        """How many URLs a refill buffers per host now: a fair part of the free room."""
        room = self.capacity - self._scheduler.buffered
        return max(1, min(MAX_BATCH, room // max(1, len(self._held))))

    def runs_low(self, slot: HostSlot | None) -> bool:
        """True when a refill would top up this host's buffer (None: a host without
        one yet), as long as the store has URLs for it: the buffer is below half the
        host's share."""
        return self._scheduler.buffered < self.capacity and (
            slot is None or len(slot.queue) * 2 < self._share()
        )

    def may_dispatch(self, slot: HostSlot, longest_fetch: float) -> bool:
        """Whether a request to the host could finish before its lease runs out."""
        return slot.generation is not None and slot.lease_deadline - self._clock() > longest_fetch

    async def refill(self) -> int:
        """Lease more hosts if there is room, claim due URLs for held hosts whose buffer
        runs low, give back held hosts that have nothing left, forget hosts given back
        whose kept state has lapsed (:meth:`HostScheduler.sweep`); return URLs claimed.

        While this runs, claimed URLs are neither queued in the store nor buffered yet:
        ``refilling`` says so, and the engine does not call the crawl finished meanwhile.
        """
        self.refilling = True
        try:
            self._scheduler.sweep()
            await self._shed()
            await self._lease_more()
            return await self._claim()
        finally:
            self.refilling = False

    async def _shed(self) -> None:
        """Give back held hosts with nothing buffered and nothing out while more are held
        than the host limit allows (it shrank: trawl.crawl.capacity)."""
        excess = len(self._held) - self.max_hosts
        if excess <= 0:
            return
        for host_id in list(self._empty):
            slot = self._held.get(host_id)
            if slot is not None and slot.idle():
                await self.release(slot)
                excess -= 1
                if not excess:
                    return

    async def _lease_more(self) -> None:
        room = self.max_hosts - len(self._held)
        started = self._clock()
        if room <= 0 or started < self._lease_again:
            return
        scheduler = self._scheduler
        leases = await self._store.lease_hosts(
            self._policy.worker,
            room,
            self._policy.ttl,
            holding=self._held.keys() | self._releasing,
            crowded=scheduler.crowded,
        )
        # Fewer than asked: no other host is leasable now. Its query grows with the hosts
        # held, so it is asked again for new hosts (new_work) or after RECHECK.
        self._lease_again = started + RECHECK if len(leases) < room else 0.0
        wall = time.time()
        crowding: list[HostSlot] = []
        for lease in leases:
            slot = scheduler.slot(lease.host_id, lease.name)
            crowds = slot.ip is not None and scheduler.crowds(slot.ip.address)
            scheduler.lease(slot, lease.generation, started + self._policy.ttl)
            self._held[lease.host_id] = slot
            if not slot.queue:
                self._empty[lease.host_id] = None
            wait = max(0.0, lease.next_eligible_at - wall)
            scheduler.hold(slot, started + wait)
            if crowds:
                crowding.append(slot)
            elif self._on_lease is not None:
                self._on_lease(slot, wait)
        # Hosts of an address that became crowded by the hosts leased before them.
        for slot in crowding:
            await self.release(slot)

    async def _claim(self) -> int:
        if self.capacity - self._scheduler.buffered <= 0:
            return 0
        share = self._share()
        now = self._clock()
        drained = self._drained
        # A host whose last claim came back short is asked again only after RECHECK,
        # unless its address is crowded: then it is asked at once, so that it is given
        # back as soon as it has nothing left, for the address's hosts waiting to be
        # leased (a wait of RECHECK a host held up the address's cohort).
        on_crowded = self._crowded_host
        if share <= 2:
            # A buffer runs low (below half the share) only when it is empty: the held
            # hosts with an empty one are known, and a scan of every held host at every
            # refill cost more than the claim as thousands were held (bench.world).
            wanted = {
                host_id: share
                for host_id in self._empty
                if drained.get(host_id, 0.0) <= now or on_crowded(host_id)
            }
        else:
            wanted = {
                host_id: share - len(slot.queue)
                for host_id, slot in self._held.items()
                if len(slot.queue) * 2 < share
                and (drained.get(host_id, 0.0) <= now or on_crowded(host_id))
            }
        if not wanted:
            return 0
        generations = {host_id: self._held[host_id].generation for host_id in wanted}
        budgets = None
        if self._scheduler.site_budgets:
            held = self._held
            budgets = {h: b for h in wanted if (b := held[h].page_budget) is not None}
        claimed = await self._store.claim(
            wanted, now=time.time(), worker=self._policy.worker, budgets=budgets
        )
        self.exhausted = not claimed
        by_host: dict[int, list[QueuedURL]] = {}
        for url in claimed:
            by_host.setdefault(url.host_id, []).append(url)
        for host_id, urls in by_host.items():
            slot = self._held.get(host_id)
            # A lease lost while the claim ran: the URLs are the next owner's to take back.
            if slot is not None and slot.generation == generations[host_id]:
                self._scheduler.add(slot, urls)
                self._empty.pop(host_id, None)
        for host_id, want in wanted.items():
            if len(by_host.get(host_id, ())) < want:
                drained[host_id] = now + RECHECK
            else:
                drained.pop(host_id, None)
        # Make room for hosts with work: give back the held ones that have none now, when
        # every host slot is taken or the host's address is crowded.
        full, crowded = self.full, self._scheduler.crowded
        for host_id in wanted.keys() - by_host.keys():
            slot = self._held.get(host_id)
            if slot is None or not slot.idle() or self.committing(host_id):
                continue
            if full or (slot.ip is not None and slot.ip.address in crowded):
                await self.release(slot)
        return len(claimed)

    def _crowded_host(self, host_id: int) -> bool:
        """Whether the held host is on a crowded address (see :meth:`_claim`)."""
        ip = self._held[host_id].ip
        return ip is not None and ip.address in self._scheduler.crowded

    def _emptied(self, slot: HostSlot) -> None:
        """The scheduler emptied ``slot``'s buffer."""
        if slot.id in self._held:
            self._empty[slot.id] = None

    def recheck(self) -> None:
        """URLs of any host may be queued again (recrawls came due): the next refill
        asks every held host whose buffer runs low."""
        self._drained.clear()

    def new_work(self, host_ids: Iterable[int]) -> None:
        """URLs of these hosts were committed: the next refill asks for them again, and
        leases hosts again if one of them is not held."""
        for host_id in host_ids:
            self._drained.pop(host_id, None)
            if host_id not in self._held:
                self._lease_again = 0.0

    async def release(self, slot: HostSlot) -> None:
        """Give a held host back (its buffered URLs return to the store's queue)."""
        if slot.generation is None or self._held.pop(slot.id, None) is None:
            return
        self._empty.pop(slot.id, None)
        self._drained.pop(slot.id, None)
        next_eligible = time.time() + max(0.0, slot.next_ready - self._clock())
        release = Release(slot.id, slot.generation, next_eligible)
        crowded = self._scheduler.crowded
        was_crowded = slot.ip is not None and slot.ip.address in crowded
        self._scheduler.drain(slot)
        self._scheduler.end_lease(slot)
        if was_crowded and slot.ip is not None and slot.ip.address not in crowded:
            # The address's other hosts may be leased again.
            self._lease_again = 0.0
        self._releasing.add(slot.id)
        if self._on_release is not None:
            await self._on_release(release)

    def released(self, host_ids: Iterable[int]) -> None:
        """The store committed these hosts' releases: they may be leased again, and the
        scheduler forgets those it need not keep (:meth:`HostScheduler.forget`)."""
        forget = self._scheduler.forget
        for host_id in host_ids:
            self._releasing.discard(host_id)
            forget(host_id)

    async def release_all(self) -> None:
        """Give back every held host (the worker is stopping)."""
        for slot in list(self._held.values()):
            await self.release(slot)

    async def renew(self) -> None:
        """Extend every held lease; drop the hosts whose lease was lost meanwhile."""
        if not self._held:
            return
        started = self._clock()
        held = {
            host_id: slot.generation
            for host_id, slot in self._held.items()
            if slot.generation is not None
        }
        kept = await self._store.renew_leases(self._policy.worker, held, self._policy.ttl)
        for host_id, generation in held.items():
            slot = self._held.get(host_id)
            if slot is None or slot.generation != generation:
                continue
            if host_id in kept:
                slot.renew_lease(started + self._policy.ttl)
                continue
            del self._held[host_id]
            self._empty.pop(host_id, None)
            self._drained.pop(host_id, None)
            self._scheduler.drain(slot)
            self._scheduler.end_lease(slot)
            self._scheduler.forget(host_id)  # it is another worker's now
            self.lost += 1

    async def look(self) -> None:
        """Read how much work the store has left (for the progress display)."""
        self.store_queued = await self._store.work_left()
