"""Crawler traps end to end: endless sites stop at their budgets, the rest of the crawl
completes.

The trap hosts make their pages on demand (`Site.build(generated=...)`), so they are
really endless: an infinite calendar, a relative-link maze (``a/`` and ``b/`` on every
page), an endless tree. What stops the crawl there is trawl's own limits: hop depth, the
per-host page and discovery budgets, and the path rules of trawl.extract.urls.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from conftest import CrawlOutcome, CrawlRunner, page_requests
from trawl.config import Limits
from trawl.demo import Response, Site, SiteServer
from trawl.store.sqlite.store import DB_NAME
from trawl.store.values import State

NORMAL_HOSTS = [f"n{k}.normal.test" for k in range(10)]
NORMAL_PAGES = ["/", "/p1.html", "/p2.html", "/p3.html", "/p4.html"]
PAGE_BUDGET = 60
CALENDAR_START = (2024, 1)


def page(*hrefs: str) -> Response:
    """An HTML page linking ``hrefs``."""
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in hrefs)
    return Response(body=f"<!doctype html><title>t</title><body>{anchors}".encode())


def month(year: int, number: int) -> str:
    """The calendar path of a month, any month number folded into its year."""
    year, index = divmod(year * 12 + number - 1, 12)
    return f"/cal/{year}/{index + 1}"


_MONTH = re.compile(r"/cal/(\d+)/(\d+)")


def linear_calendar(target: str) -> Response | None:
    """Each month links only the next one, forever."""
    if target == "/":
        return page(month(*CALENDAR_START))
    found = _MONTH.fullmatch(target)
    if found is None:
        return None
    year, number = int(found[1]), int(found[2])
    return page(month(year, number + 1))


def maze(target: str) -> Response | None:
    """A calendar that links the next and previous month and the next year, and a
    relative-link loop where every page under /loop/ links ``a/`` and ``b/``."""
    if target == "/":
        return page(month(*CALENDAR_START), "/loop/")
    if target.startswith("/loop/") and target.endswith("/"):
        return page("a/", "b/")
    found = _MONTH.fullmatch(target)
    if found is None:
        return None
    year, number = int(found[1]), int(found[2])
    return page(month(year, number + 1), month(year, number - 1), month(year + 1, number))


def normal_routes() -> dict[str, Response]:
    """Ten small hosts: a home page and four pages in a ring."""
    routes: dict[str, Response] = {}
    for host in NORMAL_HOSTS:
        for index, path in enumerate(NORMAL_PAGES):
            following = NORMAL_PAGES[(index + 1) % len(NORMAL_PAGES)]
            routes[f"http://{host}{path}"] = page(following, "/")
    return routes


def traps_site(port: int) -> Site:
    """Ten normal hosts, an endless calendar host and an endless maze host."""
    seeds = [f"http://{host}/" for host in (*NORMAL_HOSTS, "calendar.test", "maze.test")]
    return Site.build(
        port,
        normal_routes(),
        seeds,
        generated={"calendar.test": linear_calendar, "maze.test": maze},
    )


def counters(outcome: CrawlOutcome) -> Counter[str]:
    """Every counter the crawl stored."""
    with sqlite3.connect(outcome.data_dir / DB_NAME) as db:
        return Counter(dict(db.execute("SELECT name, value FROM counters").fetchall()))


def by_host(requests: Counter[str]) -> Counter[str]:
    """Page requests per host name."""
    hosts: Counter[str] = Counter()
    for url, count in requests.items():
        hosts[urlsplit(url).hostname or ""] += count
    return hosts


async def test_trap_hosts_stop_at_depth_and_budget_while_normal_hosts_finish(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(traps_site) as server:
        result = await crawl(server, limits=Limits(max_pages_per_host=PAGE_BUDGET))
        requests = page_requests(server)
    site = server.site

    # Every page of every normal host, each once; the crawl finished ("done" is checked
    # by the fixture).
    for host in NORMAL_HOSTS:
        for path in NORMAL_PAGES:
            assert requests[site.url(host, path)] == 1
    hosts = by_host(requests)
    assert all(count == 1 for count in requests.values())

    # The linear calendar ends at the depth limit: the seed and 15 months.
    calendar = [url for url in requests if urlsplit(url).hostname == "calendar.test"]
    assert hosts["calendar.test"] == 16
    assert site.url("calendar.test", month(2024, 15)) in calendar
    assert max(row.depth for url, row in result.rows.items() if "calendar.test" in url) == 15

    # The maze ends at the page budget, exactly; what it still had queued is parked.
    assert hosts["maze.test"] == PAGE_BUDGET
    maze_rows = [row for url, row in result.rows.items() if urlsplit(url).hostname == "maze.test"]
    states = Counter(row.state for row in maze_rows)
    assert states[State.DONE] == PAGE_BUDGET
    assert states[State.QUEUED] == 0
    assert states[State.PARKED] > 0
    assert {row.error for row in maze_rows if row.state is State.PARKED} == {"host_page_budget"}

    stored = counters(result)
    assert stored["too_deep"] == 1
    assert stored["over_host_page_budget"] == states[State.PARKED]
    # The relative loop never reaches a third "a/a/a/": the path rule stops it.
    assert stored["invalid:repeated_path"] > 0
    assert not [url for url in result.rows if "/a/a/a/" in url or "/b/b/b/" in url]
    assert result.summary.queued == 0


def chain_site(port: int) -> Site:
    """An endless chain (/1 -> /2 -> ...) whose page 5 links a redirect to /moved."""

    def chain(target: str) -> Response | None:
        if target == "/r":
            return Response(status=301, headers=(("Location", "/moved"),))
        if target == "/moved":
            return page("/after-move")
        found = re.fullmatch(r"/(\d+)", target)
        if found is None:
            return None
        n = int(found[1])
        return page(f"/{n + 1}", "/r") if n == 5 else page(f"/{n + 1}")

    return Site.build(port, {}, ["http://chain.test/1"], generated={"chain.test": chain})


async def test_hop_depth_is_counted_and_a_redirect_keeps_its_depth(crawl: CrawlRunner) -> None:
    with SiteServer(chain_site) as server:
        result = await crawl(server, limits=Limits(max_depth=5))
        requests = page_requests(server)
    site = server.site
    depths = {urlsplit(url).path: row.depth for url, row in result.rows.items()}
    # /1 is the seed at depth 0; /6 is the last page within 5 hops, and so is /moved,
    # reached through the redirect /r that /5 links.
    assert depths == {"/1": 0, "/2": 1, "/3": 2, "/4": 3, "/5": 4, "/6": 5, "/r": 5, "/moved": 5}
    assert set(requests) == {site.url("chain.test", path) for path in depths}
    # The links of /6 and /moved would be 6 hops from the seed.
    stored = counters(result)
    assert stored["too_deep"] == 2


def tree_site(port: int) -> Site:
    """An endless tree: page /n links /n0 ... /n9; and a small normal host."""

    def tree(target: str) -> Response | None:
        found = re.fullmatch(r"/t(\d*)", target)
        if found is None:
            return None
        return page(*(f"/t{found[1]}{digit}" for digit in range(10)))

    return Site.build(
        port,
        {f"http://small.test{path}": page("/p1.html", "/p2.html") for path in ("/", "/p1.html")},
        ["http://tree.test/t", "http://small.test/"],
        generated={"tree.test": tree},
    )


async def test_host_budgets_are_exact_across_a_stop_and_resume(
    crawl: CrawlRunner, tmp_path: Path
) -> None:
    data_dir = tmp_path / "resumed"
    limits = Limits(max_pages_per_host=12, max_discovered_per_host=30)
    with SiteServer(tree_site) as server:
        first = await crawl(
            server,
            limits=Limits(max_pages=5, max_pages_per_host=12, max_discovered_per_host=30),
            data_dir=data_dir,
            concurrency=2,
            expect_state="page budget reached",
        )
        assert first.summary.fetched <= 6
        result = await crawl(server, limits=limits, data_dir=data_dir)
        requests = page_requests(server)
    hosts = by_host(requests)
    assert all(count == 1 for count in requests.values())
    assert hosts["tree.test"] == 12
    tree_rows = [row for url, row in result.rows.items() if "tree.test" in url]
    assert len(tree_rows) == 30
    states = Counter(row.state for row in tree_rows)
    assert states == {State.DONE: 12, State.PARKED: 18}
    # The small host is untouched by the tree's budgets.
    assert hosts["small.test"] == 3
    stored = counters(result)
    assert stored["over_host_page_budget"] == 18
    assert stored["over_host_discovery_budget"] > 0
    assert stored["discovered"] == 30 + 3


def link_flood_site(port: int) -> Site:
    """A page with 100,000 distinct same-host links (about 2.4 MB of HTML)."""
    anchors = "".join(f'<a href="/l{n}.html">{n}</a>' for n in range(100_000))
    body = f"<!doctype html><title>flood</title><body>{anchors}</body>".encode()
    return Site.build(port, {"http://flood.trap.test/": Response(body=body)},
                      ["http://flood.trap.test/"])  # fmt: skip


async def test_links_per_page_are_capped(crawl: CrawlRunner) -> None:
    with SiteServer(link_flood_site) as server:
        outcome = await crawl(server, limits=Limits(max_links=5000, max_pages=1),
                              expect_state="page budget reached")  # fmt: skip
    found = counters(outcome)
    assert found["links"] == 5000
    assert outcome.summary.discovered == 5001
    stored = {url for url in outcome.rows if url.endswith(".html")}
    assert stored == {server.site.url("flood.trap.test", f"/l{n}.html") for n in range(5000)}
