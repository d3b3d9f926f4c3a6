"""The jobs of a host's first turns, before its pages: resolving its address, reading
its robots.txt, and probing it for soft 404s.

Resolving first puts the host under the per-address limit from its first request, and
claims the address for this worker (another worker's address gives the host back, as
does an address this worker already holds as many hosts of as it can serve).
What a robots.txt answer means is decided in trawl.crawl.outcomes and kept in the host's
slot (trawl.politeness.scheduler); its ``Sitemap:`` lines are queued with ``--sitemaps``.
"""

from __future__ import annotations

import logging
import random

from trawl.config import CrawlConfig
from trawl.crawl.commit import Committer
from trawl.crawl.outcomes import RobotsVerdict, classify_robots
from trawl.crawl.refusals import block_queued, give_up, refuse_queued
from trawl.crawl.wakeup import Wakeup
from trawl.extract.links import LinkFilter
from trawl.extract.soft404 import Soft404Detector
from trawl.extract.urls import hostname
from trawl.fetch.fetcher import Fetcher, FetchError
from trawl.fetch.resolver import BlockedAddress
from trawl.freshness.sitemaps import host_sitemaps, queue_sitemaps
from trawl.frontier.queue import Frontier
from trawl.politeness.robots import RobotsGate
from trawl.politeness.robots_parser import DISALLOW_ALL
from trawl.politeness.scheduler import Clock, HostScheduler
from trawl.politeness.slots import HostSlot
from trawl.store.protocols import Store
from trawl.store.values import CommitBatch, Fence, HostUpdate

PROXY = FetchError.PROXY

log = logging.getLogger("trawl.crawl.host_jobs")


class HostJobs:
    """Runs the resolve, robots.txt and soft-404 jobs of hosts' turns."""

    def __init__(
        self,
        config: CrawlConfig,
        store: Store,
        fetcher: Fetcher,
        scheduler: HostScheduler,
        frontier: Frontier,
        committer: Committer,
        *,
        robots: RobotsGate,
        soft404: Soft404Detector,
        links: LinkFilter,
        wake: Wakeup,
        clock: Clock,
        rng: random.Random,
    ) -> None:
        self._config = config
        self._store = store
        self._fetcher = fetcher
        self._scheduler = scheduler
        self._frontier = frontier
        self._committer = committer
        self._robots = robots
        self._soft404 = soft404
        self._links = links
        self._wake = wake
        self._clock = clock
        self._rng = rng

    async def resolve(self, slot: HostSlot, some_url: str, fence: Fence) -> None:
        """Look up the host's address and claim it for this worker."""
        address: str | None = None
        batch = CommitBatch(fence=fence)
        try:
            address = await self._fetcher.address_of(hostname(some_url))
        except BlockedAddress:
            reason = FetchError.BLOCKED_ADDRESS.value
            give_up(self._scheduler, slot, reason, batch, count="blocked_hosts")
        if address is not None and not await self._store.claim_address(
            self._config.leases.worker, slot.id, fence.generation, address
        ):
            # Another worker serves this address: the host is given back for it to take,
            # so that one server is asked by one worker at a time (--per-ip).
            slot.stop_resolving()
            await self._frontier.release(slot)
            self._wake.set()
            return
        if address is not None and self._joins_crowd(slot, address):
            # As many hosts of this address are held as it can serve: the host waits in
            # the store (the address now recorded keeps it from being leased meanwhile),
            # counted among the address's sites all the same.
            self._scheduler.seen_at(slot, address)
            slot.stop_resolving()
            await self._frontier.release(slot)
            self._wake.set()
            return
        self._scheduler.assign_address(slot, address)
        if batch.outcomes:
            await self._committer.submit(batch)
        self._wake.set()

    def _joins_crowd(self, slot: HostSlot, address: str) -> bool:
        """Whether the host would be one more held on a crowded address."""
        moves = slot.ip is None or slot.ip.address != address
        return moves and self._scheduler.crowds(address)

    async def robots(self, slot: HostSlot, some_url: str, reached_at: int, fence: Fence) -> None:
        """Read the host's robots.txt (from the store's cache or the network), for
        ``some_url`` found ``reached_at`` hops from a seed, and apply what it means."""
        started = self._clock()
        answer = await self._robots.check(slot.id, some_url)
        batch = CommitBatch(fence=fence)
        if answer.fetched:
            batch.count("robots_fetches")
            if answer.rules is not None and self._config.freshness.reads_sitemaps:
                named = host_sitemaps(some_url, answer.rules.sitemaps)
                queue_sitemaps(named, some_url, reached_at, self._links, batch)
        if answer.failure is PROXY:
            batch.count("proxy_errors")
        decision = classify_robots(answer, slot.robots_failures, self._config.retry, self._rng)
        until = self._clock() + decision.seconds
        pause = 0.0
        if decision.verdict is RobotsVerdict.RULES:
            assert answer.rules is not None
            if answer.fetched:
                batch.hosts.append(HostUpdate(slot.id, robots=answer.record))
            slot.robots_loaded(answer.rules, until)
        elif decision.verdict is RobotsVerdict.RETRY:
            slot.robots_retry()
            pause = decision.seconds
            batch.count("robots_retries")
        elif decision.verdict is RobotsVerdict.NOT_ASKED:
            slot.robots_not_asked()
            pause = decision.seconds
            batch.count(FetchError.FD_LIMIT.value)
        elif decision.verdict is RobotsVerdict.UNAVAILABLE:
            # RFC 9309 says disallow all: block what is queued, and what arrives until
            # the next attempt after the back-off cap.
            slot.robots_unavailable(until)
            batch.count("robots_unavailable")
            block_queued(self._scheduler, slot, batch, "robots_unavailable")
        else:
            # Refused (the host's address is not one trawl may connect to; a DNS change
            # is noticed when robots.txt is due again) or unreachable (no answer at all,
            # which is not a robots.txt rule): its URLs fail with that error class.
            assert decision.error is not None
            # A proxy that fails says nothing of the host: not counted as unreachable.
            if decision.verdict is RobotsVerdict.UNREACHABLE and decision.error is not PROXY:
                log.info(
                    "host %s unreachable (%s): failing its URLs", slot.name, decision.error,
                    extra={"host": slot.name, "error": str(decision.error)},
                )  # fmt: skip
                batch.count("unreachable_hosts")
            slot.robots_shut_out(decision.error.value, until)
            refuse_queued(self._scheduler, slot, batch)
        response_time = self._clock() - started if answer.fetched else 0.0
        self._scheduler.finished(slot, response_time, pause)
        self._fetcher.host_rests(slot.name, self._scheduler.turn_in(slot), bool(slot.queue))
        await self._committer.submit(batch)
        self._wake.set()

    async def probe_soft404(self, slot: HostSlot, some_url: str, fence: Fence) -> None:
        """Ask the host for a page that cannot exist, to learn how it answers one."""
        rules = slot.robots or DISALLOW_ALL
        answer = await self._soft404.probe(slot.id, some_url, rules.allowed)
        batch = CommitBatch(fence=fence)
        if answer.fetched:
            batch.count("soft_404_probes")
        if answer.record is not None:
            batch.hosts.append(HostUpdate(slot.id, soft404=answer.record))
        self._scheduler.finished(slot, answer.elapsed)
        self._fetcher.host_rests(slot.name, self._scheduler.turn_in(slot), bool(slot.queue))
        await self._committer.submit(batch)
        self._wake.set()
