"""The crawl process's file-descriptor limit: raised at the start, and what it leaves for
connections.

Every connection is a file descriptor, and a polite crawl of many hosts holds one per
host in service, so the usual soft limit (1,024) binds long before the CPU does. A crawl
raises its soft limit to the hard one (:func:`raise_fd_limit`) when it starts, as the
command line and the library's ``Crawler`` both do through ``build_engine``; an
unprivileged process may, and needs nothing else.

:func:`fd_budget` is what connections may use of it: the limit less ``FD_RESERVE`` for
the rest of the crawl. Measured on a crawl with ``--warc --text --events`` and two
extract workers (``/proc/self/fd`` sampled every 10 ms, docs/PERFORMANCE.md): the
interpreter and event loop 7, SQLite 5 (database, WAL and shared memory, the checkpoint
thread's connection beside), the WARC file and its CDXJ index 2 (4 while a file
rotates), the text file 1 (2 while it rotates), the events file 1, three pipes per
extract worker, and a few UDP sockets for DNS: about 30. The reserve is four times that,
for more extract workers, a PostgreSQL pool, the metrics server and a margin.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

FD_RESERVE = 128
"""File descriptors kept for the store, logs, output files and extract workers' pipes."""
_NR_OPEN = Path("/proc/sys/fs/nr_open")
_UNLIMITED_FALLBACK = 1 << 20
"""The most a soft limit may be raised to when the hard one is unlimited and the
kernel's ceiling cannot be read (Linux's default ``fs.nr_open``)."""


@dataclass(frozen=True, slots=True)
class FdLimit:
    """The process's file-descriptor limit after :func:`raise_fd_limit`."""

    soft: int
    """What the process may open now."""
    hard: int
    """The most an unprivileged process may raise ``soft`` to."""
    before: int
    """The soft limit before it was raised."""

    def advice(self) -> str:
        """How to give the crawl more, for the warning when the limit binds."""
        if self.soft < self.hard:
            return f"raise it with `ulimit -n {self.hard}` before the crawl"
        return (
            f"raise the hard limit ({self.hard}) as root, e.g. `ulimit -Hn 1048576` or "
            "LimitNOFILE= in a systemd unit, then `ulimit -n` to match"
        )


def _ceiling(hard: int) -> int:
    """The soft limit the process may ask for, an unlimited hard limit made a number."""
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(_NR_OPEN.read_text().strip())
    except (OSError, ValueError):
        return _UNLIMITED_FALLBACK


def current() -> FdLimit:
    """The process's limit as it stands."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = _ceiling(hard)
    soft = ceiling if soft == resource.RLIM_INFINITY else soft
    return FdLimit(soft, ceiling, soft)


def raise_fd_limit() -> FdLimit:
    """Raise the soft limit to the hard one; the limit after. Safe to call more than
    once; a system that refuses leaves the limit as it was."""
    limit = current()
    if limit.soft >= limit.hard:
        return limit
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit.hard, hard))
    except (OSError, ValueError):
        return limit
    return FdLimit(limit.hard, limit.hard, limit.before)


def fd_budget(reserve: int = FD_RESERVE) -> int:
    """File descriptors the crawl's connections may use under the current soft limit:
    the limit less ``reserve``, and at least a quarter of it."""
    soft = current().soft
    return max(soft // 4, soft - reserve)
