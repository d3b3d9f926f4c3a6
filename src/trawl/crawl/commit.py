"""The commit stage: outcomes and their discovered links reach the store together.

Workers hand in one small :class:`CommitBatch` per page (its outcome, its links, host
state, counters), with the page's fingerprinted content beside it for the content stage
(trawl.content.stage), which the store never sees. The committer merges whatever has
arrived into one transaction, sends the links through the seen-set, and commits. A page's
outcome and its links are always in the same transaction (the outbox rule), so a kill -9
at any moment either keeps both or neither; in the second case the page is still CLAIMED
and is fetched again on resume.

Batching many pages per transaction is what keeps the store cheap. Batches form on
their own (group commit): whatever arrived while the previous transaction ran goes into
the next one, up to ``max_batch`` pages; ``linger`` adds a short wait before each
transaction so that pages trickling in one by one (a politeness delay spacing them out)
still share one. The wait ends early once ``hurry`` pages are waiting: a page holds its
crawl slot until it is committed, so lingering with half the slots waiting would leave
the dispatcher with none to fetch in.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from trawl.content.stage import ContentStage, FetchedContent
from trawl.frontier.inlinks import InlinkCounter
from trawl.frontier.seen import SeenSet
from trawl.handlers.item_files import ItemWriter
from trawl.store.protocols import Commits
from trawl.store.values import CommitBatch, CommitResult, PageItems

OnCommit = Callable[[CommitResult], None]
OnItems = Callable[[list[PageItems]], None]
"""Hears of the page items a commit wrote (trawl.handlers.crawler's ``on_item``)."""
Part = tuple[CommitBatch, Sequence[FetchedContent]]
"""A page's batch, and its fingerprinted content for the content stage."""


def merge(into: CommitBatch, part: CommitBatch) -> None:
    """Append ``part`` to ``into``; a fenced part's own writes (outcomes, host updates,
    counters, items) stay apart in ``into.fenced`` for the store to check against the
    host's lease."""
    into.new_urls.extend(part.new_urls)
    into.listed.update(part.listed)
    into.lastmods.extend(part.lastmods)
    into.releases.extend(part.releases)
    if part.fence is not None:
        into.fenced.append(
            CommitBatch(
                outcomes=part.outcomes,
                hosts=part.hosts,
                counters=part.counters,
                items=part.items,
                fence=part.fence,
            )
        )
        return
    into.outcomes.extend(part.outcomes)
    into.hosts.extend(part.hosts)
    into.items.extend(part.items)
    for name, value in part.counters.items():
        into.count(name, value)


class Committer:
    """Single writer that batches page results into store transactions."""

    def __init__(
        self,
        store: Commits,
        seen: SeenSet,
        on_commit: OnCommit,
        *,
        max_batch: int = 256,
        linger: float = 0.0,
        hurry: int | None = None,
        content: ContentStage | None = None,
        on_store: Callable[[float], None] | None = None,
        on_items: OnItems | None = None,
        item_files: ItemWriter | None = None,
    ) -> None:
        """``hurry`` (default ``max_batch``) is how many waiting pages end a linger;
        ``on_store`` hears how long each store transaction took (seconds); ``on_items``
        the page items each transaction wrote; ``item_files`` gets each batch's items
        before its transaction (``--output`` in a handler crawl)."""
        self._on_store = on_store
        self._on_items = on_items
        self._item_files = item_files
        self._store = store
        self._content = content
        self._seen = seen
        self._inlinks = InlinkCounter()
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._linger = linger
        self._hurry = min(max_batch, hurry or max_batch)
        self._enough = asyncio.Event()
        self._queue: asyncio.Queue[Part | None] = asyncio.Queue(maxsize=4 * max_batch)
        self.pending = 0
        self._hosts_pending: dict[int, int] = {}
        """Pages handed in and not committed yet, by the host whose lease they were made
        under."""
        self._drained = asyncio.Event()
        self._drained.set()

    def committing(self, host_id: int) -> bool:
        """Whether results of the host are handed in and not committed yet (its newly
        found URLs may not be in the store)."""
        return host_id in self._hosts_pending

    async def submit(self, part: CommitBatch, content: Sequence[FetchedContent] = ()) -> None:
        """Hand in one page's results, and its fingerprinted ``content`` (waits when the
        committer is behind)."""
        self.pending += 1
        if part.fence is not None:
            host_id = part.fence.host_id
            self._hosts_pending[host_id] = self._hosts_pending.get(host_id, 0) + 1
        self._drained.clear()
        await self._queue.put((part, content))
        if self._queue.qsize() >= self._hurry - 1:
            self._enough.set()

    async def wait_drained(self) -> None:
        """Wait until everything submitted so far is committed."""
        await self._drained.wait()

    async def close(self) -> None:
        """Ask :meth:`run` to commit what it has and return."""
        await self._queue.put(None)

    async def run(self) -> None:
        """Commit batches until :meth:`close`."""
        closing = False
        while not closing:
            first = await self._queue.get()
            if first is None:
                return
            if self._linger > 0 and self._queue.qsize() < self._hurry - 1:
                self._enough.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._linger):
                        await self._enough.wait()
            batch = CommitBatch()
            merge(batch, first[0])
            content = list(first[1])
            parts = 1
            while parts < self._max_batch and not self._queue.empty():
                part = self._queue.get_nowait()
                if part is None:
                    closing = True
                    break
                merge(batch, part[0])
                content.extend(part[1])
                parts += 1
            # Read before the commit, which may leave out parts whose lease was lost.
            hosts = [part.fence.host_id for part in batch.fenced if part.fence is not None]
            await self._commit(batch, content)
            self._settle_hosts(hosts)
            self.pending -= parts
            if self.pending == 0:
                self._drained.set()

    def _settle_hosts(self, hosts: Sequence[int]) -> None:
        pending = self._hosts_pending
        for host_id in hosts:
            left = pending[host_id] - 1
            if left:
                pending[host_id] = left
            else:
                del pending[host_id]

    async def _commit(self, batch: CommitBatch, content: Sequence[FetchedContent]) -> None:
        if batch.new_urls:
            batch.inlinks = self._inlinks.observe(batch.new_urls)
            verdict = await self._seen.filter_new(batch.new_urls)
            batch.new_urls = verdict.new
            batch.shallower = verdict.shallower
            batch.count("duplicates", verdict.duplicates)
            batch.count("hash_collisions", verdict.collisions)
        if content and self._content is not None:
            # Outputs are flushed before the commit: a kill in between repeats them on
            # resume (at least once), never loses them.
            await self._content.process(batch, content)
        if self._item_files is not None:
            self._write_items(batch)
        started = time.perf_counter()
        result = await self._store.commit(batch)
        if self._on_store is not None:
            self._on_store(time.perf_counter() - started)
        self._on_commit(result)
        # Committed, the batch's items are those the store wrote (fenced parts settled).
        if self._on_items is not None and batch.items:
            self._on_items(batch.items)

    def _write_items(self, batch: CommitBatch) -> None:
        """Write and flush the batch's items, its fenced parts' too (a part the store
        then refuses is fetched again by the host's new holder, whose items have the
        same keys)."""
        assert self._item_files is not None
        pages = [*batch.items, *(page for part in batch.fenced for page in part.items)]
        if pages and self._item_files.write(pages):
            self._item_files.flush()
