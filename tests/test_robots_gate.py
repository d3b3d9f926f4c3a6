"""The robots gate against a live server and a real store: redirects, cache, expiry."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from conftest import loopback_fetcher
from trawl.config import Timeouts
from trawl.demo import Response, Site, SiteServer
from trawl.extract.urls import DEFAULT_RULES
from trawl.fetch.fetcher import FetchError
from trawl.politeness.robots import RobotsGate
from trawl.politeness.robots_parser import ROBOTS_TTL
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, HostUpdate


def moved(location: str) -> Response:
    return Response(status=301, headers=(("Location", location),))


def site(port: int) -> Site:
    routes: dict[str, Response] = {
        "http://long.test/robots.txt": moved("/r1"),
        "http://moved.test/robots.txt": moved(f"http://rules.test:{port}/shared-robots"),
        "http://rules.test/shared-robots": Response(
            body=b"User-agent: *\nDisallow: /no\n", content_type="text/plain"
        ),
        "http://down.test/robots.txt": Response(status=503),
    }
    routes |= {f"http://long.test/r{n}": moved(f"/r{n + 1}") for n in range(1, 8)}
    return Site.build(port, routes, ["http://long.test/"])


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(site) as served:
        yield served


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def gate_parts(
    server: SiteServer, tmp_path: Path
) -> AsyncIterator[tuple[RobotsGate, SQLiteStore, Clock]]:
    clock = Clock()
    async with (
        SQLiteStore(tmp_path) as store,
        loopback_fetcher(server, timeouts=Timeouts(connect=2, total=5), max_body=1 << 20) as f,
    ):
        yield RobotsGate(store, f, "trawl", DEFAULT_RULES, clock), store, clock


def robots_hits(server: SiteServer, host: str) -> int:
    return sum(1 for r in server.requests if r.host == host)


async def test_more_than_five_redirects_means_no_restrictions(
    server: SiteServer, gate_parts: tuple[RobotsGate, SQLiteStore, Clock]
) -> None:
    gate, store, _ = gate_parts
    ids = await store.host_ids(["long.test"])
    answer = await gate.check(ids["long.test"], server.site.url("long.test", "/page"))
    assert answer.rules is not None
    assert answer.rules.allowed(server.site.url("long.test", "/anything"))
    assert robots_hits(server, "long.test") == 6  # robots.txt and five redirects


async def test_redirect_to_another_host_is_followed(
    server: SiteServer, gate_parts: tuple[RobotsGate, SQLiteStore, Clock]
) -> None:
    gate, store, _ = gate_parts
    ids = await store.host_ids(["moved.test"])
    answer = await gate.check(ids["moved.test"], server.site.url("moved.test", "/"))
    assert answer.rules is not None
    assert not answer.rules.allowed(server.site.url("moved.test", "/no"))
    assert answer.rules.allowed(server.site.url("moved.test", "/yes"))


async def test_unavailable_is_reported_as_no_rules(
    server: SiteServer, gate_parts: tuple[RobotsGate, SQLiteStore, Clock]
) -> None:
    gate, store, _ = gate_parts
    ids = await store.host_ids(["down.test"])
    answer = await gate.check(ids["down.test"], server.site.url("down.test", "/"))
    assert (answer.rules, answer.record.status, answer.fetched) == (None, 503, True)
    assert answer.failure is None  # the host answered: robots.txt is unavailable


async def test_an_unreachable_host_says_why(
    gate_parts: tuple[RobotsGate, SQLiteStore, Clock],
) -> None:
    gate, store, _ = gate_parts
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    host = f"127.0.0.1:{port}"
    ids = await store.host_ids([host])
    answer = await gate.check(ids[host], f"http://{host}/")
    assert (answer.rules, answer.record.status) == (None, None)
    assert (answer.failure, answer.refused) == (FetchError.CONNECTION_REFUSED, False)


async def test_cached_rules_are_used_until_they_expire(
    server: SiteServer, gate_parts: tuple[RobotsGate, SQLiteStore, Clock]
) -> None:
    gate, store, clock = gate_parts
    host = (await store.host_ids(["moved.test"]))["moved.test"]
    url = server.site.url("moved.test", "/")
    first = await gate.check(host, url)
    await store.commit(CommitBatch(hosts=[HostUpdate(host, robots=first.record)]))
    before = robots_hits(server, "moved.test")

    clock.now += ROBOTS_TTL - 60
    cached = await gate.check(host, url)
    assert (cached.fetched, robots_hits(server, "moved.test")) == (False, before)
    assert cached.expires_in == pytest.approx(60)

    clock.now += 120
    expired = await gate.check(host, url)
    assert (expired.fetched, robots_hits(server, "moved.test")) == (True, before + 1)
