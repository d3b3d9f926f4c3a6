"""The uploader stage: each closed output file to the object store, off the event loop.

With ``--output s3://BUCKET/PREFIX`` the uploader looks through the data dir's ``warc/``,
``text/`` and ``items/`` directories when it starts, whenever a writer closes a file, every few
seconds, and when the crawl ends. Each file under its final name (never a ``.open``
one), as the writers name them, is an upload to make unless the store records its key
(``uploads``, schema migration 14): a WARC file once its CDXJ index is beside it, then
the index. Uploads run one at a time; the file's hashing and sending happen on the
uploader's own thread and in the client's threads (trawl.outputs.bucket), the event
loop only hears when one is done, so fetching never waits for them.

An upload confirmed by the store (a new object, or one that holds the file already: an
earlier attempt that a kill -9 cut off after the store took it) is recorded in the store
and the local file removed, unless ``--keep-local``. A key that holds other content is
a conflict: never overwritten, the local file kept, said once in the log and counted.
A store that cannot be reached or refuses pauses the uploads: the files stay, and the
next attempt comes after a back-off that doubles from 0.5 s up to 30 s. The figures
(:class:`UploadFigures`) feed the metrics and the crawl's summary.

At the end of the crawl the uploader tries what is pending for ``--upload-wait``
seconds at most; what is left is said in one log line, and uploaded when the crawl
next starts. A kill -9 at any point loses nothing: a file is removed only after the
store confirmed it and the crawl's store recorded it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from trawl.content.cdxj import INDEX_SUFFIX, WARC_SUFFIX, index_path
from trawl.outputs.bucket import Bucket, PutOutcome, StoreRefused
from trawl.outputs.target import MAX_OBJECT_SIZE, KeyLayout, Kind
from trawl.resource import AsyncResource
from trawl.store.protocols import Uploads
from trawl.store.values import UploadRecord

T = TypeVar("T")

SCAN_INTERVAL = 5.0
"""Seconds between looks through the directories when no writer said a file closed."""
BACKOFF = (0.5, 30.0)
"""The first and the longest wait before trying a store that refused again (seconds)."""

log = logging.getLogger("trawl.outputs.uploader")


@dataclass(frozen=True, slots=True)
class UploadFigures:
    """What the uploader did in this run and what it has left."""

    files: int = 0
    bytes: int = 0
    pending: int = 0
    pending_bytes: int = 0
    failures: int = 0
    """Attempts the store refused or could not be reached for."""
    conflicts: int = 0
    """Files whose key holds other content in the bucket (kept locally)."""
    paused: bool = False

    def counts(self) -> dict[str, int]:
        """The figures as the summary's ``uploads`` (zeros left out)."""
        values = {
            "files": self.files, "bytes": self.bytes, "pending": self.pending,
            "pending_bytes": self.pending_bytes, "failures": self.failures,
            "conflicts": self.conflicts,
        }  # fmt: skip
        return {name: value for name, value in values.items() if value}


@dataclass(frozen=True, slots=True)
class _Local:
    """A closed output file to upload."""

    kind: Kind
    path: Path
    key: str
    size: int


