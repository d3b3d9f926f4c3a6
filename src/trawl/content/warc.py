"""WARC output: every fetch kept as the request sent and the response received.

Each fetch becomes a ``response`` record (a ``revisit`` record for a 304 answer to a
conditional GET) followed by its ``request`` record, in WARC 1.1 files; the records and
what they hold are built by trawl.content.warc_records, each its own gzip member, so a
reader can start at any record's offset.

Files are named ``<prefix>-<UTC time to the microsecond>-<serial>-<random>.warc.gz``, so
they sort by time and two writers never pick the same name, and each starts with a
``warcinfo`` record. A file is written as ``<name>.warc.gz.open`` and renamed once it is
complete (when it reaches the size limit or the writer closes), so a file under its final
name is never written again. Each closed file then gets its CDXJ index beside it
(trawl.content.cdxj), made by a child process that a thread of its own waits for, so that
writing goes on meanwhile; a writer that starts indexes the closed files of its directory
that have none (a run stopped between the two), and closing waits for every index. A
writer that starts also publishes the ``.open`` files a killed writer left (their
records are whole, see below): renamed to their final names and indexed by reading them
back, so the records of pages a crawl committed before a kill -9 reach the index and an
``--output`` upload. ``on_closed`` hears of each file once its index is written, and
``locate`` gives the bucket and key a file's records will be at (``--output``), which
each :class:`StorageKey` then names.

All file work runs on one dedicated thread, so the event loop never blocks on disk or on
compression. That thread takes the exchanges in batches: every exchange handed to the
writer while it was busy with the last batch. It builds their records and writes them
with one write a file (one for the records before a rotation, one for those after), then
wakes the event loop once to resolve every caller of the batch, where a round trip
between the threads for each page woke the loop once a page. Whole exchanges reach the
operating system in one write, and a caller's ``write`` returns only after its records
did, so after a kill -9 the ``.open`` file holds every exchange whose write returned, and
nothing torn unless the machine itself stopped part way through a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Self, TypeVar

from trawl import __version__
from trawl.content.cdxj import index_in_child, index_line, lines_path, load_surt, unindexed
from trawl.content.rotation import check_rotation
from trawl.content.warc_records import WarcExchange, exchange_records, warcinfo_record
from trawl.errors import TrawlError
from trawl.resource import AsyncResource
from trawl.store.values import StorageKey

T = TypeVar("T")

DEFAULT_MAX_SIZE = 1024**3
"""Default size at which a WARC file is closed and the next one started (1 GiB)."""
SUFFIX = ".warc.gz"
PARTIAL = ".open"
"""Added to the name of the file being written; dropped by a rename once it is complete."""

_Written = tuple[StorageKey, int, int]
"""Where an exchange's response record is, the bytes written for it (its file's warcinfo
record included when it started the file), and whether it started a file (0 or 1)."""
_Waiting = tuple[WarcExchange, "asyncio.Future[StorageKey]"]


@dataclass(frozen=True, slots=True)
class WarcStatistics:
    """What a writer has written so far."""

    exchanges: int
    files: int
    bytes: int


class WarcWriter(AsyncResource):
    """Writes exchanges to rotating WARC files in ``directory``.

    A file is closed and the next one started before an exchange would take it past
    ``max_size`` bytes; only a file holding a single exchange can be larger. ``info``
    adds fields to each file's warcinfo record (for example ``http-header-user-agent``).
    """

    def __init__(
        self,
        directory: Path,
        *,
        prefix: str = "trawl",
        max_size: int = DEFAULT_MAX_SIZE,
        info: Mapping[str, str] | None = None,
        on_closed: Callable[[], None] | None = None,
        locate: Callable[[str], tuple[str, str] | None] | None = None,
    ) -> None:
        check_rotation("WARC", prefix, max_size)
        self._on_closed = on_closed
        self._locate = locate
        self._object: tuple[str, str] | None = None
        self.directory = directory
        self._prefix = prefix
        self._max_size = max_size
        self._info = {
            "software": f"trawl/{__version__}",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.1/",
            **(info or {}),
        }
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trawl-warc")
        self._indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trawl-cdxj")
        self._indexing: list[Future[None]] = []
        self._unindexed: list[Path] = []
        self._unindexed_lock = threading.Lock()
        self._lock = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._draining = False
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._pending_lines: list[str] = []
        self._file: IO[bytes] | None = None
        self._lines: IO[str] | None = None
        self._name = ""
        self._size = 0
        self._info_size = 0
        self._serial = 0
        self._last_stamp = 0
        self._closed = False
        self._exchanges = 0
        self._files = 0
        self._bytes = 0

    async def __aenter__(self) -> Self:
        await self._run(self._make_directory)
        await self._run(self._publish_leftovers)
        # Imported on the writer's thread while the crawl starts, before the first write.
        self._executor.submit(load_surt)
        for path in await self._run(lambda: unindexed(self.directory)):
            self._index(path)
        return self

    async def write(self, exchange: WarcExchange) -> StorageKey:
        """Write the response and request records of ``exchange``; returns where the
        response record is. The records have reached the operating system on return."""
        if self._closed:
            raise RuntimeError("WarcWriter used after close")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[StorageKey] = loop.create_future()
        with self._lock:
            self._waiting.append((exchange, future))
            idle, self._draining = not self._draining, True
        if idle:
            self._executor.submit(self._drain, loop)
        return await future

    def statistics(self) -> WarcStatistics:
        """Exchanges written, files started and bytes written so far."""
        return WarcStatistics(exchanges=self._exchanges, files=self._files, bytes=self._bytes)

    async def close(self) -> None:
        """Finish the current file (rename it to its final name); idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._run(self._seal)
        finally:
            self._executor.shutdown(wait=True)
            await asyncio.to_thread(self._indexer.shutdown, wait=True)
        for done in self._indexing:
            self._indexed(done)

    async def _run(self, func: Callable[[], T]) -> T:
        def guarded() -> T:
            try:
                return func()
            except OSError as exc:
                raise self._failure(exc) from exc

        return await asyncio.get_running_loop().run_in_executor(self._executor, guarded)

    def _make_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)

    def _index(self, path: Path) -> None:
        """Have the closed file ``path`` indexed: the indexing thread takes every file
        closed meanwhile into one child process."""
        with self._unindexed_lock:
            self._unindexed.append(path)
        self._indexing = [done for done in self._indexing if not done.done() or done.exception()]
        self._indexing.append(self._indexer.submit(self._index_waiting))

    def _index_waiting(self) -> None:
        with self._unindexed_lock:
            paths, self._unindexed = self._unindexed, []
        if paths:
            index_in_child(paths)
            if self._on_closed is not None:
                self._on_closed()

    def _publish_leftovers(self) -> None:
        """Give the ``.open`` files of a killed writer their final names; their index
        lines may lack the last records, so they go and the file is read back."""
        for partial in sorted(self.directory.glob(f"*{SUFFIX}{PARTIAL}")):
            final = partial.with_name(partial.name.removesuffix(PARTIAL))
            lines_path(final).unlink(missing_ok=True)
            os.rename(partial, final)

    @staticmethod
    def _indexed(done: Future[None]) -> None:
        """Raise what went wrong writing an index (a TrawlError)."""
        error = done.exception()
        if error is not None:
            raise error

    def _failure(self, exc: Exception) -> Exception:
        """What a caller is told of ``exc``: a failed file operation as one TrawlError."""
        if not isinstance(exc, OSError):
            return exc
        where = exc.filename or self.directory
        error = TrawlError(f"cannot write WARC file {where}: {exc.strerror}")
        error.__cause__ = exc
        return error

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the writer's thread: write the exchanges waiting, a batch at a time, until
        none is left; each batch's callers are resolved with one call into ``loop``."""
        while True:
            with self._lock:
                batch, self._waiting = self._waiting, []
                if not batch:
                    self._draining = False
                    return
            outcomes = self._write_batch([exchange for exchange, _ in batch])
            loop.call_soon_threadsafe(self._settle, batch, outcomes)

    def _settle(self, batch: list[_Waiting], outcomes: list[_Written | Exception]) -> None:
        """On the event loop: count what a batch wrote and resolve its callers."""
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Exception):
                if not future.done():
                    future.set_exception(outcome)
                continue
            key, written, opened = outcome
            self._exchanges += 1
            self._files += opened
            self._bytes += written
            if not future.done():
                future.set_result(key)

    def _write_batch(self, exchanges: list[WarcExchange]) -> list[_Written | Exception]:
        """Write the records of ``exchanges``, those for one file in one write; an
        exchange that could not be written gets the error instead."""
        outcomes: list[_Written | Exception] = []
        held: list[int] = []
        for exchange in exchanges:
            try:
                records = exchange_records(exchange)
                size = records.size
                end = self._size + self._pending_size
                if self._file is not None and end > self._info_size and end + size > self._max_size:
                    self._flush(held, outcomes)
                    self._seal()
                opened = 0
                if self._file is None:
                    self._start()
                    opened = 1
                offset = self._size + self._pending_size
                line = index_line(exchange, records, self._name, offset)
                self._pending += (records.response, records.request, records.conversion)
                self._pending_size += size
                self._pending_lines.append(line)
                held.append(len(outcomes))
                key = StorageKey(self._name, offset, len(records.response), *self._where())
                outcomes.append((key, size + opened * self._info_size, opened))
            except Exception as exc:
                outcomes.append(self._failure(exc))
        self._flush(held, outcomes)
        return outcomes

    def _where(self) -> tuple[str, str] | tuple[None, None]:
        """The bucket and key of the current file's object, if it is uploaded."""
        return self._object or (None, None)

    def _flush(self, held: list[int], outcomes: list[_Written | Exception]) -> None:
        """Write the pending records in one write, then their index lines; if the write
        fails, the exchanges they belong to (``held``, indexes into ``outcomes``) get the
        error."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        lines = "".join(self._pending_lines)
        self._pending = []
        self._pending_size = 0
        self._pending_lines = []
        try:
            self._append(data)
        except OSError as exc:
            failure = self._failure(exc)
            for index in held:
                outcomes[index] = failure
            return
        finally:
            held.clear()
        if self._lines is not None:
            try:
                self._lines.write(lines)
            except OSError:
                self._drop_lines()

    def _drop_lines(self) -> None:
        """Give up the current file's index lines (one could not be written): the file
        will be indexed by reading it back."""
        lines, self._lines = self._lines, None
        if lines is not None:
            with contextlib.suppress(OSError):
                lines.close()
            with contextlib.suppress(OSError):
                lines_path(self.directory / self._name).unlink(missing_ok=True)

    def _append(self, data: bytes) -> None:
        """Write all of ``data`` to the current file; on failure cut the file back to its
        last complete record, so one failed write never leaves a torn record behind."""
        if self._file is None:
            raise RuntimeError("no WARC file is open")
        view = memoryview(data)
        try:
            while view:
                view = view[self._file.write(view) or 0 :]
        except OSError:
            self._file.seek(self._size)
            self._file.truncate()
            raise
        self._size += len(data)

    def _next_name(self) -> str:
        """A new file name, later in time than the last one this writer chose."""
        stamp = max(time.time_ns() // 1000, self._last_stamp + 1)
        self._last_stamp = stamp
        moment = datetime.fromtimestamp(stamp // 1_000_000, UTC)
        digits = f"{moment:%Y%m%d%H%M%S}{stamp % 1_000_000:06d}"
        self._serial += 1
        return f"{self._prefix}-{digits}-{self._serial:05d}-{secrets.token_hex(3)}{SUFFIX}"

    def _start(self) -> None:
        """Create the next file under a name no file has yet and write its warcinfo."""
        while True:
            name = self._next_name()
            if (self.directory / name).exists():
                continue
            try:
                # Unbuffered, so each write reaches the OS whole; kept open across
                # calls and closed by _seal, hence no ``with`` (SIM115).
                self._file = open(self.directory / (name + PARTIAL), "xb", buffering=0)  # noqa: SIM115
            except FileExistsError:
                continue
            break
        self._name = name
        self._object = None if self._locate is None else self._locate(name)
        self._size = 0
        try:
            # Written as the records are; closed by _seal or _drop_lines.
            self._lines = lines_path(self.directory / name).open("x", encoding="utf-8")
        except OSError:
            self._lines = None
        self._append(warcinfo_record(name, self._info, time.time()))
        self._info_size = self._size

    def _seal(self) -> None:
        """Flush the current file to disk and give it its final name."""
        file, self._file = self._file, None
        if file is None:
            return
        if self._lines is not None:
            # On disk before the file's final name, so a closed file's lines are whole.
            try:
                self._lines.flush()
                os.fsync(self._lines.fileno())
                self._lines.close()
                self._lines = None
            except OSError:
                self._drop_lines()
        try:
            os.fsync(file.fileno())
        finally:
            file.close()
        os.rename(self.directory / (self._name + PARTIAL), self.directory / self._name)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self._index(self.directory / self._name)
