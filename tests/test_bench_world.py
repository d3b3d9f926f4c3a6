"""The world benchmark: its map, its DNS server, its log checks, and a tiny world crawled
end to end by trawl with its default politeness."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiodns
import pytest
from bench.servers import free_port
from bench.world import ANY, WorldResult, run_world
from bench.world_log import (
    LATE_ANSWER,
    TIMEOUT,
    Request,
    audit_store,
    parse,
    politeness,
    read_store,
)
from bench.world_map import Behaviour, Dns, Host, World, WorldParams, ground_truth, own_address
from bench.world_monitor import Sample, settled_rss
from bench.world_server import MEDIAN

from pg import URL, connect

ROOT = Path(__file__).resolve().parents[1]
TINY = WorldParams(hosts=30, pages=4, seed=1684, http_port=0, https_port=0)
"""30 hosts whose seed gives every kind of host: TLS, shared, slow, failing, throttled,
Crawl-delay, flaky DNS, NXDOMAIN and SERVFAIL (checked below)."""


def _port() -> int:
    """A port free on every address, as the world's server needs."""
    return free_port(address=ANY)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[WorldResult, World, Path]:
    """The tiny world crawled to the end, latencies a twentieth of the real ones."""
    params = dataclasses.replace(TINY, http_port=_port(), https_port=_port())
    run = tmp_path_factory.mktemp("world")
    result = run_world(params, interval=1.0, latency_scale=0.05, run_dir=run)
    return result, World(params), run


def test_tiny_world_has_every_kind_of_host() -> None:
    world = World(TINY)
    truth = ground_truth(world)
    reached = [h for h in world.hosts() if h.url(0) in truth.discovered]
    assert {h.behaviour for h in reached} == set(Behaviour)
    assert {h.dns for h in reached} == set(Dns)
    assert any(h.crawl_delay for h in reached)
    assert any(h.tls for h in reached)
    assert sum(h.shared for h in reached) >= 3


def test_world_is_deterministic_and_names_round_trip() -> None:
    params = WorldParams(hosts=100_000, pages=10, seed=7)
    first, second = World(params), World(params)
    for index in (0, 42, 65_023, 65_024, 99_999):
        host = first.host(index)
        assert host == second.host(index)
        assert first.index_of(host.name.upper() + ".") == index
    assert first.index_of("h00042.bravo.test") is None  # 42 lives in zone charlie
    assert first.index_of("h100000.alpha.test") is None
    addresses = {own_address(i) for i in range(0, 100_000, 97)}
    assert len(addresses) == len(range(0, 100_000, 97))
    assert all(int(part) <= 255 for a in addresses for part in a.split("."))


def test_dns_server_answers_as_the_map_says(tmp_path: Path) -> None:
    world = World(TINY)
    by_kind = {h.dns: h for h in world.hosts()}
    counts = tmp_path / "dns.json"
    args = [str(v) for v in (TINY.hosts, TINY.pages, TINY.seed, 1, 2, _udp_port())]
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.world_dns", *args, str(counts)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        answers = asyncio.run(_ask(args[5], by_kind))
    finally:
        server.terminate()
        server.wait(timeout=10)
    ok = by_kind[Dns.OK]
    assert answers["ok-A"] == [(ok.address, ok.ttl)]
    assert answers["ok-AAAA"] == "NODATA"
    assert answers["nxdomain-A"] == "NXDOMAIN"
    assert answers["servfail-A"] == "SERVFAIL"
    assert answers["flaky-A"] == "SERVFAIL"
    assert answers["flaky-A-again"] == [(by_kind[Dns.FLAKY].address, by_kind[Dns.FLAKY].ttl)]
    assert json.loads(counts.read_text())["queries"][ok.name] == 2


def _udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _ask(port: str, by_kind: dict[Dns, Host]) -> dict[str, object]:
    resolver = aiodns.DNSResolver(nameservers=[f"127.0.0.1:{port}"], tries=1, timeout=2)
    status = {
        aiodns.error.ARES_ENOTFOUND: "NXDOMAIN", aiodns.error.ARES_ESERVFAIL: "SERVFAIL",
        aiodns.error.ARES_ENODATA: "NODATA",
    }  # fmt: skip

    async def ask(name: str, kind: str) -> object:
        try:
            answer = await resolver.query_dns(name, kind)
        except aiodns.error.DNSError as error:
            return status.get(error.args[0], error.args)
        return [(getattr(r.data, "addr", None), r.ttl) for r in answer.answer]

    names = {kind.value: host.name for kind, host in by_kind.items()}
    found = {
        "ok-A": await ask(names["ok"], "A"), "ok-AAAA": await ask(names["ok"], "AAAA"),
        "nxdomain-A": await ask(names["nxdomain"], "A"),
        "servfail-A": await ask(names["servfail"], "A"),
        "flaky-A": await ask(names["flaky"], "A"),
    }  # fmt: skip
    await ask(names["flaky"], "A")
    found["flaky-A-again"] = await ask(names["flaky"], "A")
    return found


