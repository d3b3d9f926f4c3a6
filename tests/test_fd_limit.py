"""The file-descriptor limit: raised at the start, a budget for connections, and a crawl
that runs into it completing exactly.

Limits are set in child processes (``preexec_fn``), so this process keeps its own; the
one in-process test lowers the soft limit for a moment and puts it back.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from test_cli import page_gets, write_config
from test_crawl import page
from test_http_client import (
    LOOPBACK,
    NAMES,
    Connection,
    RawServer,
    Witness,
    fetch_body,
    new_client,
    response,
)
from trawl.demo import Site, SiteServer
from trawl.fetch.client import HttpClient, OutOfFiles
from trawl.fetch.fdlimit import FD_RESERVE
from trawl.fetch.resolver import GuardedResolver

HOSTS, PAGES = 150, 3
LOW_LIMIT = 150
"""Soft and hard: connections get a quarter (37), fewer than the 64 requests a crawl
starts with in flight."""


def limited(soft: int, hard: int) -> Callable[[], None]:
    """A ``preexec_fn`` giving the child process these RLIMIT_NOFILE limits."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


@pytest.mark.parametrize(
    ("soft", "hard", "after"),
    [(256, 4096, 4096), (300, 300, 300), (100, 100, 100)],
    ids=["raised", "at-hard", "tiny"],
)
def test_the_soft_limit_is_raised_to_the_hard_one_and_the_budget_keeps_a_reserve(
    soft: int, hard: int, after: int
) -> None:
    code = (
        "import resource; from trawl.fetch.fdlimit import raise_fd_limit, fd_budget; "
        "limit = raise_fd_limit(); again = raise_fd_limit(); "
        "print(limit.before, limit.soft, again.before, "
        "resource.getrlimit(resource.RLIMIT_NOFILE)[0], fd_budget())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, preexec_fn=limited(soft, hard),
    )  # fmt: skip
    budget = max(after // 4, after - FD_RESERVE)
    assert done.stdout.split() == [str(n) for n in (soft, after, after, after, budget)]


async def test_a_connect_without_a_file_descriptor_raises_out_of_files() -> None:
    client = new_client()
    try:
        async with RawServer(lambda connection: connection.wait_hangup()) as server:
            before = resource.getrlimit(resource.RLIMIT_NOFILE)
            probe = os.dup(0)
            os.close(probe)
            resource.setrlimit(resource.RLIMIT_NOFILE, (probe, before[1]))
            try:
                with pytest.raises(OutOfFiles):
                    await client.get(server.url("/"))
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, before)
            assert client.sockets == 0
            assert server.connections == []
    finally:
        await client.close()


async def test_the_budget_closes_an_idle_connection_before_it_refuses() -> None:
    witness = Witness()
    release = asyncio.Event()

    async def held_until_released(connection: Connection) -> None:
        while (request := await connection.read_request()) is not None:
            if request.path == "/held":
                await release.wait()
            await connection.send(response(b"ok"))

    client = HttpClient(
        GuardedResolver(LOOPBACK, overrides=NAMES),
        headers=[("User-Agent", "trawl-test")],
        connect_timeout=5.0,
        max_idle=8,
        max_open=2,
    )
    try:
        async with RawServer(held_until_released, witness) as server:
            assert await fetch_body(client, server.url("/", host="h0.test")) == b"ok"
            assert await fetch_body(client, server.url("/", host="h1.test")) == b"ok"
            assert (client.idle, client.sockets) == (2, 2)
            # A third host: the connection idle longest (h0's) makes room.
            assert await fetch_body(client, server.url("/", host="h2.test")) == b"ok"
            assert (client.idle, client.sockets) == (2, 2)
            await witness.until(lambda: server.connections[0].hung_up)
            assert [c.hung_up for c in server.connections] == [True, False, False]
            # Both in use: none may be closed, so a third is refused.
            held = [
                asyncio.ensure_future(client.get(server.url("/held", host=f"h{n}.test")))
                for n in (1, 2)
            ]
            await witness.until(lambda: len(server.requests) == 5)
            with pytest.raises(OutOfFiles):
                await client.get(server.url("/", host="h3.test"))
            release.set()
            for answer in await asyncio.gather(*held):
                answer.close()
    finally:
        await client.close()
    assert client.opened == 3


def many_hosts(port: int) -> Site:
    """``HOSTS`` hosts of ``PAGES`` pages each, every host on its own address."""
    hosts = [f"h{n}.fd.test" for n in range(HOSTS)]
    routes = {}
    for host in hosts:
        pages = [f"/p{n}.html" for n in range(1, PAGES)]
        routes[f"http://{host}/"] = page(*pages)
        routes |= {f"http://{host}{p}": page() for p in pages}
    return Site.build(port, routes, [f"http://{host}/" for host in hosts])


def test_a_crawl_held_by_a_low_limit_completes_exactly_and_says_so(tmp_path: Path) -> None:
    data_dir = tmp_path / "crawl"
    config = write_config(tmp_path / "fast.toml", {"delay": 0, "response_factor": 0})
    with SiteServer(many_hosts) as server:
        done = subprocess.run(
            [
                sys.executable, "-m", "trawl", "crawl", *server.site.seeds,
                *server.resolve_args(), "--data-dir", str(data_dir), "--config", str(config),
                "--no-progress", "--json", "--concurrency", str(2 * HOSTS),
                "--max-hosts", str(2 * HOSTS),
            ],
            capture_output=True, text=True, timeout=120, check=False,
            preexec_fn=limited(LOW_LIMIT, LOW_LIMIT),
        )  # fmt: skip
        gets = page_gets(server)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "file-descriptor limit" in line]
    assert len(warnings) == 1, done.stderr
    assert f"{LOW_LIMIT} open files allowed" in warnings[0]
    assert "ulimit -n" in warnings[0] or "LimitNOFILE" in warnings[0]
    summary = json.loads(done.stdout)
    assert summary["fetched"] == HOSTS * PAGES
    assert summary["failed"] == 0
    assert summary["limits"]["fd_limit"] > 0
    assert summary["limits"].get("breaker_trips", 0) == 0
    assert gets == HOSTS * PAGES
