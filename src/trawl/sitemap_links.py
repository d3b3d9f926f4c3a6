"""The sitemap stage: sitemaps are found per host, and a fetched one becomes URLs.

A sitemap is a URL of kind SITEMAP in the frontier, so it is fetched like any page:
under the host's lease and politeness, after robots.txt allows it, with retries. With
``--sitemaps``, when a host's robots.txt is fetched its ``Sitemap:`` lines and its
``/sitemap.xml`` are queued (``--sitemaps-only`` queues the seeds' ``/sitemap.xml``
instead of the seed pages). A fetched sitemap is parsed by trawl.sitemaps, within the
protocol's limits; a refused one is counted under ``sitemap_error:<reason>``.

Each entry goes through the URL filter like a link (normalised, validated, scope and
include/exclude checked) and enters the seen-set at depth 0: a sitemap lists the
pages a site wants crawled, so they count as seeds. A page keeps the sitemap's
``<priority>`` (trawl.priority); a sitemap index's entries are sitemaps in turn; an
entry's ``<lastmod>`` goes to the store, which makes a page fetched before it due at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from trawl.fetcher import FetchResult
from trawl.links import LinkFilter
from trawl.parser import is_html
from trawl.sitemaps import Sitemap, SitemapError, SitemapKind, parse_sitemap
from trawl.store.base import CommitBatch, Kind, Listed
from trawl.urls import resolve

DEFAULT_SITEMAP = "/sitemap.xml"
"""Where a host's sitemap is looked for when robots.txt names none."""
_SITEMAP = Listed(Kind.SITEMAP, None)


def queue_sitemaps(urls: Iterable[str], base: str, links: LinkFilter, batch: CommitBatch) -> None:
    """Queue the sitemaps at ``urls`` (resolved against ``base``) in ``batch``."""
    for href in urls:
        candidate = links.candidate(href, base, 0, batch)
        if candidate is not None:
            batch.new_urls.append(candidate)
            batch.listed[candidate.id] = _SITEMAP


def host_sitemaps(some_url: str, named: Iterable[str]) -> list[str]:
    """A host's sitemaps: those its robots.txt ``named``, and its ``/sitemap.xml``."""
    default = resolve(DEFAULT_SITEMAP, some_url)
    return [*named, *([default] if default is not None else [])]


def read_sitemap(url: str, response: FetchResult, links: LinkFilter, batch: CommitBatch) -> None:
    """Turn a fetched sitemap into candidates in ``batch`` (a refused sitemap is counted
    by its reason). A body the fetcher cut at
    the protocol's size limit is refused as too large, an HTML page (a site's error or
    catch-all page served at a sitemap's address, told by its first bytes whatever its
    Content-Type says) as not a sitemap.

    Runs on a worker thread (a 50,000-entry sitemap takes about a second of CPU), so
    ``links`` must be a URL filter of its own: its verdict cache is the only state it
    has, and two sitemaps read at once can only fill it with the same verdicts."""
    if response.truncated:
        parsed: Sitemap | SitemapError = SitemapError.TOO_LARGE
    elif is_html(None, response.body[:512]):  # by its bytes: labels are often wrong
        parsed = SitemapError.NOT_A_SITEMAP
    else:
        parsed = parse_sitemap(response.body)
    if not isinstance(parsed, Sitemap):
        batch.count("sitemap_errors")
        batch.count(f"sitemap_error:{parsed.value}")
        return
    batch.count("sitemaps_read")
    kind = Kind.SITEMAP if parsed.kind is SitemapKind.INDEX else Kind.PAGE
    for entry in parsed.entries:
        candidate = links.candidate(entry.loc, url, 0, batch)
        if candidate is None:
            continue
        batch.new_urls.append(candidate)
        if kind is Kind.SITEMAP or entry.priority is not None:
            batch.listed[candidate.id] = Listed(kind, entry.priority)
        if entry.lastmod is not None:
            batch.lastmods.append((candidate.id, entry.lastmod))
    batch.count("sitemap_urls", len(parsed.entries))
