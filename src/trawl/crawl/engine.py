"""The engine: wires the stages into the crawl loop and owns every task.

    frontier (store queues -> bounded buffer)
      -> host scheduler (ready-time heap, per-host slots)
      -> robots gate (fetched once per host, cached 24 h in the store)
      -> soft-404 probe (once per host, after robots.txt; trawl.extract.soft404)
      -> fetcher (one GET, no automatic redirects, capped)
      -> extract stage (parser + URL filter, inline or in child processes;
                        redirect targets go through the URL filter here)
      -> committer (seen-set, one transaction per batch) -> store

One ``asyncio.TaskGroup`` owns the committer, the refill loop and every fetch. The
dispatcher (``_dispatch_loop``) is the only place that decides what to fetch next; the
crawl is finished when :meth:`Crawler.finished` says so: nothing buffered, in flight,
being extracted, waiting to commit, being claimed, or queued in the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import re
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trawl.config import CrawlConfig, RecrawlPass
from trawl.content.stage import ContentStage, FetchedContent
from trawl.crawl.commit import Committer
from trawl.crawl.wakeup import Wakeup
from trawl.errors import UsageError
from trawl.extract.links import LinkFilter
from trawl.extract.parser import is_html
from trawl.extract.pool import ExtractFailed, ExtractPool
from trawl.extract.scope import Scope
from trawl.extract.soft404 import Soft404Detector
from trawl.extract.urls import Rejection, hostname, normalize, url_hash
from trawl.fetch.fetcher import RETRYABLE_ERRORS, Fetcher, FetchError, FetchResult, Validators
from trawl.fetch.resolver import BlockedAddress
from trawl.fetch.retry import parse_retry_after, retry_delay
from trawl.freshness.recrawl import NOT_MODIFIED, body_hash, failed_due, revisit
from trawl.freshness.sitemap_parser import MAX_BYTES as SITEMAP_MAX_BYTES
from trawl.freshness.sitemaps import (
    DEFAULT_SITEMAP,
    host_sitemaps,
    queue_sitemaps,
    read_sitemap,
    redirected,
)
from trawl.frontier.queue import Frontier
from trawl.frontier.seen import SeenSet
from trawl.ops.summary import Summary
from trawl.policy import POLICY_KEY, policy_json
from trawl.politeness.robots import RobotsGate
from trawl.politeness.robots_parser import DISALLOW_ALL, agent_token
from trawl.politeness.rules import BLOCKED_ERROR, RULES_KEY, OperatorRules
from trawl.politeness.scheduler import Clock, HostScheduler, HostSlot
from trawl.store.protocols import Store
from trawl.store.values import (
    CommitBatch,
    CommitResult,
    Fence,
    HostUpdate,
    Kind,
    Outcome,
    QueuedURL,
    Release,
    Revalidation,
    State,
)

if TYPE_CHECKING:
    from trawl.ops.metrics import CrawlMetrics, Levels

REFILL_PERIOD = 0.5
REQUEUE_BATCH = 10_000
"""Due pages queued again per store transaction."""
COMMIT_LINGER = 0.010
"""Seconds the committer waits for more pages before a transaction: one transaction per
page costs more store time than a whole page's other bookkeeping. 10 ms rather than 2
halves the transactions of the 20 x 500 benchmark (1,897 -> 794) and takes 3-6 % off its
CPU per page; the wait ends once half of ``--concurrency`` pages are waiting."""
BREAKER_ERRORS = frozenset(
    {
        FetchError.TIMEOUT, FetchError.CONNECT, FetchError.CONNECTION_REFUSED, FetchError.DNS,
        FetchError.TLS, FetchError.PROTOCOL,
    }
)  # fmt: skip
"""Fetch errors that count against a host's circuit breaker (as 5xx answers do)."""
UNREACHABLE_ERRORS = frozenset(
    {
        FetchError.DNS, FetchError.CONNECT, FetchError.CONNECTION_REFUSED, FetchError.TIMEOUT,
        FetchError.TLS,
    }
)  # fmt: skip
"""robots.txt fetch errors that mean the host itself cannot be reached (no such name, no
connection, no answer in time, a failed TLS handshake): after the last attempt its URLs
fail with that error class, counted as failed, instead of being held back as if
robots.txt disallowed them (a 5xx or a broken answer still does, as RFC 9309 says)."""

