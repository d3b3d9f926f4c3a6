"""Crawling through an HTTP proxy: a real forward proxy on loopback (tests/forward_proxy.py)
in front of the test sites, http (absolute form) and https (CONNECT, the test CA)."""

from __future__ import annotations

import gzip
import ipaddress
import logging
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import CrawlRunner, is_page
from forward_proxy import VIA, ForwardProxy
from test_tls import GOOD, OTHER, https_server  # noqa: F401 - the fixture
from trawl.config import CrawlConfig, IPNetwork, Limits, Politeness
from trawl.crawl.runner import build_engine
from trawl.demo import Response, Site, SiteServer, generate_site
from trawl.fetch.client import HttpClient
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.proxy import PASSWORD_ENV, USER_ENV, always, parse_proxy
from trawl.fetch.resolver import GuardedResolver
from trawl.sites.rules import Site as SiteRule
from trawl.sites.rules import Sites
from trawl.store.values import State

USER, PASSWORD = "crawler", "s3cret-Pa55"
TOKEN = "Basic Y3Jhd2xlcjpzM2NyZXQtUGE1NQ=="  # base64 of USER:PASSWORD
CREDENTIALS = {USER_ENV: USER, PASSWORD_ENV: PASSWORD}
PROXY_ADDRESS = "127.0.9.1"
"""Where the proxy listens: outside every range the crawls below allow for targets."""
DELAY = 0.1


def generated(port: int) -> Site:
    return generate_site(port, hosts=4, pages_per_host=16, seed=3)


def small_site(port: int) -> Site:
    """Two hosts of three pages that link to each other."""
    page = '<a href="http://{h}.test:{p}/{n}.html">{n}</a>'
    routes: dict[str, Response] = {}
    for host in ("one", "two"):
        for n in range(3):
            other = "two" if host == "one" else "one"
            body = page.format(h=host, p=port, n=(n + 1) % 3) + page.format(h=other, p=port, n=n)
            routes[f"http://{host}.test:{port}/{n}.html"] = Response(body=body.encode())
    seeds = [f"http://{host}.test:{port}/0.html" for host in ("one", "two")]
    return Site.build(port, routes, seeds, ground_truth=routes)


def target_ranges(server: SiteServer) -> tuple[IPNetwork, ...]:
    """Each of the site's addresses alone: the proxy's address is not among them."""
    return tuple(ipaddress.ip_network(f"{a}/32") for a in set(server.resolve_map().values()))


