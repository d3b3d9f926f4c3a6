"""The embedded store in a process of its own, so the crawl's interpreter is the event
loop's alone.

:class:`SQLiteStore` runs its statements on a thread of the process that opens it, and
the Python around them (a commit's rows built, a claim's rows read) holds that process's
interpreter lock: at the world benchmark's shape that thread took a third of a core, and
the event loop waited for the lock behind it. :class:`StoreProcess` is the same store,
every role of :class:`trawl.store.protocols.Store`, run in a child process: a call
crosses as one length-prefixed pickle on the child's standard input, its answer comes
back on the child's standard output, so the crawl process pays a pickle each way and the
store's work runs on another core.

The child changes nothing of what a store guarantees:

- Calls reach the store in the order they were made, as they do its one thread, and a
  transaction commits or not as before: a crawl killed (even by kill -9) mid-call leaves
  the database as in-process, and the child, whose standard input closes with the
  crawl, ends the call in hand and exits (nothing else is started).
- The child holds the data dir's lock with its parent (it inherits the locked file), so
  no new crawl opens the database until the child of a dead crawl has exited.
- A commit's batch comes back settled: the fenced parts the store accepted are in its
  outcomes, as :meth:`SQLiteStore.commit` leaves them.
- An error in the child is raised in the crawl as it was there (a :class:`StoreError`
  for the database's own); a child that dies fails every call in hand and every later
  one with a :class:`StoreError` saying why, in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import signal
import sys
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from trawl.children import STDERR_BYTES, frame, read_frame, stop_reason
from trawl.errors import StoreError
from trawl.resource import AsyncResource
from trawl.store.values import (
    ANY_URL,
    Blocks,
    CommitBatch,
    CommitResult,
    ExportRow,
    HostFigures,
    HostRow,
    ItemRow,
    Lease,
    QueuedURL,
    RobotsRecord,
    Soft404Record,
    UploadRecord,
    UrlFilter,
)

CHILD_CODE = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "from trawl.store.process import child_main; child_main()"
)
"""What the child runs: it ignores the stop signals before loading any code (the crawl
decides when to stop, and closes the child's input)."""
_OPEN = "__open__"
_ITER = "__iter__"
_NEXT = "__next__"


def _sendable(error: BaseException) -> BaseException:
    """``error`` as it can cross to the crawl: itself if it pickles and loads back, else a
    :class:`StoreError` with its text."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return StoreError(f"{type(error).__name__}: {error}")
    return error


class StoreProcess(AsyncResource):
    """A :class:`trawl.store.sqlite.store.SQLiteStore` of ``data_dir`` opened with
    ``options``, run in a child process."""

    def __init__(self, data_dir: Path, **options: Any) -> None:
        self._settings = frame((data_dir, options))
        self._process: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._seq = itertools.count()
        self._reader: asyncio.Task[None] | None = None
        self._errors: asyncio.Task[None] | None = None
        self._stderr = b""
        self._failure: StoreError | None = None
        self._closed = False

    async def _acquire(self) -> None:
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CHILD_CODE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                close_fds=False,  # the data dir's lock, made inheritable, and no other
            )  # fmt: skip
        except OSError as exc:
            raise StoreError(f"cannot start the store process: {exc}") from exc
        assert self._process.stdin is not None
        self._process.stdin.write(self._settings)
        self._errors = asyncio.create_task(self._read_errors(self._process))
        self._reader = asyncio.create_task(self._read_answers(self._process))
        await self._call(_OPEN)

    async def close(self) -> None:
        """End the child's input, wait for it to close the store and exit; idempotent."""
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process is None:
            return
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        if self._reader is not None:
            # The child ends the calls in hand, closes the store and exits.
            await asyncio.shield(self._reader)

    async def _read_errors(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(STDERR_BYTES):
            self._stderr = (self._stderr + chunk)[-STDERR_BYTES:]

    async def _read_answers(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while (answer := await read_frame(process.stdout)) is not None:
            seq, ok, value = answer
            future = self._pending.pop(seq)
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        if self._errors is not None:
            await self._errors
        returncode = await process.wait()
        if self._closed and returncode == 0 and not self._pending:
            return
        reason = stop_reason(returncode, self._stderr.decode(errors="replace"))
        self._failure = StoreError(f"the store process stopped: {reason}")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._failure)
        self._pending.clear()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._failure is not None:
            raise self._failure
        process = self._process
        if process is None or process.stdin is None or process.stdin.is_closing():
            if self._reader is not None and not self._closed:
                await asyncio.shield(self._reader)  # the child died: say why
            raise self._failure or StoreError("store is not open")
        seq = next(self._seq)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[seq] = future
        process.stdin.write(frame((seq, name, args, kwargs)))
        with contextlib.suppress(ConnectionError):
            await process.stdin.drain()
        return await future

    async def _iterate(self, name: str, *args: Any) -> AsyncIterator[Any]:
        handle = await self._call(_ITER, name, *args)
        while (chunk := await self._call(_NEXT, handle)) is not None:
            yield chunk

    # -- Leases --------------------------------------------------------------------------

    async def recover(self, worker: str | None = None, *, now: float | None = None) -> int:
        return cast(int, await self._call("recover", worker, now=now))

    async def lease_hosts(
        self,
        worker: str,
        limit: int,
        ttl: float,
        holding: Collection[int] = (),
        *,
        crowded: Collection[str] = (),
        now: float | None = None,
    ) -> Sequence[Lease]:
        leases = await self._call(
            "lease_hosts", worker, limit, ttl, holding, crowded=tuple(crowded), now=now
        )
        return cast(Sequence[Lease], leases)

    async def claim_address(
        self,
        worker: str,
        host_id: int,
        generation: int,
        address: str,
        *,
        now: float | None = None,
    ) -> bool:
        claimed = await self._call("claim_address", worker, host_id, generation, address, now=now)
        return cast(bool, claimed)

    async def renew_leases(
        self, worker: str, leases: Mapping[int, int], ttl: float, *, now: float | None = None
    ) -> frozenset[int]:
        return cast(frozenset[int], await self._call("renew_leases", worker, leases, ttl, now=now))

    # -- Frontier ------------------------------------------------------------------------

    async def claim(
        self,
        wanted: Mapping[int, int],
        now: float,
        worker: str | None = None,
        budgets: Mapping[int, int] | None = None,
    ) -> Sequence[QueuedURL]:
        return cast(Sequence[QueuedURL], await self._call("claim", wanted, now, worker, budgets))

    async def work_left(self) -> int:
        return cast(int, await self._call("work_left"))

    async def requeue_due(
        self, now: float, limit: int, *, every: bool = False, sitemaps: bool = False
    ) -> int:
        return cast(
            int, await self._call("requeue_due", now, limit, every=every, sitemaps=sitemaps)
        )

    async def next_due(self) -> float | None:
        return cast(float | None, await self._call("next_due"))

    async def requeue_failed(self, error: str) -> int:
        return cast(int, await self._call("requeue_failed", error))

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        return cast(Mapping[str, int], await self._call("host_ids", names))

    # -- Known URLs ----------------------------------------------------------------------

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        return cast(Mapping[int, str], await self._call("existing", ids))

    def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        return self._iterate("iter_ids", batch)

    def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        return self._iterate("queued_depths", batch)

    # -- Commits -------------------------------------------------------------------------

    async def commit(self, batch: CommitBatch) -> CommitResult:
        result, settled = await self._call("commit", batch)
        if settled is not None:
            # The fenced parts were settled in the child: the batch says so here too.
            batch.outcomes, batch.hosts, batch.items, batch.counters = settled
            batch.fenced = []
        return cast(CommitResult, result)

    # -- Content index -------------------------------------------------------------------

    async def content_owners(self, hashes: Sequence[str]) -> Mapping[str, int]:
        return cast(Mapping[str, int], await self._call("content_owners", hashes))

    async def content_hashes(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        return cast(Mapping[int, str], await self._call("content_hashes", url_ids))

    async def canonicals(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        return cast(Mapping[int, str], await self._call("canonicals", url_ids))

    async def simhash_candidates(self, blocks: Blocks) -> list[tuple[int, int]]:
        return cast(list[tuple[int, int]], await self._call("simhash_candidates", blocks))

    # -- Host records ----------------------------------------------------------------------

    async def robots(self, host_id: int) -> RobotsRecord | None:
        return cast(RobotsRecord | None, await self._call("robots", host_id))

    async def soft404(self, host_id: int) -> Soft404Record | None:
        return cast(Soft404Record | None, await self._call("soft404", host_id))

    # -- Reports ---------------------------------------------------------------------------

    async def counters(self) -> Mapping[str, int]:
        return cast(Mapping[str, int], await self._call("counters"))

    async def get_meta(self, key: str) -> str | None:
        return cast(str | None, await self._call("get_meta", key))

    async def set_meta(self, key: str, value: str) -> None:
        await self._call("set_meta", key, value)

    def export(self) -> AsyncIterator[ExportRow]:
        return self._iterate("export")

    def items(self) -> AsyncIterator[ItemRow]:
        return self._iterate("items")

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        figures = await self._call("host_figures", limit)
        return cast(tuple[list[HostFigures], list[HostFigures]], figures)

    async def url_page(
        self, start: int, limit: int, wanted: UrlFilter = ANY_URL
    ) -> list[tuple[int, ExportRow]]:
        return cast(list[tuple[int, ExportRow]], await self._call("url_page", start, limit, wanted))

    async def host_page(
        self, order: str, descending: bool, limit: int, offset: int, now: float
    ) -> tuple[int, list[HostRow]]:
        page = await self._call("host_page", order, descending, limit, offset, now)
        return cast(tuple[int, list[HostRow]], page)

    async def host_states(self, now: float) -> dict[str, int]:
        return cast(dict[str, int], await self._call("host_states", now))

    # -- Uploads ---------------------------------------------------------------------------

    async def uploaded(self, bucket: str, keys: Collection[str]) -> set[str]:
        return cast(set[str], await self._call("uploaded", bucket, keys))

    async def record_upload(self, record: UploadRecord) -> None:
        await self._call("record_upload", record)


# -- The child ---------------------------------------------------------------------------


def child_main() -> None:
    """The store process: its settings first, then one call a frame until end of input."""
    import uvloop

    sys.stdout.flush()
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    uvloop.run(_serve(answers))


class _Child:
    """What the child serves: calls on its store, answered as each ends."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.store: Any = None
        self._iterators: dict[int, AsyncIterator[Any]] = {}

    def answer(self, seq: int, ok: bool, value: object) -> None:
        try:
            data = frame((seq, ok, value))
        except Exception as exc:
            data = frame((seq, False, StoreError(f"{type(exc).__name__}: {exc}")))
        self._writer.write(data)

    async def serve(
        self, seq: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        try:
            value = await self._run(seq, name, args, kwargs)
        except Exception as exc:
            self.answer(seq, False, _sendable(exc))
        else:
            self.answer(seq, True, value)

    async def _run(self, seq: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name == _ITER:
            method, *rest = args
            self._iterators[seq] = getattr(self.store, method)(*rest)
            return seq
        if name == _NEXT:
            (handle,) = args
            chunk = await anext(self._iterators[handle], None)
            if chunk is None:
                del self._iterators[handle]
            return chunk
        if name == "commit":
            (batch,) = args
            fenced = bool(batch.fenced)
            result = await self.store.commit(batch)
            settled = (batch.outcomes, batch.hosts, batch.items, batch.counters) if fenced else None
            return result, settled
        return await getattr(self.store, name)(*args, **kwargs)


async def _serve(answers: Any) -> None:
    from trawl.store.sqlite.store import SQLiteStore

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.Protocol, answers)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    child = _Child(writer)
    settings = await read_frame(reader)
    if settings is None:
        return
    data_dir, options = settings
    opening = await read_frame(reader)
    if opening is None:
        return
    seq = opening[0]
    try:
        child.store = await SQLiteStore(data_dir, inline=True, **options).__aenter__()
    except Exception as exc:
        child.answer(seq, False, _sendable(exc))
        return
    child.answer(seq, True, None)
    calls: set[asyncio.Task[None]] = set()
    try:
        while (call := await read_frame(reader)) is not None:
            task = asyncio.create_task(child.serve(*call))
            calls.add(task)
            task.add_done_callback(calls.discard)
        if calls:
            await asyncio.wait(calls)
    finally:
        await child.store.close()
        with contextlib.suppress(ConnectionError):
            await writer.drain()
