"""One crawl of a normal site mixed with hostile hosts: every bad host is contained.

A generated site (`SiteServer`) is served next to a `HostileServer` whose hosts drip,
never end, send a 1 GiB gzip bomb, garbage instead of HTTP, a reset mid-body, a 100 KB
header, pages in broken and mixed encodings, binary as text/html, and robots.txt files
that are huge, binary or a redirect loop. Every host is under ``trawl.test``, so all are
in scope, and the normal site's home pages link the hostile pages. The crawl runs once
per module as a real ``trawl crawl`` process; each test then checks one case against
three witnesses: the store's rows, the normal server's log and the hostile server's log.
Memory is measured in crawls of their own, with one hostile page each and no extract
worker, so the crawl process's high-water mark is the crawler's peak for that page.

Property tests at the end feed the URL filter and the parser what a hostile server can
send: any string (lone surrogates included, which is how trawl's HTTP client hands over
undecodable header bytes) and any bytes under any charset label.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import functools
import gzip
import html
import http.client
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import UrlRow, expected_hits, read_rows
from hostile_server import (
    Answer,
    HostileRecord,
    HostileServer,
    drip,
    endless,
    garbage,
    gzip_bomb,
    huge_header,
    page,
    raw,
    reset_mid_body,
)
from test_robots_hostile import robots_routes
from trawl.config import Limits, ScopeConfig
from trawl.demo import Route, Site, SiteServer, canonical_url, generate_site
from trawl.extract.parser import parse_html
from trawl.extract.pool import Extractor, ExtractSettings
from trawl.extract.soft404 import PROBE_PREFIX
from trawl.extract.urls import DEFAULT_RULES, Rejection, normalize
from trawl.fetch.fetcher import FetchError
from trawl.store.values import State

MAX_BODY = Limits().max_body
"""The crawl runs with the default body cap, so the bomb meets what users get."""
TIMEOUT = 2.0
ATTEMPTS = 2
RSS_LIMIT = 200 * 1024 * 1024
BOMB_SIZE = 1 << 30
BINARY_SIZE = 256 * 1024


def leaf() -> Answer:
    """A small page without links."""
    return page(b"<!doctype html><title>leaf</title><p>nothing to follow</p>")


def links_page(*hrefs: str) -> Answer:
    """A small page linking ``hrefs``."""
    anchors = "".join(f'<a href="{html.escape(href)}">{html.escape(href)}</a>' for href in hrefs)
    return page(f"<!doctype html><title>links</title>{anchors}".encode())


# -- the encodings host: where the links are decodable, they must be found --------------

DECLARED_UTF8 = (
    b"<!doctype html><title>caf\xe9 \x93quoted\x94</title>"
    b"<p>invalid: \xff\xfe \xc3\x28 \xed\xa0\x80 \xf0\x28\x8c\x28 \xc0\xaf cut \xe6\x97</p>"
    b'<a href="/enc/one.html">one</a><p>'
    + "Grüße".encode()
    + b" "
    + "Grüße".encode("latin-1")
    + b" "
    + "日本".encode("shift_jis")
    + b'</p><a href="/enc/caf\xe9.html">a latin-1 byte in a link</a><a href="/enc/'
    + "日本".encode()
    + b'.html">utf-8 in a link</a>'
)
"""Says UTF-8, mixes in windows-1252, Shift_JIS and invalid sequences."""

META_SHIFT_JIS = (
    '<!doctype html><meta charset="shift_jis"><title>日本語</title><p>ページ</p>'.encode(
        "shift_jis"
    )
    + b'<a href="/enc/two.html">two</a>'
    + '<a href="/enc/東京.html">東京</a>'.encode("shift_jis")
    + b"<p>\xef\xbb\xbf a stray UTF-8 BOM and a lone lead byte \x82</p>"
    + b'<a href="/enc/three.html">three</a>'
)
"""Shift_JIS declared only in a meta tag, with UTF-8 and a cut character mixed in."""

BOGUS_LABEL = (
    b'<!doctype html><meta charset="utf-16"><title>x\x00y</title><p>\x00\x00 '
    + "Grüße".encode()
    + b'</p><a href="/enc/four.html">four</a>'
)
"""Served with an unknown charset label; claims UTF-16 in ASCII and holds NUL bytes."""

UTF16_BOM = (
    codecs.BOM_UTF16_LE
    + '<!doctype html><title>Grüße</title><a href="/enc/five.html">five</a>'.encode("utf-16-le")
    + b"\x00"
)
"""UTF-16 with a byte-order mark (which beats the Latin-1 it is served as) and an odd end."""

ENCODING_PAGES: Mapping[str, tuple[bytes, str]] = {
    "/declared-utf8.html": (DECLARED_UTF8, "text/html; charset=utf-8"),
    "/meta-shift-jis.html": (META_SHIFT_JIS, "text/html"),
    "/bogus-label.html": (BOGUS_LABEL, "text/html; charset=x-no-such-charset"),
    "/utf16-bom.html": (UTF16_BOM, "text/html; charset=iso-8859-1"),
}
ENCODING_LINKS = (
    "/enc/one.html",
    "/enc/caf%EF%BF%BD.html",  # the undecodable byte becomes U+FFFD, as in a browser
    "/enc/%E6%97%A5%E6%9C%AC.html",
    "/enc/two.html",
    "/enc/%E6%9D%B1%E4%BA%AC.html",  # decoded from Shift_JIS
    "/enc/three.html",
    "/enc/four.html",
    "/enc/five.html",
)

BINARY = b'<!doctype html><a href="/before-binary.html">b</a>' + random.Random(4).randbytes(
    BINARY_SIZE
)
BOMB_HEAD = b'<!doctype html><title>bomb</title><a href="/after-bomb.html">more</a><p>'
RESET_BODY = b'<!doctype html><a href="/never-seen.html">x</a>' + b"<p>lost</p>" * 10_000


def hostile_routes() -> dict[str, Answer]:
    """Every hostile answer of the crawl, by URL (any port)."""
    routes: dict[str, Answer] = {
        "http://drip.trawl.test/": drip(interval=1.0),
        "http://endless.trawl.test/": endless(),
        "http://bomb.trawl.test/": gzip_bomb(BOMB_SIZE, head=BOMB_HEAD),
        "http://bomb.trawl.test/after-bomb.html": leaf(),
        "http://garbage.trawl.test/random": garbage(),
        "http://garbage.trawl.test/bad-length": raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: -5\r\n\r\n<p>"
        ),
        "http://reset.trawl.test/": reset_mid_body(RESET_BODY),
        "http://header.trawl.test/": huge_header(100 * 1024),
        "http://binary.trawl.test/": page(BINARY, content_type="text/html"),
        "http://binary.trawl.test/before-binary.html": leaf(),
        "http://robots-huge.trawl.test/": links_page(
            "/early/page.html", "/late/page.html", "/anything.html"
        ),
        "http://robots-binary.trawl.test/": links_page("/secret/page.html", "/open.html"),
        "http://robots-loop.trawl.test/": links_page("/anything.html"),
        **robots_routes(),
    }
    for path, (body, content_type) in ENCODING_PAGES.items():
        routes[f"http://encodings.trawl.test{path}"] = page(body, content_type=content_type)
    for path in ENCODING_LINKS:
        routes[f"http://encodings.trawl.test{path}"] = leaf()
    for host in ("robots-huge", "robots-binary", "robots-loop"):
        for path in ("/early/page.html", "/late/page.html", "/anything.html", "/open.html"):
            routes[f"http://{host}.trawl.test{path}"] = leaf()
    return routes


HOSTILE_ENTRIES = (
    ("drip.trawl.test", "/"),
    ("endless.trawl.test", "/"),
    ("bomb.trawl.test", "/"),
    ("garbage.trawl.test", "/random"),
    ("garbage.trawl.test", "/bad-length"),
    ("reset.trawl.test", "/"),
    ("header.trawl.test", "/"),
    ("binary.trawl.test", "/"),
    ("robots-huge.trawl.test", "/"),
    ("robots-binary.trawl.test", "/"),
    ("robots-loop.trawl.test", "/"),
    *(("encodings.trawl.test", path) for path in ENCODING_PAGES),
)
"""The hostile pages the normal site links to."""


def with_links(site: Site, links: list[str]) -> Site:
    """``site`` with ``links`` spread over the home pages of the hosts it fetches."""
    homes = [host for host in site.hosts if site.url(host, "/") in site.expected_fetches]
    routes = dict(site.routes)
    for index, host in enumerate(homes):
        route = routes[(host, "/")]
        *before, home = route.responses
        anchors = "".join(f'<a href="{href}">hostile</a>' for href in links[index :: len(homes)])
        body = home.body.replace(b"</main>", anchors.encode() + b"</main>", 1)
        routes[(host, "/")] = Route((*before, dataclasses.replace(home, body=body)))
    return dataclasses.replace(site, routes=MappingProxyType(routes))


# -- the crawl ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MixedCrawl:
    """What the crawl of the mixed site left behind."""

    site: Site
    hostile: HostileServer
    returncode: int
    stderr: str
    summary: Mapping[str, object]
    rows: Mapping[str, UrlRow]
    normal_requests: Counter[str]
    hostile_requests: list[HostileRecord]

    def row(self, host: str, path: str) -> UrlRow:
        return self.rows[self.hostile.url(host, path)]

    def hits(self, host: str, path: str | None = None) -> list[HostileRecord]:
        return [
            record
            for record in self.hostile_requests
            if record.host == host and (path is None or record.path == path)
        ]


def is_probe(url_or_path: str) -> bool:
    """Whether a request is trawl's soft-404 probe, which every host gets once."""
    return urlsplit(url_or_path).path.startswith(PROBE_PREFIX)


