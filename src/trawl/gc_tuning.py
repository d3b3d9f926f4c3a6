"""How often the garbage collector runs in trawl's busy processes.

A crawl makes many short-lived container objects (a worker's answer, a batch of link
candidates, a claimed batch), and CPython collects its youngest generation every 700
allocations of them by default, so the collector ran about 650 times in a 10,000-page
crawl for 9% of the crawl process's CPU. The processes that carry a crawl's traffic (the
crawl process and its extract workers) collect it every ``GC_YOUNG_THRESHOLD``
allocations instead; the older generations keep their defaults, and RSS does not change.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest GC generation while a crawl
runs. In bench.store at 1 M URLs, set in both its processes (the URL filter's and the
store's), it took the run from 53,000 to 56,100 links/s and its CPU from 108.7 to 102.2
user seconds (means of three runs each); the URL filter's share fell from 46.2 to 41.5 s."""


@contextlib.contextmanager
def young_gc_threshold(threshold: int = GC_YOUNG_THRESHOLD) -> Iterator[None]:
    """Collect the youngest GC generation every ``threshold`` allocations meanwhile."""
    before = gc.get_threshold()
    gc.set_threshold(threshold, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
