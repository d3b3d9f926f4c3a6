"""A generated book catalogue, for the tests of trawl as a library (page handlers).

The home page links every category's first listing page (``nav a``); a listing page shows a few
books (``article h3 a``) and links the next page (``li.next a``); a book's page has its
title (``h1``) and price (``p.price``). Some books are listed in two categories, so a
crawl reaches their pages from several listings and must still give one item each. A
listing also links a book under ``/private/`` (robots.txt forbids it) and one on another
host (out of scope): a handler that follows them must not make either be fetched.

:func:`catalogue` builds the site for a port; :func:`expected_items` is the ground
truth: one item per book a crawl may fetch, as the handlers of tests/catalogue_handlers.py
yield it.
"""

from __future__ import annotations

import dataclasses

from trawl.demo import Site
from trawl.demo.site import Response

HOST = "books.test"
OTHER_HOST = "elsewhere.test"
CATEGORIES = ("fiction", "poetry", "travel")
PER_PAGE = 4
BOOKS_PER_CATEGORY = 10
SHARED = {"poetry": (1, 2, 3), "travel": (12, 13)}
"""Books of other categories that a category lists too (by book number)."""
ROBOTS = b"User-agent: *\nDisallow: /private/\n"


def books(category: str) -> list[int]:
    """The numbers of the books a category lists, in listing order."""
    first = CATEGORIES.index(category) * BOOKS_PER_CATEGORY + 1
    own = list(range(first, first + BOOKS_PER_CATEGORY))
    return own + list(SHARED.get(category, ()))


def title(number: int) -> str:
    """The title of book ``number``."""
    return f"Book number {number}: a story of {'ÄÖÜ'[number % 3]}"


def price(number: int) -> str:
    """The price of book ``number``."""
    return f"£{number * 1.25:.2f}"


def _page(heading: str, body: str) -> bytes:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{heading}</title></head>"
        f"<body><h1>{heading}</h1>{body}</body></html>"
    ).encode()


def _listing(category: str, page: int) -> bytes:
    listed = books(category)
    shown = listed[(page - 1) * PER_PAGE : page * PER_PAGE]
    articles = "".join(
        f"<article><h3><a href='/book/{n}.html'>{title(n)}</a></h3></article>" for n in shown
    )
    extra = ""
    if page == 1:
        extra = (
            "<article><h3><a href='/private/secret.html'>Secret</a></h3></article>"
            f"<article><h3><a href='http://{OTHER_HOST}/book/1.html'>Away</a></h3></article>"
        )
    pages = (len(listed) + PER_PAGE - 1) // PER_PAGE
    following = (
        f"<ul><li class='next'><a href='page-{page + 1}.html'>next</a></li></ul>"
        if page < pages
        else ""
    )
    return _page(f"{category} page {page}", articles + extra + following)


def _book(number: int) -> bytes:
    return _page(
        title(number),
        f"<p class='price'>{price(number)}</p><a href='/'>home</a>"
        f"<a href='/book/{number + 1}.html'>a book not listed anywhere</a>",
    )


def book_numbers() -> list[int]:
    """Every book a listing names (and a crawl may fetch), once each."""
    return sorted({n for category in CATEGORIES for n in books(category)})


def catalogue(port: int) -> Site:
    """The catalogue on ``port``."""
    base = f"http://{HOST}"
    home = "<nav>" + "".join(f"<a href='/c/{c}/page-1.html'>{c}</a>" for c in CATEGORIES)
    home += "</nav>"
    routes: dict[str, Response] = {
        f"{base}/": Response(body=_page("Catalogue", home + "<a href='/about.html'>about</a>")),
        f"{base}/about.html": Response(body=_page("About", "<a href='/'>home</a>")),
        f"{base}/robots.txt": Response(body=ROBOTS, content_type="text/plain"),
        f"{base}/private/secret.html": Response(body=_page("Secret", "")),
        f"http://{OTHER_HOST}/book/1.html": Response(body=_page("Away", "")),
    }
    for category in CATEGORIES:
        pages = (len(books(category)) + PER_PAGE - 1) // PER_PAGE
        for page in range(1, pages + 1):
            routes[f"{base}/c/{category}/page-{page}.html"] = Response(
                body=_listing(category, page)
            )
    for number in book_numbers():
        routes[f"{base}/book/{number}.html"] = Response(body=_book(number))
    site = Site.build(port, routes, [f"{base}/"], hosts=[HOST])
    return dataclasses.replace(site, off_scope_hosts=(OTHER_HOST,))


def book_url(site: Site, number: int) -> str:
    """The URL of book ``number``'s page as trawl fetches it."""
    return site.url(HOST, f"/book/{number}.html")


def expected_items(site: Site, numbers: list[int] | None = None) -> list[dict[str, str]]:
    """The items of the catalogue's handlers for the books ``numbers`` (default:
    every listed book), sorted by URL."""
    chosen = book_numbers() if numbers is None else numbers
    items = [{"title": title(n), "price": price(n), "url": book_url(site, n)} for n in chosen]
    return sorted(items, key=lambda item: item["url"])
