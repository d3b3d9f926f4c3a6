"""End-to-end crawls against the live loopback test site.

Each test serves a site on 127.0.0.1, crawls it in-process and then checks three
witnesses that do not depend on each other: the crawl's summary, the rows in its store,
and the server's own log of every request (which spellings, how often, when, how many at
once). The generated site carries its exact ground truth; the small sites here are built
for one behaviour each.
"""

from __future__ import annotations

import dataclasses
import itertools
from urllib.parse import urlsplit

import pytest

from conftest import FAST_RETRY, CrawlRunner, expected_hits, page_requests, robots_requests
from trawl.config import Breaker, Limits, Politeness
from trawl.demo import Response, Route, Site, SiteServer, generate_site
from trawl.demo.generator import CRAWL_DELAY
from trawl.fetch.retry import RetryPolicy
from trawl.store.values import State

TOLERANCE = 0.02
"""Seconds of clock slack allowed when comparing server-side gaps with a delay."""


def html(*hrefs: str, title: str = "page") -> bytes:
    """A small HTML page linking ``hrefs``."""
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in hrefs)
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>{anchors}</body>".encode()
    )


def page(*hrefs: str, delay: float = 0.0) -> Response:
    """An HTML page response linking ``hrefs``."""
    return Response(body=html(*hrefs), delay=delay)


def moved(status: int, location: str) -> Response:
    """A redirect whose body links a page no crawler may follow."""
    return Response(
        status=status, body=html("/from-redirect-body"), headers=(("Location", location),)
    )


def robots(*lines: str) -> Response:
    """A robots.txt response."""
    return Response(body="\n".join(lines).encode(), content_type="text/plain")


# -- the generated site ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "hosts", "pages_per_host"), [(1, 4, 30), (7, 6, 45)], ids=["small", "larger"]
)
async def test_generated_site_matches_its_ground_truth(
    crawl: CrawlRunner, seed: int, hosts: int, pages_per_host: int
) -> None:
    with SiteServer(
        lambda port: generate_site(port, hosts=hosts, pages_per_host=pages_per_host, seed=seed)
    ) as server:
        result = await crawl(server)
        site = server.site
        requests = page_requests(server)
        robots_hits = robots_requests(server)
        log = server.requests
        inflight = server.max_inflight_per_host()

    summary = result.summary
    assert summary.discovered == len(site.ground_truth)
    assert set(result.rows) == site.ground_truth
    assert set(requests) == site.expected_fetches
    duplicates = {url: n for url, n in requests.items() if n != expected_hits(site, url)}
    assert duplicates == {}
    assert not set(requests) & site.robots_blocked
    assert {record.host for record in log} <= set(site.hosts)
    assert all(record.method == "GET" for record in log)
    # One robots.txt per host, except the host whose robots.txt fails, which is retried.
    broken = site.hosts[-1]
    assert robots_hits.pop(broken) == FAST_RETRY.attempts
    assert set(robots_hits.values()) == {1}
    assert set(robots_hits) == set(site.hosts) - {broken}

    assert result.in_state(State.BLOCKED) == site.robots_blocked
    assert summary.robots_blocked == len(site.robots_blocked)
    unavailable = {url for url, row in result.rows.items() if row.error == "robots_unavailable"}
    assert unavailable == {url for url in site.ground_truth if urlsplit(url).hostname == broken}
    assert unavailable
    assert result.in_state(State.DONE) == site.expected_fetches
    assert summary.fetched == len(site.expected_fetches)
    assert summary.requests == sum(requests.values())
    assert summary.queued == 0
    assert summary.off_scope > 0
    assert set(summary.invalid_by_reason) >= {"scheme", "credentials", "bad_port", "bad_host"}
    assert summary.duplicates > len(site.ground_truth)
    assert set(inflight.values()) == {1}


# -- robots.txt --------------------------------------------------------------------------


