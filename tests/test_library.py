"""trawl as a library: a :class:`trawl.Crawler` with page handlers crawls a generated book
catalogue on loopback (tests/catalogue_site.py) and gives exactly its items.

The crawls are real: the catalogue is served over HTTP, the store is SQLite in a
temporary data dir, and the handlers run in extract worker processes (which import
tests/catalogue_handlers.py) or in the crawl's process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import catalogue_handlers
import trawl
from catalogue_site import HOST, OTHER_HOST, book_numbers, book_url, catalogue, expected_items
from conftest import page_requests, read_rows
from trawl.config import ScopeConfig
from trawl.demo import SiteServer
from trawl.errors import UsageError
from trawl.extract.handled import Fetched
from trawl.extract.pool import Extracted, Extractor, ExtractSettings
from trawl.extract.urls import DEFAULT_RULES
from trawl.store.location import StoreLocation
from trawl.store.values import State

TESTS = Path(__file__).resolve().parent


def crawler_for(server: SiteServer, data_dir: Path, **options: Any) -> trawl.Crawler:
    """A crawler of the catalogue with no politeness delay, every host on loopback."""
    wanted: dict[str, Any] = {
        "delay": 0.0, "response_factor": 0.0, "retry_base": 0.05, "parse_workers": 0,
        "resolve": server.resolve_map(), "allow_network": ["127.0.0.0/8"],
    }  # fmt: skip
    return trawl.Crawler(server.site.seeds, data_dir=data_dir, **(wanted | options))


def with_catalogue_handlers(crawler: trawl.Crawler) -> trawl.Crawler:
    crawler.handler()(catalogue_handlers.listing)
    crawler.handler(label="book")(catalogue_handlers.book)
    return crawler


async def stored_items(data_dir: Path) -> list[dict[str, Any]]:
    """The items the store of the crawl in ``data_dir`` holds, checked to have one key each."""
    async with StoreLocation(data_dir).open(readonly=True) as store:
        rows = [row async for row in store.items()]
    assert len({row.key for row in rows}) == len(rows)
    return by_url([json.loads(row.data) for row in rows])


def by_url(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: str(item["url"]))


def flaky_book(page: trawl.Page) -> Iterator[dict[str, str | None]]:
    """The catalogue's book handler, failing on every seventh book."""
    number = int(page.url.rsplit("/", 1)[1].removesuffix(".html"))
    if number % 7 == 0:
        raise ValueError(f"no price for book {number}\nthe second line is left out")
    yield from catalogue_handlers.book(page)


def follows_nothing(page: trawl.Page) -> None:
    """A handler that neither yields items nor follows links."""


@pytest.fixture
def workers_import_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Extract workers can import the tests' modules, as they import a user's."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", f"{TESTS}{os.pathsep}{path}" if path else str(TESTS))


@pytest.mark.usefixtures("workers_import_the_tests")
def test_the_catalogue_gives_every_item_once_and_follows_only_what_it_may(
    tmp_path: Path,
) -> None:
    with SiteServer(catalogue) as server:
        crawler = with_catalogue_handlers(crawler_for(server, tmp_path / "books", parse_workers=1))
        summary = crawler.run()
        again = crawler.run()
        requests = page_requests(server)
        hosts = {record.host for record in server.requests}
    site = server.site
    assert summary.state == "done"
    assert crawler.summary == again
    assert (again.state, again.fetched) == ("done", summary.fetched)
    assert asyncio.run(stored_items(tmp_path / "books")) == expected_items(site)
    # Books listed twice are fetched once; the follows to a robots-disallowed path and
    # to another host are never fetched, nor is a link no handler followed.
    assert all(requests[book_url(site, n)] == 1 for n in book_numbers())
    assert site.url(HOST, "/private/secret.html") not in requests
    assert OTHER_HOST not in {host.partition(":")[0] for host in hosts}
    assert site.url(HOST, "/about.html") not in requests
    rows = read_rows(tmp_path / "books")
    assert rows[site.url(HOST, "/private/secret.html")].state is State.BLOCKED


async def test_a_failing_handler_fails_its_pages_and_the_crawl_goes_on(tmp_path: Path) -> None:
    with SiteServer(catalogue) as server:
        crawler = crawler_for(server, tmp_path / "books")
        crawler.handler()(catalogue_handlers.listing)
        crawler.handler(label="book")(flaky_book)
        async with crawler:
            summary = await crawler.wait()
    site = server.site
    assert summary.state == "done"
    failing = [n for n in book_numbers() if n % 7 == 0]
    rows = read_rows(tmp_path / "books")
    for number in failing:
        row = rows[book_url(site, number)]
        assert (row.state, row.error) == (State.FAILED, "handler_failed")
    kept = [n for n in book_numbers() if n % 7]
    assert await stored_items(tmp_path / "books") == expected_items(site, kept)
    assert summary.errors_by_class.get("handler_failed") == len(failing)


