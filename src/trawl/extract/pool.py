"""The extract stage: a fetched HTML page in, its canonical URL and link candidates out.

It joins the parser and the URL filter, the two most CPU-hungry steps of a crawl, into
one pure function of the page, so it can run in a worker process on another core. A
page whose label has a page handler gives what the handler gave instead of its links
(trawl.extract.handled); the worker loads the handlers when it starts.
``ExtractPool`` runs it there (``workers`` >= 1) or in the crawl's own process
(``workers`` = 0). A worker is a plain child process fed through its standard input and
answering on its standard output (length-prefixed pickles, answers in order; a page's
body follows its job as a raw length-prefixed frame, so it is never copied into a
pickle; an answer crosses as plain tuples, which pickle and load several times faster
than the dataclass and named tuples they stand for). Workers run in a session of their
own and ignore SIGINT and SIGTERM (the crawl process decides how to stop: a Ctrl-C at the
terminal reaches it alone), and exit at end of input, which comes when the crawl closes
the pipe or dies, even by kill -9: nothing is left behind. A worker's standard error is
read by the crawl, which keeps its last lines to say why a worker stopped. A worker that
dies mid-crawl is replaced and only the page it held fails (:class:`ExtractFailed`); one
that cannot start, dies before answering any page, or keeps dying fails the crawl with
one line saying why (:class:`WorkerStopped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import pickle
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from trawl.children import FRAME, STDERR_BYTES, frame, read_frame, stop_reason
from trawl.config import ScopeConfig, TextFormat
from trawl.content.text import PageText, extract_text
from trawl.crawl.gc_tuning import young_gc_threshold
from trawl.errors import TrawlError
from trawl.extract.channel import widen_channel
from trawl.extract.handled import Fetched, Handled, Handlers
from trawl.extract.links import DEFAULT_MAX_DEPTH, LinkFilter
from trawl.extract.parser import content_charset, parse_html, robots_header
from trawl.extract.resolution import resolve
from trawl.extract.scope import Scope
from trawl.extract.urls import NormalizeRules, normalize
from trawl.freshness.recrawl import body_hash, text_hash
from trawl.render.rule import script_built
from trawl.resource import AsyncResource
from trawl.store.values import CommitBatch, NewURL


@dataclass(frozen=True, slots=True)
class ExtractSettings:
    """Everything the extract stage needs, small enough to send to a worker."""

    seeds: tuple[str, ...]
    scope: ScopeConfig
    rules: NormalizeRules
    agent: str
    honour_nofollow: bool
    max_links: int
    max_depth: int = DEFAULT_MAX_DEPTH
    content: bool = False
    """Take each indexable page's main text and fingerprints (``--text``, ``--events``)."""
    text_format: TextFormat = "text"
    handlers: tuple[tuple[str | None, str], ...] = ()
    """The page handlers, (label, ref) (trawl.extract.handled)."""
    render_signals: bool = False
    """Say whether each page looks built by its scripts (trawl.render.rule)."""
    site_depths: tuple[tuple[str, int], ...] = ()
    """(host pattern, max_depth) of the sites that set one (trawl.sites)."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """What one page yielded: its canonical URL, its link candidates, its counters, when
    content is on and the page may be indexed, its main text and content hash (of the
    main text, or of the body when it has none), and always its change hash
    (trawl.freshness.recrawl: of the main text when there is one, else of the body)."""

    canonical: str | None
    links: list[NewURL]
    counters: dict[str, int] = field(default_factory=dict)
    noindex: bool = False
    out_links: int = 0
    text: PageText | None = None
    content_hash: str | None = None
    change_hash: int | None = None
    handled: Handled | None = None
    """What the page's handler gave, when it has one (its links are then its follows)."""
    script_built: bool = False
    """The page looks built by its scripts (trawl.render.rule; only when asked for)."""


