"""How often the garbage collector runs in trawl's busy processes.

A crawl makes many short-lived container objects (a worker's answer, a batch of link
candidates, a claimed batch, the URL filter's cached verdicts), and CPython collects its
youngest generation every 700 allocations of them by default, so the collector ran
about 650 times in a 10,000-page crawl for 9% of the crawl process's CPU. The processes
that carry a crawl's traffic (the crawl process and its extract workers) collect it
every ``GC_YOUNG_THRESHOLD`` allocations instead; the older generations keep their
defaults.

CPython counts allocations net of deallocations, so a threshold larger than what one
batch keeps alive means a batch's objects are mostly freed before any collection sees
them; below that, every collection walks a whole batch (and the filter's newest cached
verdicts) only to find it still alive.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

GC_YOUNG_THRESHOLD = 100_000
"""Net allocations between two collections of the youngest GC generation while a crawl
runs. At 10,000, bench.store's URL filter process collected 1,154 times at 2 M URLs
(6.4 s of GC in about 62 s of work) and its store process 640 times (3.8 s); at 100,000,
44 times each, under 0.1 s together: 96,700 -> 109,900 links/s at 2 M URLs, user CPU
618 -> 582 s at 10 M. The crawl, ``bench.compare --runs 3`` on 20 x 500: 1.16x pages/s,
0.93x CPU a page, peak RSS 116 -> 118 MB (700 -> 10,000 earlier: 53,000 -> 56,100 links/s
at 1 M URLs)."""


@contextlib.contextmanager
def young_gc_threshold(threshold: int = GC_YOUNG_THRESHOLD) -> Iterator[None]:
    """Collect the youngest GC generation every ``threshold`` allocations meanwhile."""
    before = gc.get_threshold()
    gc.set_threshold(threshold, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
