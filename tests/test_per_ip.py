"""Per-address politeness: host names on one server share its limit and its delay."""

from __future__ import annotations

import itertools

import pytest

from conftest import CrawlRunner, page_requests
from test_crawl import page, peak_overlap
from trawl.config import Politeness
from trawl.demo import Response, Route, Site, SiteServer
from trawl.politeness.scheduler import HostScheduler
from trawl.store.values import QueuedURL

HOSTS, PAGES = 6, 3


def virtual_hosts_site(port: int) -> Site:
    """Six hosts of four pages, each answer taking 0.05 s."""
    hosts = [f"v{n}.shared.test" for n in range(HOSTS)]
    routes: dict[str, Response | Route] = {}
    for host in hosts:
        pages = [f"/p{n}.html" for n in range(PAGES)]
        routes[f"http://{host}/"] = page(*pages, delay=0.05)
        routes |= {f"http://{host}{p}": page(delay=0.05) for p in pages}
    return Site.build(port, routes, [f"http://{host}/" for host in hosts])


@pytest.mark.parametrize("per_ip", [1, 3])
async def test_virtual_hosts_on_one_address_share_its_limit(
    crawl: CrawlRunner, per_ip: int
) -> None:
    with SiteServer(virtual_hosts_site, shared_address=True) as server:
        result = await crawl(
            server,
            politeness=Politeness(per_host=2, delay=0.0, response_factor=0.0, per_ip=per_ip),
        )
        overlap = peak_overlap(server)
        requests = page_requests(server)
    assert result.summary.fetched == HOSTS * (PAGES + 1)
    assert set(requests.values()) == {1}
    assert overlap == per_ip


async def test_the_delay_rule_holds_across_an_address(crawl: CrawlRunner) -> None:
    with SiteServer(virtual_hosts_site, shared_address=True) as server:
        await crawl(server, politeness=Politeness(delay=0.05, response_factor=0.0))
        log = sorted(server.requests, key=lambda r: r.start)
    gaps = [b.start - a.end for a, b in itertools.pairwise(log)]
    assert len(log) >= HOSTS * (PAGES + 2)
    assert min(gaps) >= 0.05 - 0.02


def test_a_busy_address_wakes_its_waiting_hosts() -> None:
    now = [0.0]
    scheduler = HostScheduler(Politeness(delay=1.0, response_factor=0.0), lambda: now[0])
    a, b = scheduler.slot(1, "a.test"), scheduler.slot(2, "b.test")
    for slot in (a, b):
        scheduler.assign_address(slot, "192.0.2.1")
        scheduler.add(slot, [QueuedURL(slot.id, f"http://{slot.name}/", slot.id, 0, 0, 0)])
    first = scheduler.pop_ready()
    assert first is a
    scheduler.take(a)
    scheduler.started(a)
    assert scheduler.pop_ready() is None  # b waits on the address, not on a timer
    now[0] = 0.3
    scheduler.finished(a, 0.1)
    assert scheduler.pop_ready() == 1.3  # the address rests for the delay after a
    now[0] = 1.3
    assert scheduler.pop_ready() is b
