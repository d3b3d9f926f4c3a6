"""The per-host circuit breaker: a failing host pauses, then is given up, alone."""

from __future__ import annotations

from conftest import CrawlRunner, page_requests
from test_crawl import page
from trawl.config import Breaker
from trawl.demo import Response, Route, Site, SiteServer
from trawl.fetch.retry import RetryPolicy
from trawl.store.values import State

BROKEN_PAGES = 30


def half_broken_site(port: int) -> Site:
    """www links 30 pages of a host that answers 503 to everything, and 4 good pages."""
    broken = [f"http://down.breaker.test:{port}/p{n}.html" for n in range(BROKEN_PAGES)]
    good = [f"/g{n}.html" for n in range(4)]
    routes: dict[str, Response | Route] = {
        "http://www.breaker.test/": page(*good, *broken),
        **{f"http://www.breaker.test{p}": page() for p in good},
        **{url: Response(status=503, body=b"down") for url in broken},
        f"http://down.breaker.test:{port}/": Response(status=503, body=b"down"),
    }
    return Site.build(port, routes, ["http://www.breaker.test/"])


async def test_a_failing_host_pauses_then_is_given_up(crawl: CrawlRunner) -> None:
    with SiteServer(half_broken_site) as server:
        result = await crawl(
            server,
            retry=RetryPolicy(base=0.01, cap=0.05, attempts=2, statuses=frozenset({503})),
            breaker=Breaker(threshold=3, pause=0.3, trips=1),
        )
        requests = page_requests(server)
        down = sorted(
            (r for r in server.requests if r.host == "down.breaker.test" and r.status == 503),
            key=lambda r: r.start,
        )
    good = {
        server.site.url("www.breaker.test", p) for p in ("/", *[f"/g{n}.html" for n in range(4)])
    }
    assert good <= set(requests)
    assert all(requests[url] == 1 for url in good)
    # Three failures trip the breaker (a pause of 0.3 s), three more give the host up.
    assert len(down) == 6
    assert down[3].start - down[2].end >= 0.3 - 0.02
    broken = {url: row for url, row in result.rows.items() if "down.breaker.test" in url}
    assert len(broken) == BROKEN_PAGES
    assert all(row.state == State.FAILED for row in broken.values())
    given_up = [row for row in broken.values() if row.error == "host_failing"]
    assert len(given_up) >= BROKEN_PAGES - 6
    assert result.summary.state == "done"
