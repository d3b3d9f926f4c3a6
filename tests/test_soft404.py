"""Soft-404 detection: fingerprints, and whole crawls of hosts that answer every path.

``soft.test`` answers any unknown path with status 200 and an error page that repeats
the path asked for and links to a page no crawler should reach; ``normal.test``
answers unknown paths with a real 404; ``guarded.test`` behaves like soft.test but its
robots.txt forbids the probe; ``huge.test`` answers every path with the same page, too
large to be an error page.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CrawlOutcome, CrawlRunner, is_page, page_requests
from trawl.config import Limits, Politeness
from trawl.demo import Response, Site, SiteServer
from trawl.extract.soft404 import MAX_DISTANCE, PROBE_PREFIX, distance, fingerprint, probe_url
from trawl.extract.urls import normalize
from trawl.store.sqlite.store import DB_NAME
from trawl.store.values import State

DELAY = 0.05
TOLERANCE = 0.02


def error_page(path: str, when: str = "2024-05-01 10:00:00") -> bytes:
    """The page a soft-404 host serves for ``path``: it names the path and the time."""
    return (
        "<!doctype html><html><head><title>Page not found</title>"
        "<style>body { font: 12px serif }</style><script>track('404')</script></head>"
        f"<body><h1>Sorry!</h1><p>We looked everywhere but {path} is not here.</p>"
        "<p>Maybe it moved, or it never existed. Go back to the <a href='/'>home page</a> "
        "or browse <a href='/from-error-page'>our picks</a>.</p>"
        f"<footer>Served at {when}</footer></body></html>"
    ).encode()


def article(title: str, *hrefs: str) -> Response:
    """A real page with its own words and links."""
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in hrefs)
    text = f"{title}: harbour tide rope vessel catch, the crew hauled the nets at dawn."
    return Response(body=f"<!doctype html><title>{title}</title><p>{text}</p>{anchors}".encode())


def answer_everything(target: str) -> Response:
    """Status 200 and the error page for every path without a route."""
    return Response(body=error_page(target, when=f"2024-05-01 10:00:{len(target) % 60:02d}"))


def answer_hugely(target: str) -> Response:
    """Status 200 and one page of 1.5 MB for every path without a route."""
    return Response(body=b"<!doctype html><p>" + b"all of our words, again and again. " * 45_000)


def soft_site(port: int) -> Site:
    """A soft-404 host, a host with real 404s, a soft-404 host whose robots.txt forbids
    the probe, and a host whose every page is too large to be an error page."""
    robots = Response(body=b"User-agent: *\nDisallow: /trawl-soft404-\n", content_type="text/plain")
    return Site.build(
        port,
        {
            "http://soft.test/": article("Home", "/real.html", "/missing-1", "/gone/missing-2"),
            "http://soft.test/real.html": article("Real", "/real2.html"),
            "http://soft.test/real2.html": article("Also real", "/"),
            "http://normal.test/": article("Home", "/page.html", "/missing"),
            "http://normal.test/page.html": article("Page", "/"),
            "http://guarded.test/robots.txt": robots,
            "http://guarded.test/": article("Home", "/missing-3"),
            "http://huge.test/": article("Home", "/missing-4"),
        },
        ["http://soft.test/", "http://normal.test/", "http://guarded.test/", "http://huge.test/"],
        generated={
            "soft.test": answer_everything,
            "guarded.test": answer_everything,
            "huge.test": answer_hugely,
        },
    )


def probes(server: SiteServer) -> Counter[str]:
    """Soft-404 probe requests per host."""
    return Counter(r.host for r in server.requests if r.path.startswith(PROBE_PREFIX))


def counters(outcome: CrawlOutcome) -> Counter[str]:
    """Every counter the crawl stored."""
    with sqlite3.connect(outcome.data_dir / DB_NAME) as db:
        return Counter(dict(db.execute("SELECT name, value FROM counters").fetchall()))


# -- fingerprints --------------------------------------------------------------------------


def test_error_pages_for_different_paths_share_a_fingerprint() -> None:
    probe = fingerprint(
        error_page("/trawl-soft404-0123abcd"), "http://a.test/trawl-soft404-0123abcd"
    )
    other = fingerprint(
        error_page("/shop/item-17?colour=red", when="2025-12-31 23:59:59"),
        "http://a.test/shop/item-17?colour=red",
    )
    real = fingerprint(article("Real").body, "http://a.test/real.html")
    assert probe is not None
    assert other is not None
    assert real is not None
    assert distance(probe, other) <= MAX_DISTANCE
    assert distance(probe, real) > MAX_DISTANCE


def test_pages_without_words_have_no_fingerprint() -> None:
    for body in (b"", b"<img src=a.png>", b"<script>var words = 1</script>", b"<p>404 2024</p>"):
        assert fingerprint(body, "http://a.test/x") is None


def test_distance_counts_differing_bits() -> None:
    assert distance(-1, 0) == 64
    assert distance(-(2**63), 2**63 - 1) == 64
    assert distance(5, 5) == 0
    assert distance(0b1010, 0b0110) == 2


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_fingerprint_never_raises_and_fits_a_signed_64_bit_column(body: bytes) -> None:
    found = fingerprint(body, "http://a.test/x")
    assert found is None or -(2**63) <= found < 2**63


def test_probe_urls_are_normalised_random_paths_on_the_same_host() -> None:
    rng = random.Random(7)
    first = probe_url("http://a.test:8080/x/y?q=1", rng)
    second = probe_url("http://a.test:8080/", rng)
    assert first.startswith("http://a.test:8080" + PROBE_PREFIX)
    assert len(first) == len("http://a.test:8080" + PROBE_PREFIX) + 16
    assert first != second
    assert normalize(first) == first


# -- crawls --------------------------------------------------------------------------------


async def test_soft_404_pages_are_recorded_and_their_links_not_followed(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(soft_site) as server:
        result = await crawl(server, politeness=Politeness(delay=DELAY, response_factor=0.0))
        requests = page_requests(server)
        probed = probes(server)
        first_requests: dict[str, str] = {}
        for record in sorted(server.requests, key=lambda r: r.start):
            if record.path != "/robots.txt":
                first_requests.setdefault(record.host, record.path)
        soft_gaps = server.gaps("soft.test")
    site, rows = server.site, result.rows

    # One probe per host, before its first page, spaced like any request to the host.
    assert probed == {"soft.test": 1, "normal.test": 1, "huge.test": 1}
    assert first_requests["soft.test"].startswith(PROBE_PREFIX)
    assert first_requests["normal.test"].startswith(PROBE_PREFIX)
    assert min(soft_gaps) >= DELAY - TOLERANCE

    # The host's error pages are recorded as soft 404s and their links not followed.
    for path in ("/missing-1", "/gone/missing-2"):
        row = rows[site.url("soft.test", path)]
        assert (row.state, row.status, row.error) == (State.DONE, 200, "soft_404")
    assert site.url("soft.test", "/from-error-page") not in rows
    # Its real pages, the home page included, are crawled as usual.
    for path in ("/", "/real.html", "/real2.html"):
        assert rows[site.url("soft.test", path)].error is None
        assert requests[site.url("soft.test", path)] == 1

    # A host that answers 404 is not affected.
    normal = {url: row for url, row in rows.items() if "normal.test" in url}
    assert {row.error for row in normal.values()} == {None}
    assert rows[site.url("normal.test", "/missing")].status == 404
    assert rows[site.url("normal.test", "/page.html")].status == 200

    # robots.txt forbids the probe on guarded.test: no probe, nothing recognised there.
    assert rows[site.url("guarded.test", "/missing-3")].error is None
    assert requests[site.url("guarded.test", "/from-error-page")] == 1

    # A page too large to be an error page is not compared at all.
    assert rows[site.url("huge.test", "/missing-4")].error is None

    stored = counters(result)
    assert stored["soft_404"] == 2
    assert stored["soft_404_probes"] == 3


async def test_the_probe_answer_is_kept_across_a_resume(crawl: CrawlRunner, tmp_path: Path) -> None:
    data_dir = tmp_path / "resumed"
    with SiteServer(soft_site) as server:
        await crawl(
            server,
            limits=Limits(max_pages=2),
            concurrency=1,
            data_dir=data_dir,
            expect_state="page budget reached",
        )
        assert probes(server)["soft.test"] == 1
        result = await crawl(server, data_dir=data_dir)
        probed = probes(server)
    site = server.site
    assert probed == {"soft.test": 1, "normal.test": 1, "huge.test": 1}
    assert result.rows[site.url("soft.test", "/missing-1")].error == "soft_404"
    assert site.url("soft.test", "/from-error-page") not in result.rows


async def test_detection_can_be_switched_off(crawl: CrawlRunner) -> None:
    with SiteServer(soft_site) as server:
        result = await crawl(server, soft_404=False)
        probed = probes(server)
    site = server.site
    assert not probed
    assert result.rows[site.url("soft.test", "/missing-1")].error is None
    assert result.rows[site.url("soft.test", "/from-error-page")].state is State.DONE


def test_the_command_line_switch_turns_the_probe_off(tmp_path: Path) -> None:
    with SiteServer(soft_site) as server:
        command = [
            sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
            "--data-dir", str(tmp_path / "data"), "--delay", "0", "--no-progress", "--json",
        ]  # fmt: skip
        done = subprocess.run(
            [*command, "--no-soft-404"], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        assert not probes(server)
        assert sum(1 for r in server.requests if is_page(r.path)) > 0
