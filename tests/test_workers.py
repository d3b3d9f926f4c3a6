"""Many workers on one PostgreSQL crawl: real ``trawl crawl --store`` and ``trawl worker``
processes share the multi-host test site through host leases.

The server's log is the judge of politeness (at most one request in flight per host at
any moment, over all workers) and of duplicate fetches; the store is the judge of the
unique count. Leases last 2 s here (the fetch timeout is 1 s), so a dead or paused
worker's hosts come back within seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

import pytest
from bench.servers import free_port
from bench.workers import run_workers

from conftest import expected_hits, page_requests
from pg import URL as PG_URL
from pg import connect, crawl_name, drop_schema
from test_crawl import peak_overlap
from trawl.config import Politeness
from trawl.demo import Site, SiteServer, generate_site
from trawl.demo.site import Response, Route
from trawl.politeness.scheduler import address_limit
from trawl.store.location import StoreLocation
from trawl.store.values import STALE_COUNTER, ExportRow, State

__all__ = ["crawl_name"]

TTL = 2.0
CONCURRENCY = 4
POLICY = [
    "--delay", "0.01", "--response-factor", "0", "--timeout", "1", "--connect-timeout", "0.5",
    "--retry-base", "0.05", "--retry-cap", "0.5",
]  # fmt: skip
LOCAL = [
    "--concurrency", str(CONCURRENCY), "--lease-ttl", str(TTL), "--parse-workers", "0",
    "--no-progress", "--json",
]  # fmt: skip


@dataclasses.dataclass
class Delay:
    """How long a slowed site takes to answer; a test may change it mid-crawl."""

    seconds: float


def slowed(delay: float | Delay, hosts: int = 8, pages: int = 12) -> Callable[[int], Site]:
    """The generated site with every answer delayed by ``delay``, so that a worker
    always has requests in flight."""

    def make(port: int) -> Site:
        site = generate_site(port, hosts=hosts, pages_per_host=pages, seed=5)
        routes = {
            key: Route(tuple(dataclasses.replace(r, delay=delay) for r in route.responses))
            if isinstance(delay, float)
            else delayed(route, delay)
            for key, route in site.routes.items()
        }
        return dataclasses.replace(site, routes=MappingProxyType(routes))

    return make


def delayed(route: Route, delay: Delay) -> Route:
    """``route`` answered after ``delay`` as it is when each request comes; the n-th
    request still gets the n-th answer."""
    served = itertools.count()

    def answer(_: Mapping[str, str]) -> Response:
        response = route.responses[min(next(served), len(route.responses) - 1)]
        return dataclasses.replace(response, delay=delay.seconds)

    return Route(route.responses, live=answer)


class Workers:
    """Starts the crawl's processes: the first with ``trawl crawl``, the others with
    ``trawl worker``, each with its own data dir and name (``w0``, ``w1``, ...)."""

    def __init__(self, server: SiteServer, crawl: str, root: Path) -> None:
        self.server = server
        self.crawl = crawl
        self.root = root
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.extra: list[str] = []
        """More options for every process."""
        self.policy = list(POLICY)
        """The crawl's policy, given to the first process (the others take it from the store)."""

    def start(self, max_hosts: int, env: Mapping[str, str] | None = None) -> str:
        """Start the next process (with ``env`` as its whole environment if given)."""
        name = f"w{len(self.procs)}"
        command = ["worker"] if self.procs else ["crawl", *self.server.site.seeds, *self.policy]
        command += [
            "--store", PG_URL, "--crawl", self.crawl, "--data-dir", str(self.root / name),
            "--worker-id", name, "--max-hosts", str(max_hosts), *LOCAL,
            *self.server.resolve_args(), *self.extra,
        ]  # fmt: skip
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "trawl", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        return name

    def begin(self, max_hosts: int, env: Mapping[str, str] | None = None) -> str:
        """Start the crawl (``trawl crawl``); return once its policy is stored, which its
        first request shows."""
        name = self.start(max_hosts, env)
        self.wait_for_requests(1)
        return name

    def end(self, name: str) -> tuple[int, str, str]:
        """Wait for a process, however it ends: its exit status, output and errors."""
        out, err = self.procs[name].communicate(timeout=90)
        return self.procs[name].returncode, out, err

    def wait_for_requests(self, count: int) -> None:
        deadline = time.monotonic() + 30
        while len(self.server.requests) < count:
            assert time.monotonic() < deadline, "the crawl made no progress"
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} ended early: {proc.stderr}"
            time.sleep(0.01)

    def finish(self, *names: str) -> dict[str, dict[str, object]]:
        """Wait for the named workers; their JSON summaries (each must end done)."""
        summaries = {}
        for name in names:
            try:
                out, err = self.procs[name].communicate(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{name} did not finish; hosts: {hosts_of(self.crawl)}")
            assert self.procs[name].returncode == 0, f"{name}: {err}"
            summaries[name] = json.loads(out)
            assert summaries[name]["state"] == "done", name
        return summaries

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)