class Extractor:
    """Parses a page and filters its links (one per process: its caches are local)."""

    def __init__(self, settings: ExtractSettings) -> None:
        self._settings = settings
        scope = Scope(settings.seeds, settings.scope.mode, settings.scope.include,
                      settings.scope.exclude)  # fmt: skip
        self._links = LinkFilter(scope, settings.rules, settings.max_depth, settings.site_depths)
        self._handlers = Handlers(settings.handlers) if settings.handlers else None

    def extract(
        self,
        url: str,
        depth: int,
        body: bytes,
        content_type: str | None,
        robots_tags: Sequence[str],
        fetched: Fetched | None = None,
    ) -> Extracted:
        """Links of the page at ``url`` (found at ``depth`` - 1) and its canonical URL;
        with ``fetched``, a page whose label has a handler gives what the handler gave."""
        s = self._settings
        page = parse_html(
            body,
            agent_token=s.agent,
            honour_nofollow=s.honour_nofollow,
            max_links=s.max_links,
            charset=content_charset(content_type),
            script_signals=s.render_signals,
        )
        built = page.signals is not None and script_built(page.signals, len(page.links))
        base = url
        if page.base_href:
            base = resolve(page.base_href, url) or url
        canonical = None
        if page.canonical:
            found = normalize(page.canonical, base, s.rules)
            canonical = found if isinstance(found, str) else None
        batch = CommitBatch()
        noindex_header, nofollow_header = robots_header(robots_tags, s.agent)
        noindex = page.noindex or noindex_header
        text = content_hash = None
        if noindex:
            batch.count("noindex_pages")
        elif s.content:
            text = extract_text(body, url, content_charset(content_type), s.text_format)
            content_hash = text.content_hash if text else hashlib.sha256(body).hexdigest()
        change = text_hash(text.content_hash) if text else body_hash(body)
        handler = None
        if fetched is not None and self._handlers is not None:
            handler = self._handlers.get(fetched.label)
        nofollow = s.honour_nofollow and (page.nofollow or nofollow_header)
        if handler is not None:
            assert fetched is not None
            follows, handled = Handlers.run(
                handler, url, depth, body, fetched, base, page.links,
                None if nofollow else self._links, batch,
            )  # fmt: skip
            return Extracted(canonical, follows, batch.counters, noindex, len(page.links),
                             text, content_hash, change, handled, built)  # fmt: skip
        if nofollow:
            batch.count("nofollow_pages")
            return Extracted(
                canonical, [], batch.counters, noindex, 0, text, content_hash, change,
                script_built=built,
            )  # fmt: skip
        batch.count("nofollow_links", page.nofollow_links)
        links = self._links.page_links(page.links, base, depth, batch)
        return Extracted(
            canonical,
            links,
            batch.counters,
            noindex,
            len(page.links),
            text,
            content_hash,
            change,
            script_built=built,
        )


_Links = list[tuple[int, str, str, int, int, str | None, str | None]]
_Plain = tuple[
    str | None, _Links, dict[str, int], bool, int, PageText | None, str | None, int | None,
    bool,
]  # fmt: skip
_WithHandled = tuple[
    str | None, _Links, dict[str, int], bool, int, PageText | None, str | None, int | None,
    bool, tuple[tuple[str, ...], str | None, tuple[tuple[int, float], ...]],
]  # fmt: skip
Answer = _Plain | _WithHandled
"""An :class:`Extracted` as it crosses the pipe: its fields in order, the links as plain
tuples; what a handler gave, as a plain tuple, only when the page had one."""

_new_url = functools.partial(tuple.__new__, NewURL)
"""Builds a :class:`NewURL` from a plain tuple without a Python-level call per link."""


def _answer(found: Extracted) -> Answer:
    links = [link[:] for link in found.links]
    if found.handled is None:
        return (found.canonical, links, found.counters, found.noindex, found.out_links,
                found.text, found.content_hash, found.change_hash,
                found.script_built)  # fmt: skip
    handled = (found.handled.items, found.handled.error, found.handled.priorities)
    return (found.canonical, links, found.counters, found.noindex, found.out_links,
            found.text, found.content_hash, found.change_hash, found.script_built,
            handled)  # fmt: skip


