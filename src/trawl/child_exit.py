"""Why a child process stopped, in one line: what the crawl says when an extract worker
or the store's process dies."""

from __future__ import annotations

import signal

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
