"""Sitemaps in whole crawls: found through robots.txt and /sitemap.xml, indexes, gzip and
text sitemaps, RSS and Atom feeds; their URLs scope-, robots- and location-checked, one
hop deeper than their sitemap, their priority and lastmod kept; ``--sitemaps-only``; and
oversized or hostile sitemaps refused with a count, the crawl going on."""

from __future__ import annotations

import gzip
import json
import math
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import CrawlRunner, read_rows
from listing_site import Listing, ListingFormat
from pg import URL as PG_URL
from pg import crawl_name
from test_cli import trawl
from test_store import sqlite_query
from trawl.config import Freshness, Limits
from trawl.demo import Response, Site, SiteServer
from trawl.frontier.priority import priority
from trawl.store.values import State

__all__ = ["crawl_name"]

WWW, BLOG = "www.maps.test", "blog.maps.test"
XML = "application/xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str) -> bytes:
    return f'<?xml version="1.0"?><urlset {NS}>{"".join(entries)}</urlset>'.encode()


def entry(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def maps_site(port: int) -> Site:
    """A seed page that links nowhere; every other page is known only from sitemaps.

    www's robots.txt names an index and, on the blog's host, a text sitemap of blog pages
    and a sitemap of www pages kept in the blog's /maps/ (which it may list because
    www's robots.txt names it). Refused by the location rule: a blog sitemap listed by
    www's index, a blog page outside /maps/ listed from there, and an https page.
    """
    www, blog = f"http://{WWW}:{port}", f"http://{BLOG}:{port}"
    index = (
        f'<?xml version="1.0"?><sitemapindex {NS}>'
        f"<sitemap><loc>{www}/sitemap-pages.xml.gz</loc></sitemap>"
        f"<sitemap><loc>{blog}/listed-by-www.xml</loc></sitemap></sitemapindex>"
    ).encode()
    pages = urlset(
        entry(f"{www}/a"), entry(f"{www}/b"), entry("http://elsewhere.example/x"),
        entry(f"{www}/private/p"), entry(f"{www}/a#again"),
        entry(f"https://{WWW}:{port}/secure"),
    )  # fmt: skip
    for_www = urlset(entry(f"{www}/w"), entry(f"{blog}/maps/m"), entry(f"{blog}/outside"))
    robots = f"User-agent: *\nDisallow: /private/\nSitemap: {www}/index.xml\n"
    robots += f"Sitemap: {blog}/posts.txt\nSitemap: {blog}/maps/www.xml\n"
    page = Response(body=b"<!doctype html><title>page</title><p>hello</p>")
    return Site.build(
        port,
        {
            f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
            f"http://{WWW}/robots.txt": Response(body=robots.encode(), content_type="text/plain"),
            f"http://{WWW}/index.xml": Response(body=index, content_type=XML),
            f"http://{WWW}/sitemap-pages.xml.gz": Response(
                body=gzip.compress(pages), content_type="application/gzip"
            ),
            f"http://{BLOG}/posts.txt": Response(
                body=f"{blog}/c\n\n  {blog}/d  \nnot a url\n".encode(), content_type="text/plain"
            ),
            f"http://{BLOG}/maps/www.xml": Response(body=for_www, content_type=XML),
            f"http://{BLOG}/listed-by-www.xml": Response(
                body=urlset(entry(f"{blog}/never")), content_type=XML
            ),
            f"http://{WWW}/sitemap.xml": Response(
                body=urlset(
                    entry(
                        f"{www}/extra",
                        "<lastmod>2024-05-01</lastmod><priority>0.9</priority>",
                    )
                ),
                content_type=XML,
            ),
            **{
                f"http://{WWW}{path}": page
                for path in ("/a", "/b", "/extra", "/private/p", "/w", "/secure")
            },
            **{f"http://{BLOG}{path}": page for path in ("/c", "/d", "/maps/m", "/outside")},
        },
        seeds=[f"http://{WWW}/"],
        hosts=[WWW, BLOG, "elsewhere.example"],
    )


def counters_of(data_dir: Path) -> dict[str, int]:
    """Every stored counter of the crawl in ``data_dir``, by name."""
    return dict(sqlite_query(data_dir, "SELECT name, value FROM counters"))


def gets(server: SiteServer) -> Counter[tuple[str, str]]:
    return Counter((r.host, r.path) for r in server.requests if r.path != "/robots.txt")


async def test_sitemap_urls_are_crawled_within_scope_robots_and_location(
    crawl: CrawlRunner, tmp_path: Path
) -> None:
    with SiteServer(maps_site) as server:
        outcome = await crawl(server, soft_404=False, freshness=Freshness(sitemaps=True))
        requested = gets(server)
    pages = {(WWW, p) for p in ("/", "/a", "/b", "/extra", "/w")}
    pages |= {(BLOG, p) for p in ("/c", "/d", "/maps/m")}
    sitemaps = {(WWW, "/index.xml"), (WWW, "/sitemap-pages.xml.gz"), (BLOG, "/posts.txt"),
                (BLOG, "/maps/www.xml"), (WWW, "/sitemap.xml"), (BLOG, "/sitemap.xml")}  # fmt: skip
    assert set(requested) == pages | sitemaps
    assert set(requested.values()) == {1}  # each fetched once, #again included
    fresh = outcome.summary.freshness
    assert fresh["sitemaps_read"] == 5  # the blog's /sitemap.xml is a 404
    assert fresh["sitemap_urls"] == 2 + 6 + 2 + 3 + 1
    # listed-by-www.xml (another host than its index), /secure (another scheme) and
    # the blog's /outside (outside /maps/, and not on the host whose robots.txt names it)
    assert counters_of(outcome.data_dir)["sitemap_urls_refused"] == 3
    assert outcome.summary.off_scope >= 1
    assert outcome.in_state(State.BLOCKED) == {server.site.url(WWW, "/private/p")}
    assert outcome.summary.discovered == len(pages) + len(sitemaps) + 1
    extra = sqlite_query(
        outcome.data_dir, "SELECT priority, lastmod, kind FROM urls WHERE url LIKE '%/extra'"
    )
    assert extra == [(priority(1, 0.9), 1714521600.0, 0)]
    kinds: dict[str, int] = dict(sqlite_query(outcome.data_dir, "SELECT url, kind FROM urls"))
    assert {url for url, kind in kinds.items() if kind == 1} == {
        server.site.url(host, path) for host, path in sitemaps
    }
    # A listed URL is one hop deeper than its sitemap; robots.txt's sitemaps are at 0.
    depths: dict[str, int] = dict(sqlite_query(outcome.data_dir, "SELECT url, depth FROM urls"))
    expected = {(WWW, "/index.xml"): 0, (WWW, "/sitemap-pages.xml.gz"): 1, (WWW, "/a"): 2,
                (BLOG, "/posts.txt"): 0, (BLOG, "/c"): 1, (BLOG, "/maps/m"): 1,
                (WWW, "/w"): 1, (WWW, "/sitemap.xml"): 0, (WWW, "/extra"): 1}  # fmt: skip
    assert {key: depths[server.site.url(*key)] for key in expected} == expected


def chain_site(port: int) -> Site:
    """A trap: each sitemap is an index of the next, each listing one page too."""
    www = f"http://{WWW}:{port}"
    routes = {
        f"http://{WWW}/sitemap-{n}.xml": Response(
            body=(
                f'<?xml version="1.0"?><sitemapindex {NS}>'
                f"<sitemap><loc>{www}/sitemap-{n + 1}.xml</loc></sitemap></sitemapindex>"
            ).encode(),
            content_type=XML,
        )
        for n in range(20)
    }
    return Site.build(
        port,
        {
            f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
            f"http://{WWW}/robots.txt": Response(
                body=f"User-agent: *\nSitemap: {www}/sitemap-0.xml\n".encode(),
                content_type="text/plain",
            ),
            **routes,
        },
        seeds=[f"http://{WWW}/"],
    )


async def test_a_chain_of_sitemap_indexes_ends_at_the_hop_depth_limit(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(chain_site) as server:
        outcome = await crawl(
            server, soft_404=False, limits=Limits(max_depth=3), freshness=Freshness(sitemaps=True)
        )
        requested = gets(server)
    chain = sorted(path for _, path in requested if path.startswith("/sitemap-"))
    assert chain == [f"/sitemap-{n}.xml" for n in range(4)]
    assert outcome.summary.limits["too_deep"] == 1


async def test_sitemaps_only_starts_from_the_seeds_sitemaps(crawl: CrawlRunner) -> None:
    with SiteServer(maps_site) as server:
        outcome = await crawl(server, soft_404=False, freshness=Freshness(sitemaps_only=True))
        requested = gets(server)
    assert (WWW, "/") not in requested
    assert {(WWW, "/a"), (WWW, "/b"), (WWW, "/extra"), (BLOG, "/c"), (BLOG, "/d")} <= set(requested)
    assert server.site.url(WWW, "/") not in read_rows(outcome.data_dir)


HOSTILE = "bad.maps.test"
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    f"<urlset {NS}><url><loc>http://{HOSTILE}/&lol3;</loc></url></urlset>"
).encode()
EXTERNAL = (
    '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
    f"<urlset {NS}><url><loc>http://{HOSTILE}/&e;</loc></url></urlset>"
).encode()


def hostile_site(port: int) -> Site:
    """Sitemaps that break the protocol's limits or attack the parser, beside a good one."""
    base = f"http://{HOSTILE}:{port}"
    named = ["bomb.xml.gz", "huge.xml", "many.txt", "laughs.xml", "external.xml", "good.xml"]
    robots = "User-agent: *\nAllow: /\n" + "".join(f"Sitemap: {base}/{n}\n" for n in named)
    bomb = gzip.compress(b"<urlset>" + b" " * (60 * 1024 * 1024) + b"</urlset>")
    many = "".join(f"{base}/p{n}\n" for n in range(50_001)).encode()
    return Site.build(
        port,
        {
            f"http://{HOSTILE}/": Response(body=b"<!doctype html><title>home</title>"),
            f"http://{HOSTILE}/robots.txt": Response(
                body=robots.encode(), content_type="text/plain"
            ),
            f"http://{HOSTILE}/bomb.xml.gz": Response(body=bomb, content_type="application/gzip"),
            f"http://{HOSTILE}/huge.xml": Response(body_size=51 * 1024 * 1024, content_type=XML),
            f"http://{HOSTILE}/many.txt": Response(body=many, content_type="text/plain"),
            f"http://{HOSTILE}/laughs.xml": Response(body=LAUGHS, content_type=XML),
            f"http://{HOSTILE}/external.xml": Response(body=EXTERNAL, content_type=XML),
            f"http://{HOSTILE}/good.xml": Response(body=urlset(entry(f"{base}/ok"))),
            f"http://{HOSTILE}/ok": Response(body=b"<!doctype html><title>ok</title>"),
        },
        seeds=[f"http://{HOSTILE}/"],
    )


async def test_oversized_and_hostile_sitemaps_are_refused_and_counted(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(hostile_site) as server:
        outcome = await crawl(server, soft_404=False, freshness=Freshness(sitemaps=True))
        requested = gets(server)
    errors = outcome.summary.errors_by_class
    fresh = outcome.summary.freshness
    assert fresh["sitemap_errors"] == 5
    assert fresh["sitemaps_read"] == 1  # good.xml; /sitemap.xml is a 404
    counters = counters_of(outcome.data_dir)
    assert counters["sitemap_error:too_large"] == 2
    assert counters["sitemap_error:too_many_urls"] == 1
    assert counters["sitemap_error:dtd_forbidden"] == 2
    assert (HOSTILE, "/ok") in requested
    assert not [path for _, path in requested if path.startswith(("/p", "/lol", "/root"))]
    assert not errors
    assert outcome.summary.discovered == 1 + 7 + 1  # home, the sitemaps, /ok


def html_site(port: int) -> Site:
    """A catch-all HTML page answering at the sitemap's address, labelled as XML."""
    return Site.build(
        port,
        {
            f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
            f"http://{WWW}/sitemap.xml": Response(
                body=b"<!DOCTYPE html><html><title>Not here</title></html>", content_type=XML
            ),
        },
        seeds=[f"http://{WWW}/"],
    )


async def test_an_html_page_at_a_sitemap_address_is_not_a_sitemap(crawl: CrawlRunner) -> None:
    with SiteServer(html_site) as server:
        outcome = await crawl(server, soft_404=False, freshness=Freshness(sitemaps=True))
    counters = counters_of(outcome.data_dir)
    assert counters["sitemap_error:not_a_sitemap"] == 1
    assert "sitemap_error:dtd_forbidden" not in counters


def ranked_site(port: int) -> Site:
    """A sitemap listing one page at priority 1.0 and ten at 0.0, all at one depth."""
    www = f"http://{WWW}:{port}"
    low = [entry(f"{www}/low/{n}", "<priority>0.0</priority>") for n in range(10)]
    page = Response(body=b"<!doctype html><title>page</title>")
    return Site.build(
        port,
        {
            f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
            f"http://{WWW}/sitemap.xml": Response(
                body=urlset(*low, entry(f"{www}/vip", "<priority>1.0</priority>")),
                content_type=XML,
            ),
            f"http://{WWW}/vip": page,
            **{f"http://{WWW}/low/{n}": page for n in range(10)},
        },
        seeds=[f"http://{WWW}/"],
    )


async def test_a_high_priority_sitemap_page_is_fetched_first(crawl: CrawlRunner) -> None:
    with SiteServer(ranked_site) as server:
        await crawl(
            server, soft_404=False, limits=Limits(memory_queue=1),
            freshness=Freshness(sitemaps=True),
        )  # fmt: skip
        order = [r.path for r in server.requests if r.path.startswith(("/vip", "/low/"))]
    assert len(order) == 11
    assert order[0] == "/vip"


def feeds_site(port: int) -> Site:
    """robots.txt names an RSS and an Atom feed, each listing two pages with their times."""
    www = f"http://{WWW}:{port}"
    rss = Listing(ListingFormat.RSS, {f"{www}/r1": 1714521600.0, f"{www}/r2": 1714608000.0},
                  home=f"{www}/rss-home")  # fmt: skip
    atom = Listing(ListingFormat.ATOM, {f"{www}/a1": 1714694400.0, f"{www}/a2": 1714780800.0},
                   home=f"{www}/atom-home")  # fmt: skip
    robots = f"User-agent: *\nSitemap: {www}/feed.rss\nSitemap: {www}/atom.xml\n"
    page = Response(body=b"<!doctype html><title>page</title>")
    return Site.build(
        port,
        {
            f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
            f"http://{WWW}/robots.txt": Response(body=robots.encode(), content_type="text/plain"),
            f"http://{WWW}/feed.rss": rss,
            f"http://{WWW}/atom.xml": atom,
            **{f"http://{WWW}/{name}": page for name in ("r1", "r2", "a1", "a2")},
        },
        seeds=[f"http://{WWW}/"],
    )


async def test_rss_and_atom_feeds_are_read_as_sitemaps(crawl: CrawlRunner) -> None:
    with SiteServer(feeds_site) as server:
        outcome = await crawl(server, soft_404=False, freshness=Freshness(sitemaps=True))
        requested = gets(server)
    assert set(requested) == {
        (WWW, path) for path in ("/", "/feed.rss", "/atom.xml", "/sitemap.xml", "/r1", "/r2",
                                 "/a1", "/a2")
    }  # fmt: skip
    fresh = outcome.summary.freshness
    assert fresh["sitemaps_read"] == 2
    assert fresh["sitemap_urls"] == 4
    assert "sitemap_errors" not in fresh  # /sitemap.xml is a 404
    rows = sqlite_query(
        outcome.data_dir, "SELECT url, lastmod, depth FROM urls WHERE lastmod IS NOT NULL"
    )
    assert sorted(rows) == [
        (server.site.url(WWW, path), when, 1)
        for path, when in (("/a1", 1714694400.0), ("/a2", 1714780800.0),
                           ("/r1", 1714521600.0), ("/r2", 1714608000.0))
    ]  # fmt: skip


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_recrawl_pass_revalidates_sitemaps_and_takes_what_their_lastmod_changed(
    engine: str, crawl_name: str, tmp_path: Path
) -> None:
    sitemap, feed = Listing(ListingFormat.URLSET), Listing(ListingFormat.ATOM)

    def site(port: int) -> Site:
        www = f"http://{WWW}:{port}"
        sitemap.lastmods.update({f"{www}/p1": 1_700_000_000.0, f"{www}/p2": 1_700_000_000.0})
        feed.lastmods.update({f"{www}/a1": 1_700_000_000.0})
        page = Response(body=b"<!doctype html><title>page</title>")
        return Site.build(
            port,
            {
                f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
                f"http://{WWW}/robots.txt": Response(
                    body=f"User-agent: *\nSitemap: {www}/atom.xml\n".encode(),
                    content_type="text/plain",
                ),
                f"http://{WWW}/sitemap.xml": sitemap,
                f"http://{WWW}/atom.xml": feed,
                **{f"http://{WWW}/{name}": page for name in ("p1", "p2", "a1")},
            },
            seeds=[f"http://{WWW}/"],
        )

    where = ["--data-dir", str(tmp_path / "data")]
    if engine == "postgresql":
        where += ["--store", PG_URL, "--crawl", crawl_name]
    with SiteServer(site) as server:
        local = [*where, *server.resolve_args(), "--no-progress", "--json"]
        crawled = trawl("crawl", *server.site.seeds, "--sitemaps", "--delay", "0",
                        "--no-soft-404", *local)  # fmt: skip
        assert crawled.code == 0, crawled.err
        assert {(WWW, f"/{name}") for name in ("p1", "p2", "a1")} <= set(gets(server))

        def recrawl() -> dict[str, list[tuple[int, str | None]]]:
            before = len(server.requests)
            run = trawl("recrawl", *local)
            assert run.code == 0, run.err
            answers: dict[str, list[tuple[int, str | None]]] = {}
            for r in server.requests[before:]:
                if r.path != "/robots.txt":
                    answers.setdefault(r.path, []).append(
                        (r.status, r.headers.get("If-None-Match"))
                    )
            return answers

        # Nothing changed: the pass asks for each sitemap with its ETag, and gets a 304.
        unchanged = recrawl()
        assert set(unchanged) == {"/sitemap.xml", "/atom.xml"}
        assert all(status == 304 and etag for ((status, etag),) in unchanged.values())
        # A page's lastmod moves past its fetch: the next pass fetches it, and only it.
        changed_at = math.ceil(time.time()) + 1.0
        sitemap.lastmods[server.site.url(WWW, "/p1")] = changed_at
        feed.lastmods[server.site.url(WWW, "/a1")] = changed_at
        changed = recrawl()
        assert changed == {
            "/sitemap.xml": [(200, unchanged["/sitemap.xml"][0][1])],
            "/atom.xml": [(200, unchanged["/atom.xml"][0][1])],
            "/p1": [(200, None)],
            "/a1": [(200, None)],
        }
        status = trawl("status", *where, "--json")
    assert json.loads(status.out)["freshness"]["recrawled"] == 2 + 4


def moved_site(port: int) -> Site:
    """/sitemap.xml redirects to where the sitemap now is, as http-to-https moves do."""
    www = f"http://{WWW}:{port}"
    page = Response(body=b"<!doctype html><title>page</title>")
    return Site.build(
        port,
        {
            f"http://{WWW}/": Response(body=b"<!doctype html><title>seed</title>"),
            f"http://{WWW}/sitemap.xml": Response(
                status=301, headers=(("Location", f"{www}/maps/current.xml"),)
            ),
            f"http://{WWW}/maps/current.xml": Response(
                body=urlset(entry(f"{www}/listed")), content_type=XML
            ),
            f"http://{WWW}/listed": page,
        },
        seeds=[f"http://{WWW}/"],
    )


async def test_a_redirected_sitemap_is_read_as_a_sitemap(crawl: CrawlRunner) -> None:
    with SiteServer(moved_site) as server:
        outcome = await crawl(server, soft_404=False, freshness=Freshness(sitemaps=True))
        requested = gets(server)
    assert (WWW, "/listed") in requested
    assert outcome.summary.freshness["sitemaps_read"] == 1
    kinds: dict[str, int] = dict(sqlite_query(outcome.data_dir, "SELECT url, kind FROM urls"))
    assert kinds[server.site.url(WWW, "/maps/current.xml")] == 1


def hosts_trap_site(port: int) -> Site:
    """A trap across hosts: each host's robots.txt names a sitemap listing a page that
    links to the next host, whose robots.txt names a sitemap in turn."""
    names = [f"h{n}.maps.test" for n in range(10)]
    routes: dict[str, Response] = {
        f"http://{WWW}/": Response(body=f'<a href="http://{names[0]}:{port}/">h0</a>'.encode())
    }
    for n, name in enumerate(names):
        base = f"http://{name}:{port}"
        after = f"http://{names[(n + 1) % len(names)]}:{port}/"
        routes |= {
            f"http://{name}/": Response(body=b"<!doctype html><title>root</title>"),
            f"http://{name}/robots.txt": Response(
                body=f"User-agent: *\nSitemap: {base}/sm.xml\n".encode(),
                content_type="text/plain",
            ),
            f"http://{name}/sm.xml": Response(body=urlset(entry(f"{base}/p")), content_type=XML),
            f"http://{name}/p": Response(body=f'<a href="{after}">next</a>'.encode()),
        }
    return Site.build(port, routes, seeds=[f"http://{WWW}/"], hosts=[WWW, *names])


async def test_a_hosts_sitemaps_start_at_the_depth_the_crawl_reached_it(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(hosts_trap_site) as server:
        outcome = await crawl(
            server, soft_404=False, limits=Limits(max_depth=4), freshness=Freshness(sitemaps=True)
        )
        requested = gets(server)
    # h0's root is 1 hop from the seed, its sitemap too, its page 2; h1's root is 3 hops,
    # its sitemap 3, its page 4; h2's root would be 5.
    assert {host for host, path in requested if path == "/p"} == {"h0.maps.test", "h1.maps.test"}
    depths: dict[str, int] = dict(sqlite_query(outcome.data_dir, "SELECT url, depth FROM urls"))
    assert depths[server.site.url("h1.maps.test", "/sm.xml")] == 3