def crawl_command(seeds: tuple[str, ...], resolve_args: list[str], data_dir: Path) -> list[str]:
    """``trawl crawl`` with fast politeness, short timeouts and few attempts."""
    return [
        sys.executable, "-m", "trawl", "crawl", *seeds, *resolve_args,
        "--allow-network", "127.0.0.0/8", "--data-dir", str(data_dir),
        "--json", "--no-progress", "--delay", "0", "--response-factor", "0",
        "--per-ip", "64", "--timeout", str(TIMEOUT), "--connect-timeout", "1",
        "--retry-attempts", str(ATTEMPTS), "--retry-base", "0.05", "--retry-cap", "0.2",
    ]  # fmt: skip


def peak_rss(pid: int) -> int:
    """The process's own high-water mark (``VmHWM``) in bytes, 0 once it is gone.

    Not ``ru_maxrss`` from ``os.wait4``: that also counts the moment between fork and
    exec, when the child still shares the test process's memory.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


def run_trawl(command: list[str], errors: Path) -> tuple[int, str, int]:
    """Run trawl to its end: exit code, stdout and the crawl process's peak RSS in bytes
    (its high-water mark, read until it exits); stderr goes to ``errors``."""
    with errors.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, peak_rss(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert process.stdout is not None
    with process.stdout:
        out = process.stdout.read()
    peak = max(peak, peak_rss(process.pid))  # a zombie's status is gone; this is the last look
    done.set()
    sampler.join()
    process.wait()
    return process.returncode, out, peak


def warm_up(server: SiteServer) -> float:
    """Ask once for the generated site's own gzip bomb, which the server compresses on the
    first request (about half a second) and then caches, so that no fetch of the crawl
    can time out waiting for it; returns the moment after which requests are the crawl's."""
    host = server.site.hosts[0]
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("GET", "/features/bomb.html", headers={"Host": f"{host}:{server.port}"})
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    assert response.status == 200
    return time.monotonic()


