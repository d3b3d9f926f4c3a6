"""SSRF defence in whole crawls: non-public addresses are refused unless allowed."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CrawlRunner, page_requests
from listener import Listener
from test_crawl import moved, page
from trawl.demo import Site, SiteServer
from trawl.store.values import State

ONLY_SERVER = (ipaddress.ip_network("127.0.0.1/32"),)


@pytest.fixture
def internal() -> Iterator[Listener]:
    """A 'private network' service on 127.0.0.2 that counts connections to it."""
    with Listener("127.0.0.2") as service:
        yield service


async def test_loopback_is_refused_by_default(crawl: CrawlRunner) -> None:
    routes = {"http://www.ssrf.test/": page("/a"), "http://www.ssrf.test/a": page()}
    with SiteServer(lambda port: Site.build(port, routes, ["http://www.ssrf.test/"])) as server:
        result = await crawl(server, allow_networks=())
    assert server.requests == []
    seed = server.site.seeds[0]
    assert result.rows[seed].state == State.FAILED
    assert result.rows[seed].error == "blocked_address"
    assert result.summary.errors_by_class == {"blocked_address": 1}
    assert result.summary.dns["blocked"] == 1


async def test_redirects_and_links_to_refused_addresses_are_not_followed(
    crawl: CrawlRunner, internal: Listener
) -> None:
    target = f"http://intranet.ssrf.test:{internal.port}/admin"

    def build(port: int) -> Site:
        routes = {
            "http://www.ssrf.test/": page("/go", target, "/fine"),
            "http://www.ssrf.test/go": moved(302, target.replace("/admin", "/via-redirect")),
            "http://www.ssrf.test/fine": page(),
        }
        return Site.build(port, routes, ["http://www.ssrf.test/"], hosts=["www.ssrf.test"])

    with SiteServer(build) as server:
        result = await crawl(
            server, allow_networks=ONLY_SERVER, extra_resolve={"intranet.ssrf.test": "127.0.0.2"}
        )
        requested = page_requests(server)
    assert internal.accepted == 0
    assert set(requested) == {server.site.url("www.ssrf.test", p) for p in ("/", "/go", "/fine")}
    refused = {url for url, row in result.rows.items() if row.error == "blocked_address"}
    assert refused == {target, target.replace("/admin", "/via-redirect")}


def test_an_ip_literal_seed_is_refused_and_allowed_with_its_network(
    tmp_path: Path, internal: Listener
) -> None:
    seed = f"http://127.0.0.2:{internal.port}/"
    base = [sys.executable, "-m", "trawl", "crawl", seed, "--scope", "host", "--json",
            "--no-progress", "--retry-attempts", "1", "--timeout", "2"]  # fmt: skip
    refused = subprocess.run(
        [*base, "--data-dir", str(tmp_path / "a")], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 3, refused.stderr
    assert json.loads(refused.stdout)["errors_by_class"] == {"blocked_address": 1}
    assert refused.stderr.splitlines() == [
        f"trawl: {seed} not fetched: 127.0.0.2 is a loopback address: "
        "add --allow-network 127.0.0.0/8 to crawl it"
    ]
    assert internal.accepted == 0
    allowed = subprocess.run(
        [*base, "--data-dir", str(tmp_path / "b"), "--allow-network", "127.0.0.2/32"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # Reached now; the service hangs up without an answer, so robots.txt is unavailable.
    assert allowed.returncode == 3, allowed.stderr
    assert internal.accepted >= 1
    assert "not fetched: robots.txt unavailable" in allowed.stderr


def test_a_bad_network_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trawl", "crawl", "http://a.test/", "--allow-network", "10.0.0/8x",
         "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("'10.0.0/8x' is not an address range")
