"""Host scheduler maths on a virtual clock: delays, per-host limits, fairness; a host's
circuit breaker and robots.txt state, kept by its slot."""

from __future__ import annotations

import dataclasses

import pytest

from trawl.config import Breaker, Politeness
from trawl.politeness.robots_parser import DISALLOW_ALL, parse_robots
from trawl.politeness.scheduler import HostScheduler
from trawl.politeness.slots import BreakerVerdict, HostSlot
from trawl.store.values import QueuedURL


class VirtualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def urls(host_id: int, count: int) -> list[QueuedURL]:
    return [QueuedURL(host_id * 1000 + i, f"http://h{host_id}/{i}", host_id, 0, 0, 0)
            for i in range(count)]  # fmt: skip


def scheduler(**politeness: float) -> tuple[HostScheduler, VirtualClock]:
    clock = VirtualClock()
    return HostScheduler(Politeness(**politeness), clock), clock  # type: ignore[arg-type]


def ready_slot(sched: HostScheduler) -> HostSlot:
    turn = sched.pop_ready()
    assert isinstance(turn, HostSlot), turn
    return turn


def test_delay_is_the_largest_of_setting_crawl_delay_and_response_time() -> None:
    sched, _ = scheduler(delay=1.0, response_factor=10.0, max_delay=60.0)
    slot = sched.slot(1, "h1")
    assert sched.delay_after(slot, 0.01) == 1.0
    assert sched.delay_after(slot, 0.5) == 5.0
    assert sched.delay_after(slot, 30.0) == 60.0
    slot.robots = parse_robots(b"User-agent: *\nCrawl-delay: 7\n", "trawl")
    assert sched.delay_after(slot, 0.01) == 7.0
    slot.robots = parse_robots(b"User-agent: *\nCrawl-delay: 500\n", "trawl")
    assert sched.delay_after(slot, 0.01) == 60.0


def test_one_host_waits_its_delay_between_requests() -> None:
    sched, clock = scheduler(delay=2.0, response_factor=0.0)
    slot = sched.slot(1, "h1")
    sched.add(slot, urls(1, 3))
    first = ready_slot(sched)
    sched.take(first)
    sched.started(first)
    assert sched.pop_ready() is None  # in flight, per_host 1
    clock.now += 0.5
    sched.finished(first, response_time=0.5)
    assert sched.pop_ready() == clock.now + 2.0
    clock.now += 2.0
    assert ready_slot(sched) is slot


def test_per_host_limit_allows_that_many_in_flight() -> None:
    sched, _ = scheduler(per_host=3, delay=0.0, response_factor=0.0)
    slot = sched.slot(1, "h1")
    sched.add(slot, urls(1, 10))
    for _ in range(3):
        turn = ready_slot(sched)
        sched.take(turn)
        sched.started(turn)
    assert sched.pop_ready() is None
    assert slot.inflight == 3


def test_a_throttled_host_does_not_block_others() -> None:
    sched, clock = scheduler(delay=1.0, response_factor=0.0)
    slow, fast = sched.slot(1, "slow"), sched.slot(2, "fast")
    sched.add(slow, urls(1, 5))
    sched.add(fast, urls(2, 5))
    turn = ready_slot(sched)
    sched.take(turn)
    sched.started(turn)
    sched.finished(turn, response_time=0.0, extra_wait=300.0)  # 429 back-off
    other = ready_slot(sched)
    assert other is not turn
    sched.take(other)
    sched.started(other)
    sched.finished(other, response_time=0.0)
    clock.now += 1.0
    assert ready_slot(sched) is other
    assert turn.next_ready == 100.0 + 300.0


def test_hosts_take_turns_in_ready_time_order() -> None:
    sched, clock = scheduler(delay=1.0, response_factor=0.0)
    slots = [sched.slot(i, f"h{i}") for i in range(1, 4)]
    for slot in slots:
        sched.add(slot, urls(slot.id, 2))
    order = []
    for _ in range(3):
        turn = ready_slot(sched)
        sched.take(turn)
        sched.started(turn)
        order.append(turn.id)
        clock.now += 0.1
        sched.finished(turn, 0.0)
    assert sorted(order) == [1, 2, 3]
    assert sched.pop_ready() == pytest.approx(100.1 + 1.0)  # the first host finished first
    assert sched.buffered == 3


