"""A private event loop on a background thread, for the loopback test servers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """Runs an event loop on a daemon thread; ``stop`` is idempotent."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, setup: Callable[[], Awaitable[T]], timeout: float = 10) -> T:
        """Start the thread and run ``setup`` on it; on failure, stop again and raise."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
        self._thread.start()
        try:
            return self.run(setup, timeout)
        except BaseException:
            self.stop(None)
            raise

    def run(self, job: Callable[[], Awaitable[T]], timeout: float = 10) -> T:
        """Run ``job`` on the loop and wait for its result."""
        if self._loop is None:
            raise RuntimeError(f"{self._name} is not running")

        async def call() -> T:
            return await job()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout=timeout)

    def stop(self, cleanup: Callable[[], Awaitable[object]] | None) -> None:
        """Run ``cleanup`` (if any) on the loop, then stop it and join the thread."""
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        try:
            if cleanup is not None:
                asyncio.run_coroutine_threadsafe(_awaited(cleanup), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()


async def _awaited(job: Callable[[], Awaitable[object]]) -> None:
    await job()