def robots_site(port: int) -> Site:
    """Five hosts, one robots.txt behaviour each."""
    fast_pages = [f"/f{n}.html" for n in range(8)]
    slow_pages = [f"/d{n}.html" for n in range(5)]
    routes: dict[str, Response | Route] = {
        "http://rules.test/robots.txt": robots(
            "User-agent: trawl", "Allow: /private/open.html", "Disallow: /private/"
        ),
        "http://rules.test/": page("/private/secret.html", "/private/open.html", "/public.html"),
        "http://rules.test/private/secret.html": page(),
        "http://rules.test/private/open.html": page(),
        "http://rules.test/public.html": page(),
        "http://norobots.test/": page("/private/secret.html"),
        "http://norobots.test/private/secret.html": page(),
        "http://broken.test/robots.txt": Response(status=500, content_type="text/plain"),
        "http://broken.test/": page("/other.html"),
        "http://delayed.test/robots.txt": robots("User-agent: *", f"Crawl-delay: {CRAWL_DELAY}"),
        "http://delayed.test/": page(*slow_pages),
        "http://fast.test/robots.txt": robots("User-agent: *", "Disallow: /private/"),
        "http://fast.test/": page(*fast_pages),
    }
    routes |= {f"http://delayed.test{p}": page() for p in slow_pages}
    routes |= {f"http://fast.test{p}": page() for p in fast_pages}
    hosts = ("rules.test", "norobots.test", "broken.test", "delayed.test", "fast.test")
    return Site.build(port, routes, [f"http://{host}/" for host in hosts])


SLOW_ANSWER = 0.1
"""Seconds the slow host takes to answer each request."""


def slow_answers_site(port: int) -> Site:
    """One host that takes ``SLOW_ANSWER`` to answer every page."""
    pages = [f"/s{n}.html" for n in range(4)]
    routes = {"http://slow.test/": page(*pages, delay=SLOW_ANSWER)}
    routes |= {f"http://slow.test{p}": page(delay=SLOW_ANSWER) for p in pages}
    return Site.build(port, routes, ["http://slow.test/"])


