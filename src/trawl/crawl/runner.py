"""Assembles a crawl from its configuration and runs it with signals and progress.

``build_engine`` is the one place where the stages get their dependencies. ``run_crawl``
adds what a command-line run needs around it: an exclusive lock on the data dir, its
progress (the live line on a terminal, else a stats line every ``stats_interval``
seconds: trawl.ops.progress), and graceful SIGINT/SIGTERM handling from the moment it
starts (first signal: stop taking new work, let in-flight fetches finish and commit;
second signal: cancel now; claimed URLs are returned to the queue on the next start
either way). An interrupted run ends with the summary state ``interrupted``, which
the command line turns into its resume hint and exit 130 (trawl.cli.commands).
``crawl_here`` runs a crawl in an event loop that is already running (the library's
``Crawler``, trawl.handlers.crawler): with the signals handled, or with the signal
handlers left alone and a :class:`Stopper` as the only way to stop it.

A run checks what it can before it makes the data dir (the seeds, the lease length), so
that a refused command leaves nothing behind. ``--fresh`` starts every output over: the
store, the data dir's ``text/`` and ``warc/`` files and the ``--events`` file (a broker's
stream or queue is left as it is, with a warning). Without
it, a run resumes the stored crawl only if it names the same seeds and scope
(:func:`trawl.policy.other_crawl`), and gives the URLs refused for their address another
go when the networks it may fetch from changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import functools
import logging
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import uvloop
from rich.console import Console

from trawl.config import CrawlConfig
from trawl.content.stage import ContentStage
from trawl.content.text_files import TextWriter
from trawl.content.warc import WarcWriter
from trawl.crawl.commit import OnItems
from trawl.crawl.engine import Crawler
from trawl.crawl.gc_tuning import young_gc_threshold
from trawl.crawl.run_record import RUN_STARTED_KEY
from trawl.crawl.seeds import seeds_of
from trawl.errors import CrawlInterrupted, StoreError, UsageError
from trawl.events.sink import open_sink
from trawl.extract.pool import ExtractPool, ExtractSettings, parse_workers
from trawl.fetch.fdlimit import raise_fd_limit
from trawl.fetch.fetcher import Fetcher, FetchError
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import AiodnsBackend, GuardedResolver, HostsFile
from trawl.fetch.tls import tls_context
from trawl.handlers.item_files import ItemWriter
from trawl.ops.progress import log_stats, show_progress, store_figures
from trawl.ops.summary import Summary
from trawl.outputs.target import KeyLayout, Kind, worker_tag
from trawl.policy import (
    HANDLERS_KEY,
    NETWORKS_KEY,
    POLICY_KEY,
    joined_handlers,
    networks_json,
    other_crawl,
    with_policy,
)
from trawl.politeness.robots import RobotsGate
from trawl.politeness.robots_parser import agent_token
from trawl.sites.requests import site_proxies, site_requests
from trawl.store.location import StoreLocation
from trawl.store.protocols import Store

WARC_DIR = "warc"
"""Where ``--warc`` files go, inside the data dir."""
TEXT_DIR = "text"
"""Where ``--text`` files go, inside the data dir."""
ITEMS_DIR = "items"
"""Where the items files of a handler crawl with ``--output`` go, inside the data dir."""

LOCK_NAME = "crawl.lock"

if TYPE_CHECKING:
    from trawl.outputs.uploader import Uploader
    from trawl.render.renderer import Renderer

log = logging.getLogger("trawl.crawl.runner")


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the data dir so two crawls never share one store.

    A run refused as bad usage (:class:`UsageError`) under the lock removes the data dir
    if it made it: what it wrote there is nothing but the start of a crawl it refused.
    """
    made = not data_dir.exists()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        handle = (data_dir / LOCK_NAME).open("a")
    except (FileExistsError, NotADirectoryError) as exc:
        raise UsageError(f"--data-dir {data_dir} is a file, not a directory") from exc
    except OSError as exc:
        raise StoreError(f"cannot use data dir {data_dir}: {exc.strerror}") from exc
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise UsageError(f"another trawl is already crawling in {data_dir}") from exc
        # The store's child process inherits the lock, and holds it while it lives
        # (trawl.store.process); processes started with close_fds (all others) do not.
        os.set_inheritable(handle.fileno(), True)
        try:
            yield
        except UsageError:
            if made:
                shutil.rmtree(data_dir, ignore_errors=True)
            raise


