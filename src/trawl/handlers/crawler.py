"""The library's crawler: seeds, options and page handlers, crawled from Python.

A :class:`Crawler` is a crawl as ``trawl crawl`` runs it (the same store, politeness,
resume and options, by the option table's names: trawl.options), with the page
handlers its decorators register. :meth:`Crawler.run` blocks until the crawl ends and
handles SIGINT and SIGTERM as the command line does (the first stops gracefully, the
next cancels); ``async with crawler:`` runs the crawl in the caller's event loop
instead, leaving the signal handlers alone, while :meth:`Crawler.items` yields each
committed item. Items are kept in the store either way (``trawl export --items``).

Handlers run in the extract workers, processes of their own that import each
handler's module; a handler of a script run as ``python script.py`` is loaded from the
script's file, whose top level runs again there with :func:`trawl.handlers.refs.is_loading`
true: :meth:`Crawler.run` then returns at once without crawling. A script that starts
its crawl otherwise (``asyncio.run(main())``) does so under ``if __name__ ==
"__main__":``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

import uvloop

from trawl.cli.seeds import check_seeds
from trawl.config import CrawlConfig
from trawl.crawl.gc_tuning import young_gc_threshold
from trawl.crawl.runner import Stopper, crawl_here
from trawl.errors import CrawlInterrupted, UsageError
from trawl.handlers.refs import is_loading, ref_of
from trawl.ops.summary import Summary
from trawl.settings import build_config, library_values
from trawl.sites.rules import parse_sites
from trawl.store.values import PageItems

__all__ = ["Crawler", "OnItem"]

Item = dict[str, Any]
OnItem = Callable[[Item], Awaitable[None]]
"""An ``on_item`` function: called with each committed item, in the crawl's process."""
HandlerFunction = TypeVar("HandlerFunction", bound=Callable[..., object])
_END = object()
"""The end of :meth:`Crawler.items`."""


