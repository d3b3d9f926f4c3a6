"""A page handler for the crawl benchmark: what running one costs a crawl.

``python -m bench.crawl --extra "--handler bench/handlers.py:follow_all"`` crawls the
benchmark's site with a handler on every page: it yields one small item and follows
every link of the page, so the crawl fetches what it fetches without a handler and the
benchmark's checks still hold (docs/PERFORMANCE.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from trawl.handlers.follow import Follow
from trawl.handlers.page import Page


def follow_all(page: Page) -> Iterator[dict[str, object] | Follow]:
    """One item naming the page, and a follow of each of its links."""
    yield {"url": page.url, "links": len(page.links)}
    yield from page.follow(page.links)
