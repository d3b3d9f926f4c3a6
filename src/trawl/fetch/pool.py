"""The HTTP client's connection pool: idle connections kept for their host's next turn,
and the count of every connection open.

A polite crawl of many hosts asks each one thing every second or more, so what the pool
holds is mostly hosts at rest. A connection is worth keeping only while its server
still holds it: Apache closes an idle connection after 5 s by default, nginx after 75 s,
and a request sent on one the server has just closed has to be sent again. So the pool
keeps a connection at most ``idle_timeout`` (4.5 s), closing it then (a sweep every
``SWEEP_EVERY`` while anything is idle) rather than when it is next asked for, and the
crawl drops a host's idle connections at once
when the host's next turn is further off than ``KEEP_WINDOW`` (4 s) or it has nothing
waiting (:meth:`Pool.drop_host`, called through ``Fetcher.host_rests``): idle sockets
do not pile up with thousands of hosts resting, and a host with a short delay keeps
reusing one connection.

At most ``limit`` connections are idle in all; the one idle longest makes room. The
pool also counts the sockets the client holds open, idle or in use (``sockets``),
against the file-descriptor budget (trawl.fetch.fdlimit).
"""

from __future__ import annotations

import asyncio
import time
from typing import Generic, Protocol, TypeVar

IDLE_TIMEOUT = 4.5
"""Seconds an idle connection is kept at most: under Apache's default keep-alive
timeout (5 s), so that a server has probably not closed what the pool hands out."""
KEEP_WINDOW = 4.0
"""A host's idle connection is kept only when its next turn is at most this many
seconds off (and it has URLs waiting)."""
SWEEP_EVERY = 0.25
"""Seconds between sweeps for connections idle too long: one timer for the pool rather
than one per connection (2.5 us a request on uvloop, about 2% of the client's CPU)."""

Origin = tuple[str, str, int]
"""(scheme, host, port): where a URL's request goes."""
Route = tuple[str, str, int, str]
"""(scheme, host, port, proxy): what a pooled connection is reused for; ``proxy`` is the
``host:port`` of the proxy it goes through (trawl.fetch.proxy), '' for none. So a
host's connections through a proxy are its own, rested and closed with the host."""
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_key(route: Route) -> str:
    """The host of ``route`` as the crawl names it: its port only when not the
    scheme's default (trawl.extract.urls ``host_key``)."""
    scheme, host, port, _ = route
    return host if DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"


class Pooled(Protocol):
    """What the pool needs of a connection."""

    route: Route
    closed: bool
    counted: bool
    """True while the connection counts in ``Pool.sockets``."""

    def close(self) -> None:
        """Close the connection; it calls :meth:`Pool.forget` and :meth:`Pool.uncount`."""


C = TypeVar("C", bound=Pooled)


class Pool(Generic[C]):
    """Idle connections by route, newest first; at most ``limit`` in all, none kept
    longer than ``timeout`` seconds."""

    def __init__(self, limit: int, timeout: float) -> None:
        self._limit = limit
        self._timeout = timeout
        self._idle: dict[Route, list[C]] = {}
        self._by_host: dict[str, set[Route]] = {}
        self._since: dict[C, float] = {}
        """Every idle connection and when it went idle (monotonic), longest idle first."""
        self._sweep: asyncio.TimerHandle | None = None
        self.sockets = 0
        """Connections open or being opened, idle or in use."""

    def __len__(self) -> int:
        return len(self._since)

    def uncount(self, connection: C) -> None:
        """``connection`` has closed: its socket no longer counts."""
        if connection.counted:
            connection.counted = False
            self.sockets -= 1

    def take(self, route: Route) -> C | None:
        """A live idle connection for ``route`` (the newest), or None."""
        stack = self._idle.get(route)
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
        """Keep ``connection`` for its route's next request, for ``timeout`` at most."""
        if self._limit <= 0:
            connection.close()
            return
        if len(self._since) >= self._limit:
            self.evict_oldest()
        route = connection.route
        stack = self._idle.get(route)
        if stack is None:
            stack = self._idle[route] = []
            self._by_host.setdefault(host_key(route), set()).add(route)
        stack.append(connection)
        self._since[connection] = time.monotonic()
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_EVERY, self._expire)

    def _expire(self) -> None:
        """Close the connections idle longer than ``timeout``; sweep again later while
        any is idle."""
        self._sweep = None
        stale = time.monotonic() - self._timeout
        while self._since:
            oldest, since = next(iter(self._since.items()))
            if since > stale:
                break
            self._remove(oldest)
            oldest.close()
        if self._since:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_EVERY, self._expire)

    def forget(self, connection: C) -> None:
        """Take ``connection`` out of the pool, if it is there (it was closed)."""
        if connection in self._since:
            self._remove(connection)

    def _remove(self, connection: C) -> None:
        del self._since[connection]
        route = connection.route
        stack = self._idle[route]
        stack.remove(connection)
        if not stack:
            del self._idle[route]
            key = host_key(route)
            routes = self._by_host[key]
            routes.discard(route)
            if not routes:
                del self._by_host[key]

    def evict_oldest(self) -> bool:
        """Close the connection idle longest; False when none is idle."""
        oldest = next(iter(self._since), None)
        if oldest is None:
            return False
        oldest.close()
        return True

    def holds(self, host: str) -> bool:
        """Whether an idle connection to ``host`` (a host key) is kept."""
        return host in self._by_host

    def drop_host(self, host: str) -> int:
        """Close the idle connections to ``host`` (a host key: ``name`` or
        ``name:port``, any scheme or proxy); how many there were."""
        dropped = [
            connection for route in self._by_host.get(host, ()) for connection in self._idle[route]
        ]
        for connection in dropped:
            connection.close()
        return len(dropped)

    def close(self) -> None:
        """Close every idle connection, and stop sweeping."""
        for connection in list(self._since):
            connection.close()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