def crawl_requests(server: SiteServer, since: float) -> Counter[str]:
    """How often the crawl asked for each page of ``server`` (robots.txt and soft-404
    probes aside), in ground-truth spelling."""
    return Counter(
        canonical_url(server.site.url(record.host, record.path))
        for record in server.requests
        if record.start >= since and record.path != "/robots.txt" and not is_probe(record.path)
    )


def mixed_site(port: int, links: list[str]) -> Site:
    """The generated site whose home pages also link ``links``."""
    return with_links(generate_site(port, hosts=5, pages_per_host=12), links)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixedCrawl]:
    with HostileServer(hostile_routes()) as hostile:
        links = [hostile.url(host, path) for host, path in HOSTILE_ENTRIES]
        with SiteServer(functools.partial(mixed_site, links=links)) as normal:
            work = tmp_path_factory.mktemp("mixed")
            data_dir = work / "crawl"
            resolve_args = [*normal.resolve_args(), *hostile.resolve_args()]
            command = crawl_command(normal.site.seeds, resolve_args, data_dir)
            started = warm_up(normal)
            returncode, out, _ = run_trawl(command, work / "stderr.txt")
            yield MixedCrawl(
                site=normal.site,
                hostile=hostile,
                returncode=returncode,
                stderr=(work / "stderr.txt").read_text(),
                summary=json.loads(out) if returncode == 0 else {},
                rows=read_rows(data_dir),
                normal_requests=crawl_requests(normal, started),
                hostile_requests=[r for r in hostile.requests if not is_probe(r.path)],
            )