@pytest.fixture
def workers(crawl_name: str, tmp_path: Path) -> Iterator[Callable[[SiteServer], Workers]]:
    made: list[Workers] = []

    def make(server: SiteServer) -> Workers:
        made.append(Workers(server, crawl_name, tmp_path))
        return made[-1]

    yield make
    for group in made:
        group.kill_all()


def stored(crawl: str) -> tuple[list[ExportRow], dict[str, int]]:
    """Every URL of the crawl, and its counters."""

    async def read() -> tuple[list[ExportRow], dict[str, int]]:
        async with StoreLocation(Path("."), PG_URL, crawl).open(readonly=True) as store:
            return [row async for row in store.export()], dict(await store.counters())

    return asyncio.run(read())


def hosts_of(crawl: str) -> dict[str, tuple[str | None, int, int]]:
    """``{host: (lease owner, lease generation, URLs queued or handed out)}`` now."""
    schema = StoreLocation(Path("."), PG_URL, crawl).schema
    with connect(schema) as db:
        rows = db.execute(
            "SELECT name, lease_owner, lease_generation, queued + claimed FROM hosts"
        ).fetchall()
    return {name: (owner, generation, work) for name, owner, generation, work in rows}


def leases_of(crawl: str, worker: str) -> dict[str, int]:
    """``{host: generation}`` of the hosts leased to ``worker`` now."""
    return {
        name: generation
        for name, (owner, generation, _) in hosts_of(crawl).items()
        if owner == worker
    }


def taken_over(crawl: str, held: dict[str, int], taker: str) -> bool:
    """Whether every host in ``held`` that still has work is leased to ``taker`` under a
    newer generation."""
    now = hosts_of(crawl)
    return all(
        not now[host][2] or (now[host][0] == taker and now[host][1] > generation)
        for host, generation in held.items()
    )


def assert_complete(server: SiteServer, crawl: str, *, refetch_allowance: int) -> dict[str, int]:
    """The store holds exactly the ground truth, every expected page was fetched, at most
    ``refetch_allowance`` of them more often than the site asks, and no host ever had two
    requests in flight. Returns the counters."""
    site = server.site
    rows, counters = stored(crawl)
    assert {row.url for row in rows} == site.ground_truth
    assert counters["discovered"] == len(site.ground_truth)
    states = {row.url: row.state for row in rows}
    assert all(states[url] in (State.DONE, State.FAILED) for url in site.expected_fetches)
    assert not [row.url for row in rows if row.state in (State.QUEUED, State.CLAIMED)]
    requested = page_requests(server)
    assert set(requested) == set(site.expected_fetches)
    extra = sum(max(0, requested[url] - expected_hits(site, url)) for url in requested)
    assert extra <= refetch_allowance
    assert max(server.max_inflight_per_host().values()) == 1
    return counters


def test_three_workers_share_a_crawl_exactly_and_politely(
    workers: Callable[[SiteServer], Workers], crawl_name: str
) -> None:
    with SiteServer(slowed(0.02, hosts=12, pages=25)) as s:
        group = workers(s)
        first = group.begin(max_hosts=3)
        others = [group.start(max_hosts=3), group.start(max_hosts=3)]
        summaries = group.finish(first, *others)
        counters = assert_complete(s, crawl_name, refetch_allowance=0)
    assert counters.get(STALE_COUNTER, 0) == 0
    fetched = {name: int(str(summary["fetched_this_run"])) for name, summary in summaries.items()}
    assert all(count > 0 for count in fetched.values()), fetched
    assert sum(fetched.values()) == counters["fetched"]


def test_workers_on_one_server_address_keep_to_its_limit_together(
    workers: Callable[[SiteServer], Workers], crawl_name: str
) -> None:
    site = slowed(0.01, hosts=8, pages=12)
    with SiteServer(site, shared_address=True) as s:
        group = workers(s)
        first = group.begin(max_hosts=3)
        group.finish(first, group.start(max_hosts=3), group.start(max_hosts=3))
        assert_complete(s, crawl_name, refetch_allowance=0)
        # Every host is on 127.0.0.1: eight sites allow ceil(sqrt(8)) = 3 requests at once
        # to the address, in all (one worker serves an address), not 3 per worker.
        assert peak_overlap(s) <= address_limit(8, Politeness()) == 3