def _extracted(answer: Answer) -> Extracted:
    # Told apart by length (mypy narrows tuples by length only up to 8 items).
    handled = Handled(*cast(_WithHandled, answer)[9]) if len(answer) == 10 else None
    plain: _Plain = answer[:9]
    canonical, links, counters, noindex, out_links, text, content_hash, change, built = plain
    return Extracted(canonical, list(map(_new_url, links)), counters, noindex, out_links,
                     text, content_hash, change, handled, built)  # fmt: skip


MAX_AUTO_WORKERS = 2
"""The crawl process itself saturates one core at about this many workers' output."""


def parse_workers(wanted: int | None, cores: int | None = None, *, content: bool = False) -> int:
    """How many extract workers to run: ``wanted`` if given, else one per core this process
    may use beyond its own, at most :data:`MAX_AUTO_WORKERS`.

    With ``content`` (text extraction, about 10 ms a page) the workers are the bottleneck
    and the crawl process is idle most of the time, so they get every core, itself at
    least one: on 2 cores, 2 workers fetch 164 pages/s with ``--warc --text`` where one
    fetches 127 (docs/PERFORMANCE.md)."""
    if wanted is not None:
        return wanted
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    if content:
        return max(1, min(MAX_AUTO_WORKERS, cores))
    return max(0, min(MAX_AUTO_WORKERS, cores - 1))


def _write_frame(stream: BinaryIO, payload: object) -> None:
    stream.write(frame(payload))
    stream.flush()


def _read_raw(stream: BinaryIO) -> bytes | None:
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    (size,) = FRAME.unpack(head)
    return stream.read(size)


def _read_frame(stream: BinaryIO) -> object | None:
    data = _read_raw(stream)
    if data is None:
        return None
    loaded: object = pickle.loads(data)
    return loaded


