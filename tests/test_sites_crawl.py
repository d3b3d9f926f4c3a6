"""Per-site settings in whole crawls (``trawl crawl --config``) of a local multi-host
site whose server logs every request with its headers: a site's headers, cookies and
basic auth reach its own host only (its robots.txt and soft-404 probe included, a
redirect to another host and a link to another host excluded), secrets end up in no
file of the crawl (the archived request redacts them), a site's delay holds in the
server's log, and a site's tighter budgets stop that site only."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from conftest import is_page
from test_api import AUTH, TOKEN, crawl_until, settled
from trawl.demo import Site, SiteServer
from trawl.demo.server import RequestRecord
from trawl.demo.site import Response
from trawl.extract.soft404 import PROBE_PREFIX
from trawl.ops.api import create_app
from trawl.ops.crawls import Crawls

ENV = {"SITE_TOKEN": "tok-5e1d0c", "SITE_USER": "alice", "SITE_PASSWORD": "pw-0b7f2a"}
BASIC = "Basic " + base64.b64encode(b"alice:pw-0b7f2a").decode()
COOKIE_SECRET = "c00kie-4d21"
SECRETS = ("tok-5e1d0c", "pw-0b7f2a", COOKIE_SECRET, BASIC.split()[1])
SITE_DELAY = 0.4
CONFIG = f"""
delay = 0
response_factor = 0
retry_base = 0.05
retry_cap = 0.2
per_ip = 2
parse_workers = 1
warc = true

[sites."a.test"]
headers = {{"X-Site" = "a", "X-Token" = {{env = "SITE_TOKEN"}}}}
cookies = {{lang = "en", session = {{value = "{COOKIE_SECRET}", secret = true}}}}
auth = {{user_env = "SITE_USER", password_env = "SITE_PASSWORD"}}

[sites."*.a.test"]
headers = {{"X-Site" = "sub"}}

[sites."budget.test"]
max_pages = 3

[sites."slow.test"]
delay = {SITE_DELAY}

[sites."deep.test"]
max_depth = 1

