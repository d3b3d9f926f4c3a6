"""Names looked up ahead of their host's turn, against a real DNS server on loopback
that answers slowly (`ScriptedDns` with a latency) and logs each query.

The witnesses: the DNS server's query log (one lookup of a name however many ask for it
at once, at most ``limit`` lookups ahead of need at a time, a name asked again only
when its TTL has run out), the resolver's own figures (a turn's lookup answered from the
cache), and in a crawl the HTTP server's log: a host's request comes when its rest ends,
not a slow lookup later.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import time
from pathlib import Path

import pytest

from dns_server import ScriptedDns
from test_connections import CRAWL_DELAY, RESTING_PAGES, HostsServer
from trawl.config import CrawlConfig, Politeness, Timeouts
from trawl.crawl.runner import build_engine
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import MIN_TTL, AiodnsBackend, GuardedResolver

pytestmark = pytest.mark.timeout(60)

LOOPBACK = AddressPolicy([ipaddress.ip_network("127.0.0.0/8")])
LATENCY = 0.4
"""Seconds the DNS server takes to answer: a slow resolver."""


def resolver(dns: ScriptedDns, **settings: float) -> GuardedResolver:
    backend = AiodnsBackend([dns.nameserver])
    return GuardedResolver(LOOPBACK, backend=backend, **settings)  # type: ignore[arg-type]


async def test_a_prefetch_and_fetches_racing_for_a_name_make_one_query() -> None:
    with ScriptedDns({"a.test": [[("127.0.0.2", 60)]]}, latency=LATENCY) as dns:
        guarded = resolver(dns)
        try:
            guarded.prefetch("a.test")
            answers = await asyncio.gather(*(guarded.addresses("a.test") for _ in range(5)))
        finally:
            await guarded.close()
    assert answers == [("127.0.0.2",)] * 5
    assert dns.queries["a.test"] == 1
    stats = guarded.stats
    assert (stats.prefetches, stats.cache_misses, stats.joined) == (1, 5, 5)


async def test_lookups_ahead_of_need_are_bounded() -> None:
    names = [f"n{n}.test" for n in range(10)]
    script = {name: [[(f"127.0.0.{n + 2}", 60)]] for n, name in enumerate(names)}
    with ScriptedDns(script, latency=0.2) as dns:
        guarded = resolver(dns, prefetch_limit=3)
        try:
            for name in names:
                guarded.prefetch(name)
            await asyncio.sleep(2.0)  # four rounds of three lookups take about 0.8 s
            assert guarded.cached == len(names)
            answers = [await guarded.addresses(name) for name in names]
        finally:
            await guarded.close()
    assert dns.peak_inflight == 3
    assert answers == [(f"127.0.0.{n + 2}",) for n in range(len(names))]
    assert all(dns.queries[name] == 1 for name in names)
    assert (guarded.stats.prefetches, guarded.stats.cache_hits) == (len(names), len(names))


async def test_a_name_is_looked_up_again_ahead_of_a_turn_after_its_ttl() -> None:
    with ScriptedDns({"a.test": [[("127.0.0.2", 1)]]}, latency=0.2) as dns:
        guarded = resolver(dns, min_ttl=0, prefetch_lead=0.6)
        try:
            assert await guarded.addresses("a.test") == ("127.0.0.2",)
            turn = time.monotonic() + 2.0
            guarded.prefetch("a.test", 2.0)  # the answer runs out in 1 s, the turn is later
            await asyncio.sleep(turn - time.monotonic())
            hits = guarded.stats.cache_hits
            assert await guarded.addresses("a.test") == ("127.0.0.2",)
        finally:
            await guarded.close()
    assert guarded.stats.cache_hits == hits + 1  # the turn's lookup waited for nothing
    (_, first), (_, second) = dns.asked
    assert second > first + 1.0  # after the TTL: a query made ahead, not a second one early
    assert second < turn - 0.3  # ahead of the turn by more than the server's latency


async def test_a_crawl_behind_a_slow_resolver_asks_each_host_on_time(tmp_path: Path) -> None:
    hosts = [f"r{n}.test" for n in range(4)]
    server = HostsServer(hosts)
    script = {host: [[(address, int(MIN_TTL))]] for host, address in server.addresses.items()}
    with ScriptedDns(script, latency=LATENCY) as dns:
        async with server.running():
            config = CrawlConfig(
                seeds=tuple(f"http://{host}:{server.port}/" for host in hosts),
                data_dir=tmp_path / "crawl",
                nameservers=(dns.nameserver,),
                hosts_file=None,
                allow_networks=(ipaddress.ip_network("127.0.0.0/8"),),
                politeness=Politeness(delay=0.1, response_factor=0.0),
                timeouts=Timeouts(connect=2.0, total=10.0),
                soft_404=False,
                rng_seed=1,
            )
            async with build_engine(config) as crawler:
                summary = await crawler.run()
    assert summary.state == "done"
    assert summary.fetched == len(hosts) * RESTING_PAGES
    for host in hosts:
        # Each request after the host's Crawl-delay, on a new connection (the host rests
        # longer than a connection is kept), and no lookup between the two: the name
        # was looked up again ahead of the turn when its answer ran out (MIN_TTL).
        served = server.of(host)
        asked_at = [c.requests[0] for c in served]
        assert len(asked_at) == 1 + RESTING_PAGES
        times = [t for _, t in asked_at]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(gap < CRAWL_DELAY + 2 * LATENCY + 0.5 for gap in gaps), gaps
        queries = [t for name, t in dns.asked if name == host]
        assert queries
        # No lookup held a turn up: none came within the server's latency (and a margin
        # for the connection) before a request. The gaps alone would also count a loaded
        # machine's lateness.
        for later in times[1:]:
            assert not [q for q in queries if later - LATENCY - 0.5 <= q <= later], (
                later,
                queries,
            )
        # Each name asked once per TTL at most: a prefetch and a turn never both ask.
        assert all(b - a > MIN_TTL - 1.0 for a, b in itertools.pairwise(queries)), queries