class _OwnThread:
    """One daemon thread that runs the blocking work handed to it, in turn. A daemon, so
    that an upload the crawl stopped waiting for never holds the process's exit."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], object], concurrent.futures.Future[object]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, func: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((func, future))  # type: ignore[arg-type]  # one future per job
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        self._jobs.put(None)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            func, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = func()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


class Uploader(AsyncResource):
    """Uploads the closed files of ``directories`` (each output's directory) to the
    bucket of ``layout``, recording them in ``store`` as ``worker``'s (see the module
    doc). :meth:`nudge` (from any thread) says a file was closed."""

    def __init__(
        self,
        layout: KeyLayout,
        directories: Mapping[Kind, Path],
        store: Uploads,
        worker: str,
        *,
        backoff: tuple[float, float] = BACKOFF,
    ) -> None:
        self.layout = layout
        self.target = layout.target
        self._directories = dict(directories)
        self._store = store
        self._worker = worker
        self._backoff = backoff
        self._retry_in = backoff[0]
        self._bucket: Bucket | None = None
        self._thread: _OwnThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._closed = False
        self._done: set[str] = set()
        self._conflicted: set[str] = set()
        self._pending: dict[str, int] = {}
        self._files = 0
        self._bytes = 0
        self._failures = 0
        self._paused: str | None = None
        """Why the store refused the last attempt, while uploads are paused."""

    async def _acquire(self) -> None:
        self._bucket = Bucket(self.target)
        self._loop = asyncio.get_running_loop()
        self._thread = _OwnThread("trawl-upload")
        self._task = asyncio.create_task(self._run(), name="trawl-uploader")

    def nudge(self) -> None:
        """A writer closed a file: look for uploads now (callable from any thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)

    def figures(self) -> UploadFigures:
        """What this run uploaded and what is pending."""
        return UploadFigures(
            files=self._files,
            bytes=self._bytes,
            pending=len(self._pending),
            pending_bytes=sum(self._pending.values()),
            failures=self._failures,
            conflicts=len(self._conflicted),
            paused=self._paused is not None,
        )

    async def close(self) -> None:
        """Upload what is pending for the target's ``wait`` seconds at most, then stop;
        say in one line what is left. Idempotent."""
        if self._closed:
            return
        self._closed = True
        task = self._task
        if task is not None:
            self._closing = True
            self._wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), self.target.wait)
            except TimeoutError:
                task.cancel()
                await asyncio.wait([task])
                # What is left, the files closed since the last pass included (looked
                # for on another thread: the uploader's may still be in a PUT).
                await self._find_pending(final=True)
        if self._thread is not None:
            self._thread.stop()
        left = self.figures()
        if left.pending:
            why = f"the store refused: {self._paused}" if self._paused else "out of time"
            log.warning(
                "%d files (%d bytes) not uploaded to %s (%s); the crawl's next start "
                "uploads them", left.pending, left.pending_bytes, self.target.url, why,
                extra={"upload_pending": left.pending},
            )  # fmt: skip

    async def _run(self) -> None:
        try:
            await self._passes()
        except Exception as exc:
            # Said now, not only when the crawl ends and close() raises it.
            log.error("uploads to %s stopped: %s", self.target.url, exc)
            raise

    async def _passes(self) -> None:
        while True:
            self._wake.clear()
            # Only a pass that began after close() was asked for has seen every file: one
            # under way then may have looked before the writers' last files were closed.
            closing = self._closing
            finished = await self._upload_pending()
            if closing and finished:
                return
            if self._paused is not None:
                await asyncio.sleep(self._retry_in)
                self._retry_in = min(self._retry_in * 2, self._backoff[1])
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SCAN_INTERVAL)

    async def _upload_pending(self) -> bool:
        """One pass: find the files to upload and upload them in turn; False when the
        store refused one (the rest wait for the next pass)."""
        thread, bucket = self._thread, self._bucket
        assert thread is not None
        assert bucket is not None
        fresh = await self._find_pending()
        for local in fresh:
            if local.key in self._pending and not await self._upload(bucket, thread, local):
                return False
        return True

    async def _find_pending(self, *, final: bool = False) -> list[_Local]:
        """Look through the directories: the files the store records as uploaded are done
        (and removed unless kept, but not in the ``final`` look), the others pending;
        returns the files not done."""
        assert self._thread is not None
        found = await (asyncio.to_thread(self._scan) if final else self._thread.run(self._scan))
        fresh = [local for local in found if local.key not in self._done]
        recorded = await self._store.uploaded(self.target.bucket, [f.key for f in fresh])
        self._pending = {}
        for local in fresh:
            if local.key in recorded:
                self._done.add(local.key)
                if not final:
                    await self._remove(local)
            elif local.key not in self._conflicted:
                self._pending[local.key] = local.size
        return fresh

    async def _upload(self, bucket: Bucket, thread: _OwnThread, local: _Local) -> bool:
        """Upload ``local``; False when the store refused it."""
        if local.size > MAX_OBJECT_SIZE:
            self._conflict(local, f"it is larger than {MAX_OBJECT_SIZE} bytes, S3's PUT limit")
            return True
        try:
            put = await thread.run(lambda: bucket.put_new(local.key, local.path))
        except StoreRefused as exc:
            self._refused(str(exc))
            return False
        except FileNotFoundError:
            self._pending.pop(local.key, None)
            return True
        except OSError as exc:
            self._refused(f"cannot read {local.path}: {exc.strerror}")
            return False
        if put.outcome is PutOutcome.CONFLICT:
            self._conflict(local, "the key holds other content")
            return True
        await self._store.record_upload(
            UploadRecord(
                bucket=self.target.bucket, key=local.key, file=local.path.name, size=put.size,
                sha256=put.sha256, worker=self._worker, uploaded_at=time.time(),
            )
        )  # fmt: skip
        self._done.add(local.key)
        self._pending.pop(local.key, None)
        self._files += 1
        self._bytes += put.size
        if self._paused is not None:
            log.warning("uploads to %s resumed", self.target.url)
            self._paused = None
            self._retry_in = self._backoff[0]
        await self._remove(local)
        return True

    def _refused(self, why: str) -> None:
        self._failures += 1
        if self._paused is None:
            log.warning(
                "uploads to %s paused, files kept, retrying: %s", self.target.url, why,
                extra={"upload_error": why},
            )  # fmt: skip
        self._paused = why

    def _conflict(self, local: _Local, why: str) -> None:
        self._conflicted.add(local.key)
        self._pending.pop(local.key, None)
        log.error(
            "not uploaded to %s: %s (%s); the file is kept", self.target.url, local.key, why,
            extra={"upload_conflict": local.key},
        )  # fmt: skip

    async def _remove(self, local: _Local) -> None:
        if self.target.keep_local:
            return
        assert self._thread is not None
        try:
            await self._thread.run(lambda: local.path.unlink(missing_ok=True))
        except OSError as exc:
            log.warning("cannot remove uploaded file %s: %s", local.path, exc.strerror)

    def _scan(self) -> list[_Local]:
        """On the uploader's thread: the closed files to consider, a WARC file before
        its index and only once the index is there."""
        found: list[tuple[tuple[str, int], _Local]] = []
        for kind, directory in self._directories.items():
            try:
                entries = list(directory.iterdir())
            except FileNotFoundError:
                continue
            for path in entries:
                key = self.layout.key(kind, path.name)
                if key is None or key in self._done:
                    continue
                if path.name.endswith(WARC_SUFFIX) and not index_path(path).exists():
                    continue
                try:
                    size = path.stat().st_size
                except FileNotFoundError:
                    continue
                stem = path.name.removesuffix(WARC_SUFFIX).removesuffix(INDEX_SUFFIX)
                order = (stem, int(path.name.endswith(INDEX_SUFFIX)))
                found.append((order, _Local(kind, path, key, size)))
        return [local for _, local in sorted(found, key=lambda item: item[0])]