def worker_main() -> None:
    """A worker process: settings first, then one page per frame, answered in order.

    It reads its standard input until end of file, which comes when the crawl closes the
    pipe or dies (even by kill -9), so a worker never outlives its crawl. Answers go out
    on a copy of its standard output, which itself then writes to standard error: what
    a page handler's code prints cannot break them.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    sys.stdout.flush()
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    settings = _read_frame(stdin)
    if not isinstance(settings, ExtractSettings):
        return
    extractor = Extractor(settings)
    with young_gc_threshold():
        while isinstance(job := _read_frame(stdin), tuple):
            # The page body follows its job frame raw: pickling it would copy it twice more.
            body = _read_raw(stdin)
            if body is None:
                return
            if len(job) == 4:
                url, depth, content_type, robots_tags = job
                found = extractor.extract(url, depth, body, content_type, robots_tags)
            else:
                url, depth, content_type, robots_tags, fetched = job
                found = extractor.extract(
                    url, depth, body, content_type, robots_tags, Fetched._make(fetched)
                )
            _write_frame(stdout, _answer(found))


WORKER_CODE = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "from trawl.extract.pool import worker_main; worker_main()"
)
"""What a worker process runs: it ignores the stop signals before loading any code."""
MAX_DEATHS = 5
DEATH_WINDOW = 60.0
"""The ``MAX_DEATHS``-th death of a worker within ``DEATH_WINDOW`` seconds (of any of the
pool's workers) stops the pool: something kills every new worker."""

log = logging.getLogger("trawl.extract.pool")


class WorkerStopped(TrawlError):
    """An extract worker could not start, died before answering anything, or kept dying;
    the message says why in one line."""


class ExtractFailed(TrawlError):
    """A page's extraction was lost with the worker that held it (a new worker took the
    worker's other pages)."""


@dataclass(slots=True)
class _Job:
    """A page sent to a worker: its answer to come, and its frames, kept (they refer to the
    page's body, not copies of it) to send again to the worker's next process."""

    url: str
    frames: tuple[bytes, ...]
    answer: asyncio.Future[Answer]


OnStop = Callable[["_Worker", str], None]


class _Worker:
    """One worker of the pool: its current process, the pages it owes answers for, in
    order, and the end of the process's standard error. When the process stops, the pool
    (``on_stop``) either fails what it owes or has :meth:`start` run a new process, which
    is sent the pages still owed first."""

    def __init__(self, settings: bytes, on_stop: OnStop) -> None:
        self._settings = settings
        self._on_stop = on_stop
        self.waiting: deque[_Job] = deque()
        self.process: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None
        self.answered = 0
        """Pages the current process has answered."""
        self.restart: asyncio.Task[None] | None = None
        """The start of the next process, while it runs."""
        self.starting = True
        """A process is being started: pages owed are sent once it is."""
        self._stderr = b""

    async def start(self) -> None:
        """Start a process and send it the settings, then the pages still owed (a stopped
        process's), in order; pages sent meanwhile wait for that."""
        self.starting = True
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", WORKER_CODE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise WorkerStopped(f"cannot start a link-extraction worker: {exc}") from exc
        widen_channel(process.stdin)
        self.process = process
        self.answered = 0
        self._stderr = b""
        errors = asyncio.create_task(self._read_errors(process))
        self.reader = asyncio.create_task(self._read_answers(process, errors))
        # An extraction cancelled meanwhile (the crawl was) is not sent again.
        self.waiting = deque(job for job in self.waiting if not job.answer.done())
        stdin = process.stdin
        assert stdin is not None
        stdin.writelines([self._settings, *(frame for job in self.waiting for frame in job.frames)])
        self.starting = False
        with contextlib.suppress(ConnectionError):
            await stdin.drain()

    async def _read_errors(self, process: asyncio.subprocess.Process) -> None:
        stderr = process.stderr
        assert stderr is not None
        while chunk := await stderr.read(STDERR_BYTES):
            self._stderr = (self._stderr + chunk)[-STDERR_BYTES:]

    async def _read_answers(
        self, process: asyncio.subprocess.Process, errors: asyncio.Task[None]
    ) -> None:
        stdout = process.stdout
        assert stdout is not None
        while (answer := await read_frame(stdout)) is not None:
            job = self.waiting.popleft()
            self.answered += 1
            # A job whose extraction was cancelled (the crawl was) is done already.
            if not job.answer.done():
                job.answer.set_result(answer)
        await errors
        returncode = await process.wait()
        self._on_stop(self, stop_reason(returncode, self._stderr.decode(errors="replace")))

    def fail(self, error: Exception) -> None:
        """Fail every page this worker owes with ``error``."""
        while self.waiting:
            job = self.waiting.popleft()
            if not job.answer.done():
                job.answer.set_exception(error)

    async def send(self, job: _Job) -> None:
        """Send a page owed (the last of :attr:`waiting`). A process starting or gone away
        is not an error here: a new one is sent every page owed when it starts."""
        if self.starting or self.process is None:
            return
        stdin = self.process.stdin
        assert stdin is not None
        if stdin.is_closing():
            return
        # One write, one system call: uvloop sends each write at once.
        stdin.writelines(job.frames)
        with contextlib.suppress(ConnectionError):
            await stdin.drain()


class ExtractPool(AsyncResource):
    """Runs the extract stage in ``workers`` processes, or inline when ``workers`` is 0.

    A worker process that dies after it has answered a page (killed by the kernel's
    out-of-memory killer or an operator, or crashed by a page) is replaced: the page it
    held fails with :class:`ExtractFailed`, and the new process is sent the pages queued
    behind it. One that dies before answering any page (it cannot import its code), or
    the ``MAX_DEATHS``-th death within ``DEATH_WINDOW`` seconds, fails every page owed and
    every later one with :class:`WorkerStopped`: replacing it would only repeat that.
    """

    def __init__(
        self,
        settings: ExtractSettings,
        workers: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inline = Extractor(settings) if workers == 0 else None
        self._settings = settings
        self.handles = bool(settings.handlers)
        """Whether pages may have handlers: their extraction then wants a :class:`Fetched`."""
        self._count = workers
        self._clock = clock
        self._workers: list[_Worker] = []
        self._deaths: deque[float] = deque()
        self._stopped: str | None = None
        """Why the pool answers nothing more, once it does not."""
        self._closing = False

    async def _acquire(self) -> None:
        """Start the workers without waiting for them to load their code: they load it
        while the crawl opens its store and asks for robots.txt, and the first pages
        wait in their channels meanwhile (a worker that cannot start fails the first
        extraction sent to it)."""
        settings = frame(self._settings)
        for _ in range(self._count):
            worker = _Worker(settings, self._worker_stopped)
            self._workers.append(worker)
            await worker.start()

    def _worker_stopped(self, worker: _Worker, reason: str) -> None:
        """A worker's process stopped for ``reason``: replace it, or stop the pool."""
        if self._closing:
            worker.fail(WorkerStopped(f"a link-extraction worker stopped: {reason}"))
            return
        now = self._clock()
        self._deaths.append(now)
        while self._deaths[0] <= now - DEATH_WINDOW:
            self._deaths.popleft()
        if worker.answered == 0 or len(self._deaths) >= MAX_DEATHS:
            self._stop(worker, reason)
            return
        # Answers come in order: the first page owed is the one the worker was extracting.
        held = worker.waiting.popleft() if worker.waiting else None
        if held is None:
            log.warning("a link-extraction worker stopped (%s): starting another", reason)
        else:
            log.warning(
                "a link-extraction worker stopped (%s) while extracting %s: that page "
                "failed; starting another", reason, held.url,
                extra={"url": held.url, "error": "extract_failed"},
            )  # fmt: skip
            if not held.answer.done():
                held.answer.set_exception(
                    ExtractFailed(f"its link-extraction worker stopped: {reason}")
                )
        worker.starting = True
        worker.restart = asyncio.create_task(self._restart(worker))

    async def _restart(self, worker: _Worker) -> None:
        try:
            await worker.start()
        except WorkerStopped as exc:
            self._stop(worker, str(exc).removeprefix("cannot start a link-extraction worker: "))

    def _stop(self, worker: _Worker, reason: str) -> None:
        """Fail every page the worker owes, and every page sent to the pool later, with
        ``reason``."""
        if self._stopped is None:
            self._stopped = reason
        worker.fail(self._failure())

    def _failure(self) -> WorkerStopped:
        return WorkerStopped(f"a link-extraction worker stopped: {self._stopped}")

    async def close(self) -> None:
        """Stop the workers (they exit at end of input); safe to call more than once."""
        self._closing = True
        workers, self._workers = self._workers, []
        for worker in workers:
            if worker.restart is not None:
                await worker.restart
        for worker in workers:
            if worker.process is not None and worker.process.stdin is not None:
                worker.process.stdin.close()
        for worker in workers:
            if worker.process is not None:
                await worker.process.wait()
            if worker.reader is not None:
                await worker.reader

    async def extract(
        self,
        url: str,
        depth: int,
        body: bytes,
        content_type: str | None,
        robots_tags: Sequence[str],
        fetched: Fetched | None = None,
    ) -> Extracted:
        """Extract one page, on the least busy worker when there are workers; ``fetched``
        (when :attr:`handles`) for its handler."""
        if self._inline is not None:
            return self._inline.extract(url, depth, body, content_type, robots_tags, fetched)
        if not self._workers:
            raise RuntimeError("ExtractPool used outside its context")
        if self._stopped is not None:
            raise self._failure()
        worker = min(self._workers, key=lambda w: len(w.waiting))
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        # The body follows its job frame raw: pickling it would copy it twice more.
        job = (url, depth, content_type, tuple(robots_tags))
        frames = (
            frame(job if fetched is None else (*job, tuple(fetched))),
            FRAME.pack(len(body)),
            body,
        )
        sent = _Job(url, frames, answer)
        worker.waiting.append(sent)
        await worker.send(sent)
        return _extracted(await answer)
