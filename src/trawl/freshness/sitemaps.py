"""The sitemap stage: sitemaps are found per host, and a fetched one becomes URLs.

A sitemap is a URL of kind SITEMAP in the frontier, so it is fetched like any page:
under the host's lease and politeness, after robots.txt allows it, with retries; a
redirect it answers with leads to a sitemap too (an http sitemap moved to https). With
``--sitemaps``, when a host's robots.txt is fetched its ``Sitemap:`` lines and its
``/sitemap.xml`` are queued (``--sitemaps-only`` queues the seeds' ``/sitemap.xml``
instead of the seed pages). A fetched sitemap is parsed by
trawl.freshness.sitemap_parser, within the
protocol's limits; a refused one is counted under ``sitemap_error:<reason>``.

Each entry goes through the URL filter like a link (normalised, validated, scope and
include/exclude checked), one hop deeper than the sitemap, so the hop-depth limit holds
for what sitemaps list as for links, and a chain of sitemap indexes ends there too. The
sitemaps of a host are as deep as the URL that brought the crawl to the host (a seed's
host's are at depth 0), so a trap of hosts that each name a sitemap ends there as well.

The location rule (sitemaps.org): a sitemap may list only URLs under its own directory,
on its own scheme, host and port; an entry outside is dropped and counted as
``sitemap_urls_refused``. A sitemap that robots.txt names may also list any URL of that
robots.txt's host (how a site vouches for a sitemap kept elsewhere), and a sitemap that
an index lists may list whatever the index may: that authority is kept as the sitemap
URL's ``origin`` in the store, so it survives a restart and holds for every worker.

A page keeps the sitemap's ``<priority>`` (trawl.frontier.priority); a sitemap index's entries are
sitemaps in turn; an entry's ``<lastmod>`` goes to the store, which makes a page fetched
before it due at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from trawl.extract.links import LinkFilter
from trawl.extract.parser import is_html
from trawl.extract.resolution import resolve
from trawl.extract.urls import DEFAULT_RULES, normalize
from trawl.fetch.fetcher import FetchResult
from trawl.freshness.sitemap_parser import Sitemap, SitemapError, SitemapKind, parse_sitemap
from trawl.store.values import CommitBatch, Kind, Listed, QueuedURL

DEFAULT_SITEMAP = "/sitemap.xml"
"""Where a host's sitemap is looked for when robots.txt names none."""
_SITEMAP = Listed(Kind.SITEMAP, None)


def _directory(url: str) -> str:
    """A normalised URL up to the last ``/`` of its path: the scheme, host and port and
    the directory, which a ``/`` in the query or fragment does not move."""
    start = url.find("://") + 3
    end = min(i for i in (url.find("?"), url.find("#"), len(url)) if i >= 0)
    slash = url.rfind("/", start, end)
    return url[: slash + 1] if slash >= 0 else url[:end] + "/"


def may_list(sitemap: str, url: str, origin: str | None = None) -> bool:
    """Whether the sitemap at ``sitemap`` may list ``url`` (both normalised): ``url`` lies
    under the sitemap's directory, or under that of ``origin``, the URL whose authority
    the sitemap carries (the root of the host whose robots.txt named it, or what the
    index that listed it carries)."""
    return url.startswith(_directory(sitemap)) or (
        origin is not None and url.startswith(_directory(origin))
    )


def queue_sitemaps(
    urls: Iterable[str], base: str, depth: int, links: LinkFilter, batch: CommitBatch
) -> None:
    """Queue the sitemaps at ``urls`` (resolved against ``base``, a URL of the host whose
    robots.txt names them, found ``depth`` hops from a seed) in ``batch``, at that depth
    and with that host's authority."""
    root = normalize("/", base, DEFAULT_RULES)
    origin = root if isinstance(root, str) else None
    for href in urls:
        candidate = links.candidate(href, base, depth, batch)
        if candidate is not None:
            batch.new_urls.append(candidate._replace(origin=origin))
            batch.listed[candidate.id] = _SITEMAP


def redirected(source: QueuedURL, target_id: int, batch: CommitBatch) -> None:
    """A redirect answering a sitemap leads to the sitemap: queue its target
    (``target_id``, a candidate in ``batch``) as one; a page's redirect is left alone.
    The target carries the authority of the URL that redirected (its ``origin``)."""
    if source.kind == Kind.SITEMAP:
        batch.listed[target_id] = _SITEMAP


def host_sitemaps(some_url: str, named: Iterable[str]) -> list[str]:
    """A host's sitemaps: those its robots.txt ``named``, and its ``/sitemap.xml``."""
    default = resolve(DEFAULT_SITEMAP, some_url)
    return [*named, *([default] if default is not None else [])]


def read_sitemap(
    sitemap: QueuedURL, response: FetchResult, links: LinkFilter, batch: CommitBatch
) -> None:
    """Turn a fetched sitemap into candidates in ``batch``, one hop deeper than it, those
    the location rule allows (a refused sitemap is counted by its reason). A body the
    fetcher cut at
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
    url, origin, depth = sitemap.url, sitemap.origin, sitemap.depth + 1
    # What a child sitemap may list: what its index may.
    authority = (origin or url) if kind is Kind.SITEMAP else None
    refused = 0
    for entry in parsed.entries:
        candidate = links.candidate(entry.loc, url, depth, batch)
        if candidate is None:
            continue
        if not may_list(url, candidate.url, origin):
            refused += 1
            continue
        batch.new_urls.append(
            candidate if authority is None else candidate._replace(origin=authority)
        )
        if kind is Kind.SITEMAP or entry.priority is not None:
            batch.listed[candidate.id] = Listed(kind, entry.priority)
        if entry.lastmod is not None:
            batch.lastmods.append((candidate.id, entry.lastmod))
    batch.count("sitemap_urls", len(parsed.entries))
    if refused:
        batch.count("sitemap_urls_refused", refused)
