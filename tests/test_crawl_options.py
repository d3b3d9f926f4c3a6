"""Crawl options end to end: scope modes, include/exclude, nofollow, canonical, robots
redirects and cache, the memory-queue bound, the time budget, and the redirect and link
caps through the command line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import CrawlRunner, expected_hits, page_requests, robots_requests
from test_cli import trawl
from trawl.config import Limits, Politeness, ScopeConfig
from trawl.demo import Response, Site, SiteServer, generate_site, route_key
from trawl.extract.pool import parse_workers
from trawl.extract.scope import ScopeMode
from trawl.store.sqlite.store import DB_NAME


def html(*hrefs: str, head: str = "") -> bytes:
    links = "".join(f'<a href="{href}">{href}</a>' for href in hrefs)
    return f"<!doctype html><html><head>{head}</head><body>{links}</body></html>".encode()


def page(*hrefs: str, head: str = "", headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(body=html(*hrefs, head=head), headers=headers)


def text(*lines: str) -> Response:
    return Response(body="\n".join(lines).encode(), content_type="text/plain")


def scope_site(port: int) -> Site:
    routes = {
        "http://www.opt.test/docs/": page(
            "/docs/a", "/other", "http://sub.opt.test/", "/private/x"
        ),
        "http://www.opt.test/docs/a": page(),
        "http://www.opt.test/other": page(),
        "http://www.opt.test/private/x": page(),
        "http://sub.opt.test/": page(),
    }
    return Site.build(port, routes, ["http://www.opt.test/docs/"])


async def test_scope_modes_and_patterns_decide_what_is_followed(crawl: CrawlRunner) -> None:
    with SiteServer(scope_site) as server:
        site = server.site
        domain = await crawl(server)
        host = await crawl(server, scope=ScopeConfig(mode=ScopeMode.HOST))
        prefix = await crawl(server, scope=ScopeConfig(mode=ScopeMode.PREFIX))
        patterns = await crawl(server, scope=ScopeConfig(exclude=("/private/",)))
        included = await crawl(server, scope=ScopeConfig(include=("/docs/",)))

    def paths(rows: object) -> set[str]:
        assert isinstance(rows, dict)
        return {url.replace(f":{site.port}", "") for url in rows}

    assert paths(domain.rows) == {
        "http://www.opt.test/docs/", "http://www.opt.test/docs/a", "http://www.opt.test/other",
        "http://www.opt.test/private/x", "http://sub.opt.test/",
    }  # fmt: skip
    assert paths(host.rows) == paths(domain.rows) - {"http://sub.opt.test/"}
    assert host.summary.off_scope == 1
    assert paths(prefix.rows) == {"http://www.opt.test/docs/", "http://www.opt.test/docs/a"}
    assert prefix.summary.off_scope == 3
    assert "http://www.opt.test/private/x" not in paths(patterns.rows)
    assert patterns.summary.excluded == 1
    assert paths(included.rows) == {"http://www.opt.test/docs/", "http://www.opt.test/docs/a"}
    assert included.summary.excluded == 3


def nofollow_site(port: int) -> Site:
    routes = {
        "http://nf.test/": Response(
            body=html("/meta", "/header", "/kept")
            + b'<a rel="external nofollow" href="/rel-target">x</a>'
        ),
        "http://nf.test/meta": page("/meta-target", head='<meta name="robots" content="nofollow">'),
        "http://nf.test/header": page("/header-target", headers=(("X-Robots-Tag", "nofollow"),)),
        "http://nf.test/kept": page(
            head='<link rel="canonical" href="/canonical-form?utm_source=feed#x">'
        ),
    }
    return Site.build(port, routes, ["http://nf.test/"])


async def test_nofollow_is_honoured_unless_ignored_and_canonical_is_recorded(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(nofollow_site) as server:
        site = server.site
        polite = await crawl(server)
        requested = page_requests(server)
        ignoring = await crawl(server, honour_nofollow=False)
    targets = {site.url("nf.test", f"/{name}-target") for name in ("rel", "meta", "header")}
    assert not targets & set(polite.rows)
    assert not targets & set(requested)
    assert targets <= set(ignoring.rows)

    canonical = site.url("nf.test", "/canonical-form")
    with sqlite3.connect(polite.data_dir / DB_NAME) as db:
        stored = db.execute(
            "SELECT canonical FROM urls WHERE url = ?", (site.url("nf.test", "/kept"),)
        ).fetchone()
    assert stored == (canonical,)
    assert canonical not in polite.rows  # recorded, not followed


def robots_redirect_site(port: int) -> Site:
    routes = {
        "http://rr.test/robots.txt": Response(status=301, headers=(("Location", "/real-robots"),)),
        "http://rr.test/real-robots": text("User-agent: *", "Disallow: /secret"),
        "http://rr.test/": page("/secret", "/open"),
        "http://rr.test/open": page(),
        "http://rr.test/secret": page(),
    }
    return Site.build(port, routes, ["http://rr.test/"])


async def test_robots_redirect_is_followed(crawl: CrawlRunner) -> None:
    with SiteServer(robots_redirect_site) as server:
        result = await crawl(server)
        requested = page_requests(server)
    site = server.site
    assert site.url("rr.test", "/secret") not in requested
    assert requested[site.url("rr.test", "/real-robots")] == 1
    assert result.summary.robots_blocked == 1


async def test_robots_cache_survives_a_resume(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=20)) as server:
        first = await crawl(server, limits=Limits(max_pages=15), expect_state="page budget reached")
        assert 0 < first.summary.fetched < len(server.site.expected_fetches)
        before = robots_requests(server)
        await crawl(server, data_dir=first.data_dir)
        after = robots_requests(server)
    site = server.site

    def answers(host: str) -> bool:
        route = site.routes.get(route_key(host, "/robots.txt"))
        return route is None or route.responses[0].status < 500

    healthy = {host for host in before if answers(host)}
    assert len(healthy) >= 2  # the two seeds' hosts at least; more as timing allows
    for host in healthy:
        assert after[host] == 1, host  # cached in the store, not fetched again


async def test_a_tiny_memory_queue_still_crawls_everything_exactly(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=5, pages_per_host=40, seed=7)) as server:
        result = await crawl(server, limits=Limits(memory_queue=3))
        requested = page_requests(server)
    site = server.site
    assert set(result.rows) == site.ground_truth
    assert result.summary.discovered == len(site.ground_truth)
    assert all(requested[url] == expected_hits(site, url) for url in site.expected_fetches)


async def test_time_budget_stops_the_run_and_a_rerun_finishes(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=20)) as server:
        slow = Politeness(delay=0.2, response_factor=0.0)
        first = await crawl(
            server, politeness=slow, limits=Limits(max_time=1.0), expect_state="time budget reached"
        )
        assert first.summary.elapsed < 5.0
        assert first.summary.queued > 0
        final = await crawl(server, data_dir=first.data_dir)
    assert final.summary.discovered == len(server.site.ground_truth)


async def test_parse_workers_give_the_same_crawl(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=30, seed=3)) as server:
        result = await crawl(server, parse_workers=1)
        requested = page_requests(server)
    site = server.site
    assert set(result.rows) == site.ground_truth
    assert all(requested[url] == expected_hits(site, url) for url in site.expected_fetches)


@pytest.mark.parametrize(
    ("wanted", "cores", "expected"),
    [(None, 1, 0), (None, 2, 1), (None, 3, 2), (None, 64, 2), (0, 8, 0), (5, 2, 5)],
)
def test_parse_workers_default_to_the_spare_cores(
    wanted: int | None, cores: int, expected: int
) -> None:
    assert parse_workers(wanted, cores) == expected


@pytest.mark.parametrize(
    ("wanted", "cores", "expected"),
    [(None, 1, 1), (None, 2, 2), (None, 64, 2), (0, 8, 0), (3, 2, 3)],
)
def test_text_extraction_gets_every_core(wanted: int | None, cores: int, expected: int) -> None:
    assert parse_workers(wanted, cores, content=True) == expected


def redirect_site(port: int) -> Site:
    """A seed page linking to a chain of two redirects and to six plain pages."""
    routes = {
        "http://rd.test/": page("/hop1", *(f"/p{i}" for i in range(6))),
        "http://rd.test/hop1": Response(status=301, headers=(("Location", "/hop2"),)),
        "http://rd.test/hop2": Response(status=301, headers=(("Location", "/end"),)),
        "http://rd.test/end": page(),
        **{f"http://rd.test/p{i}": page() for i in range(6)},
    }
    return Site.build(port, routes, ["http://rd.test/"])


@pytest.mark.parametrize("given", ["options", "config"])
def test_redirect_and_link_caps_given_on_the_command_line_or_in_a_file_bind(
    tmp_path: Path, given: str
) -> None:
    fast = ["--delay", "0", "--response-factor", "0", "--no-soft-404", "--no-progress", "--json"]
    caps = ["--max-redirects", "1", "--max-links", "3"]
    if given == "config":
        config = tmp_path / "caps.toml"
        config.write_text("max_redirects = 1\nmax-links = 3\n")
        caps = ["--config", str(config)]
    with SiteServer(redirect_site) as server:
        site = server.site
        base = ["crawl", *site.seeds, *server.resolve_args(), *fast]
        free = trawl(*base, "--data-dir", str(tmp_path / "free"))
        assert free.code == 0, free.err
        every = page_requests(server)
        capped = trawl(*base, *caps, "--data-dir", str(tmp_path / "capped"))
        assert capped.code == 0, capped.err
        requested = page_requests(server) - every
    assert json.loads(free.out)["redirect_limit"] == 0
    assert every[site.url("rd.test", "/end")] == 1
    assert json.loads(capped.out)["redirect_limit"] == 1
    assert set(requested) == {
        site.url("rd.test", path) for path in ("/", "/hop1", "/hop2", "/p0", "/p1")
    }