class Crawler:
    """A crawl of ``seeds`` kept in ``data_dir``; ``options`` are the option table's, by
    name (``delay=1.0``, ``max_pages=100``, ``scope="host"``), checked as a config
    file's values are; ``sites`` are per-site settings by host pattern, as a config
    file's ``[sites."HOST"]`` tables give them (``{"*.example.com": {"delay": 5.0}}``,
    docs/SITES.md). A bad seed, option or site setting is a
    :class:`~trawl.errors.UsageError`."""

    def __init__(
        self,
        seeds: str | Iterable[str],
        *,
        data_dir: str | os.PathLike[str] = "trawl-data",
        sites: Mapping[str, object] | None = None,
        **options: object,
    ) -> None:
        self._seeds = (seeds,) if isinstance(seeds, str) else tuple(seeds)
        self._values = library_values({"data_dir": data_dir, **options})
        self._values["sites"] = parse_sites(sites or {})
        self._handlers: dict[str | None, str] = {}
        self._on_item: list[OnItem] = []
        self._items: asyncio.Queue[object] | None = None
        self._task: asyncio.Task[Summary] | None = None
        self._stopper: Stopper | None = None
        self._stopping = False
        self.summary: Summary | None = None
        """The crawl's summary, once it has ended."""
        self.config()

    def config(self) -> CrawlConfig:
        """The crawl's configuration, the handlers registered so far included."""
        if not self._seeds:
            raise UsageError("give at least one seed URL")
        config = build_config(self._seeds, self._values)
        check_seeds(self._seeds, config.url_rules)
        return dataclasses.replace(config, handlers=tuple(self._handlers.items()))

    def handler(self, label: str | None = None) -> Callable[[HandlerFunction], HandlerFunction]:
        """Register the decorated function as the handler of pages queued with ``label``
        (None: the seeds and every page followed without a label)."""

        def register(fn: HandlerFunction) -> HandlerFunction:
            if label in self._handlers:
                which = "pages without a label" if label is None else f"label {label!r}"
                raise UsageError(f"two handlers for {which}")
            self._handlers[label] = ref_of(fn)
            return fn

        return register

    def on_item(self, fn: OnItem) -> OnItem:
        """Register the decorated async function to be called with each item (a dict)
        once it is committed to the store. One that raises stops the crawl gracefully,
        and :meth:`run` (or :meth:`wait`) raises its exception."""
        self._on_item.append(fn)
        return fn

    def run(self) -> Summary:
        """Crawl until done, out of budget or stopped (SIGINT, SIGTERM); the summary.

        Inside an extract worker loading this script for its handlers it returns at
        once, without crawling, an empty summary."""
        if is_loading():
            return Summary.from_counters({}, state="not run", elapsed=0.0)
        config = self.config()
        self._items = self._stopper = None
        self._stopping = False
        with young_gc_threshold(), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            self.summary = runner.run(self._crawl(config, signals=True))
        return self.summary

    async def __aenter__(self) -> Crawler:
        if self._task is not None:
            raise RuntimeError("this Crawler is running already")
        config = self.config()
        self._items = asyncio.Queue()
        self._stopping = False
        self._task = asyncio.create_task(self._crawl(config, signals=False))
        self._stopper = Stopper(self._task)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the crawl gracefully if it still runs, and wait for its end."""
        if self._task is None:
            return
        if not self._task.done():
            self.stop()
        try:
            await self.wait()
        except CrawlInterrupted:
            if not self._stopping:
                raise
        finally:
            self._task = None

    def stop(self) -> None:
        """Stop the crawl: gracefully the first time (in-flight pages are committed),
        at once the next."""
        self._stopping = True
        if self._stopper is not None:
            self._stopper.request()

    async def wait(self) -> Summary:
        """Wait for the crawl (``async with``) to end; its summary."""
        if self._task is None:
            raise RuntimeError("wait() is for a crawl started with `async with crawler:`")
        self.summary = await self._task
        return self.summary

    async def items(self) -> AsyncIterator[Item]:
        """Each item (a dict) as it is committed, until the crawl ends (``async with``)."""
        if self._items is None:
            raise RuntimeError("items() is for a crawl started with `async with crawler:`")
        while (item := await self._items.get()) is not _END:
            assert isinstance(item, dict)
            yield item
        self._items.put_nowait(_END)  # for the next call

    async def _crawl(self, config: CrawlConfig, *, signals: bool) -> Summary:
        """The crawl in the running loop, with its items fed to ``on_item`` and
        :meth:`items`; an ``on_item`` that raises stops the crawl and raises here."""
        task = asyncio.current_task()
        assert task is not None
        self._stopper = self._stopper or Stopper(task)
        if not self._on_item and self._items is None:
            return await crawl_here(config, self._stopper, signals=signals)
        feed = _Feed(self._on_item, self._items)
        consumer = asyncio.create_task(feed.run())
        stopper = self._stopper

        def failed(done: asyncio.Task[None]) -> None:
            if not done.cancelled() and done.exception() is not None:
                stopper.request()

        consumer.add_done_callback(failed)
        try:
            return await crawl_here(config, stopper, signals=signals, on_items=feed.put)
        finally:
            feed.close()
            await consumer


class _Feed:
    """Committed items on their way to the ``on_item`` functions and to
    :meth:`Crawler.items`, in commit order."""

    def __init__(self, on_item: list[OnItem], items: asyncio.Queue[object] | None) -> None:
        self._on_item = on_item
        self._items = items
        self._pending: asyncio.Queue[list[PageItems] | None] = asyncio.Queue()

    def put(self, committed: list[PageItems]) -> None:
        """Take the items of a commit (called by the committer, in the loop)."""
        self._pending.put_nowait(committed)

    def close(self) -> None:
        """No more commits: :meth:`run` returns once it has fed what it has."""
        self._pending.put_nowait(None)

    async def run(self) -> None:
        try:
            while (committed := await self._pending.get()) is not None:
                for page in committed:
                    for text in page.items:
                        item = json.loads(text)
                        for fn in self._on_item:
                            await fn(item)
                        if self._items is not None:
                            self._items.put_nowait(item)
        finally:
            if self._items is not None:
                self._items.put_nowait(_END)