@contextlib.asynccontextmanager
async def build_engine(
    config: CrawlConfig, *, resuming: bool = False, on_items: OnItems | None = None
) -> AsyncIterator[Crawler]:
    """Open the store, fetcher and extract workers for ``config``; wire a crawler over them.

    ``resuming``: the store is checked first as a command-line crawl checks it
    (:func:`_check_stored`); ``on_items`` hears of the items of each commit. The
    process's file-descriptor limit is raised first, as far as the system allows
    (trawl.fetch.fdlimit)."""
    limit = raise_fd_limit()
    if limit.soft != limit.before:
        log.debug(
            "file-descriptor limit raised from %d to %d", limit.before, limit.soft,
            extra={"fd_limit": limit.soft},
        )  # fmt: skip
    settings = ExtractSettings(
        seeds=seeds_of(config),
        scope=config.scope,
        rules=config.url_rules,
        agent=agent_token(config.user_agent),
        honour_nofollow=config.honour_nofollow,
        max_links=config.limits.max_links,
        max_depth=config.limits.max_depth,
        content=config.content,
        text_format=config.text_format,
        handlers=config.handlers,
        render_signals=config.renders,
        site_depths=config.sites.depths(),
    )
    async with contextlib.AsyncExitStack() as stack:
        # First, so that the workers load their code while the store opens.
        extract = await stack.enter_async_context(
            ExtractPool(settings, parse_workers(config.parse_workers, content=config.content))
        )
        store = await stack.enter_async_context(
            config.location.open(
                page_budget=config.limits.max_pages_per_host,
                discovery_budget=config.limits.discovery_budget,
                horizon=config.freshness.horizon,
                host_budget=config.sites.page_budget_for if config.sites.budgets else None,
                child=not config.store_thread and len(os.sched_getaffinity(0)) >= 2,
            )
        )
        if resuming:
            await _check_stored(store, config)
        # Entered before the writers, so that it closes after them and takes their
        # last files (and before the store closes).
        uploader = await _uploader(stack, config, store)
        recorder = None
        if config.warc:
            recorder = await stack.enter_async_context(
                WarcWriter(
                    config.data_dir / WARC_DIR,
                    prefix=_file_prefix("trawl", config, uploader),
                    max_size=config.warc_max_size,
                    info={"http-header-user-agent": config.user_agent},
                    on_closed=None if uploader is None else uploader.nudge,
                    locate=None
                    if uploader is None
                    else functools.partial(uploader.layout.locate, "warc"),
                )
            )
        item_files = None
        if uploader is not None and config.handlers:
            item_files = stack.enter_context(
                ItemWriter(
                    config.data_dir / ITEMS_DIR,
                    prefix=_file_prefix("items", config, uploader),
                    on_closed=uploader.nudge,
                )
            )
        fetcher = await stack.enter_async_context(
            Fetcher(
                user_agent=config.user_agent,
                timeouts=config.timeouts,
                max_body=config.limits.max_body,
                resolver=GuardedResolver(
                    AddressPolicy(config.allow_networks),
                    overrides=config.resolve,
                    hosts=HostsFile.read(config.hosts_file),
                    backend=AiodnsBackend(config.nameservers),
                ),
                recorder=recorder,
                tls=tls_context(config.ca_file),
                sites=site_requests(config.sites),
                proxy_for=site_proxies(config.sites, config.proxy),
            )
        )
        renderer = None
        if config.renders:
            renderer = await stack.enter_async_context(_renderer(config, store, fetcher))
        metrics = None
        if config.metrics_port is not None:
            from trawl.ops.metrics import CrawlMetrics, MetricsServer

            metrics = CrawlMetrics()
            stack.enter_context(MetricsServer(metrics, config.metrics_port))
            if uploader is not None:
                metrics.watch_uploads(uploader.figures)
        content = None
        if config.content:
            text = None
            if config.text:
                text = stack.enter_context(
                    TextWriter(
                        config.data_dir / TEXT_DIR,
                        prefix=_file_prefix("text", config, uploader),
                        on_closed=None if uploader is None else uploader.nudge,
                    )
                )
            events = None
            if config.events is not None:
                events = open_sink(config.events)
                await stack.enter_async_context(events)
                if metrics is not None:
                    metrics.watch_events(events.stats)
            content = ContentStage(
                store,
                text=text,
                events=events,
                near_duplicates_in_text=config.text_near_duplicates,
            )
        yield Crawler(
            config, store, fetcher, extract, content=content, metrics=metrics,
            on_items=on_items, uploader=uploader, item_files=item_files, renderer=renderer,
        )  # fmt: skip


