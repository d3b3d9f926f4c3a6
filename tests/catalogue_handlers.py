"""The page handlers of the book catalogue (tests/catalogue_site.py), as a user writes them.

Tests import them from here, or copy this file's text into a script of their own.
"""

from collections.abc import Iterator

import trawl


def listing(page: trawl.Page) -> Iterator[trawl.Follow]:
    yield from page.follow(page.css("nav a::attr(href)").getall())
    yield from page.follow(page.css("article h3 a::attr(href)").getall(), label="book")
    yield from page.follow(page.css("li.next a::attr(href)").getall())


def book(page: trawl.Page) -> Iterator[dict[str, str | None]]:
    yield {
        "title": page.css("h1::text").get(),
        "price": page.css("p.price::text").get(),
        "url": page.url,
    }