def origin_form(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def outcomes(rows: object) -> dict[str, tuple[State, int | None, str | None]]:
    assert isinstance(rows, dict)
    return {url: (row.state, row.status, row.error) for url, row in rows.items()}


async def test_a_crawl_through_the_proxy_finds_what_a_direct_one_does(
    crawl: CrawlRunner,
) -> None:
    politeness = Politeness(delay=DELAY, response_factor=0.0)
    with SiteServer(generated) as server:
        port = server.port
        direct = await crawl(server, politeness=politeness, allow_networks=target_ranges(server))
    with (
        SiteServer(generated, port=port) as server,
        ForwardProxy(server.resolve_map(), address=PROXY_ADDRESS) as proxy,
    ):
        proxied = await crawl(
            server, politeness=politeness, allow_networks=target_ranges(server),
            proxy=parse_proxy(proxy.url, {}),
        )  # fmt: skip
        seen = server.requests
        inflight = server.max_inflight_per_host()
        gaps = {host: server.gaps(host) for host in server.site.hosts}
        records = proxy.records
        connections = proxy.connections

    assert outcomes(proxied.rows) == outcomes(direct.rows)
    assert set(proxied.rows) == server.site.ground_truth
    # Every request the origin saw came through the proxy, asked in absolute form.
    assert seen
    assert all(record.headers.get("Via") == VIA for record in seen)
    assert not any("Proxy-Authorization" in record.headers for record in seen)
    assert all(r.method == "GET" and r.status == 200 for r in records)
    asked = sorted(f"{urlsplit(r.target).hostname}{origin_form(r.target)}" for r in records)
    assert asked == sorted(f"{r.host}{r.path}" for r in seen)
    assert proxied.summary.requests == sum(is_page(urlsplit(r.target).path) for r in records)
    # A host's connection to the proxy is kept for its next turns, as without a proxy.
    assert connections < len(records) / 2
    # Politeness is per target host, not per proxy: one at a time, the delay between.
    assert set(inflight.values()) == {1}
    for host, between in gaps.items():
        assert min(between, default=DELAY) >= DELAY * 0.9, (host, between)


async def test_a_sites_proxy_carries_its_hosts_only(crawl: CrawlRunner) -> None:
    with (
        SiteServer(small_site) as server,
        ForwardProxy(server.resolve_map(), address=PROXY_ADDRESS) as proxy,
    ):
        result = await crawl(
            server, allow_networks=target_ranges(server),
            sites=Sites([SiteRule("one.test", proxy=proxy.url)]),
        )  # fmt: skip
        seen = server.requests
        records = proxy.records
    assert set(result.rows) == server.site.ground_truth
    through = {record.host for record in seen if record.headers.get("Via") == VIA}
    direct = {record.host for record in seen if record.headers.get("Via") != VIA}
    assert (through, direct) == ({"one.test"}, {"two.test"})
    assert {urlsplit(r.target).hostname for r in records} == {"one.test"}


async def test_https_goes_through_a_tunnel_verified_for_the_target(
    https_server: tuple[int, Path],  # noqa: F811 - the fixture imported
    tmp_path: Path,
) -> None:
    port, ca = https_server
    with ForwardProxy({}, address=PROXY_ADDRESS, credentials=(USER, PASSWORD)) as proxy:
        config = CrawlConfig(
            seeds=(f"https://{GOOD}:{port}/", f"https://{OTHER}:{port}/"),
            data_dir=tmp_path / "crawl",
            resolve={GOOD: "127.0.0.1", OTHER: "127.0.0.1"},
            allow_networks=(ipaddress.ip_network("127.0.0.1/32"),),
            ca_file=ca,
            soft_404=False,
            rng_seed=1,
            proxy=parse_proxy(proxy.url, CREDENTIALS),
        )
        async with build_engine(config) as crawler:
            summary = await crawler.run()
        records = proxy.records

    assert summary.status["2xx"] == 1
    # The tunnel is asked for the checked address, the name in its Host header; TLS is
    # end to end, so the name the certificate does not hold fails as without a proxy.
    assert {r.method for r in records} == {"CONNECT"}
    assert {r.target for r in records} == {f"127.0.0.1:{port}"}
    assert {r.host for r in records} == {f"{GOOD}:{port}", f"{OTHER}:{port}"}
    assert {r.authorization for r in records} == {TOKEN}
    assert summary.errors_by_class == {"tls": 1}
    assert summary.unreachable_hosts == 1


async def test_credentials_reach_the_proxy_only(
    crawl: CrawlRunner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with (
        SiteServer(small_site) as server,
        ForwardProxy(server.resolve_map(), credentials=(USER, PASSWORD)) as proxy,
    ):
        result = await crawl(server, warc=True, proxy=parse_proxy(proxy.url, CREDENTIALS))
        seen = server.requests
        records = proxy.records

    assert result.in_state(State.DONE) == server.site.ground_truth
    assert records
    assert {r.authorization for r in records} == {TOKEN}
    assert seen
    assert not any("Proxy-Authorization" in r.headers for r in seen)
    kept = b"".join(
        gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for path in result.data_dir.rglob("*")
        if path.is_file()
    )
    assert b"WARC/1.1" in kept or b"WARC/1.0" in kept
    for secret in (PASSWORD, TOKEN.split()[1]):
        assert secret.encode() not in kept
        assert secret not in caplog.text
    assert PASSWORD not in repr(parse_proxy(proxy.url, CREDENTIALS))


async def test_a_forbidden_target_is_refused_before_the_proxy_is_asked(
    crawl: CrawlRunner,
) -> None:
    def site(port: int) -> Site:
        ok, inside = f"http://ok.test:{port}/", f"http://inside.test:{port}/"
        routes = {ok: Response(body=b"<title>ok</title>"), inside: Response(body=b"secret")}
        return Site.build(port, routes, [ok, inside])

    with SiteServer(site) as server, ForwardProxy(server.resolve_map()) as proxy:
        result = await crawl(
            server, extra_resolve={"inside.test": "10.20.30.40"}, proxy=parse_proxy(proxy.url, {})
        )
        records = proxy.records

    inside = server.site.url("inside.test")
    assert result.rows[inside].error == "blocked_address"
    assert result.rows[server.site.url("ok.test")].status == 200
    assert records
    assert not any("inside.test" in r.target for r in records)


async def test_407_without_credentials_is_a_clear_error(
    crawl: CrawlRunner, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        SiteServer(small_site) as server,
        ForwardProxy(server.resolve_map(), credentials=(USER, PASSWORD)) as proxy,
    ):
        result = await crawl(server, proxy=parse_proxy(proxy.url, {}))
        records = proxy.records

    assert {r.status for r in records} == {407}
    assert {row.error for row in result.rows.values()} == {"proxy_error"}
    assert result.in_state(State.FAILED) == set(result.rows)
    assert result.summary.limits.get("proxy_errors", 0) >= 1
    assert "breaker_gave_up" not in result.summary.limits
    assert result.summary.unreachable_hosts == 0
    said = [r.getMessage() for r in caplog.records if r.name == "trawl.fetch.proxy"]
    assert len(said) == 1
    assert "wants credentials (407)" in said[0]
    assert USER_ENV in said[0]


async def test_a_proxy_that_dies_mid_crawl_fails_urls_not_hosts(
    crawl: CrawlRunner, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        SiteServer(generated) as server,
        ForwardProxy(server.resolve_map(), stop_after=12) as proxy,
    ):
        result = await crawl(server, proxy=parse_proxy(proxy.url, {}), limits=Limits())
        records = proxy.records

    assert 12 <= len(records) < 20
    done = result.in_state(State.DONE)
    assert done
    assert len(done) < len(result.rows)
    failed = result.in_state(State.FAILED)
    assert failed
    assert {result.rows[url].error for url in failed} == {"proxy_error"}
    assert done | failed | result.in_state(State.BLOCKED) == set(result.rows), {
        (row.state, row.error) for row in result.rows.values()
    }
    limits = result.summary.limits
    assert limits["proxy_errors"] > 0
    assert "breaker_trips" not in limits
    assert "breaker_gave_up" not in limits
    assert result.summary.unreachable_hosts == 0
    said = [r.getMessage() for r in caplog.records if r.name == "trawl.fetch.proxy"]
    assert len(said) == 1, said
    assert said[0].startswith("proxy failing")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (f"http://{USER}:{PASSWORD}@127.0.0.1:3128", "must not hold credentials"),
        ("https://127.0.0.1:3128", "not supported"),
        ("socks5://127.0.0.1:1080", "must be an http:// URL"),
        ("http://127.0.0.1:3128/path", "no path"),
        ("http://127.0.0.1:99999", "not a URL"),
    ],
)
def test_a_bad_proxy_url_is_one_line_and_exit_2(tmp_path: Path, value: str, said: str) -> None:
    command = [sys.executable, "-m", "trawl", "crawl", "http://example.test/", "--proxy", value,
               "--data-dir", str(tmp_path / "crawl"), "--no-progress"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1
    assert "Traceback" not in run.stderr
    assert said in run.stderr
    assert PASSWORD not in run.stderr


def test_credentials_come_from_the_environment() -> None:
    proxy = parse_proxy("http://proxy.test:3128", CREDENTIALS)
    assert (proxy.host, proxy.port, proxy.authorization) == ("proxy.test", 3128, TOKEN)
    assert parse_proxy("http://proxy.test", {}).port == 80
    assert parse_proxy("http://proxy.test", {}).authorization is None
    assert PASSWORD not in repr(proxy)
    assert TOKEN not in repr(proxy)


@pytest.fixture(autouse=True)
def _no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (USER_ENV, PASSWORD_ENV):
        monkeypatch.delenv(name, raising=False)


async def test_connections_through_the_proxy_are_kept_per_target_host() -> None:
    with (
        SiteServer(small_site) as server,
        ForwardProxy(server.resolve_map(), address=PROXY_ADDRESS) as proxy,
    ):
        one, two = server.site.url("one.test", "/0.html"), server.site.url("two.test", "/0.html")
        client = HttpClient(
            GuardedResolver(AddressPolicy(target_ranges(server)), overrides=server.resolve_map()),
            headers=[("User-Agent", "trawl-test")], connect_timeout=5.0, max_idle=8,
            proxy_for=always(parse_proxy(proxy.url, {})),
        )  # fmt: skip
        try:
            for url in (one, two, one, two, one):
                with await client.get(url) as answer:
                    assert answer.status == 200
            assert client.opened == 2
            # A host going to rest closes its own connection through the proxy only.
            assert client.drop_idle(f"one.test:{server.port}") == 1
            for url in (two, one):
                with await client.get(url) as answer:
                    assert answer.status == 200
            assert client.opened == 3
        finally:
            await client.close()
        connections, records = proxy.connections, proxy.records

    assert connections == 3
    assert len(records) == 7


async def test_a_tunnel_refused_is_a_proxy_error_not_the_hosts(
    https_server: tuple[int, Path],  # noqa: F811 - the fixture imported
    tmp_path: Path,
) -> None:
    port, ca = https_server
    with ForwardProxy({}, credentials=(USER, PASSWORD)) as proxy:
        config = CrawlConfig(
            seeds=(f"https://{GOOD}:{port}/",),
            data_dir=tmp_path / "crawl",
            resolve={GOOD: "127.0.0.1"},
            allow_networks=(ipaddress.ip_network("127.0.0.1/32"),),
            ca_file=ca,
            soft_404=False,
            rng_seed=1,
            proxy=parse_proxy(proxy.url, {}),
        )
        async with build_engine(config) as crawler:
            summary = await crawler.run()
        records = proxy.records

    assert {(r.method, r.status) for r in records} == {("CONNECT", 407)}
    assert summary.errors_by_class == {"proxy_error": 1}
    assert summary.unreachable_hosts == 0


async def test_a_proxy_down_from_the_start_is_one_log_line(
    crawl: CrawlRunner, caplog: pytest.LogCaptureFixture
) -> None:
    with ForwardProxy({}) as gone:
        url = gone.url
    with SiteServer(small_site) as server:
        result = await crawl(server, proxy=parse_proxy(url, {}))
        seen = server.requests

    assert seen == []
    assert {row.error for row in result.rows.values()} == {"proxy_error"}
    assert result.summary.limits["proxy_errors"] >= len(server.site.hosts)
    said = [r.getMessage() for r in caplog.records if r.name == "trawl.fetch.proxy"]
    assert len(said) == 1
    assert said[0].startswith(f"proxy failing: proxy {url} refused the connection")


def test_every_seed_failing_at_the_proxy_says_so_and_exits_3(tmp_path: Path) -> None:
    with ForwardProxy({}) as gone:
        url = gone.url
    command = [sys.executable, "-m", "trawl", "crawl", "http://site.test/", "--proxy", url,
               "--resolve", "site.test=127.0.0.1", "--allow-network", "127.0.0.1/32",
               "--retry-attempts", "1", "--data-dir", str(tmp_path / "crawl"),
               "--no-progress"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr
    assert f"proxy failing: proxy {url} refused the connection" in run.stderr
    assert "http://site.test/ not fetched: the proxy failed (--proxy" in run.stderr