EXTRACT_FAILED = "extract_failed"
"""The error class of a page whose extract worker died while extracting it."""

RUN_STARTED_KEY = "run_started_at"
"""Meta key: when the current (or last) run started, as Unix time."""

log = logging.getLogger("trawl.crawl.engine")


def seeds_of(config: CrawlConfig) -> tuple[str, ...]:
    """The normalised seeds of a crawl; a seed that cannot be crawled is a usage error."""
    seeds: list[str] = []
    for seed in config.seeds:
        url = normalize(seed, None, config.url_rules)
        if isinstance(url, Rejection):
            raise UsageError(f"not a crawlable http(s) URL: {seed}")
        seeds.append(url)
    return tuple(seeds)


@dataclass(frozen=True, slots=True)
class Progress:
    """Live figures for the progress display and the periodic stats line: the counts
    as the store has them (what ``trawl status`` shows), what this process has in
    flight, and this run's rate and time."""

    fetched: int
    queued: int
    """URLs waiting to be fetched: queued in the store or handed out to a worker
    (buffered in its memory or in flight), each once."""
    discovered: int
    errors: int
    inflight: int
    hosts_active: int
    pages_per_second: float
    elapsed: float


FIGURE_READS = 5
"""Tries at reading the store's counters and its work left with no commit between."""


