"""The crawls ``trawl serve`` manages: where each one's state is, and its crawl process.

A crawl has an id (1 to 40 of ``a-z 0-9 _``). Under ``--data-dir ROOT`` it is the SQLite
crawl in ROOT/ID; with ``--store DSN`` the PostgreSQL crawl named ID (its own data dir,
for output files, is still ROOT/ID). Starting a crawl runs ``trawl crawl`` as a child
process with the options ``trawl serve`` passes to every crawl, then the options and
seeds of the request (kept in ROOT/ID/request.json); pausing sends it SIGINT (the crawl
commits what is in flight and stops, resumable), resuming starts it again with the same
arguments (a crawl the API did not start: with the seeds and scope stored in its
policy), and cancelling pauses it for good (state ``cancelled``).

While a crawl it started runs, ``trawl serve`` samples its figures every second for the
console's charts (trawl.ops.samples).

A crawl whose store cannot be read (a damaged SQLite file, a PostgreSQL schema that is
not a crawl's) is shown with state ``unreadable`` and the store's error, and every other
operation on it raises `StoreError`; the other crawls are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trawl.crawl.runner import read_summary
from trawl.errors import StoreError, UsageError
from trawl.ops.crawl_request import crawl_arguments
from trawl.ops.samples import PERIOD, READ_SHARE, Sample, Samples
from trawl.ops.summary import Summary
from trawl.policy import POLICY_KEY
from trawl.politeness.rules import RULES_KEY, OperatorRules
from trawl.store.location import SCHEMA_PREFIX, StoreLocation
from trawl.store.sqlite.store import DB_NAME
from trawl.store.values import ExportRow, HostFigures, HostRow, UrlFilter

CANCELLED = "cancelled"
UNREADABLE = "unreadable"
STARTING = "starting"
"""A crawl whose process has not created its store yet."""
REQUEST_FILE = "request.json"
"""The arguments a crawl was started with, in its data dir, for resuming it."""
LAST_ID = 2**63 - 1
"""The largest URL id (ids are signed 64-bit integers)."""
STOP_WAIT = 30.0
"""Seconds a crawl gets to commit and stop after SIGINT before it is killed."""


@dataclass(frozen=True, slots=True)
class CrawlView:
    """A crawl as the API shows it."""

    crawl_id: str
    state: str
    summary: Summary
    error: str | None = None
    """Why the crawl's store cannot be read (state ``unreadable``), one line."""