def test_the_crawl_finishes(mixed: MixedCrawl) -> None:
    assert mixed.returncode == 0, mixed.stderr
    assert mixed.summary["state"] == "done"
    assert mixed.summary["queued"] == 0
    assert "Traceback" not in mixed.stderr


def test_every_normal_page_is_fetched_exactly_once(mixed: MixedCrawl) -> None:
    site = mixed.site
    assert set(mixed.normal_requests) == site.expected_fetches
    wrong = {u: n for u, n in mixed.normal_requests.items() if n != expected_hits(site, u)}
    assert wrong == {}
    normal_rows = {url: row for url, row in mixed.rows.items() if urlsplit(url).port == site.port}
    assert set(normal_rows) == site.ground_truth
    done = {url for url, row in normal_rows.items() if row.state is State.DONE}
    assert done == site.expected_fetches


def test_every_hostile_url_is_settled(mixed: MixedCrawl) -> None:
    found = {
        ("bomb.trawl.test", "/after-bomb.html"),
        ("binary.trawl.test", "/before-binary.html"),
        *(("encodings.trawl.test", path) for path in ENCODING_LINKS),
        *(("robots-huge.trawl.test", p) for p in ("/early/page.html", "/late/page.html")),
        ("robots-huge.trawl.test", "/anything.html"),
        ("robots-binary.trawl.test", "/secret/page.html"),
        ("robots-binary.trawl.test", "/open.html"),
        ("robots-loop.trawl.test", "/anything.html"),
    }
    expected = {mixed.hostile.url(host, path) for host, path in {*HOSTILE_ENTRIES, *found}}
    hostile = {
        url: row for url, row in mixed.rows.items() if urlsplit(url).port == mixed.hostile.port
    }
    assert set(hostile) == expected
    unsettled = {url for url, row in hostile.items() if row.state in (State.QUEUED, State.CLAIMED)}
    assert unsettled == set()


def test_peak_rss_stays_bounded_despite_a_1_gib_gzip_bomb(tmp_path: Path) -> None:
    routes = {
        "http://bomb.trawl.test/": gzip_bomb(BOMB_SIZE, head=BOMB_HEAD),
        "http://bomb.trawl.test/after-bomb.html": leaf(),
    }
    with HostileServer(routes) as hostile:
        bomb = hostile.url("bomb.trawl.test", "/")
        with SiteServer(functools.partial(mixed_site, links=[bomb])) as normal:
            resolve_args = [*normal.resolve_args(), *hostile.resolve_args()]
            command = crawl_command(normal.site.seeds, resolve_args, tmp_path / "crawl")
            warm_up(normal)
            # One process does everything, so its peak is the crawler's.
            returncode, _, peak = run_trawl([*command, "--parse-workers", "0"], tmp_path / "err")
    assert returncode == 0, (tmp_path / "err").read_text()
    row = read_rows(tmp_path / "crawl")[bomb]
    assert (row.truncated, row.length) == (True, MAX_BODY)
    assert 0 < peak < RSS_LIMIT


def test_a_drip_is_ended_by_the_total_timeout(mixed: MixedCrawl) -> None:
    row = mixed.row("drip.trawl.test", "/")
    assert (row.state, row.error, row.attempts) == (State.FAILED, FetchError.TIMEOUT, ATTEMPTS)
    hits = mixed.hits("drip.trawl.test", "/")
    assert len(hits) == ATTEMPTS
    assert all(record.hung_up for record in hits)


def test_an_endless_body_is_cut_at_the_body_cap(mixed: MixedCrawl) -> None:
    row = mixed.row("endless.trawl.test", "/")
    assert (row.state, row.status, row.truncated, row.length) == (State.DONE, 200, True, MAX_BODY)
    [hit] = mixed.hits("endless.trawl.test", "/")
    assert hit.hung_up


def test_a_gzip_bomb_is_cut_at_the_decompressed_cap(mixed: MixedCrawl) -> None:
    row = mixed.row("bomb.trawl.test", "/")
    assert (row.state, row.status, row.truncated, row.length) == (State.DONE, 200, True, MAX_BODY)
    assert len(mixed.hits("bomb.trawl.test", "/")) == 1
    # What was read of it is still a page: the link in its head is followed.
    after = mixed.row("bomb.trawl.test", "/after-bomb.html")
    assert (after.state, after.status) == (State.DONE, 200)