def _renderer(config: CrawlConfig, store: Store, fetcher: Fetcher) -> Renderer:
    """The headless browser of ``--render``, its requests through ``fetcher``."""
    from trawl.render.renderer import Renderer
    from trawl.render.requests import SubresourceRobots

    gate = RobotsGate(store, fetcher, agent_token(config.user_agent), config.url_rules)
    return Renderer(config.render, fetcher, SubresourceRobots(gate.fetch_rules), config.sites)


async def _uploader(
    stack: contextlib.AsyncExitStack, config: CrawlConfig, store: Store
) -> Uploader | None:
    """The uploader of ``config``'s ``--output`` over the data dir's output directories."""
    if config.output is None:
        return None
    from trawl.outputs.uploader import Uploader

    layout = KeyLayout(config.output, config.location.crawl)
    directories: dict[Kind, Path] = {
        "warc": config.data_dir / WARC_DIR,
        "text": config.data_dir / TEXT_DIR,
        "items": config.data_dir / ITEMS_DIR,
    }
    return await stack.enter_async_context(
        Uploader(layout, directories, store, config.leases.worker)
    )


def _file_prefix(name: str, config: CrawlConfig, uploader: Uploader | None) -> str:
    """The file-name prefix of an output: ``name``, and the worker's tag when the files
    are uploaded, so that workers sharing a bucket never write one name."""
    return name if uploader is None else f"{name}-{worker_tag(config.leases.worker)}"


async def _check_stored(store: Store, config: CrawlConfig) -> None:
    """Refuse to resume a stored crawl of other seeds or another scope than ``config``'s;
    queue again the URLs refused for their address when the networks ``config`` may
    fetch from are not the ones the last run had (they are checked again when fetched)."""
    stored = await store.get_meta(POLICY_KEY)
    if stored is not None:
        other = other_crawl(config, stored)
        if other is not None:
            raise UsageError(_other_crawl_message(config.location, other))
    networks = networks_json(config)
    if await store.get_meta(NETWORKS_KEY) != networks:
        moved = await store.requeue_failed(FetchError.BLOCKED_ADDRESS.value)
        await store.set_meta(NETWORKS_KEY, networks)
        if moved:
            log.info(
                "queued again %d URLs refused for their address: the allowed networks "
                "changed", moved, extra={"requeued": moved},
            )  # fmt: skip


def _other_crawl_message(location: StoreLocation, other: str) -> str:
    """The refusal of a run whose seeds or scope are not those of ``other``, the crawl
    stored at ``location``."""
    if location.dsn is None:
        return (
            f"{location.data_dir} holds a crawl of {other}; run with --fresh to start over "
            "there, or --data-dir DIR for a new crawl"
        )
    return (
        f"crawl {location.crawl!r} of the --store database is a crawl of {other}; run with "
        "--fresh to start it over, or --crawl NAME (and --data-dir DIR) for a new crawl"
    )