def test_tiny_world_crawl_is_correct_and_polite(tiny: tuple[WorldResult, World, Path]) -> None:
    result, _, _ = tiny
    assert result.failures == [], result.table()
    assert result.trawl_exit == 0
    assert not result.stopped
    assert result.violations == 0
    assert result.max_inflight_per_host == 1
    assert result.pages >= result.truth_pages - 10
    # The faults were served, and trawl got past every one of them.
    assert {"429", "503", "500", "404"} <= set(result.statuses)
    assert result.audit.missing == result.audit.unexpected == 0
    assert result.dns_answers.get("nxdomain", 0)
    assert result.dns_answers.get("servfail", 0)


def test_every_figure_is_reported(tiny: tuple[WorldResult, World, Path]) -> None:
    result, _, _ = tiny
    table = result.table()
    for label in ("pages/s", "trawl CPU", "memory per host", "server", "DNS", "politeness",
                  "shared addresses", "store vs truth", "verdict"):  # fmt: skip
        assert label in table
    assert len(result.series) >= 2
    # The last sample may find trawl exited (a zombie's RSS reads 0); the fits skip it.
    assert all(s.rss > 0 for s in result.series[:-1])
    assert result.server_lateness_ms_p99 < MEDIAN * 1000
    assert json.loads(result.to_json())["failures"] == []


def _requests(run: Path) -> list[Request]:
    return parse(line for log in run.glob("access-*.log") for line in log.read_text().splitlines())


def test_a_wrong_ground_truth_is_detected(tiny: tuple[WorldResult, World, Path]) -> None:
    _, world, run = tiny
    truth = ground_truth(world)
    store = read_store(run / "trawl-data")
    dropped = sorted(truth.fetched)[0]
    wrong = dataclasses.replace(
        truth,
        fetched=(truth.fetched - {dropped}) | {world.host(0).root + "/p/99.html"},
        discovered=truth.discovered | {world.host(0).root + "/p/99.html"},
    )
    audit = audit_store(world, wrong, _requests(run), store, None)
    assert (audit.missing, audit.unexpected, audit.discovered_diff) == (1, 1, 1)
    assert audit.problems(complete=True)
    # A stopped crawl is not held to the ground truth, only to the log.
    assert not audit_store(world, wrong, _requests(run), store, 0).missing


def test_a_page_served_twice_or_not_recorded_is_detected(
    tiny: tuple[WorldResult, World, Path],
) -> None:
    _, world, run = tiny
    requests = _requests(run)
    store = read_store(run / "trawl-data")
    page = next(r for r in requests if r.status == 200 and r.path.startswith("/p/"))
    again = dataclasses.replace(page, start=page.start + 10**10, end=page.end + 10**10)
    audit = audit_store(world, ground_truth(world), [*requests, again], store, None)
    assert audit.duplicate_200s == 1
    assert audit.problems(complete=True)
    took = (page.end - page.start) / 1e9
    assert any(e.startswith("served twice:") and f"{took:.2f} s" in e for e in audit.examples)
    # An answer written as trawl's fetch timeout fired, fetched again: read once.
    late = dataclasses.replace(page, end=page.start + int(LATE_ANSWER * 1e9))
    others = [r for r in requests if r is not page]
    audit = audit_store(world, ground_truth(world), [late, *others, again], store, None)
    assert (audit.duplicate_200s, audit.late_repeats) == (0, 1)
    url = world.host(world.index_of(page.host) or 0).root + page.path
    del store[url]
    audit = audit_store(world, ground_truth(world), requests, store, None)
    assert audit.unrecorded_200s == 1
    # Given up on by trawl just as it was written: recorded as a timeout, queued again.
    store[url] = (0, None, TIMEOUT)
    assert audit_store(world, ground_truth(world), requests, store, None).unrecorded_200s == 0


def test_an_injected_politeness_violation_is_detected(
    tiny: tuple[WorldResult, World, Path],
) -> None:
    _, world, run = tiny
    requests = _requests(run)
    assert politeness(requests, world, 1.0) == []
    first = min((r for r in requests if r.path == "/"), key=lambda r: r.end)
    too_soon = dataclasses.replace(first, start=first.end + 500_000_000, end=first.end + 6 * 10**8)
    inside = dataclasses.replace(first, start=first.start + 1, end=first.end + 1)
    found = politeness([*requests, too_soon], world, 1.0)
    # The injected request comes too soon, and so does the real one after it.
    assert {(v.host, v.kind) for v in found} == {(first.host, "gap")}
    found = politeness([*requests, inside], world, 1.0)
    assert (first.host, "overlap") in [(v.host, v.kind) for v in found]