async def test_a_handler_that_follows_nothing_fetches_only_the_seed(tmp_path: Path) -> None:
    with SiteServer(catalogue) as server:
        crawler = crawler_for(server, tmp_path / "books")
        crawler.handler()(follows_nothing)
        async with crawler:
            await crawler.wait()
        requests = page_requests(server)
    assert dict(requests) == {server.site.seeds[0]: 1}
    assert await stored_items(tmp_path / "books") == []


async def test_async_with_yields_each_item_once_and_leaves_signal_handlers_alone(
    tmp_path: Path,
) -> None:
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    before = [signal.getsignal(sig) for sig in stop_signals]
    heard: list[dict[str, Any]] = []
    got: list[dict[str, Any]] = []
    during = []
    with SiteServer(catalogue) as server:
        crawler = with_catalogue_handlers(crawler_for(server, tmp_path / "books"))

        @crawler.on_item
        async def hear(item: dict[str, Any]) -> None:
            heard.append(item)

        async with crawler:
            async for item in crawler.items():
                got.append(item)
                during.append([signal.getsignal(sig) for sig in stop_signals])
    assert crawler.summary is not None
    assert crawler.summary.state == "done"
    expected = expected_items(server.site)
    assert by_url(got) == expected
    assert by_url(heard) == expected
    assert all(handlers == before for handlers in during)
    assert [signal.getsignal(sig) for sig in stop_signals] == before


async def test_leaving_the_context_stops_the_crawl_and_a_new_run_resumes_it(
    tmp_path: Path,
) -> None:
    with SiteServer(catalogue) as server:
        first = with_catalogue_handlers(crawler_for(server, tmp_path / "books", delay=0.02))
        async with first:
            async for _ in first.items():
                break
        assert first.summary is not None
        assert first.summary.state == "interrupted"
        second = with_catalogue_handlers(crawler_for(server, tmp_path / "books"))
        async with second:
            await second.wait()
        requests = page_requests(server)
    assert second.summary is not None
    assert second.summary.state == "done"
    assert await stored_items(tmp_path / "books") == expected_items(server.site)
    assert all(requests[book_url(server.site, n)] == 1 for n in book_numbers())


def test_options_are_checked_as_the_command_line_checks_them(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown crawl option 'delays'"):
        trawl.Crawler("https://a.test/", data_dir=tmp_path, delays=1.0)
    with pytest.raises(UsageError, match="option max_pages must be an integer"):
        trawl.Crawler("https://a.test/", data_dir=tmp_path, max_pages="many")
    with pytest.raises(UsageError, match="concurrency must be at least 1"):
        trawl.Crawler("https://a.test/", data_dir=tmp_path, concurrency=0)
    with pytest.raises(UsageError, match=r"did you mean https://a\.test/"):
        trawl.Crawler("a.test", data_dir=tmp_path)
    crawler = trawl.Crawler("https://a.test/", data_dir=tmp_path)
    crawler.handler()(follows_nothing)
    with pytest.raises(UsageError, match="two handlers for pages without a label"):
        crawler.handler()(catalogue_handlers.listing)
    assert crawler.config().handlers == ((None, "test_library:follows_nothing"),)


async def test_an_on_item_that_raises_stops_the_crawl_and_its_error_is_raised(
    tmp_path: Path,
) -> None:
    with SiteServer(catalogue) as server:
        crawler = with_catalogue_handlers(crawler_for(server, tmp_path / "books", delay=0.02))

        @crawler.on_item
        async def refuse(item: dict[str, Any]) -> None:
            raise RuntimeError(f"cannot keep {item['title']}")

        with pytest.raises(RuntimeError, match="cannot keep Book number"):
            async with crawler:
                await crawler.wait()
        fetched = sum(page_requests(server).values())
    assert fetched < 1 + 10 + len(book_numbers())
    assert len(await stored_items(tmp_path / "books")) < len(book_numbers())


def test_a_page_that_says_nofollow_keeps_its_items_but_not_its_follows() -> None:
    settings = ExtractSettings(
        seeds=("http://books.test/",), scope=ScopeConfig(), rules=DEFAULT_RULES,
        agent="trawl", honour_nofollow=True, max_links=100,
        handlers=((None, "catalogue_handlers:listing"), ("book", "catalogue_handlers:book")),
    )  # fmt: skip
    extractor = Extractor(settings)
    listing = b"<nav><a href='/c/a/page-1.html'>a</a></nav>"
    book = b"<h1>Title</h1><a href='/other.html'>other</a>"
    meta = b"<meta name='robots' content='nofollow'>"

    def extract(body: bytes, label: str | None) -> Extracted:
        fetched = Fetched(200, {"content-type": "text/html"}, 1.0, label)
        return extractor.extract("http://books.test/", 1, body, "text/html", (), fetched)

    followed = extract(listing, None)
    assert [(link.url, link.label) for link in followed.links] == [
        ("http://books.test/c/a/page-1.html", None)
    ]
    assert extract(meta + listing, None).links == []
    assert extract(meta + listing, None).counters["nofollow_pages"] == 1
    kept = extract(meta + book, "book")
    assert kept.links == []
    assert kept.handled is not None
    assert [json.loads(item)["title"] for item in kept.handled.items] == ["Title"]
