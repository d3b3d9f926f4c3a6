"""What the crawl shares with its child processes (the extract workers, the store's
process): length-prefixed pickles on their pipes, the end of their standard error kept,
and why one stopped, in one line."""

from __future__ import annotations

import asyncio
import pickle
import signal
import struct
from typing import Any

FRAME = struct.Struct(">I")
"""The length before each pickle on a child's pipe."""
STDERR_BYTES = 1 << 16
"""The end of a child's standard error kept to tell why it stopped: a traceback through
every import of the text extractor fits many times over."""

REASON_LINES = 5
"""At most this many lines of an exception's message make the one-line reason."""


def stop_reason(returncode: int | None, stderr: str) -> str:
    """Why a child process stopped, in one line: the signal that killed it, else the exception its
    standard error ends with (a traceback's last, unindented lines), else its exit status."""
    if returncode is not None and returncode < 0:
        try:
            name = f" ({signal.Signals(-returncode).name})"
        except ValueError:
            name = ""
        return f"killed by signal {-returncode}{name}"
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    message: list[str] = []
    while lines and not lines[-1][0].isspace() and len(message) < REASON_LINES:
        message.insert(0, lines.pop())
    if message:
        return " ".join(message)
    return f"exited with status {returncode}"


def frame(payload: object) -> bytes:
    """``payload`` as one frame: its pickle's length, then the pickle."""
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The object of the next frame on ``reader``; None at end of input."""
    try:
        (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        return None
