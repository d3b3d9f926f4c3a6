"""Sitemaps and feeds whose listed pages change, for sitemap and recrawl tests.

A `Listing` is a live route: an XML sitemap (``urlset``), an RSS 2.0 feed or an Atom 1.0
feed of the pages in ``lastmods``, each with its change time (``<lastmod>``, ``<pubDate>``
or ``<updated>``). A test changes a page's time by assigning to ``lastmods`` while the
server runs. The body's ETag is a hash of the body, so a request whose If-None-Match
names the current one gets a 304 without a body, and one made after a change gets the
new body.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate
from xml.sax.saxutils import escape, quoteattr

from trawl.demo.site import Response

__all__ = ["Listing", "ListingFormat"]


class ListingFormat(enum.StrEnum):
    """How a `Listing` is written."""

    URLSET = "urlset"
    RSS = "rss"
    ATOM = "atom"


_CONTENT_TYPES = {
    ListingFormat.URLSET: "application/xml",
    ListingFormat.RSS: "application/rss+xml",
    ListingFormat.ATOM: "application/atom+xml",
}


def _w3c(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Listing:
    """The pages in ``lastmods`` (absolute URL -> change time, Unix seconds), written in
    ``format``; a feed's own links (RSS channel, Atom ``self``) name ``home``, which is
    no entry."""

    format: ListingFormat
    lastmods: dict[str, float] = field(default_factory=dict)
    home: str = "http://feed.invalid/"

    def body(self) -> bytes:
        """The sitemap or feed as it reads now."""
        items = sorted(self.lastmods.items())
        if self.format is ListingFormat.URLSET:
            entries = "".join(
                f"<url><loc>{escape(url)}</loc><lastmod>{_w3c(when)}</lastmod></url>"
                for url, when in items
            )
            text = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        elif self.format is ListingFormat.RSS:
            entries = "".join(
                f"<item><title>{escape(url)}</title><link>{escape(url)}</link>"
                f"<pubDate>{formatdate(when, usegmt=True)}</pubDate></item>"
                for url, when in items
            )
            text = (
                '<rss version="2.0"><channel><title>Listing</title>'
                f"<link>{escape(self.home)}</link>{entries}</channel></rss>"
            )
        else:
            entries = "".join(
                f"<entry><title>{escape(url)}</title>"
                f'<link rel="edit" href="{escape(url)}/edit"/><link href={quoteattr(url)}/>'
                f"<updated>{_w3c(when)}</updated></entry>"
                for url, when in items
            )
            text = (
                '<feed xmlns="http://www.w3.org/2005/Atom"><title>Listing</title>'
                f'<link rel="self" href={quoteattr(self.home)}/><link href={quoteattr(self.home)}/>'
                f"{entries}</feed>"
            )
        return f'<?xml version="1.0" encoding="UTF-8"?>\n{text}\n'.encode()

    def __call__(self, headers: Mapping[str, str]) -> Response:
        """The answer to a request with ``headers``."""
        body = self.body()
        etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        validators = (("ETag", etag),)
        match = headers.get("If-None-Match")
        if match is not None and etag in (tag.strip() for tag in match.split(",")):
            return Response(status=304, content_type=None, headers=validators)
        return Response(body=body, content_type=_CONTENT_TYPES[self.format], headers=validators)
