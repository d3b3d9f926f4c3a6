"""The page job: one fetch of a URL, and what its result means, handed to the committer.

The fetch's result is classified (trawl.crawl.outcomes); the host's turn ends with the
response, with the back-off the result calls for, its circuit breaker counted and the
operator's delay for it. An answer is then read: a redirect's target queued, a
sitemap's entries, a page's links and text extracted (inline or in child processes,
which is not the host's business), and its page handler's items kept with its outcome
(a handler that raises fails the page: ``handler_failed``). Every page request is
logged at debug level.

A page to be rendered (trawl.render: ``--render``, ``--render-include``) is rendered
inside its host's turn, which ends only once the render has: the browser's requests are
the host's too. Under ``auto`` the fetched page is extracted first, still in the turn
(the extract worker says whether it looks built by its scripts); a page that does not is
read from that extraction. A rendered page is read as its rendered HTML, and archived
with it (trawl.content.warc_records).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from typing import TYPE_CHECKING

from trawl.config import CrawlConfig
from trawl.content.stage import FetchedContent
from trawl.content.warc_records import WarcExchange
from trawl.crawl.commit import Committer
from trawl.crawl.outcomes import (
    BACK_OFF_STATUSES,
    Answer,
    FetchDecision,
    Verdict,
    answer_kind,
    classify_fetch,
    follow_redirect,
)
from trawl.crawl.refusals import give_up
from trawl.crawl.wakeup import Wakeup
from trawl.extract.handled import Fetched
from trawl.extract.links import LinkFilter
from trawl.extract.parser import is_html
from trawl.extract.pool import Extracted, ExtractFailed, ExtractPool
from trawl.extract.soft404 import Soft404Detector
from trawl.extract.urls import url_hash
from trawl.fetch.fetcher import Fetcher, FetchError, FetchResult, Validators, archived
from trawl.freshness.recrawl import body_hash, failed_due, revisit
from trawl.freshness.sitemap_parser import MAX_BYTES as SITEMAP_MAX_BYTES
from trawl.freshness.sitemaps import read_sitemap, redirected
from trawl.politeness.rules import LiveRules
from trawl.politeness.scheduler import HostScheduler
from trawl.politeness.slots import HostSlot
from trawl.render.renderer import RENDERED_TYPE, Renderer
from trawl.store.values import (
    CommitBatch,
    Fence,
    Kind,
    Listed,
    Outcome,
    PageItems,
    QueuedURL,
    Revalidation,
    State,
)

if TYPE_CHECKING:
    from trawl.ops.metrics import CrawlMetrics

EXTRACT_FAILED = "extract_failed"
"""The error class of a page whose extract worker died while extracting it."""
HANDLER_FAILED = "handler_failed"
"""The error class of a page whose handler raised (trawl.handlers.run)."""
NOT_SENT_WAIT = 1.0
"""Seconds before a URL that got no connection (no file descriptor left) is due again."""

log = logging.getLogger("trawl.crawl.page_job")


class HandlerFailed(Exception):
    """The page's handler raised; the message is its one-line error."""


