"""A crawl keeps the state of the hosts it holds, not of every host it met: a host given
back is forgotten once its release is committed, and a new lease of it starts from what
the store kept (its rest time, its robots.txt)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from conftest import CrawlRunner, page_requests, robots_requests
from test_crawl import page, robots
from test_frontier import discovered
from trawl.config import Breaker, LeasePolicy, Politeness
from trawl.demo import Response, Route, Site, SiteServer
from trawl.frontier.queue import RECHECK, Frontier
from trawl.politeness.scheduler import HostScheduler
from trawl.politeness.slots import FAILURES_KEPT, HostSlot
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, QueuedURL, Release

ADDRESS = "192.0.2.1"


def given_back(scheduler: HostScheduler, host_id: int, address: str | None) -> HostSlot:
    """A host that was held, resolved to ``address``, fetched once and given back."""
    slot = scheduler.slot(host_id, f"h{host_id}.test")
    scheduler.lease(slot, 1, 60.0)
    scheduler.assign_address(slot, address)
    scheduler.add(slot, [QueuedURL(host_id, f"http://{slot.name}/", host_id, 0, 0, 0)])
    assert scheduler.pop_ready() is slot
    scheduler.take(slot)
    scheduler.started(slot)
    scheduler.finished(slot, 0.1)
    scheduler.end_lease(slot)
    return slot


def test_a_host_given_back_is_forgotten_with_its_address_when_it_was_its_only_site() -> None:
    scheduler = HostScheduler(Politeness(), lambda: 0.0)
    slot = given_back(scheduler, 1, ADDRESS)
    assert scheduler.forget(slot.id)
    assert scheduler.find(1) is None
    assert list(scheduler.slots()) == []
    # Leased again: a new slot on a new address slot, which counts one site.
    again = scheduler.slot(1, "h1.test")
    assert again is not slot
    assert not again.resolved
    assert again.robots is None
    scheduler.assign_address(again, ADDRESS)
    assert again.ip is not None
    assert again.ip is not slot.ip
    assert again.ip.hosts == (1,)


def test_an_address_of_several_sites_keeps_their_count_when_one_is_forgotten() -> None:
    scheduler = HostScheduler(Politeness(per_ip=1, per_ip_max=16), lambda: 0.0)
    first = given_back(scheduler, 1, ADDRESS)
    for host_id in (2, 3, 4, 5):
        scheduler.assign_address(scheduler.slot(host_id, f"h{host_id}.test"), ADDRESS)
    assert scheduler.forget(first.id)
    newcomer = scheduler.slot(6, "h6.test")
    scheduler.assign_address(newcomer, ADDRESS)
    # Six sites seen, the forgotten one among them: a limit of ceil(sqrt(6)).
    assert newcomer.ip is first.ip
    assert newcomer.ip is not None
    assert newcomer.ip.limit == 3


def test_an_address_of_one_request_at_a_time_outlives_one_of_its_sites() -> None:
    """With ``per_ip_max`` 1 the limit is at its most from the first site, yet the second
    is counted too: forgetting the first must not drop the address the second is on, or
    the second and a newcomer would each have an address slot, and a request at once."""
    scheduler = HostScheduler(Politeness(delay=0.0, response_factor=0.0, per_ip_max=1), lambda: 0.0)
    first = given_back(scheduler, 1, ADDRESS)
    second = given_back(scheduler, 2, ADDRESS)
    second.count_request(True, Breaker())  # failing: kept
    assert scheduler.forget(first.id)
    assert not scheduler.forget(second.id)
    newcomer = scheduler.slot(3, "h3.test")
    scheduler.assign_address(newcomer, ADDRESS)
    assert newcomer.ip is second.ip


def test_an_address_stops_counting_sites_once_its_limit_is_at_its_most() -> None:
    scheduler = HostScheduler(Politeness(per_ip=1, per_ip_max=16), lambda: 0.0)
    for host_id in range(1, 1001):
        scheduler.seen_at(scheduler.slot(host_id, f"h{host_id}.test"), ADDRESS)
    some = scheduler.slot(1001, "h1001.test")
    scheduler.assign_address(some, ADDRESS)
    assert some.ip is not None
    assert some.ip.limit == 16
    assert len(some.ip.hosts) == 226  # the least that allow 16: 15 ** 2 + 1


def test_a_host_with_state_the_store_does_not_keep_is_not_forgotten() -> None:
    scheduler = HostScheduler(Politeness(), lambda: 0.0)
    held = scheduler.slot(1, "held.test")
    scheduler.lease(held, 1, 60.0)
    assert not scheduler.forget(held.id)
    busy = given_back(scheduler, 2, None)
    busy.job_started()  # its last result is not with the committer yet
    assert not scheduler.forget(busy.id)
    failing = given_back(scheduler, 3, None)
    failing.count_request(True, Breaker())
    assert not scheduler.forget(failing.id)
    shut_out = given_back(scheduler, 4, None)
    shut_out.robots_shut_out("unreachable", until=3600.0)
    assert not scheduler.forget(shut_out.id)
    unavailable = given_back(scheduler, 5, None)
    unavailable.robots_unavailable(until=3600.0)
    assert not scheduler.forget(unavailable.id)
    assert {slot.id for slot in scheduler.slots()} == {1, 2, 3, 4, 5}
    busy.job_settled()
    assert scheduler.forget(busy.id)


def test_what_the_store_does_not_keep_is_forgotten_once_it_has_lapsed() -> None:
    now = [0.0]
    scheduler = HostScheduler(Politeness(delay=1.0, response_factor=0.0), lambda: now[0])
    shut_out = given_back(scheduler, 1, ADDRESS)
    shut_out.robots_shut_out("unreachable", until=300.0)
    unavailable = given_back(scheduler, 2, None)
    unavailable.robots_unavailable(until=400.0)
    failing = given_back(scheduler, 3, None)
    failing.count_request(True, Breaker())  # rests until 1.0 (the delay)
    for slot in (shut_out, unavailable, failing):
        assert not scheduler.forget(slot.id)
    now[0] = 299.0
    assert scheduler.sweep() == 0
    now[0] = 300.0
    assert scheduler.sweep() == 1
    assert scheduler.find(1) is None
    again = scheduler.slot(1, "h1.test")  # asked anew, as the kept slot would have been
    assert (again.refused, again.robots, again.robots_failures) == (None, None, 0)
    now[0] = 1.0 + FAILURES_KEPT
    assert scheduler.sweep() == 2
    assert {slot.id for slot in scheduler.slots()} == {1}


def test_a_host_leased_again_before_its_state_lapses_keeps_its_breaker() -> None:
    now = [0.0]
    scheduler = HostScheduler(Politeness(delay=1.0, response_factor=0.0), lambda: now[0])
    breaker = Breaker(threshold=1, pause=60.0, trips=3)
    slot = given_back(scheduler, 1, None)
    verdict = slot.count_request(True, breaker)
    assert verdict.tripped
    scheduler.pause(slot, verdict.pause)  # rests until 60
    assert not scheduler.forget(slot.id)
    now[0] = 100.0
    scheduler.lease(slot, 2, 160.0)  # leased again: the sweep passes it over
    now[0] = 60.0 + FAILURES_KEPT
    assert scheduler.sweep() == 0
    assert scheduler.find(1) is slot
    verdict = slot.count_request(True, breaker)
    assert verdict.pause == 2 * breaker.pause  # the second trip, not a first one
    scheduler.pause(slot, verdict.pause)
    scheduler.end_lease(slot)
    assert not scheduler.forget(slot.id)  # kept anew, from its new rest
    now[0] += verdict.pause + FAILURES_KEPT
    assert scheduler.sweep() == 1


def test_a_host_given_up_is_forgotten_but_stays_refused_for_the_run() -> None:
    scheduler = HostScheduler(Politeness(), lambda: 0.0)
    refused = given_back(scheduler, 1, ADDRESS)
    refused.give_up("host_failing")
    assert scheduler.forget(refused.id)
    assert list(scheduler.slots()) == []
    again = scheduler.slot(1, "h1.test")
    assert again.refused == "host_failing"
    assert scheduler.slot(2, "h2.test").refused is None


def test_a_forgotten_host_waiting_on_its_address_is_passed_over() -> None:
    now = [0.0]
    scheduler = HostScheduler(
        Politeness(delay=1.0, response_factor=0.0, per_ip_max=1), lambda: now[0]
    )
    a, b = scheduler.slot(1, "a.pong.test"), scheduler.slot(2, "b.pong.test")
    for slot in (a, b):
        scheduler.lease(slot, 1, 60.0)
        scheduler.assign_address(slot, ADDRESS)
        scheduler.add(slot, [QueuedURL(slot.id, f"http://{slot.name}/", slot.id, 0, 0, 0)])
    assert scheduler.pop_ready() is a
    scheduler.take(a)
    scheduler.started(a)
    assert scheduler.pop_ready() is None  # b waits on the address
    scheduler.drain(b)
    scheduler.end_lease(b)
    assert scheduler.forget(b.id)
    now[0] = 0.5
    scheduler.finished(a, 0.1)
    assert scheduler.pop_ready() is None


async def asked_once(
    store: SQLiteStore, now: list[float]
) -> tuple[HostScheduler, Frontier, HostSlot]:
    """A frontier over ``store`` holding one host at a time, and its one host, leased and
    asked once (it rests 5 s from ``now``)."""
    await store.commit(discovered("a.pong.test", 1))
    scheduler = HostScheduler(Politeness(delay=5.0, response_factor=0.0), lambda: now[0])

    async def commit_release(release: Release) -> None:
        await store.commit(CommitBatch(releases=[release]))

    frontier = Frontier(
        store, scheduler, capacity=4, on_release=commit_release, clock=lambda: now[0]
    )
    frontier.max_hosts = 1
    await frontier.refill()
    (first,) = frontier.held
    scheduler.take(first)
    scheduler.started(first)
    scheduler.finished(first, 0.1)
    return scheduler, frontier, first


async def test_the_frontier_forgets_a_host_once_its_release_is_committed(tmp_path: Path) -> None:
    now = [100.0]
    async with SQLiteStore(tmp_path) as store:
        scheduler, frontier, first = await asked_once(store, now)
        now[0] += RECHECK
        await frontier.refill()  # nothing more to claim, every host slot taken: given back
        assert frontier.holding == 0
        assert scheduler.find(first.id) is first
        frontier.released([first.id])
        assert scheduler.find(first.id) is None
        # Leased again for its URL (never completed here, so queued again by the release).
        await frontier.refill()
        (again,) = frontier.held
        assert again.id == first.id
        assert again is not first
        assert len(again.queue) == 1
        # The rest it was given back with came from the store (less the time since).
        rest = 5.0 - RECHECK
        assert rest - 1.0 < scheduler.turn_in(again) <= rest


async def test_a_refill_forgets_a_failing_host_given_back_once_its_count_lapses(
    tmp_path: Path,
) -> None:
    now = [100.0]
    async with SQLiteStore(tmp_path) as store:
        scheduler, frontier, first = await asked_once(store, now)
        first.count_request(True, Breaker())  # the request failed
        now[0] += RECHECK
        await frontier.refill()  # given back
        frontier.released([first.id])
        assert scheduler.find(first.id) is first  # kept, for its failure
        now[0] = first.next_ready + FAILURES_KEPT
        await frontier.refill()  # forgotten, then leased again for its URL
        (again,) = frontier.held
        assert again.id == first.id
        assert again is not first
        assert again.failures == 0


async def test_a_host_whose_lease_was_lost_is_forgotten(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path) as store:
        await store.commit(discovered("a.pong.test", 2))
        scheduler = HostScheduler(Politeness())
        frontier = Frontier(store, scheduler, capacity=4, leases=LeasePolicy(ttl=0.2))
        await frontier.refill()
        (slot,) = frontier.held
        scheduler.take(slot)  # fetched, committed; the other URL is left buffered
        await asyncio.sleep(0.3)
        (taken,) = await store.lease_hosts("worker-b", limit=10, ttl=60)
        assert taken.host_id == slot.id
        await frontier.renew()
        assert frontier.lost == 1
        assert scheduler.find(slot.id) is None


def ping_pong_site(port: int) -> Site:
    """a.pong.test/ links b.pong.test/1, which links a.pong.test/2 and a.pong.test/private/1,
    which a.pong.test's robots.txt disallows: with one host held at a time, a.pong.test is
    given back for b.pong.test and leased again."""
    routes: dict[str, Response | Route] = {
        "http://a.pong.test/robots.txt": robots("User-agent: *", "Disallow: /private/"),
        "http://b.pong.test/robots.txt": robots("User-agent: *", "Allow: /"),
        "http://a.pong.test/": page(f"http://b.pong.test:{port}/1"),
    }
    for n in range(1, 3):
        here, there = ("b.pong.test", "a.pong.test") if n % 2 else ("a.pong.test", "b.pong.test")
        links = [f"http://{there}:{port}/{n + 1}"] if n < 2 else []
        if here == "b.pong.test":
            links.append(f"http://a.pong.test:{port}/private/{n}")
        routes[f"http://{here}/{n}"] = page(*links)
    return Site.build(port, routes, ["http://a.pong.test/"])


async def test_a_host_leased_again_keeps_its_robots_rules_and_its_rest(
    crawl: CrawlRunner,
) -> None:
    delay = 0.3
    politeness = Politeness(delay=delay, response_factor=0.0)
    with SiteServer(ping_pong_site) as server:
        result = await crawl(
            server, politeness=politeness, soft_404=False, leases=LeasePolicy(max_hosts=1)
        )
        pages = page_requests(server)
        robots_asked = robots_requests(server)
        log = sorted(server.requests, key=lambda r: r.start)
    assert result.summary.fetched == 3
    assert set(pages.values()) == {1}
    assert not any("/private/" in url for url in pages)
    # Leased again, a.pong.test's rules were read from the store, not asked for again.
    assert robots_asked == {"a.pong.test": 1, "b.pong.test": 1}
    for host in ("a.pong.test", "b.pong.test"):
        own = [r for r in log if r.host == host]
        assert min(b.start - a.end for a, b in itertools.pairwise(own)) >= delay - 0.02