def test_a_turns_wait_for_a_slot_counts_from_its_ready_time_or_from_its_return() -> None:
    """The wait the host limit is sized by (trawl.crawl.capacity) is the time a host's
    turn had come and no request slot took it: not the time it rested, nor the time it
    had nothing buffered."""
    sched, clock = scheduler(delay=1.0, response_factor=0.0)
    slot = sched.slot(1, "h1")
    sched.add(slot, urls(1, 1))
    clock.now += 0.25  # due at once; no slot for a quarter of a second
    sched.take(ready_slot(sched))
    sched.started(slot)
    sched.finished(slot, 0.0)  # rests a second
    assert (sched.waited, sched.turns) == (0.25, 1)
    clock.now += 10.0  # due after a second, but nothing is buffered until now
    sched.add(slot, urls(1, 1))
    clock.now += 0.5
    assert ready_slot(sched) is slot
    assert (sched.waited, sched.turns) == (0.75, 2)


def test_robots_pending_host_is_not_scheduled() -> None:
    sched, _ = scheduler(delay=0.0)
    slot = sched.slot(1, "h1")
    sched.add(slot, urls(1, 2))
    turn = ready_slot(sched)
    assert turn.needs_robots(0.0)
    turn.robots_pending = True
    sched.started(turn)
    assert sched.pop_ready() is None
    turn.robots_pending = False
    turn.robots = parse_robots(b"", "trawl")
    turn.robots_expires = 1e9
    sched.finished(turn, 0.0)
    assert ready_slot(sched) is slot
    assert not slot.needs_robots(0.0)


def test_the_breaker_trips_after_threshold_failures_then_gives_the_host_up() -> None:
    breaker = Breaker(threshold=2, pause=10.0, trips=2)
    slot = HostSlot(1, "h1")
    assert slot.count_request(True, breaker) == BreakerVerdict()
    assert slot.backing_off()
    assert slot.count_request(True, breaker) == BreakerVerdict(tripped=True, pause=10.0)
    slot.count_request(True, breaker)
    assert slot.count_request(True, breaker) == BreakerVerdict(tripped=True, pause=20.0)
    slot.count_request(True, breaker)
    assert slot.count_request(True, breaker) == BreakerVerdict(tripped=True, gave_up=True)


def test_a_success_closes_the_breaker_and_forgets_its_trips() -> None:
    breaker = Breaker(threshold=1, pause=10.0, trips=3)
    slot = HostSlot(1, "h1")
    assert slot.count_request(True, breaker).pause == 10.0
    assert slot.count_request(True, breaker).pause == 20.0
    assert slot.count_request(False, breaker) == BreakerVerdict()
    assert (slot.failures, slot.trips) == (0, 0)
    assert slot.count_request(True, breaker).pause == 10.0


def test_the_slot_keeps_its_robots_state_through_a_fetch() -> None:
    slot = HostSlot(1, "h1")
    assert slot.needs_robots(0.0)
    slot.start_robots()
    assert not slot.needs_robots(0.0)
    assert not slot.idle()
    assert slot.robots_retry() == 1
    assert slot.backing_off()
    assert not slot.robots_pending
    slot.start_robots()
    slot.robots_unavailable(until=50.0)
    assert slot.robots is DISALLOW_ALL
    assert not slot.backing_off()
    assert not slot.needs_robots(49.0)
    assert slot.needs_robots(50.0)
    slot.start_robots()
    slot.robots_shut_out("dns", until=80.0)
    assert (slot.refused, slot.robots, slot.robots_expires) == ("dns", DISALLOW_ALL, 80.0)
    rules = parse_robots(b"User-agent: *\nDisallow: /x\n", "trawl")
    slot.start_robots()
    slot.robots_loaded(rules, expires=200.0)
    assert (slot.refused, slot.robots, slot.robots_pending) == (None, rules, False)
    assert slot.idle()


def test_a_buffered_url_found_nearer_a_seed_is_fetched_at_that_depth() -> None:
    sched, _ = scheduler()
    slot = sched.slot(1, "h1")
    sched.add(slot, urls(1, 2))
    deeper = [dataclasses.replace(url, depth=4) for url in sched.drain(slot)]
    sched.add(slot, deeper)
    slot.lower_depth(deeper[1].id, 2)
    slot.lower_depth(deeper[0].id, 6)
    assert [url.depth for url in slot.queue] == [4, 2]
