"""Per-address politeness: host names on one server share its limit and its delay."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest

from conftest import CrawlRunner, page_requests
from test_crawl import page, peak_overlap
from trawl.config import Politeness
from trawl.demo import Response, Route, Site, SiteServer
from trawl.politeness.scheduler import HostScheduler, address_limit
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


@pytest.mark.parametrize(
    ("per_ip", "per_ip_max", "limit"),
    [
        pytest.param(1, 1, 1, id="one-at-a-time"),
        pytest.param(1, 16, 3, id="six-sites-three"),  # ceil(sqrt(6))
        pytest.param(3, 4, 4, id="capped"),
    ],
)
async def test_virtual_hosts_on_one_address_share_its_limit(
    crawl: CrawlRunner, per_ip: int, per_ip_max: int, limit: int
) -> None:
    politeness = Politeness(
        per_host=2, delay=0.0, response_factor=0.0, per_ip=per_ip, per_ip_max=per_ip_max
    )
    with SiteServer(virtual_hosts_site, shared_address=True) as server:
        result = await crawl(server, politeness=politeness)
        overlap = peak_overlap(server)
        requests = page_requests(server)
    assert result.summary.fetched == HOSTS * (PAGES + 1)
    assert set(requests.values()) == {1}
    assert overlap == limit


async def test_the_delay_rule_holds_across_an_address(crawl: CrawlRunner) -> None:
    strict = Politeness(delay=0.05, response_factor=0.0, per_ip_max=1)
    with SiteServer(virtual_hosts_site, shared_address=True) as server:
        await crawl(server, politeness=strict)
        log = sorted(server.requests, key=lambda r: r.start)
    gaps = [b.start - a.end for a, b in itertools.pairwise(log)]
    assert len(log) >= HOSTS * (PAGES + 2)
    assert min(gaps) >= 0.05 - 0.02


async def test_an_address_of_many_sites_gets_as_many_starts_per_delay_as_its_limit(
    crawl: CrawlRunner,
) -> None:
    # Six sites: a limit of three, so request starts on the address at least a third of
    # the delay apart, and each host still rests the whole delay between its own.
    with SiteServer(virtual_hosts_site, shared_address=True) as server:
        await crawl(server, politeness=Politeness(delay=0.3, response_factor=0.0))
        log = sorted(server.requests, key=lambda r: r.start)
    starts = [b.start - a.start for a, b in itertools.pairwise(log)]
    assert len(log) >= HOSTS * (PAGES + 2)
    assert min(starts) >= 0.1 - 0.02
    # One at a time, each start would be at least the delay plus the answer after the last.
    assert sorted(starts)[len(starts) // 2] < 0.3
    for host in {r.host for r in log}:
        own = [r for r in log if r.host == host]
        assert min(b.start - a.end for a, b in itertools.pairwise(own)) >= 0.3 - 0.02


@pytest.mark.parametrize(
    ("sites", "per_ip", "per_ip_max", "limit"),
    [(1, 1, 16, 1), (2, 1, 16, 2), (9, 1, 16, 3), (10, 1, 16, 4), (1250, 1, 16, 16),
     (4, 2, 16, 4), (4, 5, 3, 5), (100, 1, 1, 1)],
)  # fmt: skip
def test_an_address_limit_grows_with_the_square_root_of_its_sites(
    sites: int, per_ip: int, per_ip_max: int, limit: int
) -> None:
    politeness = Politeness(per_ip=per_ip, per_ip_max=per_ip_max)
    assert address_limit(sites, politeness) == limit


def test_a_busy_address_wakes_its_waiting_hosts() -> None:
    now = [0.0]
    strict = Politeness(delay=1.0, response_factor=0.0, per_ip_max=1)
    scheduler = HostScheduler(strict, lambda: now[0])
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


def test_a_host_slot_is_small_and_gives_its_urls_in_order() -> None:
    """A run keeps a slot for every host it met, so an idle one must cost little."""
    scheduler = HostScheduler(Politeness(), lambda: 0.0)
    names = [f"h{n}.test" for n in range(2_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        slots = [scheduler.slot(n, name) for n, name in enumerate(names)]
        per_slot = (tracemalloc.get_traced_memory()[0] - before) / len(slots)
    finally:
        tracemalloc.stop()
    assert per_slot < 600, f"{per_slot:.0f} bytes a slot"
    slot = slots[0]
    scheduler.add(slot, [QueuedURL(n, f"http://h0.test/{n}", 0, 0, 0, 0) for n in range(5)])
    assert [scheduler.take(slot).id, scheduler.take(slot).id] == [0, 1]
    assert [url.id for url in scheduler.drain(slot)] == [2, 3, 4]
    assert (scheduler.buffered, slot.queue) == (0, [])
