"""Per-address politeness: host names on one server share its limit and its delay."""

from __future__ import annotations

import itertools

import pytest

from conftest import CrawlRunner, page_requests
from malloc_stats import traced
from test_crawl import page, peak_overlap
from trawl.config import Politeness
from trawl.demo import Response, Route, Site, SiteServer
from trawl.politeness.scheduler import HostScheduler, address_limit
from trawl.politeness.slots import HostSlot
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


def test_hosts_waiting_on_a_busy_address_take_their_turns_in_order() -> None:
    """Hosts whose turns fall at the same time (the address's rest ends for all of them
    at once) go first come, first served: the host just served queues behind those that
    waited, and the one with the lowest id does not take every turn."""
    now = [0.0]
    strict = Politeness(delay=1.0, response_factor=0.0, per_ip_max=1)
    scheduler = HostScheduler(strict, lambda: now[0])
    slots = [scheduler.slot(n, f"h{n}.test") for n in (1, 2, 3)]
    for slot in slots:
        scheduler.assign_address(slot, "192.0.2.1")
        scheduler.add(
            slot, [QueuedURL(k, f"http://{slot.name}/{k}", slot.id, 0, 0, 0) for k in range(3)]
        )
    served: list[int] = []
    while len(served) < 9:
        turn = scheduler.pop_ready()
        assert turn is not None
        if isinstance(turn, float):
            now[0] = turn
            continue
        served.append(turn.id)
        scheduler.take(turn)
        scheduler.started(turn)
        scheduler.finished(turn, 0.0)
    assert served == [1, 2, 3] * 3


def test_an_address_is_crowded_at_four_times_its_limit_of_held_hosts() -> None:
    scheduler = HostScheduler(Politeness(per_ip=1, per_ip_max=16), lambda: 0.0)
    slots = [scheduler.slot(n, f"h{n}.test") for n in range(16)]
    for slot in slots[:15]:
        scheduler.lease(slot, 1, 60.0)
        scheduler.assign_address(slot, "192.0.2.1")
    # 15 hosts seen allow 4 requests at once (ceil(sqrt(15))): 15 held are not 16.
    assert not scheduler.crowds("192.0.2.1")
    scheduler.assign_address(slots[15], "192.0.2.1")
    assert not scheduler.crowds("192.0.2.1")  # seen, not held
    scheduler.lease(slots[15], 1, 60.0)
    assert scheduler.crowded == {"192.0.2.1"}
    scheduler.end_lease(slots[0])
    assert scheduler.crowded == set()
    # A host that moves to another address is no longer held on the old one.
    scheduler.lease(slots[0], 2, 60.0)
    assert scheduler.crowds("192.0.2.1")
    scheduler.assign_address(slots[0], "192.0.2.2")
    assert scheduler.crowded == set()


def test_a_host_given_back_from_a_crowded_address_still_counts_among_its_sites() -> None:
    """The address's limit grows with the sites seen behind it, not with the cohort held:
    otherwise a CDN's limit would stay at what its first few held hosts allow."""
    scheduler = HostScheduler(Politeness(per_ip=1, per_ip_max=16), lambda: 0.0)
    slots = [scheduler.slot(n, f"h{n}.test") for n in range(26)]
    for slot in slots[:16]:
        scheduler.lease(slot, 1, 60.0)
        scheduler.assign_address(slot, "192.0.2.1")
    assert scheduler.crowds("192.0.2.1")  # 16 held at a limit of 4 (ceil(sqrt(16)))
    for slot in slots[16:]:
        scheduler.seen_at(slot, "192.0.2.1")
        assert (slot.ip, slot.resolved) == (None, False)
    # 26 sites seen allow 6 requests at once: the 16 held no longer crowd it.
    assert slots[0].ip is not None
    assert slots[0].ip.limit == 6
    assert not scheduler.crowds("192.0.2.1")