async def test_a_host_rests_the_response_factor_times_its_response_time(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(slow_answers_site) as server:
        politeness = Politeness(delay=0.0, response_factor=3.0)
        await crawl(server, politeness=politeness, soft_404=False)
        gaps = server.gaps("slow.test")
    assert len(gaps) == 4
    # The server's time to answer, request out to last byte in, is at least its delay.
    assert min(gaps) >= 3 * SLOW_ANSWER * 0.95, gaps
    assert max(gaps) < 3 * SLOW_ANSWER + 0.5, gaps


async def test_robots_rules_missing_robots_failing_robots_and_crawl_delay(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(robots_site) as server:
        result = await crawl(server)
        site = server.site
        requests = page_requests(server)
        robots_hits = robots_requests(server)
        delayed_gaps = server.gaps("delayed.test")
        fast_gaps = server.gaps("fast.test")

    secret, open_page = (
        site.url("rules.test", "/private/secret.html"),
        site.url("rules.test", "/private/open.html"),
    )
    assert secret not in requests
    assert result.rows[secret].state is State.BLOCKED
    assert result.rows[secret].error is None
    assert requests[open_page] == 1
    assert requests[site.url("rules.test", "/public.html")] == 1

    # A robots.txt that is missing (404) allows everything.
    assert requests[site.url("norobots.test", "/private/secret.html")] == 1
    assert robots_hits["norobots.test"] == 1

    # A robots.txt that keeps failing with 5xx blocks the whole host.
    assert robots_hits["broken.test"] == FAST_RETRY.attempts
    assert not {url for url in requests if urlsplit(url).hostname == "broken.test"}
    home = result.rows[site.url("broken.test")]
    assert (home.state, home.error) == (State.BLOCKED, "robots_unavailable")

    # Crawl-delay spaces that host's requests; a host without one is not held back.
    assert len(delayed_gaps) == 6  # the soft-404 probe, then six pages
    assert min(delayed_gaps) >= CRAWL_DELAY - TOLERANCE
    assert len(fast_gaps) == 9  # the soft-404 probe, then nine pages
    assert max(fast_gaps) < CRAWL_DELAY / 2
    assert result.summary.robots_blocked == 2


# -- redirects ---------------------------------------------------------------------------


def redirect_site(port: int) -> Site:
    """Every redirect status, a chain, a loop, an off-scope target and a long chain."""
    base = f"http://redir.test:{port}"
    heads = ["/301", "/302", "/303", "/307", "/308", "/chain-0", "/loop-1", "/away", "/long-0"]
    routes: dict[str, Response | Route] = {
        "http://redir.test/": page(*heads),
        "http://redir.test/301": moved(301, "/dest-301"),
        "http://redir.test/302": moved(302, "dest-302"),
        "http://redir.test/303": moved(303, f"{base}/dest-303"),
        "http://redir.test/307": moved(307, f"HTTP://REDIR.TEST:{port}/dest-307"),
        "http://redir.test/308": moved(308, "./dest-308?utm_source=moved"),
        "http://redir.test/chain-0": moved(302, "/chain-1"),
        "http://redir.test/chain-1": moved(301, "/chain-2"),
        "http://redir.test/chain-2": moved(307, "/chain-end"),
        "http://redir.test/chain-end": page(),
        "http://redir.test/loop-1": moved(302, "/loop-2"),
        "http://redir.test/loop-2": moved(302, "/loop-1"),
        "http://redir.test/away": moved(302, f"http://elsewhere.test:{port}/landing"),
        "http://redir.test/long-7": page(),
    }
    routes |= {f"http://redir.test/dest-{code}": page() for code in (301, 302, 303, 307, 308)}
    routes |= {f"http://redir.test/long-{n}": moved(301, f"/long-{n + 1}") for n in range(7)}
    site = Site.build(port, routes, ["http://redir.test/"], hosts=["redir.test"])
    return dataclasses.replace(site, off_scope_hosts=("elsewhere.test",))


async def test_redirects_are_followed_through_the_frontier(crawl: CrawlRunner) -> None:
    with SiteServer(redirect_site) as server:
        result = await crawl(server)
        site = server.site
        requests = page_requests(server)
        hosts = {record.host for record in server.requests}
    rows, summary = result.rows, result.summary

    def url(target: str) -> str:
        return site.url("redir.test", target)

    for code in (301, 302, 303, 307, 308):
        head, dest = rows[url(f"/{code}")], rows[url(f"/dest-{code}")]
        assert (head.state, head.status, head.redirect_to) == (State.DONE, code, dest.url)
        assert (dest.state, dest.status, dest.redirect_hops) == (State.DONE, 200, 1)
        assert requests[dest.url] == 1
    assert rows[url("/chain-end")].redirect_hops == 3
    assert rows[url("/chain-end")].status == 200
    for target in ("/chain-0", "/chain-1", "/chain-2", "/chain-end", "/loop-1", "/loop-2"):
        assert requests[url(target)] == 1
    assert rows[url("/loop-2")].redirect_to == url("/loop-1")

    # Off-scope target: recorded as the redirect's result, never requested.
    assert hosts == {"redir.test"}
    assert rows[url("/away")].redirect_to == f"http://elsewhere.test:{site.port}/landing"
    assert summary.off_scope == 1

    # Five hops are followed; the sixth is recorded but not requested.
    for n in range(6):
        assert requests[url(f"/long-{n}")] == 1
        assert rows[url(f"/long-{n}")].redirect_hops == n
    assert url("/long-6") not in requests
    assert url("/long-6") not in rows
    assert rows[url("/long-5")].redirect_to == url("/long-6")
    assert summary.redirect_limit == 1

    # A redirect's body is not parsed for links.
    assert url("/from-redirect-body") not in rows
    assert summary.redirects == 5 + 3 + 2 + 1 + 6
    assert set(requests.values()) == {1}
    # home, 9 heads, 5 landings, chain-1..end, loop-2, long-1..long-5
    assert summary.discovered == len(rows) == 1 + 9 + 5 + 3 + 1 + 5


# -- retries -----------------------------------------------------------------------------


def retry_site(port: int) -> Site:
    """429 and 503 with Retry-After, an endless 500 and a plain 404."""

    def busy(status: int, after: int) -> Response:
        return Response(
            status=status, body=b"busy", content_type="text/plain",
            headers=(("Retry-After", str(after)),),
        )  # fmt: skip

    routes: dict[str, Response | Route] = {
        "http://throttle.retry.test/": page("/t1", "/t2"),
        "http://throttle.retry.test/t1": Route((busy(429, 1), page())),
        "http://throttle.retry.test/t2": Route((busy(429, 1), page())),
        "http://busy.retry.test/": page("/flaky", "/broken", "/missing"),
        "http://busy.retry.test/flaky": Route((busy(503, 1), busy(503, 2), page())),
        "http://busy.retry.test/broken": Response(status=500, body=b"oops"),
    }
    seeds = ["http://throttle.retry.test/", "http://busy.retry.test/"]
    return Site.build(port, routes, seeds)


async def test_retries_honour_retry_after_and_give_up(crawl: CrawlRunner) -> None:
    with SiteServer(retry_site) as server:
        retry = RetryPolicy(base=0.05, cap=5.0, attempts=3)
        # busy.retry.test fails five times (two 503s, three 500s), in a row in some orders
        # of its requests: the default breaker (5 in a row) would then pause it for 60 s.
        result = await crawl(server, retry=retry, breaker=Breaker(threshold=6))
        site = server.site
        requests = page_requests(server)
        log = sorted(server.requests, key=lambda r: r.start)
    rows, summary = result.rows, result.summary

    # After each 429 the whole host rests for Retry-After before its next request.
    throttled = [r for r in log if r.host == "throttle.retry.test"]
    later = [b.start - a.end for a, b in itertools.pairwise(throttled) if a.status == 429]
    assert len(later) == 2
    assert min(later) >= 1.0 - TOLERANCE
    for target in ("/t1", "/t2"):
        assert requests[site.url("throttle.retry.test", target)] == 2
        row = rows[site.url("throttle.retry.test", target)]
        assert (row.state, row.status, row.attempts) == (State.DONE, 200, 2)

    # 503 twice: the waits follow Retry-After (1 s, then 2 s), then the page is stored.
    flaky = [r for r in log if r.path == "/flaky"]
    assert [r.status for r in flaky] == [503, 503, 200]
    assert flaky[1].start - flaky[0].end >= 1.0 - TOLERANCE
    assert flaky[2].start - flaky[1].end >= 2.0 - TOLERANCE
    row = rows[site.url("busy.retry.test", "/flaky")]
    assert (row.state, row.status, row.attempts) == (State.DONE, 200, 3)

    # A 404 is an answer, not an error: asked once.
    missing = rows[site.url("busy.retry.test", "/missing")]
    assert requests[missing.url] == 1
    assert (missing.state, missing.status, missing.attempts) == (State.DONE, 404, 1)

    # An endless 500 is tried `attempts` times, then FAILED with its error.
    broken = rows[site.url("busy.retry.test", "/broken")]
    assert requests[broken.url] == retry.attempts
    assert (broken.state, broken.status, broken.error) == (State.FAILED, 500, "http_500")
    assert broken.attempts == retry.attempts

    assert summary.retries == 2 + 2 + (retry.attempts - 1)
    assert summary.failed == 1
    assert summary.errors_by_class == {"http_500": 1}
    assert summary.requests == sum(requests.values())


# -- politeness --------------------------------------------------------------------------


def many_hosts_site(port: int) -> Site:
    """Eight hosts of six pages, each answer taking 0.1 s."""
    hosts = [f"h{n}.polite.test" for n in range(8)]
    routes: dict[str, Response | Route] = {}
    for host in hosts:
        pages = [f"/p{n}.html" for n in range(5)]
        routes[f"http://{host}/"] = page(*pages, delay=0.1)
        routes |= {f"http://{host}{p}": page(delay=0.1) for p in pages}
    return Site.build(port, routes, [f"http://{host}/" for host in hosts])


def peak_overlap(server: SiteServer) -> int:
    """The largest number of requests the server was answering at once, all hosts."""
    points = sorted(p for r in server.requests for p in ((r.start, 1), (r.end, -1)))
    current = peak = 0
    for _, delta in points:
        current += delta
        peak = max(peak, current)
    return peak


@pytest.mark.parametrize("per_host", [1, 2])
async def test_per_host_limit_holds_while_hosts_run_in_parallel(
    crawl: CrawlRunner, per_host: int
) -> None:
    with SiteServer(many_hosts_site) as server:
        result = await crawl(
            server,
            politeness=Politeness(
                per_host=per_host, delay=0.0, response_factor=0.0, per_ip=per_host
            ),
        )
        inflight = server.max_inflight_per_host()
        overlap = peak_overlap(server)
        requests = page_requests(server)

    assert result.summary.fetched == 8 * 6
    assert set(requests.values()) == {1}
    assert len(inflight) == 8
    assert max(inflight.values()) == per_host
    assert overlap >= 6


def slow_host_site(port: int) -> Site:
    """One host answering everything after 0.5 s, three that answer at once."""
    routes: dict[str, Response | Route] = {
        "http://slow.test/robots.txt": Response(body=b"", content_type="text/plain", delay=0.5),
        "http://slow.test/": page("/s1.html", "/s2.html", delay=0.5),
        "http://slow.test/s1.html": page(delay=0.5),
        "http://slow.test/s2.html": page(delay=0.5),
    }
    fast = [f"f{n}.test" for n in range(3)]
    for host in fast:
        pages = [f"/p{n}.html" for n in range(6)]
        routes[f"http://{host}/"] = page(*pages)
        routes |= {f"http://{host}{p}": page() for p in pages}
    return Site.build(port, routes, [f"http://{host}/" for host in ("slow.test", *fast)])


async def test_slow_host_does_not_hold_back_the_others(crawl: CrawlRunner) -> None:
    with SiteServer(slow_host_site) as server:
        result = await crawl(server)
        log = server.requests

    started = min(r.start for r in log)
    fast_done = max(r.end for r in log if r.host != "slow.test")
    slow_done = max(r.end for r in log if r.host == "slow.test")
    assert result.summary.fetched == 3 + 3 * 7
    assert slow_done - started >= 4 * 0.5
    assert fast_done - started < 0.5
    assert slow_done - fast_done > 1.5


# -- content -----------------------------------------------------------------------------

CAP = 1_000_000
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def content_site(port: int) -> Site:
    """Non-HTML types with links inside, untyped bodies, and bodies far over the cap."""
    heads = ["/doc.pdf", "/img.png", "/untyped-html", "/untyped-bin", "/big", "/huge", "/bomb"]
    routes: dict[str, Response | Route] = {
        "http://content.test/": page(*heads),
        "http://content.test/doc.pdf": Response(
            body=b'%PDF-1.4\n<a href="/from-pdf">x</a>\n%%EOF\n', content_type="application/pdf"
        ),
        "http://content.test/img.png": Response(
            body=PNG + b'<a href="/from-png">x</a>', content_type="image/png"
        ),
        "http://content.test/untyped-html": Response(body=html("/from-untyped"), content_type=None),
        "http://content.test/untyped-bin": Response(
            body=PNG + b'<a href="/from-untyped-bin">x</a>', content_type=None
        ),
        "http://content.test/from-untyped": page(),
        "http://content.test/big": Response(body_size=30_000_000),
        "http://content.test/huge": Response(body_size=2_000_000_000),
        "http://content.test/bomb": Response(body_size=100_000_000, gzip=True),
    }
    return Site.build(port, routes, ["http://content.test/"])


async def test_content_types_sniffing_and_body_caps(crawl: CrawlRunner) -> None:
    with SiteServer(content_site) as server:
        result = await crawl(server, limits=Limits(max_body=CAP))
        site = server.site
        requests = page_requests(server)
        huge = next(r for r in server.requests if r.path == "/huge")
    rows = result.rows

    def url(target: str) -> str:
        return site.url("content.test", target)

    # Links inside non-HTML bodies are never discovered.
    for target in ("/from-pdf", "/from-png", "/from-untyped-bin"):
        assert url(target) not in rows
    pdf = rows[url("/doc.pdf")]
    assert (pdf.state, pdf.status, pdf.content_type) == (State.DONE, 200, "application/pdf")
    assert rows[url("/img.png")].content_type == "image/png"
    # Without a Content-Type, HTML is recognised by its first bytes and parsed.
    assert rows[url("/from-untyped")].state is State.DONE
    assert requests[url("/from-untyped")] == 1
    assert rows[url("/untyped-html")].content_type is None

    # Bodies past the cap stop at the cap, however they are sent.
    for target in ("/big", "/huge", "/bomb"):
        row = rows[url(target)]
        assert (row.state, row.status, row.truncated, row.length) == (State.DONE, 200, True, CAP)
    # 2 GB take the server well over a second to send on loopback: it was cut off early.
    assert huge.end - huge.start < 0.5
    assert result.summary.fetched == len(rows) == 9
