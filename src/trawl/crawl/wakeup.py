"""A wake-up flag for the engine's loops, cheaper than ``asyncio.Event`` under a timeout.

The dispatch loop sleeps and wakes thousands of times a second (every response, commit
and host turn wakes it). An ``asyncio.Event`` waited on inside ``asyncio.timeout`` costs
a timeout object, a rescheduled timer, a future and a waiter list on every wait; this
flag costs one future and one timer handle.
"""

from __future__ import annotations

import asyncio
import math
import time


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Wakeup:
    """A flag a single task waits on, with an optional time limit."""

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Raise the flag and wake the waiting task, if any."""
        self._set = True
        if self._waiter is not None:
            _release(self._waiter)

    def clear(self) -> None:
        self._set = False

    async def wait(self, seconds: float | None = None) -> None:
        """Return once the flag is raised, or after ``seconds`` (None: no limit).

        A cancellation cancels the wait and cannot be lost: the task awaits a plain
        future, not ``asyncio.wait_for``. ``seconds`` is rounded up to whole
        milliseconds: uvloop's timers count whole milliseconds and round, so a shorter
        wait would end at once and the caller would spin until its time came. uvloop also
        counts from the time it read at the start of its turn, so a timer set late in a busy
        turn can fire early: the wait then goes on for what is left.
        """
        if self._set:
            return
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            waiter = self._waiter = loop.create_future()
            timer = None
            if seconds is not None:
                timer = loop.call_later(math.ceil(seconds * 1000) / 1000, _release, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if deadline is None or self._set:
                return
            seconds = deadline - time.monotonic()
            if seconds <= 0:
                return
