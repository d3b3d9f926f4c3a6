"""Connections to hosts at rest are closed; a host with a short delay keeps one.

A crawl runs in-process against `HostsServer`, a loopback server answering for many
host names, each on its own loopback address (the per-address rule stays out of the
way), that records every connection: the host it served, each request's path and when
it was answered, and when the client closed it. That record is the witness: which
requests shared a connection, and whether a connection was closed as soon as its host
went to rest, or soon after it ran out of URLs (not at the end of the crawl).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from test_http_client import (
    Connection,
    RawServer,
    Witness,
    answer,
    fetch_body,
    new_client,
    response,
)
from trawl.config import CrawlConfig, LeasePolicy, Politeness, Timeouts
from trawl.crawl.runner import build_engine
from trawl.demo.server import listening_socket, loopback_address
from trawl.fetch.pool import IDLE_TIMEOUT, KEEP_WINDOW

pytestmark = pytest.mark.timeout(60)

QUICK_HOSTS, QUICK_PAGES = 10, 6
RESTING_HOSTS, RESTING_PAGES = 5, 2
QUICK_DELAY = 0.3
CRAWL_DELAY = KEEP_WINDOW + 0.5
"""The resting hosts' robots.txt Crawl-delay: a turn further off than the keep window."""
CLOSED_WITHIN = 1.0
"""Seconds after its host's turn ends by which a connection not kept must be closed."""


@dataclass
class Served:
    """One connection as the server saw it."""

    host: str = ""
    requests: list[tuple[str, float]] = field(default_factory=list)
    """Each request's path and when its answer was sent."""
    closed_at: float | None = None


class HostsServer:
    """A keep-alive HTTP/1.1 server for ``hosts``, the n-th on the n-th loopback
    address: ``q*`` hosts have ``QUICK_PAGES`` pages and no robots.txt, ``r*`` hosts
    ``RESTING_PAGES`` and a Crawl-delay."""

    def __init__(self, hosts: list[str]) -> None:
        self.addresses = {host: loopback_address(n) for n, host in enumerate(hosts)}
        self.connections: list[Served] = []
        self.port = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[HostsServer]:
        first = listening_socket(loopback_address(0), 0)
        self.port = first.getsockname()[1]
        socks = [first]
        socks += [listening_socket(a, self.port) for a in list(self.addresses.values())[1:]]
        servers = [await asyncio.start_server(self._serve, sock=sock) for sock in socks]
        try:
            yield self
        finally:
            for server in servers:
                server.close()
                await server.wait_closed()

    def _answer(self, host: str, path: str) -> bytes:
        if path == "/robots.txt":
            if host.startswith("r"):
                robots = f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode()
                return response(robots, b"Content-Type: text/plain")
            return response(b"no", status=b"404 Not Found")
        links = ""
        if path == "/":
            pages = QUICK_PAGES if host.startswith("q") else RESTING_PAGES
            links = "".join(f'<a href="/p{n}">p</a>' for n in range(1, pages))
        body = f"<html><body>{links}</body></html>".encode()
        return response(body, b"Content-Type: text/html")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served = Served()
        self.connections.append(served)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("host:"):
                        served.host = line.split(":", 2)[1].strip()
                writer.write(self._answer(served.host, path))
                await writer.drain()
                served.requests.append((path, time.monotonic()))
        except (asyncio.IncompleteReadError, ConnectionError):
            served.closed_at = time.monotonic()
        finally:
            writer.close()

    def of(self, host: str) -> list[Served]:
        return [c for c in self.connections if c.host == host]


