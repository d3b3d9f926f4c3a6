"""The frontier: per-host queues live in the store; RAM holds a bounded buffer.

:meth:`Frontier.refill` tops up the host slots of the scheduler from the store in
batches: it asks for hosts that have queued URLs, gives each a fair share of the free
buffer space, and claims that many of its shallowest URLs (breadth-first per host) in one
transaction. The buffer never holds more than ``capacity`` URLs plus one batch, so memory
stays flat however large the crawl grows.
"""

from __future__ import annotations

import time

from trawl.hosts import HostScheduler, HostSlot
from trawl.store.base import QueuedURL, Store

MAX_BATCH = 256


class Frontier:
    """Moves URLs from the store's queues into the scheduler's host slots."""

    def __init__(self, store: Store, scheduler: HostScheduler, capacity: int) -> None:
        self._store = store
        self._scheduler = scheduler
        self._capacity = capacity
        self.store_queued = 0
        self.refilling = False
        self.exhausted = False
        """The last refill found nothing to claim: the engine then asks again only when
        new URLs arrive, or on its periodic refill (retries coming due)."""
        self._hosts = 1
        """Hosts with queued URLs at the last refill."""

    def _share(self) -> int:
        """How many URLs a refill buffers per host now: a fair part of the free room."""
        room = self._capacity - self._scheduler.buffered
        return max(1, min(MAX_BATCH, room // self._hosts))

    def runs_low(self, slot: HostSlot | None) -> bool:
        """True when a refill would top up this host's buffer (None: a host without
        one yet), as long as the store has URLs for it: the buffer is below half the
        host's share."""
        return self._scheduler.buffered < self._capacity and (
            slot is None or len(slot.queue) * 2 < self._share()
        )

    async def refill(self) -> int:
        """Claim due URLs for hosts whose buffer runs low; return how many were claimed.

        While this runs, claimed URLs are neither queued in the store nor buffered yet:
        ``refilling`` says so, and the engine does not call the crawl finished meanwhile.
        """
        self.refilling = True
        try:
            return await self._refill()
        finally:
            self.refilling = False

    async def _refill(self) -> int:
        room = self._capacity - self._scheduler.buffered
        if room <= 0:
            return 0
        hosts = await self._store.hosts_with_work(limit=max(1, min(room, 10_000)))
        self.store_queued = sum(h.queued for h in hosts)
        if not hosts:
            self.exhausted = True
            return 0
        self._hosts = len(hosts)
        share = self._share()
        wanted: dict[int, int] = {}
        names: dict[int, str] = {}
        for host in hosts:
            slot = self._scheduler.slot(host.id, host.name)
            if len(slot.queue) * 2 < share:
                wanted[host.id] = share - len(slot.queue)
                names[host.id] = host.name
        if not wanted:
            return 0
        claimed = await self._store.claim(wanted, now=time.time())
        self.exhausted = not claimed
        by_host: dict[int, list[QueuedURL]] = {}
        for url in claimed:
            by_host.setdefault(url.host_id, []).append(url)
        for host_id, urls in by_host.items():
            self._scheduler.add(self._scheduler.slot(host_id, names[host_id]), urls)
        self.store_queued -= len(claimed)
        return len(claimed)
