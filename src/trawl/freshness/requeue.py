"""Queuing pages again for a recrawl: what is due (or everything) at the start of a
recrawl pass, and what comes due while a continuous crawl runs.

A pass over what is due reads the sitemaps again first (conditional GETs), so that a
page whose lastmod changed is due by the time the pass queues pages: the engine queues
the due pages once the due sitemaps are crawled.
"""

from __future__ import annotations

import logging
import time

from trawl.config import Freshness, RecrawlPass
from trawl.store.protocols import Store

REQUEUE_BATCH = 10_000
"""Due pages queued again per store transaction."""

log = logging.getLogger("trawl.freshness.requeue")


async def requeue(store: Store, *, every: bool) -> None:
    """Queue again the URLs due for a recrawl (``every``: all fetched or failed ones)."""
    total = 0
    while True:
        moved = await store.requeue_due(time.time(), REQUEUE_BATCH, every=every)
        total += moved
        if every or moved < REQUEUE_BATCH:
            break
    if total:
        log.info("queued %d pages again for a recrawl", total, extra={"recrawls": total})


async def requeue_due(store: Store) -> bool:
    """Queue again what is due, if anything is: a read when nothing is, not a write
    transaction (a continuous crawl asks twice a second). True when something was due."""
    due = await store.next_due()
    if due is not None and due <= time.time():
        await requeue(store, every=False)
        return True
    return False


async def start_pass(store: Store, fresh: Freshness) -> bool:
    """Queue again what the run's recrawl pass starts with, if it has one; True when
    that is the due sitemaps, the due pages to be queued after them (:func:`requeue`)."""
    sitemaps_first = False
    if fresh.recrawl_pass is RecrawlPass.DUE and fresh.reads_sitemaps:
        requeued = await store.requeue_due(time.time(), REQUEUE_BATCH, sitemaps=True)
        sitemaps_first = requeued > 0
    if fresh.recrawl_pass is not None and not sitemaps_first:
        await requeue(store, every=fresh.recrawl_pass is RecrawlPass.ALL)
    return sitemaps_first