async def store_figures(store: Store) -> tuple[dict[str, int], bool]:
    """The store's counters with ``queued`` set to the URLs waiting to be fetched (queued
    or handed out, :meth:`Store.work_left`), and whether the two agree: the counters are
    read before and after the work left, until no commit came between (any commit that
    changes the work left changes a counter too), at most `FIGURE_READS` times."""
    after: Mapping[str, int] = {}
    waiting = 0
    for _ in range(FIGURE_READS):
        before = await store.counters()
        waiting = await store.work_left()
        after = await store.counters()
        if before == after:
            return {**after, "queued": waiting}, True
    return {**after, "queued": waiting}, False


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
    ) -> None:
        self._config = config
        self._store = store
        self._fetcher = fetcher
        self._extract = extract
        self._extracting = 0
        self._clock = clock
        self._rng = rng or random.Random(config.rng_seed)
        self._seeds = list(seeds_of(config))
        self._scope = Scope(
            self._seeds, config.scope.mode, config.scope.include, config.scope.exclude
        )
        self._links = LinkFilter(self._scope, config.url_rules, config.limits.max_depth)
        self._sitemap_links = LinkFilter(self._scope, config.url_rules, config.limits.max_depth)
        self._agent = agent_token(config.user_agent)
        self._robots = RobotsGate(store, fetcher, self._agent, config.url_rules)
        self._soft404 = Soft404Detector(store, fetcher, enabled=config.soft_404, rng=self._rng)
        self._scheduler = HostScheduler(config.politeness, clock)
        self._frontier = Frontier(
            store,
            self._scheduler,
            config.limits.memory_queue,
            config.leases,
            on_release=self._release,
            clock=clock,
        )
        self._worker = config.leases.worker
        self._seen = SeenSet(store, config.limits.expected_urls, config.limits.bloom_error)
        self._metrics = metrics
        self._committer = Committer(
            store,
            self._seen,
            self._on_commit,
            linger=COMMIT_LINGER,
            hurry=max(1, config.concurrency // 2),
            content=content,
            on_store=metrics.stored if metrics else None,
        )
        self._counts: dict[str, int] = {}
        self._rules = OperatorRules()
        self._rules_text: str | None = None
        if metrics is not None:
            metrics.watch(self.levels)
        self._wake = Wakeup()
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
        await self._store.set_meta("state", "running")
        # Read by ``trawl status`` while this run goes on (trawl.crawl.runner.read_summary).
        await self._store.set_meta(RUN_STARTED_KEY, f"{time.time():.3f}")
        if not self._config.join:
            await self._store.set_meta(POLICY_KEY, policy_json(self._config))
        if await self._store.get_meta("created_at") is None:
            await self._store.set_meta("created_at", f"{time.time():.3f}")
        fresh = self._config.freshness
        # A pass over what is due reads the sitemaps again first (conditional GETs), so
        # that a page whose lastmod changed is due by the time the pass queues pages.
        sitemaps_first = False
        if fresh.recrawl_pass is RecrawlPass.DUE and fresh.reads_sitemaps:
            requeued = await self._store.requeue_due(time.time(), REQUEUE_BATCH, sitemaps=True)
            sitemaps_first = requeued > 0
        if fresh.recrawl_pass is not None and not sitemaps_first:
            await self._requeue(every=fresh.recrawl_pass is RecrawlPass.ALL)
        async with asyncio.TaskGroup() as group:
            committer = group.create_task(self._committer.run())
            refill = group.create_task(self._refill_loop())
            renew = group.create_task(self._renew_loop())
            await self._add_seeds()
            await self._dispatch_loop(group)
            if sitemaps_first and self._state == "done":
                await self._requeue(every=False)
                self._refill_wanted.set()
                await self._dispatch_loop(group)
            # The loops are asked to end, not cancelled: a cancellation that lands just
            # as a database call returns can be lost (asyncio.wait_for on Python 3.11).
            self._ending = True
            self._refill_wanted.set()
            await refill
            await self._frontier.release_all()
            await self._committer.submit(self._resolver_counts())
            await self._committer.wait_drained()
            self._renew_wanted.set()
            await renew
            await self._committer.close()
            await committer
        await self._store.recover(self._worker)
        elapsed = self._clock() - self._started
        await self._store.set_meta("state", self._state)
        total = float(await self._store.get_meta("elapsed") or 0.0) + elapsed
        await self._store.set_meta("elapsed", f"{total:.3f}")
        counters = await self._store.counters()
        mine = self._counts.get("fetched", 0) - self._fetched_at_start
        return Summary.from_counters(
            counters,
            state=self._state,
            elapsed=elapsed,
            fetched_before=counters.get("fetched", 0) - mine,
        )

    def _resolver_counts(self) -> CommitBatch:
        """This run's DNS cache and address-policy figures, as counters to store."""
        batch = CommitBatch()
        for name, value in self._fetcher.resolver_stats.as_counters().items():
            batch.count(name, value)
        return batch

    # -- dispatching ---------------------------------------------------------------------

    async def _add_seeds(self) -> None:
        batch = CommitBatch()
        for seed in self._seeds:
            if self._config.freshness.sitemaps_only:
                queue_sitemaps([DEFAULT_SITEMAP], seed, 0, self._links, batch)
                continue
            candidate = self._links.candidate(seed, None, 0, batch)
            if candidate is not None:
                batch.new_urls.append(candidate)
        await self._committer.submit(batch)
        await self._committer.wait_drained()

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
        return self._scheduler.inflight + self._extracting + self._committer.pending

    async def finished(self) -> bool:
        """Nothing buffered, in flight, waiting to commit, being claimed, or queued or
        handed out (to any worker) in the store. A continuous crawl never finishes."""
        busy = self._scheduler.buffered or self._active()
        if busy or self._frontier.refilling or self._config.freshness.continuous:
            return False
        return await self._store.work_left() == 0

    async def _dispatch_loop(self, group: asyncio.TaskGroup) -> None:
        concurrency = self._config.concurrency
        while True:
            if self._stop.is_set():
                self._state = "interrupted"
                break
            if not self._budget_left():
                break
            wait = REFILL_PERIOD
            # A fetch holds its slot until its result is committed, so a kill -9 can
            # lose (and a resume refetch) at most ``concurrency`` pages.
            if self._active() < concurrency:
                turn = self._scheduler.pop_ready()
                if isinstance(turn, HostSlot):
                    self._dispatch(turn, group)
                    continue
                if turn is None and await self.finished():
                    self._state = "done"
                    break
                if turn is not None:
                    wait = min(max(turn - self._clock(), 0.0), REFILL_PERIOD)
            self._wake.clear()
            await self._wake.wait(wait)
        # A page whose response is in but whose links are still being extracted is not
        # in flight any more; it must still reach the committer before the run ends.
        while self._scheduler.inflight or self._extracting:
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
        if not self._frontier.may_dispatch(slot, self._config.timeouts.total):
            # The lease is lost or runs out before a fetch could end: wait for the
            # renewal (or the loss) instead of risking two workers on one host.
            if slot.generation is not None:
                self._scheduler.pause(slot, self._config.leases.renew_every / 4)
            return None
        assert slot.generation is not None
        fence = Fence(slot.id, slot.generation)
        if not slot.resolved:
            # Resolve first, so that the per-address limit covers the host's first request.
            slot.resolving = True
            return self._resolve_job(slot, slot.queue[0].url, fence)
        if slot.needs_robots(self._clock()):
            slot.robots_pending = True
            self._scheduler.started(slot)
            head = slot.queue[0]
            return self._robots_job(slot, head.url, head.depth, fence)
        if self._soft404.wants_probe(slot.id) and slot.refused is None:
            # The soft-404 probe takes the host's first turn after robots.txt.
            self._scheduler.started(slot)
            return self._soft404_job(slot, slot.queue[0].url, fence)
        url = self._scheduler.take(slot)
        if self._frontier.runs_low(slot):
            self._refill_wanted.set()
        rules = slot.robots or DISALLOW_ALL
        if slot.refused is not None or self._rules.blocks(slot.name, url.url):
            refused = CommitBatch(fence=fence)
            self._refuse(refused, url, slot.refused or BLOCKED_ERROR)
            self._scheduler.requeue(slot)
            return self._committer.submit(refused)
        if not rules.allowed(url.url):
            reason = "robots_unavailable" if rules is DISALLOW_ALL else None
            self._scheduler.requeue(slot)
            return self._blocked(url, reason, fence)
        self._scheduler.started(slot)
        if not url.refetch:
            self._dispatched += 1
        return self._page_job(slot, url, fence)

    @staticmethod
    def _spawn(group: asyncio.TaskGroup, slot: HostSlot, job: Coroutine[Any, Any, None]) -> None:
        """Run a job of the host; the host counts it as unsettled until the job has
        handed its results to the committer (a held host is not given back before)."""
        slot.unsettled += 1

        async def settle() -> None:
            try:
                await job
            finally:
                slot.unsettled -= 1

        # A task cancelled before it starts (the crawl failed or was cancelled) never
        # runs the job: close it, so that it is not reported as never awaited.
        group.create_task(settle()).add_done_callback(lambda _: job.close())

    async def _release(self, release: Release) -> None:
        """Write a host's release after every result of it handed in so far."""
        await self._committer.submit(CommitBatch(releases=[release]))

    async def _renew_loop(self) -> None:
        while True:
            await self._renew_wanted.wait(self._config.leases.renew_every)
            if self._ending:
                return
            await self._frontier.renew()
            self._wake.set()

    async def _refill_loop(self) -> None:
        next_look = 0.0
        while True:
            await self._refill_wanted.wait(REFILL_PERIOD)
            if self._ending:
                return
            if self._clock() >= next_look:
                # Twice a second however busy: the store's figures and the operator's rules.
                next_look = self._clock() + REFILL_PERIOD
                if self._config.freshness.continuous:
                    await self._requeue_due()
                await self._frontier.look()
                await self._read_rules()
            self._refill_wanted.clear()
            if await self._frontier.refill():
                self._wake.set()

    async def _requeue_due(self) -> None:
        """Queue again what is due, if anything is: a read when nothing is, not a write
        transaction twice a second."""
        due = await self._store.next_due()
        if due is not None and due <= time.time():
            await self._requeue(every=False)

    async def _requeue(self, *, every: bool) -> None:
        """Queue again the URLs due for a recrawl (``every``: all fetched or failed ones)."""
        total = 0
        while True:
            moved = await self._store.requeue_due(time.time(), REQUEUE_BATCH, every=every)
            total += moved
            if every or moved < REQUEUE_BATCH:
                break
        if total:
            log.info("queued %d pages again for a recrawl", total, extra={"recrawls": total})

    async def _read_rules(self) -> None:
        """Pick up the operator's rules when they changed (trawl.politeness.rules)."""
        text = await self._store.get_meta(RULES_KEY)
        if text == self._rules_text:
            return
        try:
            self._rules = OperatorRules.from_json(text)
        except (ValueError, KeyError, TypeError, re.error) as exc:
            log.warning("ignoring unreadable operator rules: %s", exc)
        self._rules_text = text

    def levels(self) -> Levels:
        """What the crawl holds right now, for the metrics."""
        # Imported here: prometheus-client costs every process start about 13 ms, and
        # only crawls with --metrics-port read their levels.
        from trawl.ops.metrics import Levels

        stats = self._fetcher.resolver_stats
        return Levels(
            frontier_queue=self._scheduler.buffered,
            persistent_queue=self._frontier.store_queued,
            active_workers=self._scheduler.inflight,
            unique_urls=self._counts.get("discovered", 0),
            hosts_backing_off=sum(
                1 for slot in self._scheduler.slots() if slot.failures or slot.robots_failures
            ),
            dns_cache_hits=stats.cache_hits,
            dns_cache_misses=stats.cache_misses,
        )

    def _on_commit(self, result: CommitResult) -> None:
        if self._metrics is not None:
            self._metrics.committed(result.counters)
        for host_id, url_id, depth in result.handed_out:
            self._lower_depth(host_id, url_id, depth)
        if result.released:
            self._frontier.released(result.released)
        for name, value in result.counters.items():
            self._counts[name] = self._counts.get(name, 0) + value
        if result.hosts_with_new_work:
            self._frontier.exhausted = False
            find, runs_low = self._scheduler.find, self._frontier.runs_low
            if any(runs_low(find(host)) for host in result.hosts_with_new_work):
                self._refill_wanted.set()
        self._wake.set()

    # -- hosts ---------------------------------------------------------------------------

    async def _resolve_job(self, slot: HostSlot, some_url: str, fence: Fence) -> None:
        address: str | None = None
        batch = CommitBatch(fence=fence)
        try:
            address = await self._fetcher.address_of(hostname(some_url))
        except BlockedAddress:
            self._give_up(slot, FetchError.BLOCKED_ADDRESS.value, batch, count="blocked_hosts")
        if address is not None and not await self._store.claim_address(
            self._worker, slot.id, fence.generation, address
        ):
            # Another worker serves this address: the host is given back for it to take,
            # so that one server is asked by one worker at a time (--per-ip).
            slot.resolving = False
            await self._frontier.release(slot)
            self._wake.set()
            return
        self._scheduler.assign_address(slot, address)
        if batch.outcomes:
            await self._committer.submit(batch)
        self._wake.set()

    def _give_up(self, slot: HostSlot, reason: str, batch: CommitBatch, *, count: str) -> None:
        """Fail the host's buffered URLs, and every later one this run, with ``reason``."""
        slot.refused = reason
        batch.count(count)
        for url in self._scheduler.drain(slot):
            self._refuse(batch, url, reason)

    def _breaker_pause(self, slot: HostSlot, failed: bool, batch: CommitBatch) -> float:
        """Count a request's outcome against the host's circuit breaker; the seconds the
        host must pause (0 when it need not)."""
        if not failed:
            slot.failures = slot.trips = 0
            return 0.0
        breaker = self._config.breaker
        slot.failures += 1
        if slot.failures < breaker.threshold:
            return 0.0
        slot.failures = 0
        slot.trips += 1
        if slot.trips > breaker.trips:
            log.warning(
                "host %s keeps failing: giving up its URLs", slot.name, extra={"host": slot.name}
            )
            self._give_up(slot, "host_failing", batch, count="breaker_gave_up")
            return 0.0
        pause = breaker.pause * 2.0 ** (slot.trips - 1)
        log.warning(
            "host %s failing: pausing it for %.0f s", slot.name, pause,
            extra={"host": slot.name, "backoff_s": pause},
        )  # fmt: skip
        batch.count("breaker_trips")
        return pause

    # -- robots --------------------------------------------------------------------------

    async def _robots_job(
        self, slot: HostSlot, some_url: str, reached_at: int, fence: Fence
    ) -> None:
        started = self._clock()
        answer = await self._robots.check(slot.id, some_url)
        batch = CommitBatch(fence=fence)
        if answer.fetched:
            batch.count("robots_fetches")
            if answer.rules is not None and self._config.freshness.reads_sitemaps:
                named = host_sitemaps(some_url, answer.rules.sitemaps)
                queue_sitemaps(named, some_url, reached_at, self._links, batch)
        pause = 0.0
        if answer.refused:
            # The host's address is not one trawl may connect to: fail its URLs with that
            # reason (a DNS change is noticed when robots.txt is due again).
            self._shut_out(slot, FetchError.BLOCKED_ADDRESS, batch)
        elif answer.rules is not None:
            slot.refused = None
            if answer.fetched:
                batch.hosts.append(HostUpdate(slot.id, robots=answer.record))
            slot.robots_failures = 0
            slot.robots = answer.rules
            slot.robots_expires = self._clock() + answer.expires_in
        elif slot.robots_failures + 1 < self._config.retry.attempts:
            slot.robots_failures += 1
            pause = retry_delay(self._config.retry, slot.robots_failures, None, self._rng)
            batch.count("robots_retries")
        elif answer.failure in UNREACHABLE_ERRORS:
            # No answer at all after the last attempt: the host is unreachable, which is
            # not a robots.txt rule; its URLs fail with the connection's error class.
            log.info(
                "host %s unreachable (%s): failing its URLs", slot.name, answer.failure,
                extra={"host": slot.name, "error": str(answer.failure)},
            )  # fmt: skip
            self._shut_out(slot, answer.failure, batch, count="unreachable_hosts")
        else:
            # robots.txt still unavailable (5xx, a broken answer) after the last attempt:
            # RFC 9309 says disallow all, so block what is queued, and what arrives until
            # the next attempt after the back-off cap.
            slot.robots_failures = 0
            slot.robots = DISALLOW_ALL
            slot.robots_expires = self._clock() + self._config.retry.cap
            batch.count("robots_unavailable")
            for url in self._scheduler.drain(slot):
                self._block(batch, url, "robots_unavailable")
        slot.robots_pending = False
        response_time = self._clock() - started if answer.fetched else 0.0
        self._scheduler.finished(slot, response_time, pause)
        await self._committer.submit(batch)
        self._wake.set()

    def _shut_out(
        self, slot: HostSlot, error: FetchError, batch: CommitBatch, *, count: str | None = None
    ) -> None:
        """Fail the host's URLs with ``error`` until its robots.txt is due again (after
        the back-off cap), when the host is tried anew."""
        slot.robots_failures = 0
        slot.robots = DISALLOW_ALL
        slot.robots_expires = self._clock() + self._config.retry.cap
        slot.refused = error.value
        if count is not None:
            batch.count(count)
        for url in self._scheduler.drain(slot):
            self._refuse(batch, url, slot.refused)

    async def _soft404_job(self, slot: HostSlot, some_url: str, fence: Fence) -> None:
        rules = slot.robots or DISALLOW_ALL
        answer = await self._soft404.probe(slot.id, some_url, rules.allowed)
        batch = CommitBatch(fence=fence)
        if answer.fetched:
            batch.count("soft_404_probes")
        if answer.record is not None:
            batch.hosts.append(HostUpdate(slot.id, soft404=answer.record))
        self._scheduler.finished(slot, answer.elapsed)
        await self._committer.submit(batch)
        self._wake.set()

    # -- pages ---------------------------------------------------------------------------

    def _block(self, batch: CommitBatch, url: QueuedURL, reason: str | None = None) -> None:
        batch.outcomes.append(
            Outcome(url.id, url.host_id, State.BLOCKED, url.attempts, error=reason)
        )
        batch.count("robots_blocked")
        if reason is not None:
            batch.count(f"blocked:{reason}")

    def _refuse(self, batch: CommitBatch, url: QueuedURL, reason: str) -> None:
        batch.outcomes.append(
            Outcome(url.id, url.host_id, State.FAILED, url.attempts, error=reason)
        )
        batch.count("failed")
        batch.count(f"error:{reason}")

    async def _blocked(self, url: QueuedURL, reason: str | None, fence: Fence) -> None:
        batch = CommitBatch(fence=fence)
        self._block(batch, url, reason)
        await self._committer.submit(batch)

    async def _page_job(self, slot: HostSlot, url: QueuedURL, fence: Fence) -> None:
        validators = None
        if url.conditional:
            validators = Validators(url.etag, url.last_modified, url.fetched_at)
        if url.kind == Kind.SITEMAP:
            result = await self._fetcher.fetch(
                url.url, max_body=SITEMAP_MAX_BYTES, validators=validators
            )
        else:
            result = await self._fetcher.fetch(url.url, accept=is_html, validators=validators)
        wall = result.fetched_at
        if self._metrics is not None:
            self._metrics.fetched(slot.name, result.elapsed, result.received)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "fetch %s %s", url.url, result.status or result.error,
                extra={
                    "url": url.url, "host": slot.name, "status": result.status,
                    "error": result.error.value if result.error else None,
                    "duration_ms": round(result.elapsed * 1000, 1), "bytes": result.received,
                },
            )  # fmt: skip
        batch = CommitBatch(fence=fence)
        content: list[FetchedContent] = []
        batch.count("requests")
        attempts = url.attempts + 1
        extra_wait = 0.0
        policy = self._config.retry
        retryable = (result.error in RETRYABLE_ERRORS) or (
            result.status is not None and result.status in policy.statuses
        )
        if retryable and attempts < policy.attempts:
            after = None
            if result.retry_after is not None:
                after = parse_retry_after(result.retry_after, wall)
            delay = retry_delay(policy, attempts, after, self._rng)
            if result.status in (429, 503):
                extra_wait = delay
                log.warning(
                    "host %s answered %s: backing off %.1f s", slot.name, result.status, delay,
                    extra={"host": slot.name, "status": result.status, "backoff_s": delay},
                )  # fmt: skip
            batch.outcomes.append(
                Outcome(
                    url.id, url.host_id, State.QUEUED, attempts, status=result.status,
                    error=result.error or f"http_{result.status}", next_fetch_at=wall + delay,
                    storage=result.archived, elapsed=result.elapsed,
                )
            )  # fmt: skip
            batch.count("retries")
            answered = False
        elif result.status is None or retryable:
            error = str(result.error) if result.error else f"http_{result.status}"
            batch.outcomes.append(
                Outcome(
                    url.id, url.host_id, State.FAILED, attempts, status=result.status,
                    fetched_at=wall, error=error, storage=result.archived, elapsed=result.elapsed,
                    due_at=failed_due(self._config.freshness.recrawl, url, wall),
                )
            )  # fmt: skip
            batch.count("failed")
            batch.count(f"error:{error}")
            if result.status is not None:
                batch.count(f"status_{result.status // 100}xx")
            answered = False
        else:
            answered = True
        # The host's turn ends with the response; link extraction (possibly on another
        # core) is not the host's business. The page still counts against the global
        # cap until its result is handed to the committer.
        failed = (result.status or 0) >= 500 or result.error in BREAKER_ERRORS
        extra_wait = max(extra_wait, self._breaker_pause(slot, failed, batch))
        extra_wait = max(extra_wait, self._rules.delay_of(slot.name))
        self._scheduler.finished(slot, result.response_time, extra_wait)
        self._wake.set()
        if answered:
            self._extracting += 1
            counted = dict(batch.counters)
            try:
                outcome = await self._fetched(url, result, wall, attempts, batch, content)
            except ExtractFailed:
                # The extraction is the first thing that adds to the batch but counters.
                batch.counters = counted
                outcome = self._extract_failed(url, result, wall, attempts, batch)
            finally:
                self._extracting -= 1
            batch.outcomes.append(outcome)
        await self._committer.submit(batch, content)

    def _extract_failed(
        self, url: QueuedURL, result: FetchResult, wall: float, attempts: int, batch: CommitBatch
    ) -> Outcome:
        """The page's extract worker died holding it (trawl.extract.pool): the page fails, not
        retried, as a page that kills its worker would kill the next one too."""
        batch.count("failed")
        batch.count(f"error:{EXTRACT_FAILED}")
        batch.count(f"status_{(result.status or 0) // 100}xx")
        return Outcome(
            url.id, url.host_id, State.FAILED, attempts, status=result.status, fetched_at=wall,
            error=EXTRACT_FAILED, storage=result.archived, elapsed=result.elapsed,
            due_at=failed_due(self._config.freshness.recrawl, url, wall),
        )  # fmt: skip

    async def _fetched(
        self,
        url: QueuedURL,
        result: FetchResult,
        wall: float,
        attempts: int,
        batch: CommitBatch,
        content: list[FetchedContent],
    ) -> Outcome:
        status = result.status or 0
        batch.count("recrawled" if url.refetch else "fetched")
        batch.count(f"status_{status // 100}xx")
        redirect_to: str | None = None
        canonical: str | None = None
        error: str | None = None
        content_hash: str | None = None
        change: int | None = None
        simhash: int | None = None
        not_modified = status == NOT_MODIFIED and url.conditional
        if not_modified:
            batch.count("not_modified")
        elif 300 <= status < 400 and result.location:
            redirect_to = self._redirect(url, result.location, batch)
        elif status == 200 and url.kind == Kind.SITEMAP:
            change = body_hash(result.body)
            await asyncio.to_thread(read_sitemap, url, result, self._sitemap_links, batch)
        elif status == 200 and self._soft404.matches(url.host_id, url.url, url.depth, result.body):
            error = "soft_404"
            batch.count(error)
        elif status == 200 and result.body:
            found = await self._extract.extract(
                url.url, url.depth + 1, result.body, result.content_type, result.robots_tags
            )
            canonical = found.canonical
            batch.new_urls.extend(found.links)
            for name, value in found.counters.items():
                batch.count(name, value)
            change = found.change_hash
            content_hash = found.content_hash
            if content_hash is not None:
                simhash = found.text.simhash if found.text else None
                named = None if canonical is None else url_hash(canonical)
                content.append(
                    FetchedContent(
                        url.id, url.origin or url.url, url.url, wall, status, found.text,
                        content_hash, found.out_links, result.archived,
                        canonical=None if named == url.id else named,
                    )
                )  # fmt: skip
        elif status == 200:
            batch.count("not_parsed")
            change = body_hash(result.body)
        if result.truncated:
            batch.count("truncated")
        fresh = revisit(self._config.freshness.recrawl, url, wall, status, change)
        revalidation: Revalidation | None = None
        if url.refetch:
            batch.count("recrawl_changed" if fresh.changed else "recrawl_unchanged")
            revalidation = Revalidation.CHANGED if fresh.changed else Revalidation.UNCHANGED
        if not_modified:
            # The stored answer stands; the 304 records the revalidation, and any
            # validators it sent replace the stored ones (RFC 9111 section 4.3.4).
            return Outcome(
                url.id, url.host_id, State.DONE, attempts, status=status, fetched_at=wall,
                elapsed=result.elapsed, etag=result.etag, last_modified=result.last_modified,
                revisit_interval=fresh.interval, due_at=fresh.due_at,
                revalidation=Revalidation.NOT_MODIFIED,
            )  # fmt: skip
        return Outcome(
            url.id, url.host_id, State.DONE, attempts, status=status,
            content_type=result.content_type, length=result.length, fetched_at=wall,
            redirect_to=redirect_to, error=error, truncated=result.truncated, canonical=canonical,
            content_hash=content_hash, simhash=simhash, storage=result.archived,
            elapsed=result.elapsed, etag=result.etag, last_modified=result.last_modified,
            revisit_interval=fresh.interval, due_at=fresh.due_at, change_hash=change,
            revalidation=revalidation,
        )  # fmt: skip

    def _lower_depth(self, host_id: int, url_id: int, depth: int) -> None:
        """A URL this worker holds in its buffer was found at a smaller depth: it is
        fetched at that depth, so its links are too (one already in flight is not)."""
        slot = self._scheduler.find(host_id)
        if slot is None:
            return
        for n, held in enumerate(slot.queue):
            if held.id == url_id:
                if held.depth > depth:
                    slot.queue[n] = dataclasses.replace(held, depth=depth)
                return

    def _redirect(self, url: QueuedURL, location: str, batch: CommitBatch) -> str:
        batch.count("redirects")
        hops = url.redirect_hops + 1
        target = normalize(location, url.url, self._config.url_rules)
        if isinstance(target, Rejection):
            batch.count("invalid")
            batch.count(f"invalid:{target.value}")
            return location
        if hops > self._config.limits.max_redirects:
            batch.count("redirect_limit")
            return target
        candidate = self._links.candidate(target, None, url.depth, batch, hops)
        if candidate is not None:
            batch.new_urls.append(candidate._replace(origin=url.origin or url.url))
            redirected(url, candidate.id, batch)
        return target
