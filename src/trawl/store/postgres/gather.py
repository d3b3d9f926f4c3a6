"""Requests for single hosts that arrive together, served by one statement.

A crawl starts hundreds of hosts a second, and each one's first turns ask the store
about that host alone: claim its address, read its cached robots.txt, read its soft-404
answer. One transaction each queued them behind the store's few connections (in
``bench.world`` at 10,000 hosts they waited 0.2 s on average for a connection, and the
claims each waited for the crawl's lease lock and a WAL flush of their own).
:class:`Gathered` serves a request at once when none of its kind is being served, and
otherwise keeps it for the next statement, with every other request that arrives
meanwhile: the batches form on their own, as the committer's do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

MAX_GATHERED = 1000
"""Requests served by one statement at most."""


class Gathered(Generic[K, V]):
    """Serves single requests (``ask``) in batches: ``serve`` takes the requests of a
    batch, in order, and returns their answers in the same order."""

    def __init__(self, serve: Callable[[Sequence[K]], Awaitable[Sequence[V]]]) -> None:
        self._serve = serve
        self._waiting: list[tuple[K, asyncio.Future[V]]] = []
        self._task: asyncio.Task[None] | None = None

    async def ask(self, request: K) -> V:
        """The answer to ``request``, served with whatever else is waiting."""
        answer: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._waiting.append((request, answer))
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        return await answer

    async def close(self) -> None:
        """Stop serving: requests still waiting are cancelled."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for _, answer in self._waiting:
            answer.cancel()
        self._waiting.clear()

    async def _run(self) -> None:
        try:
            while self._waiting:
                batch = [(r, a) for r, a in self._waiting[:MAX_GATHERED] if not a.done()]
                del self._waiting[:MAX_GATHERED]
                if not batch:
                    continue
                try:
                    values = await self._serve([request for request, _ in batch])
                except Exception as exc:
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                except BaseException:
                    for _, answer in batch:
                        answer.cancel()
                    raise
                for (_, answer), value in zip(batch, values, strict=True):
                    if not answer.done():
                        answer.set_result(value)
        finally:
            if self._task is asyncio.current_task():
                self._task = None
