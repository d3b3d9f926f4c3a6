"""A quotes site in the style of quotes.toscrape.com, the site of Scrapy's tutorial.

Ten listing pages (``/`` and ``/page/1/`` are the first, ``/page/2/`` to ``/page/10/``
the others) show ten quotes each: the text (``span.text``), the author (``small.author``)
followed by a link to the author's page (``.author + a``), and the tags
(``div.tags a.tag``). A listing links the next page (``li.next a``), the previous one,
tag pages, a login page and an outside site; only the listings, the author pages and
robots.txt (which allows everything) are served. An author's page has the name
(``h3.author-title``), birth date (``.author-born-date``), birthplace and description
(``.author-description``), with the whitespace around them that the original has.

Fifty authors: each is quoted at least once, and a dozen of them many times, on several
pages and some twice on one page, so a crawl that follows every author link reaches
each author's page many times over and must still give one item each.

The site is served under the host name ``quotes.toscrape.com`` on a loopback port (the
crawler resolves the name to 127.0.0.1). :data:`QUOTES` and :data:`AUTHORS` are the
whole content; :func:`quote_items` and :func:`author_items` are the items the tutorial's
handlers (docs/TUTORIAL.md) must yield, once each.
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass
from html import escape

from trawl.demo import Site
from trawl.demo.site import Response

__all__ = [
    "AUTHORS",
    "HOST",
    "PAGES",
    "PER_PAGE",
    "PUBLIC_START",
    "QUOTES",
    "ROBOTS",
    "Author",
    "Quote",
    "author_items",
    "author_url",
    "listing_url",
    "quote_items",
    "quotes_site",
    "start_url",
]

HOST = "quotes.toscrape.com"
PUBLIC_START = "https://quotes.toscrape.com/"
"""The start URL of Scrapy's tutorial, as the tutorial's script names it."""
PAGES = 10
PER_PAGE = 10
ROBOTS = b"User-agent: *\nAllow: /\n"

_FIRST = (
    "Ada", "Albert", "Jane", "Mark", "Marie", "André", "Emily", "Oscar", "Søren", "Maya",
    "Charles", "Virginia", "Fyodor", "George", "Frida", "Leo", "Simone", "Ralph", "Zoë", "Hermann",
    "Toni", "Isaac", "Mary", "Gabriel", "Ursula",
)  # fmt: skip
_LAST = (
    "Lovelace", "Einstein", "Austen", "Twain", "Curie", "Gide", "Dickinson", "Wilde",
    "Kierkegaard", "Angelou", "Dickens", "Woolf", "Dostoevsky", "Eliot", "Kahlo", "Tolstoy",
    "de Beauvoir", "Emerson", "Núñez", "Hesse", "Morrison", "Asimov", "Shelley", "García",
    "Le Guin",
)  # fmt: skip
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_PLACES = (
    "London, The United Kingdom", "Ulm, Germany", "Paris, France", "Florida, Missouri",
    "Copenhagen, Denmark", "St. Louis, Missouri", "Moscow, Russia", "Coyoacán, Mexico",
)  # fmt: skip
_WORDS = (
    "world", "thinking", "life", "love", "books", "truth", "change", "friendship", "courage",
    "time", "light", "dreams", "silence", "kindness", "reading", "hope", "music", "wisdom",
    "the", "a", "of", "is", "and", "never", "always", "only", "every", "we", "you", "what",
)  # fmt: skip
_TAGS = (
    "life", "love", "inspirational", "humor", "books", "truth", "friendship", "change",
    "thinking", "world", "reading", "courage", "wisdom", "simile", "misattributed-to-author",
)  # fmt: skip
_OFTEN = 12
"""Authors quoted again and again: quotes past the fiftieth are theirs."""


@dataclass(frozen=True, slots=True)
class Author:
    """One author: ``slug`` names the page (``/author/SLUG``)."""

    slug: str
    name: str
    birthdate: str
    birthplace: str
    bio: str


@dataclass(frozen=True, slots=True)
class Quote:
    """One quote, with its text as shown (in curly quotes) and its tags in order."""

    text: str
    author: Author
    tags: tuple[str, ...]


def _slug(name: str) -> str:
    """The name in ASCII with hyphens, as quotes.toscrape.com spells author pages."""
    plain = unicodedata.normalize("NFKD", name.replace("ø", "o"))
    ascii_name = plain.encode("ascii", "ignore").decode()
    return "-".join(ascii_name.replace(".", "").split())


def _authors() -> tuple[Author, ...]:
    rng = random.Random(36)
    authors = []
    for index in range(50):
        name = f"{_FIRST[index % len(_FIRST)]} {_LAST[(index * 7) % len(_LAST)]}"
        if index >= len(_FIRST):
            name = f"{name} Jr."
        birthdate = f"{_MONTHS[rng.randrange(12)]} {rng.randint(1, 28)}, {rng.randint(1700, 1990)}"
        bio = " ".join(
            [f"{name} was born in {_PLACES[index % len(_PLACES)].split(',')[0]}."]
            + [f"{name.split()[0]} wrote about {rng.choice(_WORDS[:18])} & more." for _ in range(2)]
        )
        authors.append(
            Author(_slug(name), name, birthdate, f"in {_PLACES[index % len(_PLACES)]}", bio)
        )
    return tuple(authors)


AUTHORS: tuple[Author, ...] = _authors()
"""Every author, in the order of their first quote."""


def _quotes() -> tuple[Quote, ...]:
    rng = random.Random(17)
    quotes = []
    for index in range(PAGES * PER_PAGE):
        author = AUTHORS[index] if index < len(AUTHORS) else AUTHORS[index * 7 // 3 % _OFTEN]
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 14))]
        sentence = " ".join(words).capitalize()
        text = f"\u201c{sentence}, says voice number {index + 1}.\u201d"
        tags = tuple(rng.sample(_TAGS, rng.randint(0, 4)))
        quotes.append(Quote(text, author, tags))
    return tuple(quotes)


QUOTES: tuple[Quote, ...] = _quotes()
"""Every quote, in the order the listings show them."""


def _document(title: str, body: str) -> bytes:
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='UTF-8'>\n"
        f"<title>{title}</title>\n</head>\n<body>\n<div class='container'>\n"
        "<div class='row header-box'><div class='col-md-8'><h1>"
        "<a href='/' style='text-decoration: none'>Quotes to Scrape</a></h1></div>"
        "<div class='col-md-4'><p><a href='/login'>Login</a></p></div></div>\n"
        f"{body}\n</div>\n<footer class='footer'><div class='container'>"
        "<p class='text-muted'>Quotes by: "
        "<a href='https://www.goodreads.com/quotes'>GoodReads.com</a></p>"
        "</div></footer>\n</body>\n</html>\n"
    ).encode()


def _quote_html(quote: Quote) -> str:
    tags = "".join(
        f"\n            <a class='tag' href='/tag/{tag}/page/1/'>{tag}</a>" for tag in quote.tags
    )
    return (
        "<div class='quote' itemscope itemtype='http://schema.org/CreativeWork'>\n"
        f"        <span class='text' itemprop='text'>{escape(quote.text)}</span>\n"
        f"        <span>by <small class='author' itemprop='author'>{escape(quote.author.name)}"
        f"</small>\n        <a href='/author/{quote.author.slug}'>(about)</a>\n        </span>\n"
        "        <div class='tags'>\n            Tags:\n"
        f"            <meta class='keywords' itemprop='keywords' content='{','.join(quote.tags)}'>"
        f"{tags}\n        </div>\n    </div>\n"
    )


def _listing(page: int) -> bytes:
    shown = QUOTES[(page - 1) * PER_PAGE : page * PER_PAGE]
    pager = ""
    if page > 1:
        pager += (
            f"<li class='previous'><a href='/page/{page - 1}/'>"
            "<span aria-hidden='true'>&larr;</span> Previous</a></li>\n"
        )
    if page < PAGES:
        pager += (
            f"<li class='next'><a href='/page/{page + 1}/'>"
            "Next <span aria-hidden='true'>&rarr;</span></a></li>\n"
        )
    body = (
        "<div class='row'><div class='col-md-8'>\n"
        + "".join(_quote_html(quote) for quote in shown)
        + f"<nav><ul class='pager'>\n{pager}</ul></nav>\n</div></div>"
    )
    return _document("Quotes to Scrape", body)


def _author_page(author: Author) -> bytes:
    body = (
        "<div class='author-details'>\n"
        f"    <h3 class='author-title'>{escape(author.name)}\n    </h3>\n"
        "    <p><strong>Born:</strong> "
        f"<span class='author-born-date'>{author.birthdate}</span> "
        f"<span class='author-born-location'>{escape(author.birthplace)}</span></p>\n"
        "    <p><strong>Description:</strong></p>\n"
        f"    <div class='author-description'>\n        {escape(author.bio)}\n    </div>\n"
        "</div>"
    )
    return _document(f"Quotes to Scrape: {escape(author.name)}", body)


def listing_url(site: Site, page: int) -> str:
    """The URL of listing ``page`` as the crawl from ``/`` reaches it (page 1 is ``/``)."""
    return site.url(HOST, "/" if page == 1 else f"/page/{page}/")


def author_url(site: Site, author: Author) -> str:
    """The URL of ``author``'s page."""
    return site.url(HOST, f"/author/{author.slug}")


