"""Headless Chromium through Playwright, started so that it cannot reach the network
itself, restarted when its memory passes a cap.

Every request of a rendered page is intercepted (trawl.render.requests) and answered
by trawl's own fetcher, so the browser never needs a network of its own; it is started
so that anything that escapes interception fails closed:

- ``--proxy-server`` names a port trawl holds bound and never listens on, with no
  bypass (``<-loopback>`` takes away Chromium's implicit one for loopback): a request
  that reached the network stack is refused at once;
- ``--host-resolver-rules=MAP * ~NOTFOUND``: no name resolves, should a connection
  skip the proxy;
- WebRTC may use no UDP outside the proxy; background networking, component updates,
  pings and domain reliability reports are off.

Service workers are blocked in each page's context (a worker's requests are not
intercepted in every Chromium version) and WebSockets are refused by the route that
answers them.

A render takes a context of its own (cookies and storage are not shared between
pages) from a pool of ``--render-concurrency``. After each render the resident memory
of the browser's processes is read (trawl.render.memory); past ``--render-memory`` the
browser is restarted once the renders under way are done, new ones waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trawl.config import NO_BROWSER, NO_PLAYWRIGHT
from trawl.errors import UsageError
from trawl.render.memory import browser_rss
from trawl.resource import AsyncResource

if TYPE_CHECKING:
    from playwright.async_api import Browser as PlaywrightBrowser
    from playwright.async_api import BrowserContext, Playwright

log = logging.getLogger("trawl.render.browser")


def fail_closed_args(proxy_port: int) -> list[str]:
    """Chromium's flags that leave it no network of its own (see the module's text)."""
    args = [
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-sync",
        "--no-pings",
        "--no-first-run",
    ]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium's sandbox refuses to run as root
    return args


class BrowserGone(Exception):
    """The browser is not running (it crashed or did not start again): this render fails
    and the browser is started again once no render is under way."""


class Browser(AsyncResource):
    """One headless Chromium, a bounded pool of page contexts in it."""

    def __init__(self, executable: Path, *, concurrency: int, memory_cap: int) -> None:
        self._executable = executable
        self._memory_cap = memory_cap
        self._slots = asyncio.Semaphore(concurrency)
        self._idle = asyncio.Condition()
        self._active = 0
        self._restart_wanted = False
        self._closed_port: socket.socket | None = None
        self._playwright: Playwright | None = None
        self._browser: PlaywrightBrowser | None = None
        self.restarts = 0
        """Times the browser was restarted for its memory."""
        self.peak_rss = 0
        """The most resident memory its processes were seen to hold together (bytes)."""

    async def _acquire(self) -> None:
        if not os.access(self._executable, os.X_OK):
            raise UsageError(NO_BROWSER.format(path=self._executable))
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise UsageError(NO_PLAYWRIGHT) from None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        self._closed_port = sock
        self._playwright = await async_playwright().start()
        await self._launch()

    async def _launch(self) -> None:
        from playwright.async_api import Error

        assert self._playwright is not None
        assert self._closed_port is not None
        port = self._closed_port.getsockname()[1]
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=str(self._executable), args=fail_closed_args(port)
            )
        except Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"Chromium at {self._executable} did not start: {first}") from None

    @contextlib.asynccontextmanager
    async def context(self) -> AsyncIterator[BrowserContext]:
        """A fresh context (service workers blocked) for one render, once a slot of the
        pool is free and no restart is waiting."""
        async with self._slots:
            async with self._idle:
                await self._idle.wait_for(lambda: not self._restart_wanted)
                self._active += 1
            try:
                context = await self._new_context()
                try:
                    yield context
                finally:
                    with contextlib.suppress(Exception):
                        await context.close()
            finally:
                await self._done()

    async def _new_context(self) -> BrowserContext:
        """A context of the running browser; BrowserGone when it is not running."""
        from playwright.async_api import Error

        browser = self._browser
        if browser is None or not browser.is_connected():
            raise BrowserGone("the browser is not running")
        try:
            return await browser.new_context(service_workers="block")
        except Error as exc:
            raise BrowserGone(str(exc).strip().splitlines()[0]) from None

    async def _done(self) -> None:
        """A render ended: read the memory; restart past the cap once none is under way."""
        rss = await asyncio.to_thread(browser_rss)
        self.peak_rss = max(self.peak_rss, rss)
        async with self._idle:
            self._active -= 1
            if rss > self._memory_cap or not self._running():
                self._restart_wanted = True
            if self._restart_wanted and self._active == 0:
                await self._restart(rss)
                self._restart_wanted = False
                self._idle.notify_all()

    async def _restart(self, rss: int) -> None:
        """Start the browser anew; one that does not start is left stopped (its renders
        fail and the next one that ends tries again)."""
        log.info("browser restarted: %d MiB resident", rss >> 20, extra={"rss_bytes": rss})
        await self._close_browser()
        try:
            await self._launch()
        except UsageError as exc:
            log.warning("%s: pages are read as fetched meanwhile", exc)
            return
        self.restarts += 1

    def _running(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    async def _close_browser(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()

    async def close(self) -> None:
        """Close the browser and Playwright; safe to call more than once."""
        await self._close_browser()
        playwright: Any = self._playwright
        self._playwright = None
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        if self._closed_port is not None:
            self._closed_port.close()
            self._closed_port = None
