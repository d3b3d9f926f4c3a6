"""The network guard holds for every request a rendered page makes: metadata, loopback
and private addresses, literal or behind a name, and a name that rebinds, never reached."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Awaitable

import pytest
from playwright.async_api import Error as PlaywrightError

from conftest import CrawlRunner
from dns_server import ScriptedDns
from listener import Listener
from trawl.config import DEFAULT_BROWSER, RenderConfig, Timeouts
from trawl.demo import Response, Site, SiteServer
from trawl.fetch.fetcher import Fetcher
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import AiodnsBackend, GuardedResolver
from trawl.politeness.robots_parser import rules_for_response
from trawl.render.browser import Browser
from trawl.render.renderer import Renderer
from trawl.render.requests import HostRules, SubresourceRobots

ONLY_SERVER = (ipaddress.ip_network("127.0.0.1/32"),)


def probing_page(targets: list[str], private: str) -> Response:
    """A page whose script asks for each of ``targets``, then links /done; it also tries
    ``private`` (host:port) by a WebSocket, a beacon, an image and a frame."""
    script = (
        f"try {{ new WebSocket('ws://{private}/socket'); }} catch (e) {{}}"
        f"navigator.sendBeacon('http://{private}/beacon', 'x');"
        f"Promise.allSettled({targets!r}.map(t => fetch(t))).then(results => {{"
        "document.getElementById('root').innerHTML = "
        "'<p>' + results.map(r => r.status).join(' ') + '</p><a href=/done>done</a>'; });"
    )
    html = (
        f'<!doctype html><body><div id="root"></div><img src="http://{private}/image.png">'
        f'<iframe src="http://{private}/frame"></iframe><script>{script}</script></body>'
    )
    return Response(body=html.encode())


async def test_metadata_loopback_and_private_names_are_refused(crawl: CrawlRunner) -> None:
    with Listener("127.0.0.3") as private:
        targets = [
            "http://169.254.169.254/latest/meta-data/",
            f"http://127.0.0.3:{private.port}/literal",
            f"http://intranet.guard.test:{private.port}/named",
        ]

        def build(port: int) -> Site:
            routes = {
                "http://www.guard.test/": probing_page(targets, f"127.0.0.3:{private.port}"),
                "http://www.guard.test/done": Response(body=b"<p>done</p>"),
            }
            return Site.build(port, routes, ["http://www.guard.test/"])

        with SiteServer(build, shared_address=True) as server:
            result = await crawl(
                server, allow_networks=ONLY_SERVER, render=RenderConfig(mode="auto"),
                extra_resolve={"intranet.guard.test": "127.0.0.3"},
            )  # fmt: skip
    assert private.accepted == 0
    render = result.summary.render
    # The three fetches and the frame were refused for their address, the image never
    # asked for, the beacon (a POST) refused; the WebSocket never left the browser.
    assert render["render_blocked_address"] == 4
    assert render["render_skipped"] == 1
    assert render["render_refused"] == 1
    assert "render_requests" not in render
    # The render went on past the refusals: the link its script made once all had
    # failed was found.
    assert server.site.url("www.guard.test", "/done") in result.rows


async def test_a_request_that_escapes_interception_reaches_nothing() -> None:
    # A context with no route: what the browser asks for goes to its own network stack,
    # which has only a proxy that refuses every connection.
    with SiteServer(
        lambda port: Site.build(port, {"http://127.0.0.1/": Response(body=b"<p>x</p>")})
    ) as server:
        browser = Browser(DEFAULT_BROWSER, concurrency=1, memory_cap=1 << 40)
        async with browser, browser.context() as context:
            page = await context.new_page()
            with pytest.raises(PlaywrightError, match="ERR_PROXY_CONNECTION_FAILED"):
                await page.goto(f"http://127.0.0.1:{server.port}/", timeout=10_000)
        assert server.requests == []


def secret_page() -> bytes:
    """An HTTP response: a page whose script asks its own host for /secret twice."""
    script = (
        "fetch('/secret').catch(() => 0).then(() => fetch('/secret?again'))"
        ".then(() => { document.body.dataset.got = 'yes'; },"
        " () => { document.body.dataset.got = 'refused'; });"
    )
    body = f"<!doctype html><body><p>app</p><script>{script}</script></body>".encode()
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def no_other_host(url: str) -> Awaitable[HostRules]:
    raise AssertionError(f"the page asked another host: {url}")


async def test_a_name_rebinding_to_loopback_never_reaches_it() -> None:
    # The page's host answers a "public" address (127.0.0.2, the only one allowed) once,
    # then 127.0.0.1 with no time to live: the browser's requests resolve it again.
    script = {"rebind.test": [[("127.0.0.2", 0)], [("127.0.0.1", 0)]]}
    with (
        ScriptedDns(script) as dns,
        Listener("127.0.0.2", answer=secret_page()) as public,
        Listener("127.0.0.1", public.port) as private,
    ):
        port = public.port
        resolver = GuardedResolver(
            AddressPolicy([ipaddress.ip_network("127.0.0.2/32")]),
            backend=AiodnsBackend([dns.nameserver]), min_ttl=0, clock=time.monotonic,
        )  # fmt: skip
        fetcher = Fetcher(
            user_agent="trawl-test/1", timeouts=Timeouts(connect=2, total=5),
            max_body=1 << 16, resolver=resolver,
        )  # fmt: skip
        url = f"http://rebind.test:{port}/"
        async with fetcher:
            page = await fetcher.fetch(url)
            rules = rules_for_response(404, b"", "trawl")
            renderer = Renderer(
                RenderConfig(mode="always", timeout=10), fetcher, SubresourceRobots(no_other_host)
            )
            async with renderer:
                done = await renderer.render(url, page, rules)
    assert page.status == 200
    assert (public.accepted, private.accepted) == (1, 0)
    assert dns.queries["rebind.test"] >= 3
    assert done.counters["render_blocked_address"] == 2
    assert done.html is not None
    assert b'data-got="refused"' in done.html