async def _start_over(config: CrawlConfig) -> None:
    """``--fresh``: delete the stored crawl and the outputs of its runs."""
    await config.location.remove()
    for name in (TEXT_DIR, WARC_DIR, ITEMS_DIR):
        try:
            shutil.rmtree(config.data_dir / name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot empty {config.data_dir / name}: {exc.strerror}") from exc
    if isinstance(config.events, Path):
        try:
            os.truncate(config.events, 0)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise UsageError(f"cannot empty --events {config.events}: {exc.strerror}") from exc
    elif config.events is not None:
        log.warning(
            "--fresh does not empty %s: the events published before stay there",
            config.events.shown, extra={"events_sink": config.events.shown},
        )  # fmt: skip


async def _joined(config: CrawlConfig) -> CrawlConfig:
    """A worker's ``config`` under the policy and handlers stored with the crawl it joins;
    stored handlers that cannot be loaded here are a :class:`UsageError`."""
    async with config.location.open(readonly=True) as store:
        stored = await store.get_meta(POLICY_KEY)
        handlers = await store.get_meta(HANDLERS_KEY)
    if stored is None:
        raise UsageError("that crawl has no stored policy: start it with trawl crawl --store")
    joined = joined_handlers(with_policy(config, stored), handlers)
    site_requests(joined.sites)  # each secret from this machine's environment, or one line
    if joined.handlers and not config.handlers:
        # The stored handlers must load here too: one that cannot is a usage error of
        # this worker's machine, said before it takes any host.
        from trawl.handlers.refs import load_all

        load_all(joined.handlers)
    return joined


class Stopper:
    """How a running crawl is stopped: the first request stops the crawler gracefully
    (or, before there is one, cancels the run), the next ones cancel the run. While
    :meth:`handled`, SIGINT and SIGTERM are such requests; a program that runs the crawl
    in its own event loop calls :meth:`request` itself (trawl.handlers.crawler)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, task: asyncio.Task[Summary]) -> None:
        self.crawler: Crawler | None = None
        self._task = task
        self._count = 0

    def request(self) -> None:
        """Stop the crawl: gracefully the first time, at once after that."""
        self._count += 1
        if self._count == 1 and self.crawler is not None:
            self.crawler.stop()
        else:
            self._task.cancel()

    @contextlib.contextmanager
    def handled(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Handle the signals in ``loop`` meanwhile; then put back the handlers before."""
        before = {sig: signal.getsignal(sig) for sig in self.SIGNALS}
        for sig in self.SIGNALS:
            loop.add_signal_handler(sig, self.request)
        try:
            yield
        finally:
            for sig, handler in before.items():
                loop.remove_signal_handler(sig)
                if handler is not None:
                    signal.signal(sig, handler)


async def _show(crawler: Crawler, console: Console | None, stats_interval: float) -> None:
    """The crawl's progress: live on a terminal, else a stats line now and then."""
    if console is not None and console.is_terminal:
        await show_progress(crawler.progress, console)
    elif stats_interval > 0:
        await log_stats(crawler.progress, stats_interval)


async def _crawl(
    config: CrawlConfig,
    console: Console | None,
    stats_interval: float,
    stopper: Stopper,
    on_items: OnItems | None = None,
) -> Summary:
    if config.fresh:
        await _start_over(config)
    if config.join:
        config = await _joined(config)
    config.check_leases()
    async with build_engine(config, resuming=not config.join, on_items=on_items) as crawler:
        stopper.crawler = crawler
        display = asyncio.create_task(_show(crawler, console, stats_interval))
        try:
            summary = await crawler.run()
        finally:
            display.cancel()
            # Waited for without raising, so that a cancellation of this run is kept.
            await asyncio.wait([display])
            error = None if display.cancelled() else display.exception()
            if error is not None:
                raise error
    if crawler.uploader is not None:
        # After the uploader closed: what it uploaded at the end counts.
        summary = dataclasses.replace(summary, uploads=crawler.uploader.figures().counts())
    return summary


async def _run(
    config: CrawlConfig,
    console: Console | None,
    stats_interval: float,
    *,
    stopper: Stopper | None = None,
    signals: bool = True,
    on_items: OnItems | None = None,
) -> Summary:
    """The crawl in the running loop, stopped by ``stopper``'s requests (default: one of
    this task's), and with ``signals`` by SIGINT and SIGTERM."""
    if stopper is None:
        task = asyncio.current_task()
        assert task is not None
        stopper = Stopper(task)
    try:
        with stopper.handled(asyncio.get_running_loop()) if signals else contextlib.nullcontext():
            summary = await _crawl(config, console, stats_interval, stopper, on_items)
    except asyncio.CancelledError as exc:
        raise CrawlInterrupted("crawl cancelled; run the same command to resume") from exc
    return summary


def checked(config: CrawlConfig) -> None:
    """Check what can be checked before the data dir is made (a refused crawl leaves
    nothing behind)."""
    if not config.join:
        seeds_of(config)
        config.check_leases()


async def crawl_here(
    config: CrawlConfig, stopper: Stopper, *, signals: bool, on_items: OnItems | None = None
) -> Summary:
    """Run (or resume) the crawl of ``config`` in the running event loop (the task that
    ``stopper`` cancels), holding the data dir's lock; ``on_items`` hears of the items of
    each commit. With ``signals``, SIGINT and SIGTERM stop it as they stop
    :func:`run_crawl`; without, the signal handlers are not touched."""
    checked(config)
    with data_dir_lock(config.data_dir):
        return await _run(config, None, 0.0, stopper=stopper, signals=signals, on_items=on_items)


def run_crawl(
    config: CrawlConfig, console: Console | None = None, *, stats_interval: float = 60.0
) -> Summary:
    """Run (or resume) the crawl in ``config.data_dir``; block until it ends.

    Its progress shows live on ``console`` if that is a terminal; otherwise a stats
    line is logged every ``stats_interval`` seconds (0: never).
    """
    checked(config)
    with (
        data_dir_lock(config.data_dir),
        young_gc_threshold(),
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        return runner.run(_run(config, console, stats_interval))


def crawl_running(data_dir: Path) -> bool:
    """True while a trawl process holds the data dir's lock."""
    try:
        handle = (data_dir / LOCK_NAME).open("r")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


async def read_summary(location: StoreLocation) -> Summary:
    """The summary of the crawl at ``location`` (works while another process crawls).

    ``elapsed`` is the crawl time summed over all runs, the current one included while
    it runs; ``queued`` counts the URLs waiting to be fetched, those a running crawl holds
    in memory or in flight included. A crawl whose last run died without recording its
    end (kill -9, power loss) shows as stopped and resumable. The store is read through
    first: figures from a store that a crawl or an export would reject as damaged are
    never shown.
    """
    async with location.open(readonly=True, checked=True) as store:
        figures, _ = await store_figures(store)
        state = await store.get_meta("state") or "new"
        elapsed = float(await store.get_meta("elapsed") or 0.0)
        started = await store.get_meta(RUN_STARTED_KEY)
    if state == "running":
        if not await _still_running(location):
            state = "stopped (resumable)"
        elif started is not None:
            elapsed += max(0.0, time.time() - float(started))
    return Summary.from_counters(figures, state=state, elapsed=elapsed)


async def _still_running(location: StoreLocation) -> bool:
    """Whether a trawl process is crawling at ``location`` now."""
    if location.dsn is None:
        return crawl_running(location.data_dir)
    return await location.leased()
