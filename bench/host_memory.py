"""Memory a queued host costs the crawl process.

    python -m bench.host_memory [--hosts 20000] [--urls 3]

A queued host is one a crawl holds with URLs buffered and no connection open: its
frontier and scheduler slots, its address's slot, its parsed robots.txt, its answer in
the resolver's cache and its share of the URL buffer. This builds exactly that with
trawl's own parts, with the cycle collector tuned as in a crawl: the store in its own
process (so the store's memory is not counted, as in a crawl on two cores or more), the
frontier leasing ``--hosts`` hosts of bench.world_map's world from it, each host's name
looked up through the resolver (c-ares) against bench.world_dns and its address assigned,
and the world's robots.txt of each host parsed and loaded (the world's hosts share a few
rule sets, as most of the web's do; ``--unique-robots`` gives each host rules of its own,
the most a host's rules can cost). It prints the crawl process's
RSS and the bytes glibc's malloc holds (``mallinfo2``: Python's and c-ares's) per host,
from after the first tenth of the hosts (the process's own start-up) to the end. What an
open connection adds is bench.connection_memory's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.connection_memory import malloced, rss
from bench.servers import free_port
from bench.world_map import Dns, Host, World, WorldParams
from trawl.config import Politeness
from trawl.crawl.gc_tuning import young_gc_threshold
from trawl.extract.urls import url_hash
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import AiodnsBackend, GuardedResolver
from trawl.frontier.queue import Frontier
from trawl.politeness.robots_parser import parse_robots
from trawl.politeness.scheduler import HostScheduler
from trawl.store.process import StoreProcess
from trawl.store.values import CommitBatch, NewURL

MEMORY_QUEUE = 10_000
"""The crawl's default ``--memory-queue``."""


def _robots(host: Host, unique: bool) -> bytes:
    """The host's robots.txt, with a rule of its own when ``unique``."""
    own = f"Disallow: /{host.name}/\n" if unique else ""
    return (host.robots() + own).encode()


async def _hold(
    hosts: Sequence[Host], urls: int, dns_port: int, data: Path, unique_robots: bool
) -> tuple[float, float, int]:
    """RSS and malloc'd bytes a host, and the hosts held at the end."""
    by_name = {host.name: host for host in hosts}
    async with StoreProcess(data) as store:
        for start in range(0, len(hosts), 5_000):
            new = [
                NewURL(url_hash(url), url, host.name, 1)
                for host in hosts[start : start + 5_000]
                for url in (host.url(k) for k in range(min(urls, host.pages)))
            ]
            await store.commit(CommitBatch(new_urls=new))
        scheduler = HostScheduler(Politeness(), time.monotonic)
        frontier = Frontier(store, scheduler, MEMORY_QUEUE)
        resolver = GuardedResolver(
            AddressPolicy([ipaddress.ip_network("127.0.0.0/8")]),
            backend=AiodnsBackend([f"127.0.0.1:{dns_port}"]),
        )
        resolver.hold_hosts(len(hosts))
        try:
            figures: list[tuple[int, int, int]] = []
            for target in (len(hosts) // 10, len(hosts)):
                frontier.max_hosts = target
                for _ in range(100):
                    if frontier.holding >= target:
                        break
                    await frontier.refill()
                waiting = [slot for slot in frontier.held if not slot.resolved]
                for start in range(0, len(waiting), 64):
                    part = waiting[start : start + 64]
                    found = await asyncio.gather(*(resolver.addresses(s.name) for s in part))
                    for slot, addresses in zip(part, found, strict=True):
                        scheduler.assign_address(slot, addresses[0])
                        robots = _robots(by_name[slot.name], unique_robots)
                        slot.robots_loaded(parse_robots(robots, "trawl"), time.monotonic() + 86_400)
                gc.collect()
                figures.append((frontier.holding, rss(), malloced()))
        finally:
            await resolver.close()
    (held_0, rss_0, malloc_0), (held, rss_1, malloc_1) = figures
    return (rss_1 - rss_0) / (held - held_0), (malloc_1 - malloc_0) / (held - held_0), held


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--urls", type=int, default=3, help="URLs stored a host")
    parser.add_argument(
        "--unique-robots", action="store_true", help="no two hosts' robots.txt rules alike"
    )
    args = parser.parse_args(argv)
    world = World(WorldParams(args.hosts, 30))
    hosts = [host for host in world.hosts() if host.dns is Dns.OK]
    port = free_port(socket.SOCK_DGRAM)
    with tempfile.TemporaryDirectory() as tmp:
        dns = subprocess.Popen(
            [sys.executable, "-m", "bench.world_dns", str(args.hosts), "30", "1", "1", "2",
             str(port), os.path.join(tmp, "counts.json")],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert dns.stdout is not None
            dns.stdout.readline()
            with young_gc_threshold():
                per_rss, per_malloc, held = asyncio.run(
                    _hold(hosts, args.urls, port, Path(tmp), args.unique_robots)
                )
        finally:
            dns.terminate()
            dns.wait()
    rules = "rules of its own" if args.unique_robots else "the world's rules"
    print(f"{held} hosts held, {args.urls} URLs stored a host, {rules}, no connection open")
    print(f"a queued host: {per_rss:.0f} B of RSS, {per_malloc:.0f} B malloc'd")
    return 0


if __name__ == "__main__":
    sys.exit(main())
