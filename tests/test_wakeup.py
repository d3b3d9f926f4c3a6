"""The engine's wake-up flag: raised, timed out, cancelled, and never a busy wait."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvloop

from trawl.crawl.wakeup import Wakeup


async def test_a_raised_flag_returns_at_once_until_cleared() -> None:
    flag = Wakeup()
    flag.set()
    await asyncio.wait_for(flag.wait(10.0), 1.0)
    assert flag.is_set()
    flag.clear()
    assert not flag.is_set()
    started = time.monotonic()
    await flag.wait(0.05)
    assert time.monotonic() - started >= 0.05


async def test_set_wakes_the_waiting_task() -> None:
    flag = Wakeup()
    waiter = asyncio.create_task(flag.wait(None))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    flag.set()
    await asyncio.wait_for(waiter, 1.0)


async def test_a_cancelled_wait_is_cancelled_and_a_later_one_works() -> None:
    flag = Wakeup()
    waiter = asyncio.create_task(flag.wait(10.0))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    later = asyncio.create_task(flag.wait(10.0))
    await asyncio.sleep(0)
    flag.set()
    await asyncio.wait_for(later, 1.0)


def test_a_sub_millisecond_wait_on_uvloop_lasts_its_time() -> None:
    # uvloop rounds timers to whole milliseconds: a 0.3 ms timer would fire at once and a
    # loop waiting for a turn 0.3 ms away would spin; the wait must last at least that.
    async def waits() -> list[float]:
        flag = Wakeup()
        spans = []
        for _ in range(20):
            started = time.monotonic()
            await flag.wait(0.0003)
            spans.append(time.monotonic() - started)
        return spans

    assert min(uvloop.run(waits())) >= 0.0003
