"""Every request a rendered page makes, answered by trawl's fetcher or refused.

The page's own document is answered with the body already fetched (it is not asked
for twice). Any other request is refused unless it is an http(s) GET of a kind worth
loading: images, fonts and media (``SKIPPED_TYPES``) are never requested, later
navigations of the main frame are refused (the render is of this page). What is left
is capped at ``--render-max-requests`` a page, checked against robots.txt of its host
(the page's own rules for its host, :class:`SubresourceRobots` for others; robots.txt
unavailable refuses), and fetched by trawl's :class:`~trawl.fetch.fetcher.Fetcher`:
the guarded resolver and the address policy decide where it may connect, with no
second resolution, so a metadata, loopback or private address, literal or behind a
name, or a name that rebinds, is refused as for any fetch. A page's requests to one
host go one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from trawl.extract.urls import Rejection, host_key, normalize_resolved
from trawl.fetch.fetcher import Fetcher, FetchError, FetchResult
from trawl.politeness.robots_parser import RobotsRules

if TYPE_CHECKING:
    from playwright.async_api import Route

SKIPPED_TYPES = frozenset({"image", "font", "media", "texttrack"})
"""Resource types never requested (Playwright's names)."""
HostRules = tuple[RobotsRules | None, FetchError | None]
ROBOTS_KEPT = 1024
"""Hosts whose robots.txt rules for subresources are kept in RAM."""


class SubresourceRobots:
    """robots.txt rules of the hosts rendered pages load subresources from, read once
    a host (the last :data:`ROBOTS_KEPT` hosts kept) for the life of the crawl run."""

    def __init__(self, fetch_rules: Callable[[str], Awaitable[HostRules]]) -> None:
        self._fetch_rules = fetch_rules
        self._kept: OrderedDict[str, asyncio.Task[HostRules]] = OrderedDict()

    async def rules(self, url: str) -> HostRules:
        """The rules of ``url``'s host, None when its robots.txt is unavailable; and why
        the host gave no answer, if it gave none (trawl.politeness.robots.fetch_rules)."""
        key = host_key(url)
        task = self._kept.get(key)
        if task is None:
            task = asyncio.ensure_future(self._fetch_rules(url))
            self._kept[key] = task
            if len(self._kept) > ROBOTS_KEPT:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        return await asyncio.shield(task)


class PageRequests:
    """Answers the requests of one rendered page and counts them (``counters``:
    ``render_requests`` fetched, ``render_blocked_address``, ``render_robots``,
    ``render_capped``, ``render_skipped`` for images, fonts and media, ``render_refused``
    for the rest refused)."""

    def __init__(
        self,
        page_url: str,
        answer: FetchResult,
        fetcher: Fetcher,
        *,
        page_rules: RobotsRules | None,
        robots: SubresourceRobots,
        cap: int,
    ) -> None:
        self._page_url = page_url
        self._page_host = host_key(page_url)
        self._answer = answer
        self._fetcher = fetcher
        self._page_rules = page_rules
        self._robots = robots
        self._cap = cap
        self._served = False
        self._asked = 0
        self._hosts: dict[str, asyncio.Lock] = {}
        self.counters: dict[str, int] = {}
        self._inflight = 0
        self._last = time.monotonic()
        self._answering: set[asyncio.Task[object]] = set()

    def quiet_for(self) -> float:
        """Seconds since the page's last request was answered; 0 while one is open."""
        return 0.0 if self._inflight else time.monotonic() - self._last

    def _count(self, name: str) -> None:
        self.counters[name] = self.counters.get(name, 0) + 1

    async def handle(self, route: Route) -> None:
        """Answer or refuse one request of the page."""
        from playwright.async_api import Error

        task = asyncio.current_task()
        if task is not None:
            self._answering.add(task)
        self._inflight += 1
        try:
            # The page may close (the render ended) while one of its requests is answered.
            with contextlib.suppress(Error):
                await self._answer_route(route)
        finally:
            self._inflight -= 1
            self._last = time.monotonic()
            if task is not None:
                self._answering.discard(task)

    async def close(self) -> None:
        """End the requests still being answered (the render is over, and the host's
        turn with it): none of them goes on past the turn."""
        answering = list(self._answering)
        for task in answering:
            task.cancel()
        await asyncio.gather(*answering, return_exceptions=True)

    async def _answer_route(self, route: Route) -> None:
        request = route.request
        if request.is_navigation_request() and request.frame.parent_frame is None:
            if self._served:
                self._count("render_refused")
                await route.abort("blockedbyclient")
                return
            self._served = True
            await route.fulfill(
                status=self._answer.status or 200,
                headers={"content-type": self._answer.content_type or "text/html"},
                body=self._answer.body,
            )
            return
        if request.resource_type in SKIPPED_TYPES:
            self._count("render_skipped")
            await route.abort("blockedbyclient")
            return
        url = normalize_resolved(request.url)
        if request.method != "GET" or isinstance(url, Rejection):
            self._count("render_refused")
            await route.abort("blockedbyclient")
            return
        if self._asked >= self._cap:
            self._count("render_capped")
            await route.abort("blockedbyclient")
            return
        self._asked += 1
        host = host_key(url)
        rules, failure = self._page_rules, None
        if host != self._page_host:
            rules, failure = await self._robots.rules(url)
        if failure is FetchError.BLOCKED_ADDRESS:
            self._count("render_blocked_address")
            await route.abort("addressunreachable")
            return
        if rules is None or not rules.allowed(url):
            self._count("render_robots")
            await route.abort("blockedbyclient")
            return
        async with self._hosts.setdefault(host, asyncio.Lock()):
            result = await self._fetcher.fetch(url)
        if result.error is not None or result.status is None:
            self._count(
                "render_blocked_address"
                if result.error is FetchError.BLOCKED_ADDRESS
                else "render_failed_requests"
            )
            await route.abort("addressunreachable")
            return
        self._count("render_requests")
        headers = {}
        if result.content_type:
            headers["content-type"] = result.content_type
        if result.location:
            headers["location"] = result.location
        await route.fulfill(status=result.status, headers=headers, body=result.body)


async def refuse_websocket(socket: object) -> None:
    """A WebSocket route's handler that never connects: the socket is closed."""
    close = getattr(socket, "close", None)
    if close is not None:
        await close()
