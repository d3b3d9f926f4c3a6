"""A crawl that fetches nothing says so, and names resolve as the system resolves them.

Every test runs ``python -m trawl`` as a user would, against a live site on loopback;
names come from a hosts file of the test's own, and any other name is asked of a DNS
server on loopback (so no real DNS is asked), which knows only a wrong address of WWW.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import is_page, read_rows
from dns_server import ScriptedDns
from test_cli import FAST, Run, trawl, write_config
from test_crawl import page, robots
from trawl.demo import Response, Site, SiteServer
from trawl.store.values import State

WWW = "www.hosts.test"
GONE = "gone.hosts.test"
"""In scope, but in no hosts file and unknown to DNS."""
DEAD = "dead.hosts.test"
"""In scope and in the hosts file, at a port nothing listens on."""
NO_ROBOTS = "norobots.test"
"""Its robots.txt answers 503 on every attempt."""
SHUT = "shut.test"
"""Its robots.txt disallows everything."""
MISSING = "missing.test"
"""Its seed page answers 404."""


def closed_port() -> int:
    """A loopback port that refuses connections (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


DEAD_PORT = closed_port()


def build(port: int) -> Site:
    routes: dict[str, Response] = {
        f"http://{WWW}/": page("/a", "/b", f"http://{GONE}/", f"http://{DEAD}:{DEAD_PORT}/"),
        f"http://{WWW}/a": page("/b"),
        f"http://{WWW}/b": page(),
        f"http://{NO_ROBOTS}/robots.txt": Response(status=503),
        f"http://{NO_ROBOTS}/": page(),
        f"http://{SHUT}/robots.txt": robots("User-agent: *", "Disallow: /"),
        f"http://{SHUT}/": page(),
        f"http://{MISSING}/": Response(status=404, body=b"not here"),
    }
    return Site.build(port, routes, [f"http://{WWW}/"], hosts=[WWW, NO_ROBOTS, SHUT, MISSING])


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(build) as served:
        yield served


@pytest.fixture
def dns() -> Iterator[ScriptedDns]:
    """A name server with an address for WWW where nothing listens (the hosts file must
    win over it), NXDOMAIN for every other name."""
    with ScriptedDns({WWW: [[("127.255.255.254", 60)]]}) as served:
        yield served


@pytest.fixture
def hosts_file(tmp_path: Path, server: SiteServer) -> Path:
    """The site's names (and DEAD's) in /etc/hosts format, with comments and aliases."""
    lines = ["# the test site", f"127.0.0.1  {DEAD.upper()}  dead-alias.test  # nothing here"]
    lines += [f"{address}\t{name}" for name, address in server.resolve_map().items()]
    path = tmp_path / "hosts"
    path.write_text("\n".join(lines) + "\n")
    return path


def crawl(
    tmp_path: Path, dns: ScriptedDns, hosts_file: Path, *seeds: str, extra: tuple[str, ...] = ()
) -> Run:
    """``trawl crawl SEEDS`` with the fast test settings, the hosts file and the DNS server."""
    config = write_config(tmp_path / "fast.toml", FAST)
    return trawl(
        "crawl", *seeds, "--data-dir", str(tmp_path / "crawl"), "--config", str(config),
        "--hosts-file", str(hosts_file), "--nameserver", dns.nameserver, "--json",
        "--no-progress", "--no-soft-404", *extra, timeout=60,
    )  # fmt: skip


def page_gets(server: SiteServer, host: str) -> int:
    return sum(1 for r in server.requests if r.host == host and is_page(r.path))


def test_a_site_reached_through_the_hosts_file_is_crawled(
    tmp_path: Path, server: SiteServer, dns: ScriptedDns, hosts_file: Path
) -> None:
    seed = server.site.url(WWW)
    run = crawl(tmp_path, dns, hosts_file, seed, extra=("--allow-network", "127.0.0.0/8"))
    # The seed was fetched: hosts that cannot be reached are reported, but no failure.
    assert run.code == 0, run.err
    assert "not fetched" not in run.err
    summary = json.loads(run.out)
    assert summary["fetched"] == 3
    assert page_gets(server, WWW) == 3
    assert (summary["robots_blocked"], summary["unreachable_hosts"]) == (0, 2)
    assert summary["errors_by_class"] == {"connection_refused": 1, "dns": 1}
    rows = read_rows(tmp_path / "crawl")
    gone, dead = rows[f"http://{GONE}/"], rows[f"http://{DEAD}:{DEAD_PORT}/"]
    assert (gone.state, gone.error, dead.state, dead.error) == (
        State.FAILED, "dns", State.FAILED, "connection_refused",
    )  # fmt: skip
    assert dns.queries[WWW] == 0  # the hosts file answered for it


def test_a_hosts_file_loopback_answer_is_refused_without_allow_network(
    tmp_path: Path, server: SiteServer, dns: ScriptedDns, hosts_file: Path
) -> None:
    seed = server.site.url(WWW)
    before = len(server.requests)
    run = crawl(tmp_path, dns, hosts_file, seed)
    assert run.code == 3, run.err
    address = server.resolve_map()[WWW]
    assert run.err.splitlines() == [
        f"trawl: {seed} not fetched: {WWW} resolves to {address}, a loopback address: "
        "add --allow-network 127.0.0.0/8 to crawl it"
    ]
    assert len(server.requests) == before
    assert json.loads(run.out)["errors_by_class"] == {"blocked_address": 1}


def test_a_loopback_seed_without_allow_network_exits_3_with_the_fix(
    tmp_path: Path, server: SiteServer, dns: ScriptedDns, hosts_file: Path
) -> None:
    seed = f"http://127.0.0.1:{server.site.port}/"
    before = len(server.requests)
    run = crawl(tmp_path, dns, hosts_file, seed)
    assert run.code == 3, run.err
    assert run.err.splitlines() == [
        f"trawl: {seed} not fetched: 127.0.0.1 is a loopback address: "
        "add --allow-network 127.0.0.0/8 to crawl it"
    ]
    assert len(server.requests) == before


def test_a_refused_connection_is_a_failure_not_a_robots_block(
    tmp_path: Path, dns: ScriptedDns, hosts_file: Path
) -> None:
    seed = f"http://127.0.0.1:{closed_port()}/"
    args = (seed,)
    extra = ("--allow-network", "127.0.0.0/8")
    line = f"trawl: {seed} not fetched: connection refused (nothing listens on that port)"
    run = crawl(tmp_path, dns, hosts_file, *args, extra=extra)
    assert run.code == 3, run.err
    assert run.err.splitlines() == [line]
    summary = json.loads(run.out)
    assert (summary["failed"], summary["robots_blocked"], summary["unreachable_hosts"]) == (1, 0, 1)
    row = read_rows(tmp_path / "crawl")[seed]
    assert (row.state, row.error, row.status) == (State.FAILED, "connection_refused", None)
    # Resumed, the run fetches nothing new and reports the seed from its stored state.
    again = crawl(tmp_path, dns, hosts_file, *args, extra=extra)
    assert again.code == 3, again.err
    assert again.err.splitlines() == [line]


def test_a_name_that_does_not_resolve_exits_3(
    tmp_path: Path, dns: ScriptedDns, hosts_file: Path
) -> None:
    seed = "http://nowhere.hosts.test/"
    run = crawl(tmp_path, dns, hosts_file, seed)
    assert run.code == 3, run.err
    assert run.err.splitlines() == [f"trawl: {seed} not fetched: no such host (DNS)"]
    assert json.loads(run.out)["errors_by_class"] == {"dns": 1}


def test_robots_txt_that_blocks_or_is_unavailable_is_said_so(
    tmp_path: Path, server: SiteServer, dns: ScriptedDns, hosts_file: Path
) -> None:
    unavailable, shut, missing = (server.site.url(h) for h in (NO_ROBOTS, SHUT, MISSING))
    config = write_config(tmp_path / "fast.toml", FAST)
    common = ("--data-dir", str(tmp_path / "crawl"), "--config", str(config), "--hosts-file",
              str(hosts_file), "--nameserver", dns.nameserver, "--allow-network", "127.0.0.0/8",
              "--no-progress", "--no-soft-404")  # fmt: skip
    run = trawl("crawl", unavailable, shut, *common, timeout=60)
    assert run.code == 3, run.err
    assert sorted(run.err.splitlines()) == [
        f"trawl: {unavailable} not fetched: robots.txt unavailable (an error status, or no "
        "valid HTTP answer); run the same command again later",
        f"trawl: {shut} not fetched: blocked by robots.txt",
    ]
    rows = dict(line.split("  ", 1) for line in run.out.splitlines())
    figures = {name.strip(): value.strip() for name, value in rows.items()}
    assert figures["blocked by robots.txt"] == "1"
    assert figures["robots.txt unavailable"] == "1 URLs held back"
    assert (figures["hosts unreachable"], figures["failed"]) == ("0", "0")
    assert page_gets(server, NO_ROBOTS) == page_gets(server, SHUT) == 0

    # A seed that answered 404 was fetched: the crawl did not fail.
    answered = trawl("crawl", missing, *common, "--fresh", timeout=60)
    assert answered.code == 0, answered.err
    assert answered.err == ""
