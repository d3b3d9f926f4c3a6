"""The HTTP client's connection pool: idle connections kept for their origin's next
request, and the count of every connection open.

At most ``limit`` connections are idle in all; the one idle longest makes room, and one
idle longer than ``timeout`` is not reused. The pool also counts the sockets the client
holds open, idle or in use (``sockets``), against the file-descriptor budget
(trawl.fetch.fdlimit).
"""

from __future__ import annotations

import time
from typing import Generic, Protocol, TypeVar

IDLE_TIMEOUT = 15.0
"""Seconds an idle connection may be reused for."""

Origin = tuple[str, str, int]
"""(scheme, host, port): what a pooled connection is reused for."""


class Pooled(Protocol):
    """What the pool needs of a connection."""

    origin: Origin
    closed: bool
    counted: bool
    """True while the connection counts in ``Pool.sockets``."""

    def close(self) -> None:
        """Close the connection; it calls :meth:`Pool.forget` and :meth:`Pool.uncount`."""


C = TypeVar("C", bound=Pooled)


class Pool(Generic[C]):
    """Idle connections by origin, newest first; at most ``limit`` in all, none reused
    after ``timeout`` seconds idle."""

    def __init__(self, limit: int, timeout: float) -> None:
        self._limit = limit
        self._timeout = timeout
        self._idle: dict[Origin, list[C]] = {}
        self._since: dict[C, float] = {}
        """Every idle connection and when it went idle, longest idle first."""
        self.sockets = 0
        """Connections open or being opened, idle or in use."""

    def __len__(self) -> int:
        return len(self._since)

    def uncount(self, connection: C) -> None:
        """``connection`` has closed: its socket no longer counts."""
        if connection.counted:
            connection.counted = False
            self.sockets -= 1

    def take(self, origin: Origin) -> C | None:
        """A live idle connection to ``origin`` (the newest), or None."""
        stack = self._idle.get(origin)
        stale = time.monotonic() - self._timeout
        while stack:
            connection = stack[-1]
            since = self._since[connection]
            self._remove(connection)
            if not connection.closed and since > stale:
                return connection
            connection.close()
        return None

    def put(self, connection: C) -> None:
        """Keep ``connection`` for its origin's next request."""
        if self._limit <= 0:
            connection.close()
            return
        if len(self._since) >= self._limit:
            self.evict_oldest()
        self._idle.setdefault(connection.origin, []).append(connection)
        self._since[connection] = time.monotonic()

    def forget(self, connection: C) -> None:
        """Take ``connection`` out of the pool, if it is there (it was closed)."""
        if connection in self._since:
            self._remove(connection)

    def _remove(self, connection: C) -> None:
        del self._since[connection]
        stack = self._idle[connection.origin]
        stack.remove(connection)
        if not stack:
            del self._idle[connection.origin]

    def evict_oldest(self) -> bool:
        """Close the connection idle longest; False when none is idle."""
        oldest = next(iter(self._since), None)
        if oldest is None:
            return False
        oldest.close()
        return True

    def close(self) -> None:
        """Close every idle connection."""
        for connection in list(self._since):
            connection.close()
