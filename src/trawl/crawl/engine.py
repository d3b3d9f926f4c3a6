"""The engine: wires the stages into the crawl loop and owns every task.

    frontier (store queues -> bounded buffer)
      -> host scheduler (ready-time heap, per-host slots)
      -> robots gate (fetched once per host, cached 24 h in the store)
      -> soft-404 probe (once per host, after robots.txt; trawl.extract.soft404)
      -> fetcher (one GET, no automatic redirects, capped)
      -> extract stage (parser + URL filter, inline or in child processes;
                        redirect targets go through the URL filter here)
      -> committer (seen-set, one transaction per batch) -> store

One ``asyncio.TaskGroup`` owns the committer, the refill loop and every job. The
dispatcher (``_dispatch_loop``) is the only place that decides what to run next: a
host's turn is a job of trawl.crawl.host_jobs (resolve, robots.txt, soft-404 probe) or
trawl.crawl.page_job (one URL), or a URL refused or blocked without a request; the
crawl is finished when :meth:`Crawler.finished` says so: nothing buffered, in flight,
being extracted, waiting to commit, being claimed, or queued in the store.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from trawl.config import START_REQUESTS, CrawlConfig
from trawl.content.stage import ContentStage
from trawl.crawl.capacity import PROBE, TICK, Capacity, LoadMeter
from trawl.crawl.commit import Committer, OnItems
from trawl.crawl.host_jobs import HostJobs
from trawl.crawl.page_job import PageJob
from trawl.crawl.refusals import block, refuse
from trawl.crawl.run_record import run_begins, run_ends
from trawl.crawl.seeds import seed_batch, seeds_of
from trawl.crawl.wakeup import Wakeup
from trawl.extract.links import LinkFilter
from trawl.extract.pool import ExtractPool
from trawl.extract.scope import Scope
from trawl.extract.soft404 import Soft404Detector
from trawl.fetch import fdlimit
from trawl.fetch.fetcher import Fetcher
from trawl.freshness.requeue import requeue, requeue_due, start_pass
from trawl.frontier.queue import Frontier
from trawl.frontier.seen import SeenSet
from trawl.ops.progress import Progress, store_figures
from trawl.ops.summary import Summary
from trawl.politeness.robots import RobotsGate
from trawl.politeness.robots_parser import DISALLOW_ALL, agent_token
from trawl.politeness.rules import BLOCKED_ERROR, LiveRules
from trawl.politeness.scheduler import Clock, HostScheduler
from trawl.politeness.slots import HostSlot
from trawl.store.protocols import Store
from trawl.store.values import CommitBatch, CommitResult, Fence, Release

if TYPE_CHECKING:
    from trawl.handlers.item_files import ItemWriter
    from trawl.ops.metrics import CrawlMetrics, Levels
    from trawl.outputs.uploader import Uploader
    from trawl.render.renderer import Renderer

REFILL_PERIOD = 0.5
COMMIT_LINGER = 0.010
"""Seconds the committer waits for more pages before a transaction: one transaction per
page costs more store time than a whole page's other bookkeeping. 10 ms rather than 2
halves the transactions of the 20 x 500 benchmark (1,897 -> 794) and takes 3-6 % off its
CPU per page; the wait ends once half of ``--concurrency`` pages are waiting."""


class Crawler:
    """Runs one crawl over a store until it is finished, out of budget, or stopped."""

    def __init__(
        self,
        config: CrawlConfig,
        store: Store,
        fetcher: Fetcher,
        extract: ExtractPool,
        *,
        content: ContentStage | None = None,
        metrics: CrawlMetrics | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        on_items: OnItems | None = None,
        uploader: Uploader | None = None,
        item_files: ItemWriter | None = None,
        renderer: Renderer | None = None,
    ) -> None:
        self._config = config
        self.uploader = uploader
        """The ``--output`` uploads, whose figures the run's summary reports."""
        self._store = store
        self._fetcher = fetcher
        self._clock = clock
        self._rng = rng or random.Random(config.rng_seed)
        self._seeds = list(seeds_of(config))
        self._scope = Scope(
            self._seeds, config.scope.mode, config.scope.include, config.scope.exclude
        )
        depths = config.sites.depths()
        self._links = LinkFilter(self._scope, config.url_rules, config.limits.max_depth, depths)
        robots = RobotsGate(store, fetcher, agent_token(config.user_agent), config.url_rules)
        self._soft404 = Soft404Detector(store, fetcher, enabled=config.soft_404, rng=self._rng)
        self._scheduler = HostScheduler(config.politeness, clock, config.sites)
        self._capacity = Capacity(
            config.concurrency, config.leases.max_hosts, fdlimit.current().soft
        )
        self._meter = LoadMeter(clock(), time.thread_time())
        self._frontier = Frontier(
            store,
            self._scheduler,
            config.limits.memory_queue,
            config.leases,
            on_release=self._release,
            on_lease=lambda slot, wait: fetcher.prefetch(slot.name, wait),
            clock=clock,
        )
        self._frontier.max_hosts = self._capacity.hosts
        fetcher.hold_hosts(self._capacity.hosts)
        self._worker = config.leases.worker
        self._seen = SeenSet(store, config.limits.expected_urls, config.limits.bloom_error)
        self._metrics = metrics
        self._committer = Committer(
            store,
            self._seen,
            self._on_commit,
            linger=COMMIT_LINGER,
            hurry=max(1, (config.concurrency or START_REQUESTS) // 2),
            content=content,
            on_store=metrics.stored if metrics else None,
            on_items=on_items,
            item_files=item_files,
        )
        self._frontier.committing = self._committer.committing
        self._counts: dict[str, int] = {}
        self._rules = LiveRules()
        if metrics is not None:
            metrics.watch(self.levels)
        self._wake = Wakeup()
        sitemap_links = LinkFilter(self._scope, config.url_rules, config.limits.max_depth, depths)
        self._pages = PageJob(
            config, fetcher, extract, self._soft404, self._scheduler, self._committer,
            links=self._links, sitemap_links=sitemap_links, rules=self._rules, wake=self._wake,
            rng=self._rng, metrics=metrics, renderer=renderer,
        )  # fmt: skip
        self._hosts = HostJobs(
            config, store, fetcher, self._scheduler, self._frontier, self._committer,
            robots=robots, soft404=self._soft404, links=self._links, wake=self._wake,
            clock=clock, rng=self._rng,
        )  # fmt: skip
        self._longest_turn = config.timeouts.total + (
            config.render.timeout if config.renders else 0.0
        )
        """The longest a page's turn may take: its fetch, and its render if it may have one."""
        self._refill_wanted = Wakeup()
        self._renew_wanted = Wakeup()
        self._ending = False
        """The dispatch loop is over: the refill and renewal loops return."""
        self._stop = asyncio.Event()
        self._started = clock()
        self._fetched_at_start = 0
        self._figures: dict[str, int] | None = None
        """The store's figures at the last consistent read (:meth:`progress`)."""
        self._dispatched = 0
        self._state = "running"

    # -- public --------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop gracefully: no new requests; in-flight ones finish and are committed."""
        self._stop.set()
        self._wake.set()

    async def progress(self) -> Progress:
        """Figures for the live display and the stats line, read from the store now
        (when a commit always came between its reads, the last consistent ones)."""
        figures, consistent = await store_figures(self._store)
        if consistent or self._figures is None:
            self._figures = figures
        figures = self._figures
        elapsed = max(self._clock() - self._started, 1e-9)
        fetched = figures.get("fetched", 0)
        return Progress(
            fetched=fetched,
            queued=figures["queued"],
            discovered=figures.get("discovered", 0),
            errors=figures.get("failed", 0),
            inflight=self._scheduler.inflight,
            hosts_active=sum(1 for s in self._scheduler.slots() if s.inflight or s.queue),
            pages_per_second=max(0, fetched - self._fetched_at_start) / elapsed,
            elapsed=elapsed,
        )

    async def run(self) -> Summary:
        """Crawl until finished, out of budget or stopped; return the final summary."""
        await self._store.recover(self._worker)
        await self._seen.load()
        self._counts = dict(await self._store.counters())
        self._fetched_at_start = self._counts.get("fetched", 0)
        self._started = self._clock()
        await run_begins(self._store, self._config)
        sitemaps_first = await start_pass(self._store, self._config.freshness)
        async with asyncio.TaskGroup() as group:
            committer = group.create_task(self._committer.run())
            refill = group.create_task(self._refill_loop())
            renew = group.create_task(self._renew_loop())
            sizing = group.create_task(self._capacity_loop())
            only = self._config.freshness.sitemaps_only
            await self._committer.submit(seed_batch(self._seeds, self._links, sitemaps_only=only))
            await self._committer.wait_drained()
            await self._dispatch_loop(group)
            if sitemaps_first and self._state == "done":
                await requeue(self._store, every=False)
                self._refill_wanted.set()
                await self._dispatch_loop(group)
            # The loops are asked to end, not cancelled: a cancellation that lands just
            # as a database call returns can be lost (asyncio.wait_for on Python 3.11).
            self._ending = True
            self._refill_wanted.set()
            await refill
            await self._frontier.release_all()
            # This run's DNS cache and address-policy figures.
            await self._committer.submit(
                CommitBatch(counters=self._fetcher.resolver_stats.as_counters())
            )
            await self._committer.wait_drained()
            self._renew_wanted.set()
            await renew
            await sizing
            await self._committer.close()
            await committer
        await self._store.recover(self._worker)
        elapsed = self._clock() - self._started
        await run_ends(self._store, self._state, elapsed)
        counters = await self._store.counters()
        mine = self._counts.get("fetched", 0) - self._fetched_at_start
        return Summary.from_counters(
            counters,
            state=self._state,
            elapsed=elapsed,
            fetched_before=counters.get("fetched", 0) - mine,
        )

    # -- dispatching ---------------------------------------------------------------------

    def _budget_left(self) -> bool:
        limits = self._config.limits
        if limits.max_time is not None and self._clock() - self._started >= limits.max_time:
            self._state = "time budget reached"
            return False
        # --max-pages counts pages, not recrawls of them, and bounds crawls, not a recrawl
        # pass (what is due bounds that, and the per-host budgets).
        if limits.max_pages is not None and self._config.freshness.recrawl_pass is None:
            done = self._fetched_at_start + self._dispatched
            if done >= limits.max_pages:
                self._state = "page budget reached"
                return False
        return True

    def _active(self) -> int:
        """Requests in flight plus fetched pages not yet handed to the store."""
        return self._scheduler.inflight + self._pages.extracting + self._committer.pending

    async def finished(self) -> bool:
        """Nothing buffered, in flight, waiting to commit, being claimed, or queued or
        handed out (to any worker) in the store. A continuous crawl never finishes."""
        busy = self._scheduler.buffered or self._active()
        if busy or self._frontier.refilling or self._config.freshness.continuous:
            return False
        return await self._store.work_left() == 0

    async def _dispatch_loop(self, group: asyncio.TaskGroup) -> None:
        while True:
            if self._stop.is_set():
                self._state = "interrupted"
                break
            if not self._budget_left():
                break
            wait = REFILL_PERIOD
            # A fetch holds its slot until its result is committed, so a kill -9 can
            # lose (and a resume refetch) at most ``concurrency`` pages.
            if self._active() < self._capacity.requests:
                turn = self._scheduler.pop_ready()
                if isinstance(turn, HostSlot):
                    self._dispatch(turn, group)
                    continue
                if turn is None and await self.finished():
                    self._state = "done"
                    break
                if turn is not None:
                    wait = min(max(turn - self._clock(), 0.0), REFILL_PERIOD)
            elif self._scheduler.ready_now():
                self._meter.requests_capped = True
            self._wake.clear()
            await self._wake.wait(wait)
        # A page whose response is in but whose links are still being extracted is not
        # in flight any more; it must still reach the committer before the run ends.
        while self._scheduler.inflight or self._pages.extracting:
            self._wake.clear()
            await self._wake.wait()

    def _dispatch(self, slot: HostSlot, group: asyncio.TaskGroup) -> None:
        job = self._turn(slot)
        if job is not None:
            self._spawn(group, slot, job)

    def _turn(self, slot: HostSlot) -> Coroutine[Any, Any, None] | None:
        """The job of the host's turn (None: it has none now). The job is given every URL
        it needs now: the host's lease, and its buffered URLs with it, may be lost before
        the job first runs (:meth:`Frontier.renew`)."""
        if not self._frontier.may_dispatch(slot, self._longest_turn):
            # The lease is lost or runs out before a fetch (and its render) could end:
            # wait for the renewal (or the loss) instead of risking two workers on one host.
            if slot.generation is not None:
                self._scheduler.pause(slot, self._config.leases.renew_every / 4)
            return None
        assert slot.generation is not None
        fence = Fence(slot.id, slot.generation)
        if not slot.resolved:
            # Resolve first, so that the per-address limit covers the host's first request.
            slot.start_resolving()
            return self._hosts.resolve(slot, slot.queue[0].url, fence)
        if slot.needs_robots(self._clock()):
            slot.start_robots()
            self._scheduler.started(slot)
            head = slot.queue[0]
            return self._hosts.robots(slot, head.url, head.depth, fence)
        if self._soft404.wants_probe(slot.id) and slot.refused is None:
            # The soft-404 probe takes the host's first turn after robots.txt.
            self._scheduler.started(slot)
            return self._hosts.probe_soft404(slot, slot.queue[0].url, fence)
        url = self._scheduler.take(slot)
        if self._frontier.runs_low(slot):
            self._refill_wanted.set()
        rules = slot.robots or DISALLOW_ALL
        if slot.refused is not None or self._rules.rules.blocks(slot.name, url.url):
            refused = CommitBatch(fence=fence)
            refuse(refused, url, slot.refused or BLOCKED_ERROR)
            self._scheduler.requeue(slot)
            return self._committer.submit(refused)
        if not rules.allowed(url.url):
            blocked = CommitBatch(fence=fence)
            block(blocked, url, "robots_unavailable" if rules is DISALLOW_ALL else None)
            self._scheduler.requeue(slot)
            return self._committer.submit(blocked)
        self._scheduler.started(slot)
        if not url.refetch:
            self._dispatched += 1
        return self._pages.run(slot, url, fence)

    @staticmethod
    def _spawn(group: asyncio.TaskGroup, slot: HostSlot, job: Coroutine[Any, Any, None]) -> None:
        """Run a job of the host; the host counts it as unsettled until the job has
        handed its results to the committer (a held host is not given back before)."""
        slot.job_started()

        async def settle() -> None:
            try:
                await job
            finally:
                slot.job_settled()

        # A task cancelled before it starts (the crawl failed or was cancelled) never
        # runs the job: close it, so that it is not reported as never awaited.
        group.create_task(settle()).add_done_callback(lambda _: job.close())

    async def _release(self, release: Release) -> None:
        """Write a host's release after every result of it handed in so far; its idle
        connection is closed now, as it has nothing left here."""
        slot = self._scheduler.find(release.host_id)
        if slot is not None:
            self._fetcher.host_rests(slot.name, 0.0, waiting=False)
        await self._committer.submit(CommitBatch(releases=[release]))

    async def _renew_loop(self) -> None:
        while True:
            await self._renew_wanted.wait(self._config.leases.renew_every)
            if self._ending:
                return
            await self._frontier.renew()
            self._wake.set()

    async def _capacity_loop(self) -> None:
        """Probe the event loop every ``PROBE`` seconds and move the request and host
        limits every ``TICK`` (trawl.crawl.capacity)."""
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + TICK
        scheduler = self._scheduler
        waited, turns = scheduler.waited, scheduler.turns
        while not self._ending:
            due = loop.time() + PROBE
            await asyncio.sleep(PROBE)
            now = loop.time()
            self._meter.probe(now - due, self._scheduler.inflight)
            if now < next_tick:
                continue
            next_tick = now + TICK
            active = max(self._active(), 1)
            frontier = self._frontier
            queued_beyond = frontier.store_queued > scheduler.buffered + active
            new_turns = scheduler.turns - turns
            turn_wait = (scheduler.waited - waited) / new_turns if new_turns else 0.0
            waited, turns = scheduler.waited, scheduler.turns
            # Grow the hosts only while most held hosts have work: held hosts idle for
            # want of claims (a slow store) are not what holds the crawl back.
            load = self._meter.load(
                self._clock(),
                time.thread_time(),
                network_share=scheduler.inflight / active,
                hosts_capped=frontier.full and queued_beyond and frontier.mostly_working(),
                turn_wait=turn_wait,
                held=frontier.holding,
            )
            self._capacity.adjust(load)
            frontier.max_hosts = self._capacity.hosts
            self._fetcher.hold_hosts(self._capacity.hosts)

    async def _refill_loop(self) -> None:
        next_look = 0.0
        while True:
            await self._refill_wanted.wait(REFILL_PERIOD)
            if self._ending:
                return
            if self._clock() >= next_look:
                # Twice a second however busy: the store's figures and the operator's rules.
                next_look = self._clock() + REFILL_PERIOD
                if self._config.freshness.continuous and await requeue_due(self._store):
                    self._frontier.recheck()
                await self._frontier.look()
                await self._rules.read(self._store)
            self._refill_wanted.clear()
            if self._stop.is_set():
                # Stopping: what is in flight finishes; no host is leased, no URL claimed.
                continue
            if await self._frontier.refill():
                self._wake.set()

    def levels(self) -> Levels:
        """What the crawl holds right now, for the metrics."""
        # Imported here: prometheus-client costs every process start about 13 ms, and
        # only crawls with --metrics-port read their levels.
        from trawl.ops.metrics import levels_of

        discovered = self._counts.get("discovered", 0)
        stats = self._fetcher.resolver_stats
        return levels_of(self._scheduler, self._frontier, self._capacity, discovered, stats)

    def _on_commit(self, result: CommitResult) -> None:
        if self._metrics is not None:
            self._metrics.committed(result.counters)
        for host_id, url_id, depth in result.handed_out:
            # A URL this worker holds was found at a smaller depth: it is fetched at
            # that depth, so its links are too (one already in flight is not).
            slot = self._scheduler.find(host_id)
            if slot is not None:
                slot.lower_depth(url_id, depth)
        if result.released:
            self._frontier.released(result.released)
        for name, value in result.counters.items():
            self._counts[name] = self._counts.get(name, 0) + value
        if result.hosts_with_new_work:
            self._frontier.exhausted = False
            self._frontier.new_work(result.hosts_with_new_work)
            find, runs_low = self._scheduler.find, self._frontier.runs_low
            if any(runs_low(find(host)) for host in result.hosts_with_new_work):
                self._refill_wanted.set()
        self._wake.set()
