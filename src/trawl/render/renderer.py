"""One render: a fetched HTML page loaded in headless Chromium, its DOM taken once the
page has loaded, the browser has seen no network activity for 0.5 s (Playwright's
``networkidle``) and none of the page's requests has been answered for :data:`QUIET`
seconds, or at the time cap.

The page's document is the body already fetched; its scripts run and their requests go
through trawl.render.requests. The render's HTML (``document.documentElement``
serialised) is what the crawl then reads as the page; a render that fails or passes
``--render-timeout`` before the page loaded leaves the page as fetched.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trawl.config import RenderConfig, RenderMode
from trawl.fetch.fetcher import Fetcher, FetchResult
from trawl.politeness.robots_parser import RobotsRules
from trawl.render.browser import Browser, BrowserGone
from trawl.render.requests import PageRequests, SubresourceRobots, refuse_websocket
from trawl.render.rule import RenderPlan
from trawl.resource import AsyncResource
from trawl.sites.rules import Sites

QUIET = 0.25
"""Seconds with no request of the page open (trawl.render.requests) before its DOM is
taken, after ``networkidle`` (the browser's own count: 0.5 s with none in flight). This
wait alone can end while a request the browser has sent has not reached Python yet: on a
loaded machine a 164-page crawl of the SPA benchmark found 163 pages with it alone."""
POLL = 0.05
HUNG_GRACE = 2.0
"""Seconds past ``--render-timeout`` a render's calls may take before they are given up:
Playwright's own time-outs cover loading the page, but not reading a page whose script
never yields."""
if TYPE_CHECKING:
    from playwright.async_api import BrowserContext

RENDERED_TYPE = "text/html; charset=utf-8"
"""The Content-Type a rendered page is read with (its HTML is serialised as UTF-8)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a render gave: the page's HTML (None when it failed, ``error`` says why),
    its requests' counters and how long it took."""

    html: bytes | None
    counters: dict[str, int] = field(default_factory=dict)
    elapsed: float = 0.0
    error: str | None = None


class Renderer(AsyncResource):
    """Renders pages in a :class:`~trawl.render.browser.Browser`, every request through
    ``fetcher``."""

    def __init__(
        self,
        config: RenderConfig,
        fetcher: Fetcher,
        robots: SubresourceRobots,
        sites: Sites | None = None,
    ) -> None:
        self._config = config
        self._fetcher = fetcher
        self._robots = robots
        self._plan = RenderPlan(config, sites)
        self.browser = Browser(
            config.browser, concurrency=config.concurrency, memory_cap=config.memory << 20
        )

    async def _acquire(self) -> None:
        await self.browser.__aenter__()

    async def close(self) -> None:
        """Close the browser; safe to call more than once."""
        await self.browser.close()

    def mode_for(self, url: str) -> RenderMode:
        """How the page at ``url`` is rendered (trawl.render.rule)."""
        return self._plan.mode_for(url)

    async def render(
        self, url: str, answer: FetchResult, page_rules: RobotsRules | None
    ) -> Rendered:
        """Render the page at ``url`` fetched as ``answer``; ``page_rules`` are its host's
        robots.txt rules, for the subresources of that host."""
        from playwright.async_api import Error

        started = time.monotonic()
        requests = PageRequests(
            url, answer, self._fetcher, page_rules=page_rules, robots=self._robots,
            cap=self._config.max_requests,
        )  # fmt: skip
        html: bytes | None = None
        error: str | None = None
        restarts = self.browser.restarts
        try:
            async with self.browser.context() as context:
                # A page whose script never yields holds the calls that read it: the cap
                # holds them too (and the context's close ends its renderer).
                async with asyncio.timeout(self._config.timeout + HUNG_GRACE):
                    html, error = await self._load(context, url, requests, started)
        except TimeoutError:
            error = "render_timeout"
        except (Error, BrowserGone):
            error = "render_failed"  # the browser went away under the render
        finally:
            await requests.close()
        counters = dict(requests.counters)
        if html is not None:
            counters["rendered"] = 1
        if error is not None:
            counters[error] = 1
        if self.browser.restarts > restarts:
            counters["render_restarts"] = self.browser.restarts - restarts
        return Rendered(html, counters, time.monotonic() - started, error)

    async def _load(
        self, context: BrowserContext, url: str, requests: PageRequests, started: float
    ) -> tuple[bytes | None, str | None]:
        """Load the page in ``context``; its HTML (None if it did not load) and why the
        render fell short, if it did."""
        from playwright.async_api import Error

        cap_ms = self._config.timeout * 1000
        error: str | None = None
        try:
            await context.route("**/*", requests.handle)
            await context.route_web_socket("**/*", refuse_websocket)
            page = await context.new_page()
            await page.goto(url, wait_until="load", timeout=cap_ms)
            deadline = started + self._config.timeout
            left = (deadline - time.monotonic()) * 1000
            with contextlib.suppress(Error):
                await page.wait_for_load_state("networkidle", timeout=max(left, 1.0))
            while requests.quiet_for() < QUIET:
                if time.monotonic() >= deadline:
                    error = "render_timeout"  # the DOM as it stands is taken all the same
                    break
                await asyncio.sleep(POLL)
            return (await page.content()).encode("utf-8", "replace"), error
        except Error as exc:
            return None, "render_timeout" if "Timeout" in type(exc).__name__ else "render_failed"
