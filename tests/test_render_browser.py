"""The browser's life: a browser that dies under the crawl fails the render at hand and
is started again for the next."""

from __future__ import annotations

import os
import signal

from trawl.config import RenderConfig, Timeouts
from trawl.demo import SiteServer
from trawl.demo.spa import spa_site
from trawl.fetch.fetcher import Fetcher
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver
from trawl.politeness.robots_parser import rules_for_response
from trawl.render.memory import descendants
from trawl.render.renderer import Renderer
from trawl.render.requests import HostRules, SubresourceRobots


async def no_other_host(url: str) -> HostRules:
    raise AssertionError(f"the page asked another host: {url}")


def browser_pids() -> list[int]:
    """This process's Chromium processes (the ones its renderer started)."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("chrom"):
                found.append(pid)
        except OSError:
            continue
    return found


async def test_a_browser_that_dies_is_started_again() -> None:
    with SiteServer(lambda port: spa_site(port, items=1), shared_address=True) as server:
        fetcher = Fetcher(
            user_agent="trawl-test/1", timeouts=Timeouts(connect=2, total=5), max_body=1 << 20,
            resolver=GuardedResolver(
                AddressPolicy(server.allow_networks()), overrides=server.resolve_map()
            ),
        )  # fmt: skip
        url = server.site.seeds[0]
        rules = rules_for_response(404, b"", "trawl")
        async with fetcher:
            page = await fetcher.fetch(url)
            config = RenderConfig(mode="always", timeout=10)
            async with Renderer(config, fetcher, SubresourceRobots(no_other_host)) as renderer:
                first = await renderer.render(url, page, rules)
                for pid in browser_pids():
                    os.kill(pid, signal.SIGKILL)
                lost = await renderer.render(url, page, rules)
                again = await renderer.render(url, page, rules)
    assert first.html is not None
    assert b"/item/1" in first.html
    assert lost.error == "render_failed"
    assert lost.counters["render_restarts"] == 1
    assert again.html == first.html
