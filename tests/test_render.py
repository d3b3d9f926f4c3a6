"""Rendering in headless Chromium, in whole crawls of a local single-page application:
what is found with and without it, politeness with renders mixed in, the archive."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from conftest import CrawlRunner
from test_cli import assert_one_error_line, trawl_inline
from test_content_crawl import read_text_output
from trawl.config import Politeness, RenderConfig
from trawl.demo import Response, Site, SiteServer
from trawl.demo.site import canonical_url
from trawl.demo.spa import spa_site
from trawl.sites.rules import Site as SiteRule
from trawl.sites.rules import Sites
from trawl.store.values import State

DELAY = 0.3


def paths(server: SiteServer) -> Counter[str]:
    """How often each path of the site was asked for."""
    return Counter(record.path for record in server.requests)


async def test_auto_finds_the_whole_application_and_never_does_not(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: spa_site(port, items=3), shared_address=True) as server:
        plain = await crawl(server)
        plain_paths = paths(server)
        rendered = await crawl(server, render=RenderConfig(mode="auto"))
        asked = paths(server) - plain_paths
        truth = server.site.ground_truth
    assert set(plain.rows) == {canonical_url(server.site.seeds[0])}
    assert "/static/app.js" not in plain_paths
    assert set(rendered.rows) == truth
    assert {url for url, row in rendered.rows.items() if row.state is State.DONE} == truth
    # The home page and the three item pages are shells; the reviews pages are plain HTML,
    # read as fetched. Each page was fetched once: the browser is given the fetched body.
    render = rendered.summary.render
    assert render["rendered"] == 4
    assert [asked[urlsplit(url).path] for url in sorted(truth)] == [1] * len(truth)
    # Each render loaded the script and its JSON through trawl, and never an image or font.
    assert asked["/static/app.js"] == 4
    assert asked["/api/items.json"] == 1
    assert render["render_requests"] == 8
    assert not [path for path in asked if path.startswith(("/img/", "/fonts/"))]
    assert render["render_skipped"] >= 3


async def test_a_sites_render_mode_renders_its_hosts_only(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: spa_site(port, hosts=2, items=2), shared_address=True) as server:
        result = await crawl(server, sites=Sites([SiteRule("app-0.spa.test", render="always")]))
    found = {urlsplit(url).hostname for url in result.rows}
    app_0 = {url for url in server.site.ground_truth if "app-0" in url}
    # The crawl's --render is never: the site's pages are rendered and found whole, the
    # other host's shell gives nothing.
    assert {url for url in result.rows if "app-0" in url} == app_0
    assert found == {"app-0.spa.test", "app-1.spa.test"}
    assert [url for url in result.rows if "app-1" in url] == [canonical_url(server.site.seeds[1])]
    assert result.summary.render["rendered"] == len(app_0)


async def test_per_host_politeness_holds_with_renders_mixed_in(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: spa_site(port, hosts=2, items=2)) as server:
        result = await crawl(
            server,
            politeness=Politeness(delay=DELAY, response_factor=0.0),
            render=RenderConfig(mode="auto"),
        )
        records = server.requests
        inflight = server.max_inflight_per_host()
    assert set(result.rows) == server.site.ground_truth
    assert result.summary.render["rendered"] == 2 * 3
    assert max(inflight.values()) == 1
    by_host = defaultdict(list)
    for record in records:
        by_host[record.host].append(record)
    turns = 0
    for host_records in by_host.values():
        host_records.sort(key=lambda r: r.start)
        for index, record in enumerate(host_records[1:], 1):
            if record.path.startswith(("/static/", "/api/")):
                continue  # a render's subresource, inside the turn of its page
            rested = record.start - max(r.end for r in host_records[:index])
            assert rested >= DELAY - 0.02, (record.host, record.path, rested)
            turns += 1
    assert turns >= 2 * 6


async def test_the_rendered_page_gives_the_text_and_is_archived_beside_the_response(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(lambda port: spa_site(port, items=1), shared_address=True) as server:
        result = await crawl(server, warc=True, text=True, render=RenderConfig(mode="auto"))
    # The item's text exists only once its script has fetched it: the text output has it.
    texts = {record["url"]: record["text"] for record in read_text_output(result.data_dir)}
    item = server.site.url("app-0.spa.test", "/item/1")
    assert "Item 1 is the review of this item" in texts[item]
    responses: dict[str, str] = {}
    conversions: list[tuple[str, str, bytes]] = []
    for path in sorted((result.data_dir / "warc").glob("*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                headers = record.rec_headers
                uri = headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    responses[headers.get_header("WARC-Record-ID")] = uri
                elif record.rec_type == "conversion":
                    refers = headers.get_header("WARC-Refers-To")
                    conversions.append((uri, refers, record.content_stream().read()))
    home = canonical_url(server.site.seeds[0])
    assert sorted(uri for uri, _, _ in conversions) == sorted([home, item])
    for uri, refers, html in conversions:
        assert responses[refers] == uri
        assert b"<a href=" in html
    # The subresources the browser loaded were archived too, as trawl fetched them.
    assert any(uri.endswith("/static/app.js") for uri in responses.values())


def script_page(script: str) -> Response:
    """An application shell whose inline script is ``script``."""
    html = f'<!doctype html><body><div id="root"></div><script>{script}</script></body>'
    return Response(body=html.encode())


async def test_a_pages_subresources_are_capped(crawl: CrawlRunner) -> None:
    script = (
        "Promise.allSettled([...Array(10).keys()].map(n => fetch('/data/' + n + '.json')))"
        ".then(() => { document.getElementById('root').innerHTML = '<a href=/end>end</a>'; });"
    )

    def build(port: int) -> Site:
        routes: dict[str, Response] = {"http://www.cap.test/": script_page(script)}
        for n in range(10):
            routes[f"http://www.cap.test/data/{n}.json"] = Response(body=b"{}")
        routes["http://www.cap.test/end"] = Response(body=b"<p>end</p>")
        return Site.build(port, routes, ["http://www.cap.test/"])

    with SiteServer(build) as server:
        result = await crawl(server, render=RenderConfig(mode="always", max_requests=4))
        asked = paths(server)
    assert sum(n for path, n in asked.items() if path.startswith("/data/")) == 4
    assert result.summary.render["render_capped"] == 6
    assert result.summary.render["render_requests"] == 4
    assert server.site.url("www.cap.test", "/end") in result.rows


def test_render_without_chromium_is_one_line_naming_the_package(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "no-chromium"
    run = trawl_inline(
        capsys, "crawl", "http://www.example.test/", "--render", "auto", "--render-browser",
        str(missing), "--data-dir", str(tmp_path / "data"), "--no-progress",
    )  # fmt: skip
    line = assert_one_error_line(run)
    assert "apt-get install chromium" in line
    assert str(missing) in line
    assert not (tmp_path / "data").exists()


async def test_the_browser_is_restarted_past_its_memory_cap(crawl: CrawlRunner) -> None:
    # Chromium's processes hold well over 64 MiB together: each render passes the cap.
    with SiteServer(lambda port: spa_site(port, hosts=2, items=1)) as server:
        result = await crawl(server, render=RenderConfig(mode="auto", memory=64, concurrency=2))
    assert set(result.rows) == server.site.ground_truth
    render = result.summary.render
    assert render["rendered"] == 4
    assert render["render_restarts"] >= 2
    assert "render_failed" not in render


async def test_a_page_that_never_settles_is_read_as_fetched(crawl: CrawlRunner) -> None:
    # One page's script spins for ever once it has loaded, another keeps asking for more:
    # each render ends at the cap, and the crawl goes on.
    spin = "setTimeout(() => { for (;;) {} }, 0);"
    poll = "setInterval(() => fetch('/tick'), 100);"

    def build(port: int) -> Site:
        routes = {
            "http://www.slow.test/": Response(
                body=b'<a href="/spin">spin</a><a href="/poll">poll</a><p>'
                + b"enough text to be read as it is " * 20
                + b"</p>"
            ),
            "http://www.slow.test/spin": script_page(spin),
            "http://www.slow.test/poll": script_page(poll),
            "http://www.slow.test/tick": Response(body=b"{}"),
        }
        return Site.build(port, routes, ["http://www.slow.test/"])

    with SiteServer(build) as server:
        result = await crawl(server, render=RenderConfig(mode="auto", timeout=2.0))
    assert {row.state for row in result.rows.values()} == {State.DONE}
    assert len(result.rows) == 3
    assert result.summary.render["render_timeout"] == 2