def test_retry_after_and_crawl_delay_set_the_rest() -> None:
    world = World(TINY)
    host = next(h for h in world.hosts() if h.crawl_delay)
    second = 10**9

    def request(path: str, status: int, start: float, end: float) -> Request:
        return Request(host.name, path, status, int(start * second), int(end * second), 0,
                       host.address, "0-1")  # fmt: skip

    robots_then_page = [request("/robots.txt", 200, 0, 0.1), request("/", 429, 1.2, 1.3)]
    assert politeness(robots_then_page, world, 1.0) == []
    after_robots = [*robots_then_page, request("/", 200, 2.8, 3)]
    assert [v.kind for v in politeness(after_robots, world, 1.0)] == ["gap"]
    assert politeness([*after_robots[:2], request("/", 200, 20, 21)], world, 1.0) == []


def test_the_settled_rss_is_read_from_when_the_hosts_held_stop_growing() -> None:
    def sample(second: int, held: int, rss: int, stopping: bool = False) -> Sample:
        return Sample(second, 0, 0, 0, 0, 0, 0, rss, 0, 0, held, 0, stopping=stopping)

    samples = [sample(10, 100, 50), sample(20, 850, 80), sample(30, 950, 90),
               sample(40, 1000, 95), sample(50, 700, 96)]  # fmt: skip
    samples.append(sample(60, 0, 20, stopping=True))
    assert settled_rss(samples) == (30, 90, 96)
    assert settled_rss(samples[-1:]) is None
    assert settled_rss([]) is None


def test_server_logs_a_request_the_client_abandons(tmp_path: Path) -> None:
    from bench.world import make_certificates
    from bench.world_server import ABANDONED, ServerConfig

    _, cert, key = make_certificates(tmp_path)
    log = tmp_path / "access.log"
    config = ServerConfig(TINY.hosts, TINY.pages, TINY.seed, _port(), _port(),
                          str(cert), str(key), str(log), stats_interval=0.1,
                          latency_scale=20.0)  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.world_server", json.dumps(dataclasses.asdict(config))],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    host = World(dataclasses.replace(TINY, http_port=config.http_port)).host(0)
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        with socket.create_connection((host.address, config.http_port)) as client:
            client.sendall(f"GET / HTTP/1.1\r\nHost: {host.name}\r\n\r\n".encode())
        for _ in range(100):
            if log.read_text():
                break
            time.sleep(0.05)
    finally:
        server.terminate()
        server.wait(timeout=10)
    (line,) = parse(log.read_text().splitlines())
    assert (line.host, line.path, line.status, line.local) == (host.name, "/", ABANDONED,
                                                                host.address)  # fmt: skip


def test_server_talks_to_loopback_only() -> None:
    from bench.world_server import loopback_only

    assert loopback_only(("127.1.0.7", 80), ("127.0.0.1", 50000))
    assert not loopback_only(("192.0.2.2", 80), ("127.0.0.1", 50000))
    assert not loopback_only(("127.1.0.7", 80), ("10.0.0.1", 50000))
    assert not loopback_only(("::1", 80, 0, 0), ("::1", 5000, 0, 0))
    assert not loopback_only(None, ("127.0.0.1", 50000))


def _world_schemas() -> set[str]:
    with connect() as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'trawl_world_%'")
        return {name for (name,) in rows}


def test_two_workers_share_a_postgresql_crawl_of_the_tiny_world(tmp_path: Path) -> None:
    before = _world_schemas()
    params = dataclasses.replace(TINY, http_port=_port(), https_port=_port())
    # At most 8 hosts a worker, so the first cannot take all 30 before the second starts.
    result = run_world(params, interval=1.0, latency_scale=0.05, run_dir=tmp_path, store=URL,
                       workers=2, local=["--max-hosts", "8"])  # fmt: skip
    assert result.failures == [], result.table()
    assert (result.workers, result.store, result.trawl_exit) == (2, URL, 0)
    assert not result.stopped
    assert result.audit.missing == result.audit.unexpected == result.audit.discovered_diff == 0
    assert result.violations == 0
    assert result.max_inflight_per_host == 1
    assert result.most_lease_owners == 2  # both workers held hosts at once
    assert result.leases_taken_per_second > 0
    assert result.database_cpu_seconds is not None
    assert result.database_cpu_seconds > 0
    assert "PostgreSQL CPU" in result.table()
    assert sorted(p.name for p in tmp_path.glob("trawl-data-*")) == ["trawl-data-0", "trawl-data-1"]
    assert _world_schemas() == before  # the crawl's schema is dropped
