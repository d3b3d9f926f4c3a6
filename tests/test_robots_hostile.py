"""Hostile robots.txt files through the real robots gate, fetcher and store.

What trawl documents (docs/ROBOTS.md) is asserted: only the first 500 KiB of a
robots.txt count, cut back to the last complete line; lines that parse count wherever
they are, whatever bytes surround them; more than five redirects mean no restrictions.
The same files are served to a whole crawl in tests/test_hostile.py.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from conftest import loopback_fetcher
from hostile_server import Answer, HostileServer, gzip_bomb, page, redirect
from trawl.config import Timeouts
from trawl.extract.urls import DEFAULT_RULES
from trawl.politeness.robots import RobotsAnswer, RobotsGate
from trawl.politeness.robots_parser import MAX_ROBOTS_BYTES, MAX_ROBOTS_REDIRECTS
from trawl.store.sqlite.store import SQLiteStore

HUGE_ROBOTS_SIZE = 5 * 1024 * 1024
_FILLER = b"# " + b"x" * 77 + b"\n"
_CUT_RULE = b"Disallow: /"


def huge_robots() -> bytes:
    """5 MB: a rule at the start, a rule the 500 KiB limit cuts after ``Disallow: /``,
    and a rule at the very end, with comment lines between them."""
    head = b"User-agent: *\nDisallow: /early/\n"
    gap = MAX_ROBOTS_BYTES - len(_CUT_RULE) - len(head)
    padding = (_FILLER * (gap // len(_FILLER) + 1))[: gap - 1] + b"\n"
    body = head + padding + _CUT_RULE + b"straddling-the-limit/\n"
    tail = b"Disallow: /late/\n"
    rest = _FILLER * ((HUGE_ROBOTS_SIZE - len(body) - len(tail)) // len(_FILLER))
    return body + rest + tail


def binary_robots() -> bytes:
    """Random bytes with one readable group in the middle."""
    rng = random.Random(9309)
    return (
        rng.randbytes(32 * 1024)
        + b"\nUser-agent: *\nDisallow: /secret/\n"
        + rng.randbytes(32 * 1024)
    )


def robots_routes() -> dict[str, Answer]:
    """The hostile robots.txt answers, one host each (their pages are not routed)."""
    return {
        "http://robots-huge.trawl.test/robots.txt": page(huge_robots(), content_type="text/plain"),
        "http://robots-binary.trawl.test/robots.txt": page(
            binary_robots(), content_type="text/plain"
        ),
        "http://robots-loop.trawl.test/robots.txt": redirect("/robots-loop.txt"),
        "http://robots-loop.trawl.test/robots-loop.txt": redirect("/robots.txt"),
    }


def test_the_huge_robots_txt_is_built_as_described() -> None:
    body = huge_robots()
    assert len(body) > HUGE_ROBOTS_SIZE - len(_FILLER)
    assert body[:MAX_ROBOTS_BYTES].endswith(b"\n" + _CUT_RULE)
    assert body.endswith(b"\nDisallow: /late/\n")


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    routes = robots_routes()
    bomb_head = b"User-agent: *\nDisallow: /bombed/\n"
    routes["http://robots-bomb.trawl.test/robots.txt"] = gzip_bomb(head=bomb_head)
    with HostileServer(routes) as served:
        yield served


@pytest.fixture
async def gate(
    server: HostileServer, tmp_path: Path
) -> AsyncIterator[tuple[RobotsGate, SQLiteStore]]:
    async with (
        SQLiteStore(tmp_path) as store,
        loopback_fetcher(server, timeouts=Timeouts(connect=2, total=5), max_body=1 << 20) as f,
    ):
        yield RobotsGate(store, f, "trawl", DEFAULT_RULES), store


async def check(
    gate: tuple[RobotsGate, SQLiteStore], server: HostileServer, host: str
) -> RobotsAnswer:
    robots_gate, store = gate
    ids = await store.host_ids([host])
    return await robots_gate.check(ids[host], server.url(host, "/"))


async def test_only_the_first_500_kib_of_a_5_mb_robots_txt_count(
    server: HostileServer, gate: tuple[RobotsGate, SQLiteStore]
) -> None:
    host = "robots-huge.trawl.test"
    answer = await check(gate, server, host)
    assert answer.rules is not None
    assert not answer.rules.allowed(server.url(host, "/early/page.html"))
    assert answer.rules.allowed(server.url(host, "/late/page.html"))
    # The line cut by the limit is dropped, not read as "Disallow: /".
    assert answer.rules.allowed(server.url(host, "/anything.html"))
    assert answer.record.status == 200
    assert len(answer.record.body) <= MAX_ROBOTS_BYTES + 1


async def test_a_gzip_bomb_robots_txt_is_cut_at_the_limit(
    server: HostileServer, gate: tuple[RobotsGate, SQLiteStore]
) -> None:
    host = "robots-bomb.trawl.test"
    answer = await check(gate, server, host)
    assert answer.rules is not None
    assert not answer.rules.allowed(server.url(host, "/bombed/page.html"))
    assert answer.rules.allowed(server.url(host, "/page.html"))
    assert len(answer.record.body) <= MAX_ROBOTS_BYTES + 1


async def test_a_binary_robots_txt_keeps_the_lines_that_parse(
    server: HostileServer, gate: tuple[RobotsGate, SQLiteStore]
) -> None:
    host = "robots-binary.trawl.test"
    answer = await check(gate, server, host)
    assert answer.rules is not None
    assert not answer.rules.allowed(server.url(host, "/secret/page.html"))
    assert answer.rules.allowed(server.url(host, "/open.html"))


async def test_a_robots_redirect_loop_means_no_restrictions(
    server: HostileServer, gate: tuple[RobotsGate, SQLiteStore]
) -> None:
    host = "robots-loop.trawl.test"
    before = sum(1 for record in server.requests if record.host == host)
    answer = await check(gate, server, host)
    assert answer.rules is not None
    assert answer.rules.allowed(server.url(host, "/robots.txt-loop/anything.html"))
    assert answer.record.status == 302
    requests = [record for record in server.requests if record.host == host][before:]
    assert len(requests) == MAX_ROBOTS_REDIRECTS + 1
    assert {record.path for record in requests} == {"/robots.txt", "/robots-loop.txt"}