async def test_hosts_at_rest_lose_their_connection_and_quick_ones_keep_one(
    tmp_path: Path,
) -> None:
    quick = [f"q{n}.test" for n in range(QUICK_HOSTS)]
    resting = [f"r{n}.test" for n in range(RESTING_HOSTS)]
    async with HostsServer(quick + resting).running() as server:
        config = CrawlConfig(
            seeds=tuple(f"http://{host}:{server.port}/" for host in quick + resting),
            data_dir=tmp_path / "crawl",
            resolve=server.addresses,
            allow_networks=(ipaddress.ip_network("127.0.0.0/8"),),
            politeness=Politeness(delay=QUICK_DELAY, response_factor=0.0),
            timeouts=Timeouts(connect=2.0, total=10.0),
            soft_404=False,
            rng_seed=1,
        )
        async with build_engine(config) as crawler:
            summary = await crawler.run()
            ended = time.monotonic()
    assert summary.state == "done"
    assert summary.fetched == QUICK_HOSTS * QUICK_PAGES + RESTING_HOSTS * RESTING_PAGES
    for host in quick:
        # robots.txt and every page on one connection, closed once the host had nothing
        # left (within the pool's idle time), not when the crawl ended seconds later.
        (connection,) = server.of(host)
        assert len(connection.requests) == 1 + QUICK_PAGES
        last = connection.requests[-1][1]
        assert connection.closed_at is not None
        assert connection.closed_at - last < IDLE_TIMEOUT + CLOSED_WITHIN
        assert ended - connection.closed_at > CLOSED_WITHIN
    for host in resting:
        # Every request after the Crawl-delay on a new connection: each was closed when
        # the host went to rest, at once.
        connections = server.of(host)
        assert [len(c.requests) for c in connections] == [1] * (1 + RESTING_PAGES)
        for rested in connections:
            assert rested.closed_at is not None
            assert rested.closed_at - rested.requests[0][1] < CLOSED_WITHIN


async def test_an_idle_connection_is_closed_when_its_time_is_up() -> None:
    witness = Witness()
    async with RawServer(answer({"/": response(b"ok")}), witness) as server:
        client = new_client()
        try:
            assert await fetch_body(client, server.url("/")) == b"ok"
            assert client.idle == 1
            started = time.monotonic()
            await witness.until(lambda: server.hangups == 1, within=IDLE_TIMEOUT + 2.0)
            waited = time.monotonic() - started
        finally:
            await client.close()
    assert server.hangups == 1
    assert IDLE_TIMEOUT - 0.5 < waited < IDLE_TIMEOUT + 1.0
    assert client.idle == 0


async def test_dropping_a_hosts_idle_connections_leaves_the_others() -> None:
    witness = Witness()

    async def keep_alive(connection: Connection) -> None:
        while await connection.read_request() is not None:
            await connection.send(response(b"ok"))

    async with RawServer(keep_alive, witness) as server:
        client = new_client()
        try:
            for host in ("h0.test", "h1.test"):
                assert await fetch_body(client, server.url("/", host=host)) == b"ok"
            assert client.idle == 2
            assert client.drop_idle(f"h0.test:{server.port}") == 1
            assert client.drop_idle("h1.test") == 0  # another port: another host
            await witness.until(lambda: server.hangups == 1)
            assert [c.hung_up for c in server.connections] == [True, False]
            assert client.idle == 1
            assert await fetch_body(client, server.url("/", host="h1.test")) == b"ok"
        finally:
            await client.close()
    assert client.opened == 2


async def test_a_host_given_back_loses_its_connection_at_once(tmp_path: Path) -> None:
    # One host held at a time: the first is given back once it has nothing left, for
    # the second to be leased, and its connection closes then, not at the pool's sweep.
    hosts = ["q0.test", "q1.test"]
    async with HostsServer(hosts).running() as server:
        config = CrawlConfig(
            seeds=tuple(f"http://{host}:{server.port}/" for host in hosts),
            data_dir=tmp_path / "crawl",
            resolve=server.addresses,
            allow_networks=(ipaddress.ip_network("127.0.0.0/8"),),
            politeness=Politeness(delay=QUICK_DELAY, response_factor=0.0),
            timeouts=Timeouts(connect=2.0, total=10.0),
            leases=LeasePolicy(max_hosts=1),
            soft_404=False,
            rng_seed=1,
        )
        async with build_engine(config) as crawler:
            summary = await crawler.run()
    assert summary.fetched == len(hosts) * QUICK_PAGES
    first, second = sorted(hosts, key=lambda host: server.of(host)[0].requests[0][1])
    (given_back,) = server.of(first)
    assert given_back.closed_at is not None
    assert given_back.closed_at - given_back.requests[-1][1] < IDLE_TIMEOUT - CLOSED_WITHIN
    assert given_back.closed_at < server.of(second)[0].requests[0][1]
