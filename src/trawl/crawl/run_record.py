"""What a run of a crawl writes in the store's meta, for ``trawl status`` and the next
run: its state, when it (and the crawl) started, the crawl's policy and handlers, and the time
crawled over all runs."""

from __future__ import annotations

import time

from trawl.config import CrawlConfig
from trawl.policy import HANDLERS_KEY, POLICY_KEY, handlers_json, policy_json
from trawl.store.protocols import Store

RUN_STARTED_KEY = "run_started_at"
"""Meta key: when the current (or last) run started, as Unix time."""


async def run_begins(store: Store, config: CrawlConfig) -> None:
    """Record a run as started (a worker that joins a crawl keeps its policy)."""
    await store.set_meta("state", "running")
    # Read by ``trawl status`` while this run goes on (trawl.crawl.runner.read_summary).
    await store.set_meta(RUN_STARTED_KEY, f"{time.time():.3f}")
    if not config.join:
        await store.set_meta(POLICY_KEY, policy_json(config))
        await store.set_meta(HANDLERS_KEY, handlers_json(config))
    if await store.get_meta("created_at") is None:
        await store.set_meta("created_at", f"{time.time():.3f}")


async def run_ends(store: Store, state: str, elapsed: float) -> None:
    """Record a run as ended in ``state`` after ``elapsed`` seconds."""
    await store.set_meta("state", state)
    total = float(await store.get_meta("elapsed") or 0.0) + elapsed
    await store.set_meta("elapsed", f"{total:.3f}")