def start_url(site: Site) -> str:
    """Where the tutorial's crawl starts on the served site: its first listing."""
    return listing_url(site, 1)


def quotes_site(port: int) -> Site:
    """The site on ``port``. Its ground truth is every page the tutorial's handlers
    reach from ``/``: the listings and the author pages."""
    base = f"http://{HOST}"
    routes: dict[str, Response] = {
        f"{base}/robots.txt": Response(body=ROBOTS, content_type="text/plain"),
        f"{base}/": Response(body=_listing(1)),
    }
    for page in range(1, PAGES + 1):
        routes[f"{base}/page/{page}/"] = Response(body=_listing(page))
    for author in AUTHORS:
        routes[f"{base}/author/{author.slug}"] = Response(body=_author_page(author))
    pages = [f"{base}/"] + [f"{base}/page/{page}/" for page in range(2, PAGES + 1)]
    authors = [f"{base}/author/{author.slug}" for author in AUTHORS]
    return Site.build(port, routes, [f"{base}/"], hosts=[HOST], ground_truth=pages + authors)


def quote_items() -> list[dict[str, object]]:
    """Every quote as the tutorial's listing handler yields it, in listing order."""
    return [
        {"text": quote.text, "author": quote.author.name, "tags": list(quote.tags)}
        for quote in QUOTES
    ]


def author_items() -> list[dict[str, object]]:
    """Every author as the tutorial's author handler yields it, in order of first quote."""
    return [
        {"name": author.name, "birthdate": author.birthdate, "bio": author.bio}
        for author in AUTHORS
    ]
