"""A crawl's seeds: normalised once, and queued at the start of every run (a seed the
store knows already is not queued again)."""

from __future__ import annotations

from trawl.config import CrawlConfig
from trawl.errors import UsageError
from trawl.extract.links import LinkFilter
from trawl.extract.urls import Rejection, normalize
from trawl.freshness.sitemaps import DEFAULT_SITEMAP, queue_sitemaps
from trawl.store.values import CommitBatch


def seeds_of(config: CrawlConfig) -> tuple[str, ...]:
    """The normalised seeds of a crawl; a seed that cannot be crawled is a usage error."""
    seeds: list[str] = []
    for seed in config.seeds:
        url = normalize(seed, None, config.url_rules)
        if isinstance(url, Rejection):
            raise UsageError(f"not a crawlable http(s) URL: {seed}")
        seeds.append(url)
    return tuple(seeds)


def seed_batch(seeds: list[str], links: LinkFilter, *, sitemaps_only: bool) -> CommitBatch:
    """The seeds as candidates for the seen-set, through the URL filter ``links`` (with
    ``sitemaps_only``, each seed's host's ``/sitemap.xml`` in its place)."""
    batch = CommitBatch()
    for seed in seeds:
        if sitemaps_only:
            queue_sitemaps([DEFAULT_SITEMAP], seed, 0, links, batch)
            continue
        candidate = links.candidate(seed, None, 0, batch)
        if candidate is not None:
            batch.new_urls.append(candidate)
    return batch
