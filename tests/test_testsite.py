"""The test site: canonical route lookup, generated ground truth, and the live server.

The ground truth is checked against an independent crawl of the generated routes that
uses only the standard library's HTML parser and urljoin plus protego for robots.txt,
so a page whose HTML says something other than the generator's model is caught here.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import re
import signal
import subprocess
import sys
import urllib.request
import zlib
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest
from protego import Protego
from yarl import URL

from trawl.demo import (
    Response,
    Route,
    Site,
    SiteServer,
    canonical_target,
    canonical_url,
    generate_site,
    route_key,
)

PORT = 8123
_HOST_RE = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("", "/"),
        ("/a/./b/../c.html#frag", "/a/c.html"),
        ("/a/b/..", "/a/"),
        ("/%7Eteam/%70.html", "/~team/p.html"),
        ("/x%2fy%3a", "/x%2Fy%3A"),
        ("/p?b=2&utm_source=x&a=1&GCLID=z&PHPSESSID=s", "/p?a=1&b=2"),
        ("/p?b=2&a=9&b=1&&", "/p?a=9&b=2&b=1"),
        ("/p?utm_medium=email", "/p"),
        ("/a b", "/a%20b"),
    ],
)
def test_canonical_target(raw: str, canonical: str) -> None:
    assert canonical_target(raw) == canonical


def test_route_key_and_canonical_url() -> None:
    assert route_key("WWW.Trawl.Test.:8123", "/x/../p?b=1&a=2") == ("www.trawl.test", "/p?a=2&b=1")
    assert canonical_url("HTTP://WWW.T.TEST:81/a?utm_x=1#f") == "http://www.t.test:81/a"
    assert canonical_url("http://t.test:80") == "http://t.test/"
    with pytest.raises(ValueError, match="absolute"):
        canonical_url("mailto:a@t.test")


def test_site_build_defaults() -> None:
    site = Site.build(
        PORT,
        {"http://A.test/x": Response(body=b"x"), "http://b.test/?q=1": [Response(503), Response()]},
        ["http://a.test/"],
        ground_truth=["http://a.test/", "http://a.test/x"],
        robots_blocked=["http://a.test/x"],
    )
    assert site.hosts == ("a.test", "b.test")
    assert site.routes[("b.test", "/?q=1")].responses[0].status == 503
    assert site.seeds == ("http://a.test:8123/",)
    assert site.expected_fetches == {"http://a.test:8123/"}
    assert site.robots_blocked == {"http://a.test:8123/x"}
    with pytest.raises(ValueError, match="at least one"):
        Route(())


class _Links(HTMLParser):
    """Followable links of one page, read the way a browser would."""

    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.hrefs: list[str] = []
        self.nofollow = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if tag == "base" and self.base is None and "href" in attr:
            self.base = attr["href"]
        elif tag == "meta" and attr.get("name", "").lower() == "robots":
            self.nofollow |= "nofollow" in attr.get("content", "").lower()
        elif tag in ("a", "area") and "href" in attr and not self._nofollow(attr):
            self.hrefs.append(attr["href"])

    @staticmethod
    def _nofollow(attr: dict[str, str]) -> bool:
        return "nofollow" in attr.get("rel", "").lower().split()


def _accept(url: str, domain: str) -> str | None:
    """The canonical URL if `url` is a valid in-scope http(s) URL, else None."""
    if len(url) > 2048:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return None
    host = (parts.hostname or "").removesuffix(".")
    if (
        parts.scheme not in ("http", "https")
        or parts.username is not None
        or not _HOST_RE.fullmatch(host)
        or not (host == domain or host.endswith("." + domain))
    ):
        return None
    return canonical_url(url)


def _independent_crawl(site: Site, domain: str) -> tuple[set[str], set[str], set[str]]:
    """Crawl `site.routes` in process: (discovered, fetched, robots-blocked)."""

    def final(url: str) -> Response | None:
        parts = urlsplit(url)
        route = site.routes.get(route_key(parts.netloc, parts.path + "?" + parts.query))
        return route.responses[-1] if route else None

    def allowed(url: str) -> bool:
        robots = final(urljoin(url, "/robots.txt"))
        if robots is None or 400 <= robots.status < 500:
            return True
        if robots.status >= 500:
            return False
        return bool(Protego.parse(robots.body.decode()).can_fetch(url, "trawl"))

    hops: dict[str, int] = {}
    queue: deque[str] = deque()
    fetched: set[str] = set()
    blocked: set[str] = set()

    def discover(url: str | None, hop: int) -> None:
        if url is not None and url not in hops:
            hops[url] = hop
            queue.append(url)

    for seed in site.seeds:
        discover(canonical_url(seed), 0)
    while queue:
        url = queue.popleft()
        if not allowed(url):
            blocked.add(url)
            continue
        fetched.add(url)
        answer = final(url)
        if answer is None:
            continue
        location = dict(answer.headers).get("Location")
        if answer.status in (301, 302, 303, 307, 308) and location and hops[url] < 5:
            discover(_accept(urljoin(url, location.strip()), domain), hops[url] + 1)
        if answer.status == 200 and (answer.content_type or "").startswith("text/html"):
            parser = _Links()
            parser.feed(answer.body.decode())
            if not parser.nofollow:
                document = urljoin(url, parser.base) if parser.base else url
                for href in parser.hrefs:
                    discover(_accept(urljoin(document, href.strip()), domain), 0)
    return set(hops), fetched, blocked


@pytest.mark.parametrize(
    ("hosts", "pages", "seed", "domain"),
    [(4, 30, 1, "trawl.test"), (6, 12, 7, "crawl.example.test"), (4, 2, 3, "trawl.test")],
)
def test_ground_truth_matches_an_independent_crawl(
    hosts: int, pages: int, seed: int, domain: str
) -> None:
    site = generate_site(PORT, hosts=hosts, pages_per_host=pages, seed=seed, domain=domain)
    discovered, fetched, blocked = _independent_crawl(site, domain)
    assert discovered == site.ground_truth
    assert fetched == site.expected_fetches
    assert blocked == site.robots_blocked


def test_ground_truth_properties() -> None:
    site = generate_site(PORT)
    truth = site.ground_truth
    www = f"http://www.trawl.test:{PORT}"
    assert {canonical_url(s) for s in site.seeds} <= truth
    assert site.robots_blocked <= truth
    assert site.expected_fetches == truth - site.robots_blocked
    assert all(canonical_url(u) == u for u in truth)
    hosts = {urlsplit(u).hostname for u in truth}
    assert hosts == set(site.hosts)
    assert not hosts & set(site.off_scope_hosts)
    assert not [u for u in truth if u.endswith("/robots.txt") or len(u) > 2048]
    assert not [u for u in truth if re.search(r"userinfo|bad-port|bad-host|data\.html", u)]
    assert {f"{www}/r/long-{n}" for n in range(6)} <= site.expected_fetches
    assert f"{www}/r/long-6" not in truth
    assert f"{www}/r/long-7" not in truth
    never = (
        "nf-1",
        "nf-2",
        "nf-3",
        "commented",
        "scripted",
        "canonical",
        "mnf-target",
        "from-text",
        "from-pdf",
    )
    assert not {f"{www}/features/{name}.html" for name in never} & truth
    assert f"{www}/r/body-link.html" not in truth
    assert f"{www}/orphan.html" not in truth
    assert {f"{www}/private/p1.html", f"{www}/private/redirected.html"} <= site.robots_blocked
    assert f"{www}/private/open.html" in site.expected_fetches
    assert f"http://h2.trawl.test:{PORT}/private/p1.html" in site.expected_fetches
    assert f"http://h2.trawl.test:{PORT}/r/dest-307.html" in site.expected_fetches
    assert f"{www}/features/based/one.html" in site.expected_fetches
    ab = {u for u in truth if urlsplit(u).hostname == "a.b.trawl.test"}
    assert ab
    assert ab <= site.robots_blocked


def test_pages_spell_links_in_many_ways() -> None:
    site = generate_site(PORT)
    hrefs: list[str] = []
    for route in site.routes.values():
        answer = route.responses[-1]
        if answer.content_type and answer.content_type.startswith("text/html") and answer.body:
            parser = _Links()
            parser.feed(answer.body.decode())
            hrefs += parser.hrefs
    patterns = [
        r"^HTTP://[A-Z0-9.]+:",
        r"^//",
        r"^\.\./",
        r"^\./",
        r"^[a-z~]",
        r"#",
        r"utm_",
        r"gclid=",
        r"%7[Ee]",
        r"/\.\./",
        r"^\s",
        r"^mailto:",
        r"^javascript:",
    ]
    missing = [p for p in patterns if not any(re.search(p, h) for h in hrefs)]
    assert missing == []
    target = f"http://www.trawl.test:{PORT}/features/target.html?a=1&b=2"
    spellings = {
        h
        for h in hrefs
        if _accept(
            urljoin(f"http://www.trawl.test:{PORT}/features/spellings.html", h.strip()),
            "trawl.test",
        )
        == target
    }
    assert len(spellings) >= 12


def test_generation_is_deterministic() -> None:
    first, again = generate_site(PORT, seed=5), generate_site(PORT, seed=5)
    assert dict(first.routes) == dict(again.routes)
    assert first.ground_truth == again.ground_truth
    other = generate_site(PORT, seed=6)
    assert dict(other.routes) != dict(first.routes)


async def _get(
    session: aiohttp.ClientSession, port: int, host: str, target: str
) -> tuple[int, bytes, aiohttp.ClientResponse]:
    url = URL(f"http://127.0.0.1:{port}{target}", encoded=True)
    async with session.get(
        url, headers={"Host": host}, auto_decompress=False, allow_redirects=False
    ) as resp:
        return resp.status, await resp.read(), resp


async def test_live_generated_site() -> None:
    with SiteServer(lambda port: generate_site(port)) as server:
        port, www = server.port, "www.trawl.test"
        async with aiohttp.ClientSession() as session:
            wanted = (await _get(session, port, www, "/features/target.html?a=1&b=2"))[1]
            assert b"<title>Target</title>" in wanted
            for host, target in [
                ("WWW.TRAWL.TEST", "/features/target.html?b=2&a=1#top"),
                (www + ".", "/features/x/../%74arget.html?utm_source=n&a=%31&b=2&sid=9"),
            ]:
                status, body, _ = await _get(session, port, f"{host}:{port}", target)
                assert (status, body) == (200, wanted)
            statuses = [(await _get(session, port, www, "/features/flaky.html"))[0] for _ in "abc"]
            assert statuses == [503, 200, 200]
            status, body, resp = await _get(session, port, "h1.trawl.test", "/robots.txt")
            assert b"Crawl-delay: 0.3" in body
            assert resp.content_type == "text/plain"
            assert (await _get(session, port, "a.b.trawl.test", "/robots.txt"))[0] == 500
            assert (await _get(session, port, "h2.trawl.test", "/robots.txt"))[0] == 404
            status, _, resp = await _get(session, port, www, "/r/302")
            assert (status, resp.headers["Location"]) == (302, "dest-302.html")
            status, body, _ = await _get(session, port, www, "/features/bomb.html")
            assert status == 200
            assert len(body) < 200_000
            assert len(zlib.decompress(body, 31)) == 100_000_000
        log = server.requests
        assert [r.path for r in log][1] == "/features/target.html?b=2&a=1"
        assert [r.status for r in log if r.path.startswith("/features/flaky")] == [503, 200, 200]
        assert all(r.start < r.end for r in log)
        assert log[0].host == www
        addresses = server.resolve_map()
        assert addresses["www.trawl.test"] == "127.0.0.1"
        assert len(set(addresses.values())) == len(addresses)  # one address per host
        assert server.resolve_args()[:2] == ["--resolve", "www.trawl.test=127.0.0.1"]
        assert server.resolve_args()[-2:] == ["--allow-network", "127.0.0.0/8"]
        assert "www.elsewhere.test" in addresses


def _small_site(port: int) -> Site:
    return Site.build(
        port,
        {
            "http://a.test/slow": Response(body=b"slow", delay=0.3),
            "http://a.test/bare": Response(body=b"raw bytes", content_type=None),
            "http://a.test/zipped": Response(body=b"hello " * 100, gzip=True),
            "http://a.test/big": Response(body_size=3_000_000, content_type="application/x-big"),
        },
        ["http://a.test/slow"],
    )


async def test_live_overlap_gaps_and_bodies(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with SiteServer(_small_site) as server:
        port = server.port
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(_get(session, port, "a.test", "/slow") for _ in range(3)))
            await _get(session, port, "b.test", "/slow")
            await asyncio.sleep(0.05)
            await _get(session, port, "b.test", "/missing")
            status, body, resp = await _get(session, port, "a.test", "/bare")
            assert (status, body) == (200, b"raw bytes")
            assert "Content-Type" not in resp.headers
            status, body, resp = await _get(session, port, "a.test", "/zipped")
            assert resp.headers["Content-Encoding"] == "gzip"
            assert gzip.decompress(body) == b"hello " * 100
            status, body, _ = await _get(session, port, "a.test", "/big")
            assert len(body) == 3_000_000
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /big HTTP/1.1\r\nHost: a.test\r\n\r\n")
        await reader.read(1000)
        writer.close()
        await writer.wait_closed()
        for _ in range(100):
            if len(server.requests) == 9:
                break
            await asyncio.sleep(0.02)
        inflight = server.max_inflight_per_host()
        gaps = server.gaps("b.test")
    assert inflight["a.test"] == 3
    assert inflight["b.test"] == 1
    assert [r.status for r in server.requests if r.host == "b.test"] == [404, 404]
    assert len(gaps) == 1
    assert 0.04 < gaps[0] < 1.0
    assert len(server.requests) == 9
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    server.close()


def test_serve_forever_prints_port_and_stops_on_interrupt() -> None:
    # A background job of a shell without job control starts with SIGINT ignored, and a
    # child inherits that: give the server Python's own handler, as a terminal would.
    code = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from trawl.demo import generate_site, serve_forever; serve_forever(generate_site)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/features/", headers={"Host": "www.trawl.test"}
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert b"<title>Features</title>" in resp.read()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "Traceback" not in err


async def test_log_holds_every_response_the_client_has_seen() -> None:
    with SiteServer(_small_site) as server:
        async with aiohttp.ClientSession() as session:
            for count in range(1, 151):
                target = "/bare" if count % 2 else "/nothing-here"
                url = URL(f"http://127.0.0.1:{server.port}{target}", encoded=True)
                async with session.get(url, headers={"Host": "a.test"}) as resp:
                    assert resp.status in (200, 404)
                assert len(server.requests) == count


async def test_each_host_answers_on_its_own_address_or_all_on_one() -> None:
    def two_hosts(port: int) -> Site:
        routes = {"http://a.test/": Response(body=b"a"), "http://b.test/": Response(body=b"b")}
        return Site.build(port, routes, ["http://a.test/"])

    for shared, expected in ((False, ["127.0.0.1", "127.0.0.2"]), (True, ["127.0.0.1"] * 2)):
        with SiteServer(two_hosts, shared_address=shared) as server:
            addresses = server.resolve_map()
            assert [addresses["a.test"], addresses["b.test"]] == expected
            async with aiohttp.ClientSession() as session:
                for host in ("a.test", "b.test"):
                    url = URL(f"http://{addresses[host]}:{server.port}/", encoded=True)
                    async with session.get(url, headers={"Host": host}) as resp:
                        assert await resp.read() == host[0].encode()