@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("garbage.trawl.test", "/random"),
        ("garbage.trawl.test", "/bad-length"),
        ("reset.trawl.test", "/"),
        ("header.trawl.test", "/"),
    ],
    ids=["garbage", "negative-content-length", "reset-mid-body", "100-kb-header"],
)
def test_broken_http_is_a_protocol_error(mixed: MixedCrawl, host: str, path: str) -> None:
    row = mixed.row(host, path)
    assert (row.state, row.error, row.attempts) == (State.FAILED, FetchError.PROTOCOL, ATTEMPTS)
    assert len(mixed.hits(host, path)) == ATTEMPTS


def test_a_reset_page_yields_nothing(mixed: MixedCrawl) -> None:
    assert mixed.hostile.url("reset.trawl.test", "/never-seen.html") not in mixed.rows


def test_links_in_broken_and_mixed_encodings_are_found(mixed: MixedCrawl) -> None:
    host = "encodings.trawl.test"
    stored = {url for url in mixed.rows if url.split("/")[2].startswith(f"{host}:")}
    expected = {mixed.hostile.url(host, path) for path in (*ENCODING_PAGES, *ENCODING_LINKS)}
    assert stored == expected
    assert {(mixed.rows[url].state, mixed.rows[url].status) for url in stored} == {
        (State.DONE, 200)
    }
    paths = Counter(record.path for record in mixed.hits(host))
    assert paths == Counter(["/robots.txt", *ENCODING_PAGES, *ENCODING_LINKS])


def test_binary_served_as_html_is_read_and_parsed_without_harm(mixed: MixedCrawl) -> None:
    row = mixed.row("binary.trawl.test", "/")
    assert (row.state, row.status, row.truncated, row.length) == (
        State.DONE, 200, False, len(BINARY)
    )  # fmt: skip
    before = mixed.row("binary.trawl.test", "/before-binary.html")
    assert (before.state, before.status) == (State.DONE, 200)


def test_a_5_mb_robots_txt_counts_up_to_500_kib(mixed: MixedCrawl) -> None:
    host = "robots-huge.trawl.test"
    assert mixed.row(host, "/early/page.html").state is State.BLOCKED
    assert mixed.row(host, "/late/page.html").state is State.DONE
    assert mixed.row(host, "/anything.html").state is State.DONE
    assert len(mixed.hits(host, "/robots.txt")) == 1


def test_a_binary_robots_txt_counts_where_it_parses(mixed: MixedCrawl) -> None:
    host = "robots-binary.trawl.test"
    assert mixed.row(host, "/secret/page.html").state is State.BLOCKED
    assert mixed.row(host, "/open.html").state is State.DONE


def test_a_robots_redirect_loop_means_no_restrictions(mixed: MixedCrawl) -> None:
    host = "robots-loop.trawl.test"
    assert mixed.row(host, "/anything.html").state is State.DONE
    robots = [r for r in mixed.hits(host) if r.path in ("/robots.txt", "/robots-loop.txt")]
    assert len(robots) == 6


def test_a_page_of_dense_markup_keeps_peak_rss_bounded(tmp_path: Path) -> None:
    # 10 MB of <p>x</p> made a 500 MB tree when parsed at once (trawl.extract.parser.PARSE_PIECE).
    routes = {"http://dense.trawl.test/": endless(b"<p>x</p>")}
    with HostileServer(routes) as server:
        seeds = (server.url("dense.trawl.test", "/"),)
        command = crawl_command(seeds, server.resolve_args(), tmp_path / "crawl")
        returncode, _, peak = run_trawl([*command, "--parse-workers", "0"], tmp_path / "err")
    assert returncode == 0, (tmp_path / "err").read_text()
    row = read_rows(tmp_path / "crawl")[seeds[0]]
    assert (row.truncated, row.length) == (True, MAX_BODY)
    assert peak < RSS_LIMIT


# -- the hostile server itself -----------------------------------------------------------


