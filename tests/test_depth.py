"""A URL's depth is its shortest path found, whatever the fetch order.

A URL first found along a long path and then, while it still waits in the queue, along
a shorter one takes the smaller depth, so ``--max-depth`` cuts the same pages in every
run. The seen-set's depth sketch hands such URLs to the store without asking the store
about every duplicate link.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import CrawlRunner
from pg import URL as PG_URL
from pg import crawl_name, drop_schema
from trawl.config import Limits
from trawl.demo import Response, Site, SiteServer
from trawl.extract.urls import url_hash
from trawl.frontier.seen import SeenSet
from trawl.store.location import SCHEMA_PREFIX, StoreLocation
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, NewURL

__all__ = ["crawl_name"]

# -- the seen-set's depth sketch ---------------------------------------------------------


def link(n: int, depth: int) -> NewURL:
    text = f"http://a.test/{n}"
    return NewURL(id=url_hash(text), url=text, host="a.test", depth=depth)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path) as opened:
        yield opened


async def test_a_known_url_found_shallower_is_handed_to_the_store(store: SQLiteStore) -> None:
    seen = SeenSet(store, expected_urls=100_000, error_rate=0.01)
    first = await seen.filter_new([link(1, 5), link(2, 2)])
    await store.commit(CommitBatch(new_urls=first.new))
    again = await seen.filter_new([link(1, 3), link(2, 2), link(2, 4), link(1, 6)])
    assert again.new == []
    assert again.shallower == [(url_hash("http://a.test/1"), 3)]


async def test_a_new_url_repeated_shallower_in_one_batch_is_handed_on(
    store: SQLiteStore,
) -> None:
    seen = SeenSet(store, expected_urls=100_000, error_rate=0.01)
    verdict = await seen.filter_new([link(1, 5), link(1, 2)])
    assert verdict.new == [link(1, 5)]
    assert verdict.shallower == [(url_hash("http://a.test/1"), 2)]
    await store.commit(CommitBatch(new_urls=verdict.new, shallower=verdict.shallower))
    depths = {row.url: row.depth async for row in store.export()}
    assert depths == {"http://a.test/1": 2}


async def test_a_resumed_seen_set_knows_the_depths_of_queued_urls(store: SQLiteStore) -> None:
    await store.commit(CommitBatch(new_urls=[link(1, 5), link(2, 1)]))
    seen = SeenSet(store, expected_urls=100_000, error_rate=0.01)
    assert await seen.load() == 2
    verdict = await seen.filter_new([link(1, 4), link(2, 3)])
    assert verdict.shallower == [(url_hash("http://a.test/1"), 4)]


# -- whole crawls ------------------------------------------------------------------------

MAX_DEPTH = 4
"""Deep enough for the target's subtree along the short path only."""


def paths_site(port: int, *, short_first: bool) -> Site:
    """A site where the target page is 4 links from the seed along one path and 2 along
    another. Its child and grandchild are within ``MAX_DEPTH`` only along the short path,
    and a dead end of the long path links the child too deep.

    With ``short_first`` the short path answers at once. Otherwise its page answers
    late, and the target's host answers robots.txt later still, so the long path finds
    the target first and the target waits in the queue when the short path finds it.
    """
    late = 0.0 if short_first else 0.8

    def page(*links: str, delay: float = 0.0) -> Response:
        anchors = "".join(f'<a href="http://{target}">x</a>' for target in links)
        body = f"<!doctype html><title>p</title>{anchors}".replace(".test/", f".test:{port}/")
        return Response(body=body.encode(), delay=delay)

    routes: dict[str, Response] = {
        "http://seed.paths.test/": page("long.paths.test/1", "short.paths.test/b"),
        "http://long.paths.test/1": page("long.paths.test/2"),
        "http://long.paths.test/2": page("long.paths.test/3"),
        "http://long.paths.test/3": page("target.paths.test/t", "long.paths.test/4"),
        "http://long.paths.test/4": page("target.paths.test/child"),
        "http://short.paths.test/b": page("target.paths.test/t", delay=late),
        "http://target.paths.test/robots.txt": Response(
            body=b"User-agent: *\nAllow: /\n", content_type="text/plain", delay=2 * late
        ),
        "http://target.paths.test/t": page("target.paths.test/child"),
        "http://target.paths.test/child": page("target.paths.test/grandchild"),
        "http://target.paths.test/grandchild": page(),
    }
    return Site.build(port, routes, ["http://seed.paths.test/"])


async def crawl_depths(
    crawl: CrawlRunner, store: StoreLocation | None, *, short_first: bool
) -> tuple[dict[str, int], int]:
    """Each stored URL's host and path with its depth, and the ``too_deep`` count."""
    with SiteServer(lambda port: paths_site(port, short_first=short_first)) as server:
        result = await crawl(
            server, limits=Limits(max_depth=MAX_DEPTH), soft_404=False, store=store
        )
    depths = {
        f"{urlsplit(url).hostname}{urlsplit(url).path}": row.depth
        for url, row in result.rows.items()
    }
    return depths, result.summary.limits.get("too_deep", 0)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_max_depth_cuts_the_same_pages_whatever_path_is_found_first(
    crawl: CrawlRunner, crawl_name: str, tmp_path: Path, engine: str
) -> None:
    stores: list[StoreLocation | None] = [None, None]
    if engine == "postgresql":
        stores = [StoreLocation(tmp_path / n, PG_URL, f"{crawl_name}{n}") for n in "ab"]
    try:
        short_first = await crawl_depths(crawl, stores[0], short_first=True)
        long_first = await crawl_depths(crawl, stores[1], short_first=False)
    finally:
        if engine == "postgresql":
            for name in "ab":
                drop_schema(SCHEMA_PREFIX + crawl_name + name)
    depths, too_deep = short_first
    assert depths["target.paths.test/t"] == 2
    assert depths["target.paths.test/child"] == 3
    assert depths["target.paths.test/grandchild"] == 4
    # The dead end's link to the child is too deep in either order; the child is crawled
    # all the same, found within --max-depth along the short path.
    assert too_deep == 1
    assert long_first == short_first