def start_holding(group: Workers, crawl: str, hosts: int) -> str:
    """Start a worker and return its name once it holds leases on ``hosts`` hosts."""
    name = group.start(max_hosts=3)
    deadline = time.monotonic() + 20
    while len(leases_of(crawl, name)) < hosts:
        assert time.monotonic() < deadline, "the worker never leased its hosts"
        time.sleep(0.01)
    return name


def test_a_killed_workers_hosts_return_after_its_leases_expire(
    workers: Callable[[SiteServer], Workers], crawl_name: str
) -> None:
    with SiteServer(slowed(0.05)) as s:
        group = workers(s)
        first = group.begin(max_hosts=3)
        victim = start_holding(group, crawl_name, hosts=1)
        third = group.start(max_hosts=3)
        group.wait_for_requests(len(s.requests) + 10)
        group.procs[victim].kill()
        group.procs[victim].communicate(timeout=10)
        at_kill = hosts_of(crawl_name)
        unfinished = {
            host: generation
            for host, (owner, generation, work) in at_kill.items()
            if owner == victim and work
        }
        assert unfinished, "the killed worker held no host with work"
        group.finish(first, third)
        # Its requests in flight at the kill may have been answered and never recorded.
        counters = assert_complete(s, crawl_name, refetch_allowance=CONCURRENCY)
    after = hosts_of(crawl_name)
    # Every host it left unfinished was leased again (a newer generation) and finished.
    assert all(after[host][1] > generation for host, generation in unfinished.items())
    assert all(after[host][2] == 0 for host in unfinished)
    assert counters.get(STALE_COUNTER, 0) == 0


def test_a_paused_worker_loses_its_hosts_and_its_late_results_are_refused(
    workers: Callable[[SiteServer], Workers], crawl_name: str
) -> None:
    delay = Delay(0.3)
    with SiteServer(slowed(delay)) as s:
        group = workers(s)
        first = group.begin(max_hosts=2)
        paused = start_holding(group, crawl_name, hosts=2)
        time.sleep(0.5)  # its requests take 0.3 s: some are in flight now
        held = leases_of(crawl_name, paused)
        group.procs[paused].send_signal(signal.SIGSTOP)
        try:
            taker = group.start(max_hosts=8)
            deadline = time.monotonic() + 20
            while not taken_over(crawl_name, held, taker):
                assert time.monotonic() < deadline, "nobody took the paused worker's hosts"
                time.sleep(0.05)
        finally:
            group.procs[paused].send_signal(signal.SIGCONT)
        # Its answers came during the pause. The rest of the crawl (www.trawl.test alone
        # has 55 pages) only has to end: 0.3 s a page would take it another 15 s.
        delay.seconds = 0.02
        summaries = group.finish(first, paused, taker)
        counters = assert_complete(s, crawl_name, refetch_allowance=CONCURRENCY)
    # The paused worker's answers to requests sent before the pause came back under a
    # lease that had passed on: the store refused them, and nothing it wrote late counts.
    assert counters[STALE_COUNTER] >= 1
    fetched = sum(int(str(summary["fetched_this_run"])) for summary in summaries.values())
    assert fetched == counters["fetched"]


def test_the_workers_benchmark_measures_a_correct_shared_crawl(tmp_path: Path) -> None:
    result = run_workers(
        2, hosts=4, pages=20, dsn=PG_URL, work_dir=tmp_path, concurrency=8, server="builtin",
        port=free_port(),
    )  # fmt: skip
    assert result.correct, result
    assert result.pages > 0
    assert result.worker_cpu_seconds > 0
    assert result.database_cpu_seconds > 0
    assert 0 < result.database_share < 1


def test_a_database_lost_mid_crawl_ends_it_with_one_line(
    workers: Callable[[SiteServer], Workers], crawl_name: str
) -> None:
    with SiteServer(slowed(0.2)) as s:
        group = workers(s)
        first = group.start(max_hosts=8)
        group.wait_for_requests(3)
        drop_schema(StoreLocation(Path("."), PG_URL, crawl_name).schema)
        _, err = group.procs[first].communicate(timeout=60)
    assert group.procs[first].returncode == 1
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("trawl: error: store postgresql://127.0.0.1:5432/test"), err
