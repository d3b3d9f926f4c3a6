"""HTTP client benchmark: trawl's own client against aiohttp's, on the crawl benchmark's site.

Both clients GET the same pages of a generated site (bench.site), served as the crawl
benchmark serves it (nginx when installed), through trawl's guarded resolver,
``--connections`` requests at a time, reading every body to its end. Runs alternate
(trawl, aiohttp, trawl, ...), each on a fresh uvloop event loop in this process, and the
process's CPU time over a run is divided by the requests made: that is the cost of a
request on the crawl's event loop, which is what the fetcher's choice of client sets.

    python -m bench.client [--requests 6000] [--connections 20] [--runs 3]

Each run must see the same statuses and body bytes as the first, or the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import resource
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import uvloop
from aiohttp.abc import AbstractResolver, ResolveResult

from bench.crawl import DEFAULT_PORT, default_work_dir
from bench.servers import free_port, host_addresses, port_is_free, serve
from bench.site import SiteParams, ensure_site
from trawl.fetch.client import HttpClient
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver

__all__ = ["ClientRun", "main", "measure"]

HEADERS = (
    ("User-Agent", "trawl-bench/1"),
    ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"),
    ("Accept-Encoding", "gzip, deflate, br"),
)
LOOPBACK = AddressPolicy([ipaddress.ip_network("127.0.0.0/8")])
Fetch = Callable[[str], Awaitable[tuple[int, int]]]
"""GET a URL, read its body: (status, body bytes)."""


@dataclass(frozen=True, slots=True)
class ClientRun:
    """One run of one client: what it fetched and what it cost."""

    client: str
    requests: int
    statuses: dict[int, int]
    body_bytes: int
    cpu: float
    wall: float

    @property
    def cpu_us(self) -> float:
        """CPU microseconds a request."""
        return 1e6 * self.cpu / self.requests

    @property
    def rate(self) -> float:
        """Requests a second."""
        return self.requests / self.wall


class _AiohttpResolver(AbstractResolver):
    """aiohttp's resolver seam over trawl's guarded resolver, so both clients connect to
    the same checked addresses."""

    def __init__(self, guarded: GuardedResolver) -> None:
        self._guarded = guarded

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(hostname=host, host=address, port=port, family=socket.AF_INET,
                          proto=0, flags=socket.AI_NUMERICHOST)
            for address in await self._guarded.addresses(host)
        ]  # fmt: skip

    async def close(self) -> None:
        """The guarded resolver is closed by its owner."""


async def _trawl_session(
    resolver: GuardedResolver, connections: int
) -> tuple[Fetch, Callable[[], Awaitable[None]]]:
    client = HttpClient(
        resolver, headers=HEADERS, connect_timeout=10, max_idle=max(256, connections)
    )

    async def fetch(url: str) -> tuple[int, int]:
        with await client.get(url) as response:
            size = 0
            async for chunk in response.chunks():
                size += len(chunk)
            return response.status, size

    return fetch, client.close


async def _aiohttp_session(
    resolver: GuardedResolver, connections: int
) -> tuple[Fetch, Callable[[], Awaitable[None]]]:
    # As trawl's fetcher configured it: no decompression, no redirects, no cookies,
    # a connect timeout only (the fetcher bounded the whole fetch itself).
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            resolver=_AiohttpResolver(resolver), limit=connections, use_dns_cache=False
        ),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        auto_decompress=False,
        headers=dict(HEADERS),
        cookie_jar=aiohttp.DummyCookieJar(),
    )

    async def fetch(url: str) -> tuple[int, int]:
        async with session.get(url, allow_redirects=False) as response:
            size = 0
            async for chunk in response.content.iter_chunked(64 * 1024):
                size += len(chunk)
            return response.status, size

    return fetch, session.close


SESSIONS = {"trawl": _trawl_session, "aiohttp": _aiohttp_session}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run(
    client: str, urls: Sequence[str], resolve: dict[str, str], connections: int
) -> ClientRun:
    resolver = GuardedResolver(LOOPBACK, overrides=resolve)
    fetch, close = await SESSIONS[client](resolver, connections)
    statuses: dict[int, int] = {}
    total = 0

    async def worker(first: int) -> None:
        nonlocal total
        for index in range(first, len(urls), connections):
            async with asyncio.timeout(30):
                status, size = await fetch(urls[index])
            statuses[status] = statuses.get(status, 0) + 1
            total += size

    cpu, wall = _cpu(), time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(connections)))
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    await close()
    await resolver.close()
    return ClientRun(client, len(urls), statuses, total, cpu, wall)


def measure(
    *,
    requests: int,
    connections: int,
    runs: int,
    server: str = "auto",
    work_dir: Path | None = None,
    port: int = DEFAULT_PORT,
) -> list[ClientRun]:
    """Serve the crawl benchmark's 20 x 500 site and GET ``requests`` of its pages with
    each client, alternating, ``runs`` times each (after one warm-up run each)."""
    work_dir = work_dir or default_work_dir()
    if not port_is_free(port):
        port = free_port()
    site, truth = ensure_site(SiteParams(20, 500, port), work_dir)
    pages = sorted(truth.fetched)
    urls = [pages[i % len(pages)] for i in range(requests)]
    resolve = host_addresses(truth.hosts)
    done: list[ClientRun] = []
    with (
        tempfile.TemporaryDirectory(prefix="client-", dir=work_dir) as tmp,
        serve(site, truth.hosts, port, Path(tmp) / "server", server),
    ):
        for turn in range(runs + 1):
            for client in SESSIONS:
                result = uvloop.run(_run(client, urls, resolve, connections))
                if turn:
                    done.append(result)
    return done


def report(results: Sequence[ClientRun]) -> bool:
    """Print every run, the medians and the ratio; False when the runs disagree."""
    print(f"{'run':<10}{'requests':>9}{'CPU us/request':>16}{'requests/s':>12}  body bytes")
    for run in results:
        print(f"{run.client:<10}{run.requests:>9}{run.cpu_us:>16.1f}{run.rate:>12.0f}  "
              f"{run.body_bytes}")  # fmt: skip
    medians = {}
    for client in SESSIONS:
        of = [run for run in results if run.client == client]
        medians[client] = statistics.median(run.cpu_us for run in of)
        rate = statistics.median(run.rate for run in of)
        print(f"median {client:<8}{medians[client]:>20.1f}{rate:>12.0f}")
    print(f"trawl/aiohttp: CPU per request {medians['trawl'] / medians['aiohttp']:.3f}x")
    first = results[0]
    agree = all(
        (run.statuses, run.body_bytes) == (first.statuses, first.body_bytes) for run in results
    )
    if not agree:
        print("runs disagree on statuses or body bytes", file=sys.stderr)
    return agree


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client", description=__doc__)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", choices=("auto", "nginx", "builtin"), default="auto")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.connections < 1 or args.runs < 1:
        parser.error("--requests, --connections and --runs must be positive")
    results = measure(
        requests=args.requests,
        connections=args.connections,
        runs=args.runs,
        server=args.server,
        work_dir=args.work_dir,
        port=args.port,
    )
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