class PageJob:
    """Fetches the URLs of hosts' turns, one job per URL."""

    def __init__(
        self,
        config: CrawlConfig,
        fetcher: Fetcher,
        extract: ExtractPool,
        soft404: Soft404Detector,
        scheduler: HostScheduler,
        committer: Committer,
        *,
        links: LinkFilter,
        sitemap_links: LinkFilter,
        rules: LiveRules,
        wake: Wakeup,
        rng: random.Random,
        metrics: CrawlMetrics | None,
        renderer: Renderer | None = None,
    ) -> None:
        self._config = config
        self._fetcher = fetcher
        self._extract = extract
        self._soft404 = soft404
        self._scheduler = scheduler
        self._committer = committer
        self._links = links
        self._sitemap_links = sitemap_links
        self._rules = rules
        self._wake = wake
        self._rng = rng
        self._metrics = metrics
        self._renderer = renderer
        self.extracting = 0
        """Pages whose response is in and whose links are still being read."""

    async def run(self, slot: HostSlot, url: QueuedURL, fence: Fence) -> None:
        """Fetch ``url`` (its request already counted as started on ``slot``) and hand
        the outcome to the committer."""
        validators = None
        if url.conditional:
            validators = Validators(url.etag, url.last_modified, url.fetched_at)
        exchange: WarcExchange | None = None
        if url.kind == Kind.SITEMAP:
            result, archiving = await self._fetcher.fetch_then_archive(
                url.url, max_body=SITEMAP_MAX_BYTES, validators=validators
            )
        else:
            # Archived once the page is read in the host's turn, with its rendered HTML
            # when it is rendered.
            result, exchange = await self._fetcher.fetch_exchange(
                url.url, accept=is_html, validators=validators
            )
        if result.error is FetchError.FD_LIMIT:
            await self._not_sent(slot, url, fence)
            return
        self._record(slot, url, result)
        batch = CommitBatch(fence=fence)
        content: list[FetchedContent] = []
        batch.count("requests")
        if result.error is FetchError.PROXY:
            batch.count("proxy_errors")
        attempts = url.attempts + 1
        decision = classify_fetch(result, attempts, self._config.retry, self._rng)
        if decision.verdict is Verdict.RETRY:
            if result.status in BACK_OFF_STATUSES:
                log.warning(
                    "host %s answered %s: backing off %.1f s", slot.name, result.status,
                    decision.host_wait,
                    extra={"host": slot.name, "status": result.status,
                           "backoff_s": decision.host_wait},
                )  # fmt: skip
            batch.outcomes.append(self._retried(url, result, attempts, decision))
            batch.count("retries")
        elif decision.verdict is Verdict.FAIL:
            batch.outcomes.append(self._failed(url, result, attempts, decision, batch))
        found: Extracted | None = None
        rendered: bytes | None = None
        if decision.verdict is Verdict.ANSWERED and url.kind != Kind.SITEMAP:
            found, rendered = await self._render(slot, url, result, batch)
            if rendered is not None and exchange is not None:
                exchange = dataclasses.replace(exchange, rendered=rendered)
        if url.kind != Kind.SITEMAP:
            archiving = self._fetcher.archive(exchange)
        # The host's turn ends with the response (and its render, above); link
        # extraction (possibly on another core) is not the host's business. The page
        # still counts against the global cap until its result is handed to the committer.
        self._end_turn(slot, result, decision, batch)
        # The host is free while its exchange is archived: nothing of it depends on the
        # host, and the page's outcomes below name where it was archived.
        result = await archived(result, archiving)
        if rendered is not None:
            result = dataclasses.replace(result, body=rendered, content_type=RENDERED_TYPE)
        if decision.verdict is Verdict.ANSWERED:
            self.extracting += 1
            counted = dict(batch.counters)
            try:
                outcome = await self._answered(url, result, attempts, batch, content, found)
            except ExtractFailed:
                # The extraction is the first thing that adds to the batch but counters.
                batch.counters = counted
                outcome = self._extract_failed(url, result, attempts, batch, EXTRACT_FAILED)
            except HandlerFailed as exc:
                batch.counters = counted
                log.warning(
                    "the handler of %s failed: %s", url.url, exc,
                    extra={"url": url.url, "error": HANDLER_FAILED},
                )  # fmt: skip
                outcome = self._extract_failed(url, result, attempts, batch, HANDLER_FAILED)
            finally:
                self.extracting -= 1
            batch.outcomes.append(outcome)
        await self._committer.submit(batch, content)

    async def _render(
        self, slot: HostSlot, url: QueuedURL, result: FetchResult, batch: CommitBatch
    ) -> tuple[Extracted | None, bytes | None]:
        """In the host's turn: the page's extraction when ``auto`` read it and found no
        need to render it (None when it was not read or must be read again), and its
        rendered HTML when it was rendered."""
        renderer = self._renderer
        if renderer is None or answer_kind(url, result) is not Answer.PAGE or not result.body:
            return None, None
        mode = renderer.mode_for(url.url)
        if mode == "never" or not is_html(result.content_type, result.body[:512]):
            return None, None
        if mode == "auto":
            try:
                found = await self._extract.extract(
                    url.url, url.depth + 1, result.body, result.content_type, result.robots_tags
                )
            except ExtractFailed:
                return None, None  # read again after the turn, where its failure counts
            if not found.script_built:
                return (None if self._extract.handles else found), None
        done = await renderer.render(url.url, result, slot.robots)
        for name, value in done.counters.items():
            batch.count(name, value)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "render %s %s", url.url, done.error or "ok",
                extra={"url": url.url, "host": slot.name, "error": done.error,
                       "duration_ms": round(done.elapsed * 1000, 1)},
            )  # fmt: skip
        return None, done.html

    async def _not_sent(self, slot: HostSlot, url: QueuedURL, fence: Fence) -> None:
        """No connection could be opened for ``url`` (no file descriptor left): nothing
        was asked of the host, so neither its breaker nor the URL's tries count it; the
        URL is queued again, due shortly."""
        batch = CommitBatch(fence=fence)
        batch.count(FetchError.FD_LIMIT.value)
        batch.outcomes.append(
            Outcome(
                url.id, url.host_id, State.QUEUED, url.attempts, error=FetchError.FD_LIMIT.value,
                next_fetch_at=time.time() + NOT_SENT_WAIT,
            )
        )  # fmt: skip
        self._scheduler.finished(slot, 0.0)
        self._wake.set()
        await self._committer.submit(batch)

    def _record(self, slot: HostSlot, url: QueuedURL, result: FetchResult) -> None:
        """The request in the metrics, and in the log at debug level."""
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

    def _end_turn(
        self, slot: HostSlot, result: FetchResult, decision: FetchDecision, batch: CommitBatch
    ) -> None:
        """End the host's turn: its rest is the longest of its politeness delay, the
        back-off, the circuit breaker's pause and the operator's delay for it."""
        breaker = slot.count_request(decision.breaker_failure, self._config.breaker)
        if breaker.gave_up:
            log.warning(
                "host %s keeps failing: giving up its URLs", slot.name, extra={"host": slot.name}
            )
            give_up(self._scheduler, slot, "host_failing", batch, count="breaker_gave_up")
        elif breaker.tripped:
            log.warning(
                "host %s failing: pausing it for %.0f s", slot.name, breaker.pause,
                extra={"host": slot.name, "backoff_s": breaker.pause},
            )  # fmt: skip
            batch.count("breaker_trips")
        wait = max(decision.host_wait, breaker.pause, self._rules.rules.delay_of(slot.name))
        self._scheduler.finished(slot, result.response_time, wait)
        # An answer may bring the host more URLs (its links, once committed and claimed):
        # its connection is kept for them if its next turn comes soon.
        answered = decision.verdict is Verdict.ANSWERED and slot.refused is None
        waiting = bool(slot.queue) or answered
        self._fetcher.host_rests(slot.name, self._scheduler.turn_in(slot), waiting)
        self._wake.set()

    @staticmethod
    def _retried(
        url: QueuedURL, result: FetchResult, attempts: int, decision: FetchDecision
    ) -> Outcome:
        return Outcome(
            url.id, url.host_id, State.QUEUED, attempts, status=result.status,
            error=decision.error, next_fetch_at=result.fetched_at + decision.delay,
            storage=result.archived, elapsed=result.elapsed,
        )  # fmt: skip

    def _failed(
        self,
        url: QueuedURL,
        result: FetchResult,
        attempts: int,
        decision: FetchDecision,
        batch: CommitBatch,
    ) -> Outcome:
        wall = result.fetched_at
        batch.count("failed")
        batch.count(f"error:{decision.error}")
        if result.status is not None:
            batch.count(f"status_{result.status // 100}xx")
        return Outcome(
            url.id, url.host_id, State.FAILED, attempts, status=result.status, fetched_at=wall,
            error=decision.error, storage=result.archived, elapsed=result.elapsed,
            due_at=failed_due(self._config.freshness.recrawl, url, wall),
        )  # fmt: skip

    def _extract_failed(
        self, url: QueuedURL, result: FetchResult, attempts: int, batch: CommitBatch, error: str
    ) -> Outcome:
        """The page's extract worker died holding it (trawl.extract.pool), or its handler
        raised (``error`` says which): the page fails, not retried, as a page that kills
        its worker (or its handler) would do it again."""
        wall = result.fetched_at
        batch.count("failed")
        batch.count(f"error:{error}")
        batch.count(f"status_{(result.status or 0) // 100}xx")
        return Outcome(
            url.id, url.host_id, State.FAILED, attempts, status=result.status, fetched_at=wall,
            error=error, storage=result.archived, elapsed=result.elapsed,
            due_at=failed_due(self._config.freshness.recrawl, url, wall),
        )  # fmt: skip

    async def _answered(
        self,
        url: QueuedURL,
        result: FetchResult,
        attempts: int,
        batch: CommitBatch,
        content: list[FetchedContent],
        found: Extracted | None = None,
    ) -> Outcome:
        """Record an answered fetch; a page with main text also goes into ``content``,
        for the content stage before the commit. ``found``: the page's extraction, when
        it was extracted already (trawl.render)."""
        wall = result.fetched_at
        status = result.status or 0
        batch.count("recrawled" if url.refetch else "fetched")
        batch.count(f"status_{status // 100}xx")
        redirect_to: str | None = None
        canonical: str | None = None
        error: str | None = None
        content_hash: str | None = None
        change: int | None = None
        simhash: int | None = None
        kind = answer_kind(url, result)
        if kind is Answer.NOT_MODIFIED:
            batch.count("not_modified")
        elif kind is Answer.REDIRECT:
            assert result.location is not None
            redirect_to = self._redirect(url, result.location, batch)
        elif kind is Answer.SITEMAP:
            change = body_hash(result.body)
            await asyncio.to_thread(read_sitemap, url, result, self._sitemap_links, batch)
        elif kind is Answer.PAGE and self._soft404.matches(
            url.host_id, url.url, url.depth, result.body
        ):
            error = "soft_404"
            batch.count(error)
        elif kind is Answer.PAGE and result.body:
            if found is None:
                fetched = _fetched(url, result) if self._extract.handles else None
                found = await self._extract.extract(
                    url.url, url.depth + 1, result.body, result.content_type,
                    result.robots_tags, fetched,
                )  # fmt: skip
            if found.handled is not None:
                if found.handled.error is not None:
                    raise HandlerFailed(found.handled.error)
                batch.items.append(PageItems(url.id, wall, found.handled.items, url.url))
                for uid, priority in found.handled.priorities:
                    batch.listed[uid] = Listed(Kind.PAGE, priority)
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
        elif kind is Answer.PAGE:
            batch.count("not_parsed")
            change = body_hash(result.body)
        if result.truncated:
            batch.count("truncated")
        fresh = revisit(self._config.freshness.recrawl, url, wall, status, change)
        revalidation: Revalidation | None = None
        if url.refetch:
            batch.count("recrawl_changed" if fresh.changed else "recrawl_unchanged")
            revalidation = Revalidation.CHANGED if fresh.changed else Revalidation.UNCHANGED
        if kind is Answer.NOT_MODIFIED:
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

    def _redirect(self, url: QueuedURL, location: str, batch: CommitBatch) -> str:
        """Queue the redirect's target when it is followed; the target to record."""
        limits = self._config.limits
        decision = follow_redirect(
            url, location, self._config.url_rules, limits.max_redirects, self._links
        )
        for name in decision.counters:
            batch.count(name)
        if decision.follow is not None:
            batch.new_urls.append(decision.follow)
            redirected(url, decision.follow.id, batch)
        return decision.target


def _fetched(url: QueuedURL, result: FetchResult) -> Fetched:
    """What a page handler sees of the fetch of ``url`` besides the body."""
    headers = {"content-type": result.content_type or ""}
    if result.etag is not None:
        headers["etag"] = result.etag
    if result.last_modified is not None:
        headers["last-modified"] = result.last_modified
    if result.robots_tags:
        headers["x-robots-tag"] = ", ".join(result.robots_tags)
    return Fetched(result.status or 0, headers, result.fetched_at, url.label)
