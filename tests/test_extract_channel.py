"""The channel to an extract worker holds dozens of pages, under either event loop.

A worker that finds its channel empty waits for the crawl's event loop to write the next
page; with the systems' default channels (a 64 KB pipe, a 200 KB Unix socket, two to
eight pages) it waited whenever the loop was busy elsewhere. Here the reading end never
reads, and the writer counts what the channel accepts before it pushes back.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import pytest
import uvloop

from trawl.extract.channel import CHANNEL_BYTES, widen_channel

PAGE = b"x" * 40_000


async def accepted_bytes(widen: bool) -> int:
    """Bytes written to a child that never reads its input, before writing blocks."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)", stdin=asyncio.subprocess.PIPE
    )
    assert child.stdin is not None
    try:
        if widen:
            widen_channel(child.stdin)
        sent = 0
        while sent < 4 * CHANNEL_BYTES:
            child.stdin.write(PAGE)
            try:
                await asyncio.wait_for(child.stdin.drain(), 0.5)
            except TimeoutError:
                break
            sent += len(PAGE)
        return sent
    finally:
        child.kill()
        await child.wait()


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,  # the child's input is a pipe
    "uvloop": uvloop.new_event_loop,  # the child's input is a Unix socket
}


@pytest.mark.parametrize("loop", LOOPS)
def test_the_channel_to_a_worker_holds_dozens_of_pages(loop: str) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        default = runner.run(accepted_bytes(widen=False))
        widened = runner.run(accepted_bytes(widen=True))
    assert widened >= 0.9 * CHANNEL_BYTES
    assert widened >= 3 * default
