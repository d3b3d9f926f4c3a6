"""The live limits on requests in flight and hosts held (trawl.crawl.capacity)."""

from __future__ import annotations

import dataclasses

import pytest

from trawl.config import START_HOSTS, START_REQUESTS
from trawl.crawl.capacity import (
    AUTO_HOSTS,
    AUTO_REQUESTS,
    HOSTS_FLOOR,
    SHRINK,
    WAIT_HIGH,
    Capacity,
    Load,
    LoadMeter,
)

IDLE = Load(
    cpu=0.3, lag=0.001, requests_capped=False, network_share=0.9, inflight=10.0,
    hosts_capped=False,
)  # fmt: skip
WANTS_REQUESTS = dataclasses.replace(IDLE, requests_capped=True)
WANTS_HOSTS = dataclasses.replace(IDLE, hosts_capped=True)
BUSY = dataclasses.replace(WANTS_REQUESTS, cpu=0.99)


def test_without_flags_the_limits_start_at_the_old_defaults_and_are_capped_by_files() -> None:
    capacity = Capacity(None, None, open_files=1_000_000)
    assert (capacity.requests, capacity.hosts) == (START_REQUESTS, START_HOSTS)
    assert (capacity.requests_ceiling, capacity.hosts_ceiling) == (AUTO_REQUESTS, AUTO_HOSTS)
    assert Capacity(None, None, open_files=1024).requests_ceiling == 512


def test_requests_grow_while_hosts_wait_for_a_slot_and_the_loop_has_room() -> None:
    capacity = Capacity(None, None, open_files=100_000)
    seen = [capacity.requests]
    for _ in range(10):
        capacity.adjust(WANTS_REQUESTS)
        seen.append(capacity.requests)
    assert seen == sorted(seen)
    assert seen[-1] > 8 * START_REQUESTS
    assert capacity.hosts == START_HOSTS


def test_an_explicit_limit_is_a_ceiling_and_the_start_never_passes_it() -> None:
    capacity = Capacity(100, 3, open_files=100_000)
    assert (capacity.requests, capacity.hosts) == (START_REQUESTS, 3)
    for _ in range(20):
        capacity.adjust(WANTS_REQUESTS)
        capacity.adjust(WANTS_HOSTS)
    assert (capacity.requests, capacity.hosts) == (100, 3)
    assert Capacity(8, None, open_files=100_000).requests == 8


def test_a_busy_loop_shrinks_requests_back_but_never_below_the_start() -> None:
    capacity = Capacity(None, None, open_files=100_000)
    for _ in range(10):
        capacity.adjust(WANTS_REQUESTS)
    grown = capacity.requests
    capacity.adjust(BUSY)
    assert capacity.requests < grown
    for _ in range(50):
        capacity.adjust(BUSY)
    assert capacity.requests == START_REQUESTS


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(dataclasses.replace(WANTS_REQUESTS, cpu=0.9), id="cpu-between"),
        pytest.param(dataclasses.replace(WANTS_REQUESTS, lag=0.03), id="lag-between"),
        pytest.param(dataclasses.replace(WANTS_REQUESTS, network_share=0.2), id="extract-bound"),
        pytest.param(dataclasses.replace(WANTS_HOSTS, inflight=60.0), id="requests-were-busy"),
    ],
)
def test_nothing_grows_when_growth_would_not_help(load: Load) -> None:
    capacity = Capacity(None, None, open_files=100_000)
    capacity.adjust(load)
    assert (capacity.requests, capacity.hosts) == (START_REQUESTS, START_HOSTS)


def test_hosts_grow_while_every_host_slot_is_taken_and_request_slots_go_unused() -> None:
    capacity = Capacity(None, None, open_files=100_000)
    for _ in range(8):
        capacity.adjust(WANTS_HOSTS)
    assert capacity.hosts > 5 * START_HOSTS
    assert capacity.requests == START_REQUESTS
    for _ in range(100):
        capacity.adjust(WANTS_HOSTS)
    assert capacity.hosts == AUTO_HOSTS


def test_the_meter_reports_cpu_lag_and_requests_over_its_window_then_starts_afresh() -> None:
    meter = LoadMeter(now=10.0, cpu=5.0)
    meter.probe(0.004, 20)
    meter.probe(-0.001, 40)  # a timer is never early; read as on time
    meter.requests_capped = True
    load = meter.load(
        now=11.0, cpu=5.5, network_share=0.75, hosts_capped=True, turn_wait=0.5, held=9
    )
    assert load == Load(
        cpu=0.5, lag=0.002, requests_capped=True, network_share=0.75, inflight=30.0,
        hosts_capped=True, turn_wait=0.5, held=9,
    )  # fmt: skip
    after = meter.load(
        now=12.0, cpu=5.5, network_share=1.0, hosts_capped=False, turn_wait=0.0, held=9
    )
    assert (after.cpu, after.lag, after.requests_capped, after.inflight) == (0.0, 0.0, False, 0.0)


def test_hosts_waiting_long_for_a_request_slot_shrink_the_host_limit_from_the_hosts_held() -> None:
    capacity = Capacity(None, None, open_files=100_000)
    for _ in range(12):
        capacity.adjust(WANTS_HOSTS)
    grown = capacity.hosts
    assert grown > 8 * START_HOSTS
    waiting = dataclasses.replace(BUSY, turn_wait=WAIT_HIGH * 4, held=grown // 2)
    capacity.adjust(waiting)
    # From the hosts held, not from a limit they never reached.
    assert capacity.hosts == int(grown // 2 * SHRINK)
    assert capacity.turn_wait == WAIT_HIGH * 4
    for _ in range(100):
        capacity.adjust(waiting)
    assert capacity.hosts == HOSTS_FLOOR


def test_hosts_do_not_grow_while_held_hosts_wait_for_request_slots() -> None:
    capacity = Capacity(None, None, open_files=100_000)
    capacity.adjust(dataclasses.replace(WANTS_HOSTS, turn_wait=WAIT_HIGH * 2, held=START_HOSTS))
    shrunk = capacity.hosts
    assert shrunk < START_HOSTS
    capacity.adjust(dataclasses.replace(WANTS_HOSTS, turn_wait=WAIT_HIGH / 2, held=shrunk))
    assert capacity.hosts > shrunk