[sites."pair.test"]
per_host = 2
"""
CREDENTIALS = ("X-Token", "Cookie", "Authorization")


def html(*links: str) -> Response:
    body = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return Response(body=f"<!doctype html><title>t</title><p>a page</p>{body}".encode())


def make_site(port: int) -> Site:
    def at(host: str, path: str = "/") -> str:
        return f"http://{host}:{port}{path}"

    routes: dict[str, Response] = {
        at("a.test"): html("/p1", "/go", at("b.test", "/x"), at("www.a.test")),
        at("a.test", "/p1"): html("/p2"),
        at("a.test", "/p2"): html(),
        at("a.test", "/go"): Response(
            status=302, headers=(("Location", at("b.test", "/landing")),)
        ),
        at("a.test", "/robots.txt"): Response(
            status=301, headers=(("Location", at("b.test", "/robots-of-a.txt")),)
        ),
        at("b.test", "/robots-of-a.txt"): Response(
            body=b"User-agent: *\nAllow: /\n", content_type="text/plain"
        ),
        at("b.test"): html("/x", at("a.test", "/p2")),
        at("b.test", "/x"): html(),
        at("b.test", "/landing"): html(),
        at("www.a.test"): html("/w1"),
        at("www.a.test", "/w1"): html(),
        at("budget.test"): html(*(f"/b{n}" for n in range(8))),
        at("deep.test"): html("/d1"),
        at("deep.test", "/d1"): html("/d2"),
        at("deep.test", "/d2"): html(),
        at("slow.test"): html(*(f"/s{n}" for n in range(4))),
    }
    routes |= {at("budget.test", f"/b{n}"): html() for n in range(8)}
    routes |= {at("slow.test", f"/s{n}"): html() for n in range(4)}
    routes[at("pair.test")] = html(*(f"/q{n}" for n in range(6)))
    routes |= {
        at("pair.test", f"/q{n}"): Response(body=b"<p>slow</p>", delay=0.2) for n in range(6)
    }
    hosts = ("a.test", "b.test", "budget.test", "deep.test", "slow.test", "pair.test")
    seeds = [at(host) for host in hosts]
    return Site.build(port, routes, seeds)


@dataclass(frozen=True)
class Crawled:
    server: SiteServer
    data_dir: Path
    summary: dict[str, object]
    output: str

    def requests(self, host: str) -> list[RequestRecord]:
        return [r for r in self.server.requests if r.host == host]


def run_trawl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trawl", *args],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **env},
    )  # fmt: skip


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawled]:
    root = tmp_path_factory.mktemp("sites")
    config = root / "sites.toml"
    config.write_text(CONFIG)
    data_dir = root / "crawls" / "c1"
    with SiteServer(make_site) as server:
        done = run_trawl(
            "crawl", *server.site.seeds, *server.resolve_args(), "--config", str(config),
            "--data-dir", str(data_dir), "--no-progress", "--json", "--log-level", "debug",
            env=ENV,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        yield Crawled(server, data_dir, json.loads(done.stdout), done.stdout + done.stderr)


def test_a_sites_headers_cookies_and_auth_go_with_every_request_to_its_host(
    crawled: Crawled,
) -> None:
    seen = crawled.requests("a.test")
    paths = {r.path for r in seen}
    assert {"/", "/p1", "/p2", "/go", "/robots.txt"} <= paths
    assert any(p.startswith(PROBE_PREFIX) for p in paths)  # the soft-404 probe too
    for record in seen:
        assert record.headers["X-Site"] == "a", record.path
        assert record.headers["X-Token"] == ENV["SITE_TOKEN"], record.path
        assert record.headers["Cookie"] == f"lang=en; session={COOKIE_SECRET}", record.path
        assert record.headers["Authorization"] == BASIC, record.path


def test_other_hosts_never_get_them_not_by_redirect_nor_link(crawled: Crawled) -> None:
    others = [r for r in crawled.server.requests if r.host != "a.test"]
    b_paths = {r.path for r in others if r.host == "b.test"}
    # The targets of a page's redirect and of a.test's robots.txt redirect, and a link.
    assert {"/landing", "/robots-of-a.txt", "/x", "/robots.txt"} <= b_paths
    assert any(p.startswith(PROBE_PREFIX) for p in b_paths)
    for record in others:
        leaked = [name for name in CREDENTIALS if name in record.headers]
        assert not leaked, (record.host, record.path, leaked)
        if record.host != "www.a.test":
            assert "X-Site" not in record.headers, (record.host, record.path)
    # The subdomain has its own, more specific rule, which replaces the parent's whole.
    www = crawled.requests("www.a.test")
    assert {r.path for r in www} >= {"/", "/w1", "/robots.txt"}
    assert all(r.headers["X-Site"] == "sub" for r in www)


def test_no_secret_is_in_any_file_of_the_crawl_nor_its_output(crawled: Crawled) -> None:
    assert not [s for s in SECRETS if s in crawled.output]
    warcs = list((crawled.data_dir / "warc").glob("*.warc.gz"))
    assert warcs
    for path in crawled.data_dir.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        assert not [s for s in SECRETS if s.encode() in data], path
    archive = b"".join(gzip.decompress(path.read_bytes()) for path in warcs)
    requests = [block for block in archive.split(b"WARC/1.1") if b"WARC-Type: request" in block]
    to_a = [block for block in requests if b"Host: a.test" in block]
    assert to_a
    for block in to_a:
        assert b"Authorization: [redacted]" in block
        assert b"X-Token: [redacted]" in block
        assert b"Cookie: lang=en; session=[redacted]" in block
        assert b"X-Site: a" in block


async def test_the_api_shows_the_sites_without_secrets(crawled: Crawled) -> None:
    crawls = Crawls(crawled.data_dir.parent)
    transport = httpx.ASGITransport(app=create_app(crawls, "token"))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            answer = await client.get("/crawls/c1/settings")
    finally:
        await crawls.aclose()
    assert answer.status_code == 200, answer.text
    assert not [s for s in SECRETS if s in answer.text]
    site = answer.json()["sites"]["a.test"]
    assert site["headers"] == {"X-Site": {"text": "a"}, "X-Token": {"env": "SITE_TOKEN"}}
    assert site["cookies"] == {"lang": {"text": "en"}, "session": {"secret": True}}
    assert site["auth"] == {"user_env": "SITE_USER", "password_env": "SITE_PASSWORD"}
    assert answer.json()["sites"]["slow.test"] == {"delay": SITE_DELAY}


def test_a_sites_delay_holds_in_the_servers_log(crawled: Crawled) -> None:
    gaps = crawled.server.gaps("slow.test", include_robots=True)
    assert len(gaps) >= 5
    # The server logs a request's end once its handler is done, a little after the
    # crawler may have read the last byte: 5% of slack, as the crawl's own delay has.
    assert min(gaps) >= SITE_DELAY * 0.95, gaps
    # The crawl's own delay (0) is what the other hosts got.
    assert min(crawled.server.gaps("budget.test", include_robots=True)) < SITE_DELAY / 2


def test_a_sites_requests_in_flight_replace_the_crawls_within_the_address_limit(
    crawled: Crawled,
) -> None:
    peaks = crawled.server.max_inflight_per_host()
    assert peaks["pair.test"] == 2  # its site's per_host, which per_ip = 2 allows
    assert max(peak for host, peak in peaks.items() if host != "pair.test") == 1


def test_a_sites_budgets_stop_that_site_only(crawled: Crawled) -> None:
    budget = [r.path for r in crawled.requests("budget.test") if is_page(r.path)]
    assert len(budget) == 3, budget  # max_pages = 3 fetches of that host
    limits = crawled.summary["limits"]
    assert isinstance(limits, dict)
    assert limits["over_host_page_budget"] == 6  # "/" and 8 linked pages: 3 fetched
    assert crawled.summary["queued"] == 0  # parked, and left parked when the run ended
    assert limits["too_deep"] == 1
    deep = {r.path for r in crawled.requests("deep.test") if is_page(r.path)}
    assert deep == {"/", "/d1"}  # /d2 is two hops from the seed, past the site's max_depth
    slow = {r.path for r in crawled.requests("slow.test") if is_page(r.path)}
    assert slow == {"/", *(f"/s{n}" for n in range(4))}
    b = {r.path for r in crawled.requests("b.test") if is_page(r.path)}
    assert b == {"/", "/x", "/landing", "/robots-of-a.txt"}


async def test_the_api_takes_sites_from_the_servers_config_never_from_a_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    config = tmp_path / "serve.toml"
    config.write_text(CONFIG)
    with SiteServer(make_site) as server:
        options = [*server.resolve_args(), "--config", str(config)]
        crawls = Crawls(tmp_path / "crawls", crawl_options=options)
        transport = httpx.ASGITransport(app=create_app(crawls, TOKEN))
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                seed = server.site.url("a.test")
                body = {"seeds": [seed], "sites": {"a.test": {"headers": {"X": {"env": "HOME"}}}}}
                refused = await client.post("/crawls", json=body, headers=AUTH)
                assert refused.status_code == 422
                assert "sites are not taken in a request" in refused.text
                crawl_id, final = await crawl_until(client, {"seeds": [seed]}, settled)
        finally:
            await crawls.aclose()
        assert final["state"] == "done", final
        seen = [r for r in server.requests if r.host == "a.test"]
    assert {r.path for r in seen} >= {"/", "/p1", "/robots.txt"}
    assert all(r.headers.get("Authorization") == BASIC for r in seen)
    assert crawl_id in {path.name for path in (tmp_path / "crawls").iterdir()}