async def raw_get(server: HostileServer, host: str, path: str, limit: int) -> bytes:
    """Up to ``limit`` bytes of the raw response to a GET, read straight off a socket."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{server.port}\r\n\r\n".encode())
        await writer.drain()
        data = b""
        while len(data) < limit:
            chunk = await reader.read(limit - len(data))
            if not chunk:
                break
            data += chunk
        return data
    finally:
        writer.close()


async def test_the_gzip_bomb_is_a_valid_gzip_stream() -> None:
    routes = {"http://b.test/small": gzip_bomb(8 << 20, head=b"<p>"), "http://b.test/": gzip_bomb()}
    with HostileServer(routes) as server:
        small = await raw_get(server, "b.test", "/small", 1 << 20)
        big = await raw_get(server, "b.test", "/", 4096)
    head, _, body = small.partition(b"\r\n\r\n")
    assert b"Content-Encoding: gzip" in head
    assert gzip.decompress(body) == b"<p>" + bytes(8 << 20)  # checksum and size hold
    length = next(
        int(line.split(b":")[1])
        for line in big.split(b"\r\n")
        if line.startswith(b"Content-Length")
    )
    assert 500_000 < length < 2_000_000  # 1 GiB of content in about 1 MB on the wire


# -- property tests: whatever a server sends, nothing raises -----------------------------

_LABELS = st.sampled_from(
    [
        "utf-8", "UTF-16", "utf-16be", "shift_jis", "euc-jp", "iso-2022-jp", "gb18030",
        "big5", "koi8-r", "windows-1252", "x-user-defined", "iso-8859-8-i", "euc-kr",
        "utf-7", "rot13", "base64", "bogus", "",
    ]
)  # fmt: skip
_BOMS = st.sampled_from([b"", codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE])


@settings(max_examples=300, deadline=None)
@given(
    bom=_BOMS,
    meta=st.none() | _LABELS,
    transport=st.none() | _LABELS,
    body=st.binary(max_size=4096),
)
def test_the_parser_never_raises_on_any_bytes_in_any_encoding(
    bom: bytes, meta: str | None, transport: str | None, body: bytes
) -> None:
    declared = b"" if meta is None else f'<meta charset="{meta}">'.encode()
    page = parse_html(bom + declared + body, charset=transport)
    assert all(isinstance(link, str) and link for link in page.links)


SEED = "http://www.trawl.test/"
_EXTRACTOR = Extractor(
    ExtractSettings(
        seeds=(SEED,), scope=ScopeConfig(), rules=DEFAULT_RULES, agent="trawl",
        honour_nofollow=True, max_links=20,
    )
)  # fmt: skip
_CONTENT_TYPES = (
    st.none() | st.text(max_size=30) | _LABELS.map(lambda label: f"text/html; charset={label}")
)
_MARKUP = st.sampled_from(
    [
        b"<a href=", b"<area href=", b"<base href=", b"<link rel=canonical href=",
        b"<meta name=robots content=nofollow>", b"'", b'"', b">", b" ", b"x", b"/", b"//",
        b"https://www.trawl.test/", b"http://h1.trawl.test:8080/", b"http://elsewhere.test/",
        b"?", b"#", b"%", b"%zz", b"..", b"\xff", b"\x00", b"\xc3", b"&amp;", b"&#0;",
    ]
)  # fmt: skip
_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
"""Any code points, lone surrogates included: trawl's HTTP client hands over undecodable
header bytes (a Location, an X-Robots-Tag) as surrogate escapes."""


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=4096) | st.lists(_MARKUP, max_size=60).map(b"".join),
    content_type=_CONTENT_TYPES,
    robots_tags=st.lists(_ANY_TEXT, max_size=3),
)
def test_the_extract_stage_never_raises_and_keeps_only_crawlable_links(
    body: bytes, content_type: str | None, robots_tags: list[str]
) -> None:
    found = _EXTRACTOR.extract(SEED + "page.html", 1, body, content_type, robots_tags)
    assert len(found.links) <= 20
    for link in found.links:
        assert normalize(link.url) == link.url
        assert (urlsplit(link.url).hostname or "").endswith(".trawl.test")


_URL_STARTS = st.sampled_from(["", "/", "//x.test", "http://a.test/", "HTTP://[::1]:80/p?q#f"])


@settings(max_examples=500, deadline=None)
@given(
    href=st.tuples(_URL_STARTS, _ANY_TEXT).map("".join),
    base=st.none() | _ANY_TEXT | st.sampled_from([SEED, "https://[::1]:8/a/"]),
)
def test_normalize_never_raises_and_is_idempotent_for_any_base(href: str, base: str | None) -> None:
    once = normalize(href, base)
    if isinstance(once, Rejection):
        return
    assert once.startswith(("http://", "https://"))
    assert normalize(once) == once
    assert normalize(once, base) == once