@dataclass(slots=True)
class Crawls:
    """The crawls under one data dir root (SQLite) or in one database (``dsn``)."""

    root: Path
    dsn: str | None = None
    crawl_options: Sequence[str] = ()
    samples: Samples = field(default_factory=Samples)
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _sampler: asyncio.Task[None] | None = None

    def location(self, crawl_id: str) -> StoreLocation:
        return StoreLocation(self.root / crawl_id, self.dsn, crawl_id)

    async def ids(self) -> list[str]:
        """Every crawl's id, oldest first (SQLite: by directory name)."""
        if self.dsn is None:
            if not self.root.is_dir():
                return []
            return sorted(p.name for p in self.root.iterdir() if (p / DB_NAME).is_file())
        from trawl.store.postgres.crawls import crawls

        found = await crawls(self.dsn, SCHEMA_PREFIX)
        return [c.name for c in sorted(found, key=lambda c: (c.created, c.name))]

    def running(self, crawl_id: str) -> bool:
        process = self._processes.get(crawl_id)
        return process is not None and process.poll() is None

    async def view(self, crawl_id: str) -> CrawlView:
        """The crawl's state and figures; UsageError when there is no such crawl."""
        if crawl_id not in await self.ids() and not self.running(crawl_id):
            raise UsageError(f"no crawl {crawl_id!r}")
        try:
            summary = await read_summary(self.location(crawl_id))
        except StoreError as exc:
            if not self.running(crawl_id):
                nothing = Summary.from_counters({}, state=UNREADABLE, elapsed=0.0)
                return CrawlView(crawl_id, UNREADABLE, nothing, " ".join(str(exc).split()))
            # The process has not created its store yet.
            summary = Summary.from_counters({}, state=STARTING, elapsed=0.0)
        state = summary.state
        if self.running(crawl_id) and state != STARTING:
            state = "running"
        elif state in ("interrupted", "stopped (resumable)"):
            state = "paused"
        return CrawlView(crawl_id, state, summary)

    def create(self, seeds: Sequence[str], options: Mapping[str, Any]) -> str:
        """Start a new crawl of ``seeds`` with ``options`` (checked values by option
        name, trawl.ops.crawl_request); its id."""
        crawl_id = f"c{uuid.uuid4().hex[:12]}"
        data_dir = self.root / crawl_id
        arguments = crawl_arguments(list(seeds), options, str(data_dir))
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / REQUEST_FILE).write_text(json.dumps(arguments), encoding="utf-8")
        self._start(crawl_id, arguments)
        return crawl_id

    async def resume(self, crawl_id: str) -> None:
        """Start a paused crawl again (a running one is left alone); `UsageError` for a
        cancelled one, `StoreError` for one whose store cannot be read."""
        if self.running(crawl_id):
            return
        view = await self.readable(crawl_id)
        if view.state == CANCELLED:
            raise UsageError(f"crawl {crawl_id!r} was cancelled")
        try:
            arguments = json.loads((self.root / crawl_id / REQUEST_FILE).read_text("utf-8"))
        except FileNotFoundError:
            async with self.location(crawl_id).open(readonly=True) as store:
                stored = await store.get_meta(POLICY_KEY)
            arguments = _start_arguments(json.loads(stored) if stored else {})
        self._start(crawl_id, arguments)

    async def readable(self, crawl_id: str) -> CrawlView:
        """The crawl's view; `StoreError` when its store cannot be read."""
        view = await self.view(crawl_id)
        if view.error is not None:
            raise StoreError(view.error)
        return view

    async def pause(self, crawl_id: str) -> None:
        """Stop the crawl's process gracefully (resumable)."""
        await self.readable(crawl_id)
        process = self._processes.get(crawl_id)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(asyncio.to_thread(process.wait), STOP_WAIT)
        except TimeoutError:
            process.kill()
            await asyncio.to_thread(process.wait)

    async def cancel(self, crawl_id: str) -> None:
        """Stop the crawl for good."""
        await self.pause(crawl_id)
        async with self.location(crawl_id).open() as store:
            await store.set_meta("state", CANCELLED)

    async def urls(
        self, crawl_id: str, after: int | None, limit: int, wanted: UrlFilter
    ) -> list[tuple[int, ExportRow]]:
        """A page of the crawl's URLs that are as ``wanted``, in id order, after the id
        ``after`` (a signed 64-bit integer)."""
        await self.readable(crawl_id)
        if after == LAST_ID:
            return []
        start = -LAST_ID - 1 if after is None else after + 1
        async with self.location(crawl_id).open(readonly=True) as store:
            return await store.url_page(start, limit, wanted)

    async def host_page(
        self, crawl_id: str, order: str, descending: bool, limit: int, offset: int
    ) -> tuple[int, list[HostRow]]:
        """How many hosts the crawl has, and a page of them with their state now."""
        await self.readable(crawl_id)
        async with self.location(crawl_id).open(readonly=True) as store:
            return await store.host_page(order, descending, limit, offset, time.time())

    async def hosts(self, crawl_id: str, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        """The crawl's slowest and most-blocked hosts."""
        await self.readable(crawl_id)
        async with self.location(crawl_id).open(readonly=True) as store:
            return await store.host_figures(limit)

    async def settings(self, crawl_id: str) -> dict[str, Any]:
        """The crawl's stored policy (trawl.policy), empty before it stored one."""
        await self.readable(crawl_id)
        async with self.location(crawl_id).open(readonly=True) as store:
            stored = await store.get_meta(POLICY_KEY)
        policy = json.loads(stored) if stored else {}
        return policy if isinstance(policy, dict) else {}

    async def rules(self, crawl_id: str) -> OperatorRules:
        """The operator's rules of the crawl."""
        await self.readable(crawl_id)
        async with self.location(crawl_id).open(readonly=True) as store:
            return OperatorRules.from_json(await store.get_meta(RULES_KEY))

    async def set_rules(self, crawl_id: str, rules: OperatorRules) -> None:
        """Store new rules; the crawl's workers apply them within a second."""
        async with self.location(crawl_id).open() as store:
            await store.set_meta(RULES_KEY, rules.to_json())

    async def sample(self, crawl_id: str) -> None:
        """Add a sample of the crawl's figures now (trawl.ops.samples)."""
        async with self.location(crawl_id).open(readonly=True) as store:
            counters = await store.counters()
            queued = await store.work_left()
            now = time.time()
            states = await store.host_states(now)
        backing_off = states.get("backing off", 0) + states.get("broken", 0)
        self.samples.add(crawl_id, Sample(now, counters, queued, backing_off))

    async def _sample_forever(self) -> None:
        """Sample every crawl this process started while it runs, and once after."""
        watched: set[str] = set()
        while True:
            started = time.monotonic()
            running = {crawl_id for crawl_id in self._processes if self.running(crawl_id)}
            for crawl_id in sorted(running | watched):
                with contextlib.suppress(StoreError):  # starting, or not readable
                    await self.sample(crawl_id)
            watched = running
            spent = time.monotonic() - started
            await asyncio.sleep(max(PERIOD - spent, spent / READ_SHARE - spent))

    async def aclose(self) -> None:
        """Stop sampling (its reads ended), then every crawl this process started."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None and sampler.get_loop() is asyncio.get_running_loop():
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Stop every crawl this process started (they stay resumable)."""
        if self._sampler is not None:
            self._sampler.cancel()
        for process in self._processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in self._processes.values():
            try:
                process.wait(timeout=STOP_WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _start(self, crawl_id: str, arguments: Sequence[str]) -> None:
        """Run ``trawl crawl`` for the crawl: its place, the server's crawl options, then
        ``arguments`` (which end with the seeds)."""
        command = [sys.executable, "-m", "trawl", "crawl", "--no-progress"]
        command += ["--data-dir", str(self.root / crawl_id)]
        if self.dsn is not None:
            command += ["--store", self.dsn, "--crawl", crawl_id]
        command += [*self.crawl_options, *arguments]
        (self.root / crawl_id).mkdir(parents=True, exist_ok=True)
        with (self.root / crawl_id / "crawl.log").open("ab") as log:
            self._processes[crawl_id] = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
            )
        loop = asyncio.get_running_loop()
        if self._sampler is None or self._sampler.done() or self._sampler.get_loop() is not loop:
            self._sampler = loop.create_task(self._sample_forever())


def _start_arguments(policy: Mapping[str, Any]) -> list[str]:
    """The ``trawl crawl`` arguments that resume a crawl of ``policy`` (its stored form):
    its seeds and scope, which a resumed crawl must repeat (the seeds last)."""
    arguments: list[str] = []
    scope = policy.get("scope")
    if scope is not None:
        arguments += [f"--scope={scope['mode']}"]
        arguments += [f"--include={pattern}" for pattern in scope["include"]]
        arguments += [f"--exclude={pattern}" for pattern in scope["exclude"]]
    return [*arguments, "--", *(str(seed) for seed in policy.get("seeds", []))]