def cohort_site(port: int) -> Site:
    """24 hosts of five pages on one address, each answer taking 0.01 s."""
    routes: dict[str, Response | Route] = {}
    seeds = []
    for n in range(24):
        base = f"http://c{n}.shared.test"
        seeds.append(f"{base}/")
        routes[f"{base}/"] = page("/p0.html", delay=0.01)
        for k in range(4):
            routes[f"{base}/p{k}.html"] = page(*([f"/p{k + 1}.html"] if k < 3 else []), delay=0.01)
    return Site.build(port, routes, seeds)


def most_hosts_at_once(server: SiteServer) -> int:
    """The most hosts whose requests had begun and not all ended at one time."""
    spans: dict[str, list[float]] = {}
    for record in server.requests:
        span = spans.setdefault(record.host, [record.start, record.end])
        span[0], span[1] = min(span[0], record.start), max(span[1], record.end)
    points = sorted(p for start, end in spans.values() for p in ((start, 1), (end, -1)))
    current = peak = 0
    for _, delta in points:
        current += delta
        peak = max(peak, current)
    return peak


async def test_a_crowded_address_is_served_by_a_bounded_cohort_of_its_hosts(
    crawl: CrawlRunner,
) -> None:
    """An address that may be asked two things at once is served by at most eight hosts
    held at once (``CROWD`` times its limit), each crawled whole, not by all 24 taking
    turns (as they do without the bound: the hosts rest twice as long as the address)."""
    politeness = Politeness(delay=0.05, response_factor=0.0, per_ip=1, per_ip_max=2)
    with SiteServer(cohort_site, shared_address=True) as server:
        result = await crawl(server, politeness=politeness)
        requests = page_requests(server)
        at_once = most_hosts_at_once(server)
    assert result.summary.fetched == 24 * 5
    assert set(requests.values()) == {1}
    assert at_once <= 8, at_once
    assert peak_overlap(server) <= 2


def test_a_host_slot_is_small_and_gives_its_urls_in_order() -> None:
    """A run keeps a slot for every host it holds, so an idle one must cost little."""
    scheduler = HostScheduler(Politeness(), lambda: 0.0)
    names = [f"h{n}.test" for n in range(2_000)]
    with traced() as held:
        slots = [scheduler.slot(n, name) for n, name in enumerate(names)]
        per_slot = held() / len(slots)
    assert per_slot < 600, f"{per_slot:.0f} bytes a slot"
    slot = slots[0]
    scheduler.add(slot, [QueuedURL(n, f"http://h0.test/{n}", 0, 0, 0, 0) for n in range(5)])
    assert [scheduler.take(slot).id, scheduler.take(slot).id] == [0, 1]
    assert [url.id for url in scheduler.drain(slot)] == [2, 3, 4]
    assert (scheduler.buffered, slot.queue) == (0, [])


def test_a_host_held_on_an_address_of_its_own_is_small() -> None:
    """Most of a crawl's hosts are leased, on an address of their own, with a URL or two
    buffered: the scheduler's share of such a host (its slot, its address's slot, its
    heap entry and buffer) stays under 800 bytes, where two tuples of its id, a boxed heap
    key and a buffer grown for more URLs than it holds took about 860."""
    scheduler = HostScheduler(Politeness(), lambda: 0.0)
    hosts = 2_000
    ids = [10**6 + n for n in range(hosts)]
    names = [f"h{n}.test" for n in range(hosts)]
    addresses = [f"10.0.{n // 250}.{n % 250}" for n in range(hosts)]
    urls = [[QueuedURL(10**12 + n, f"http://{names[n]}/", ids[n], 0, 0, 0)] for n in range(hosts)]
    with traced() as held:
        for host_id, name, address, buffered in zip(ids, names, addresses, urls, strict=True):
            slot = scheduler.slot(host_id, name)
            scheduler.lease(slot, 1, 60.0)
            scheduler.assign_address(slot, address)
            scheduler.add(slot, buffered)
        per_host = held() / hosts
    assert per_host < 800, f"{per_host:.0f} bytes a host"
    assert scheduler.buffered == hosts
    turns = [scheduler.pop_ready() for _ in range(3)]
    assert [slot.id for slot in turns if isinstance(slot, HostSlot)] == ids[:3]
