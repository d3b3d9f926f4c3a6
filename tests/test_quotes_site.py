"""The quotes site (tests/quotes_site.py) serves what its ground truth says: every quote
and author, read back from the served pages with the selectors of Scrapy's tutorial, is
the one :func:`quote_items` and :func:`author_items` name, and only the listings, the
author pages and robots.txt are served."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections import Counter
from urllib.parse import urlsplit

import pytest
from parsel import Selector

from quotes_site import (
    AUTHORS,
    HOST,
    PAGES,
    PER_PAGE,
    QUOTES,
    ROBOTS,
    author_items,
    author_url,
    listing_url,
    quote_items,
    quotes_site,
    start_url,
)
from trawl.demo import SiteServer


def get(server: SiteServer, url: str) -> tuple[int, bytes]:
    """The status and body of a GET of ``url``, sent to the site's loopback address."""
    parts = urlsplit(url)
    address = server.resolve_map()[HOST]
    request = urllib.request.Request(
        f"http://{address}:{server.port}{parts.path}", headers={"Host": parts.netloc}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_content_is_what_the_tutorial_needs() -> None:
    assert len(QUOTES) == PAGES * PER_PAGE
    assert len({quote.text for quote in QUOTES}) == len(QUOTES)
    assert len({author.slug for author in AUTHORS}) == len({a.name for a in AUTHORS}) == 50
    assert {quote.author for quote in QUOTES} == set(AUTHORS)
    pages_of = Counter((quote.author.slug, index // PER_PAGE) for index, quote in enumerate(QUOTES))
    on_pages = Counter(slug for slug, _ in pages_of)
    assert max(on_pages.values()) >= 3
    assert max(pages_of.values()) >= 2
    assert any(not quote.tags for quote in QUOTES)
    assert any(len(quote.tags) > 2 for quote in QUOTES)


def test_the_served_pages_hold_the_ground_truth() -> None:
    with SiteServer(quotes_site) as server:
        site = server.site
        assert start_url(site) == f"http://{HOST}:{server.port}/"
        listings = [listing_url(site, page) for page in range(1, PAGES + 1)]
        authors = [author_url(site, author) for author in AUTHORS]
        assert site.ground_truth == set(listings + authors)
        assert get(server, site.url(HOST, "/robots.txt")) == (200, ROBOTS)
        assert get(server, site.url(HOST, "/page/1/")) == get(server, start_url(site))
        served_quotes: list[dict[str, object]] = []
        next_pages = []
        for url in listings:
            status, body = get(server, url)
            assert status == 200
            page = Selector(text=body.decode())
            for quote in page.css("div.quote"):
                served_quotes.append(
                    {
                        "text": quote.css("span.text::text").get(),
                        "author": quote.css("small.author::text").get(),
                        "tags": quote.css("div.tags a.tag::text").getall(),
                    }
                )
            next_pages.append(page.css("li.next a::attr(href)").get())
            assert page.css(".author + a::attr(href)").getall() == [
                f"/author/{quote.author.slug}"
                for quote in QUOTES[len(served_quotes) - PER_PAGE : len(served_quotes)]
            ]
        assert served_quotes == quote_items()
        assert next_pages == [f"/page/{page}/" for page in range(2, PAGES + 1)] + [None]
        served_authors = []
        for url in authors:
            status, body = get(server, url)
            assert status == 200
            page = Selector(text=body.decode())
            served_authors.append(
                {
                    "name": page.css("h3.author-title::text").get(default="").strip(),
                    "birthdate": page.css(".author-born-date::text").get(default="").strip(),
                    "bio": page.css(".author-description::text").get(default="").strip(),
                }
            )
        assert served_authors == author_items()


@pytest.mark.parametrize("path", ["/tag/love/page/1/", "/login", "/page/11/", "/author/Nobody"])
def test_pages_a_crawl_must_not_need_are_not_served(path: str) -> None:
    with SiteServer(quotes_site) as server:
        status, _ = get(server, server.site.url(HOST, path))
    assert status == 404
