"""A crawl's figures over time, for the console's charts.

``trawl serve`` keeps them: while a crawl it started runs, it reads the crawl's store
once every `PERIOD` seconds (less often when the reads take more than `READ_SHARE` of
the time) (its counters, its URLs queued or handed out, how many hosts back off:
trawl.store.host_table) and keeps the last `KEPT` samples of each crawl in RAM, one more
after the crawl stops. Nothing is written to the crawl's store, so watching a crawl
costs it only the reads; the history starts when the server starts or resumes the
crawl, and is lost when the server stops (the counters themselves are durable).

A chart's point is the difference of two consecutive samples: pages per second by
status class, errors per second by reason, and the queue and the hosts backing off at
the later sample.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from trawl.ops.summary import STATUS_CLASSES

PERIOD = 1.0
"""Seconds between two samples of a running crawl, at the least."""
READ_SHARE = 0.1
"""At most this share of the time goes to sampling: the host states are a scan of the
queued and failed URLs, seconds at millions of URLs, so a big crawl is sampled less
often (its rates are still per second over the span between two samples)."""
KEPT = 900
"""Samples kept per crawl: 15 minutes at one a second."""
ERROR_PREFIX = "error:"


@dataclass(frozen=True, slots=True)
class Sample:
    """A crawl's figures at one time."""

    at: float
    """Wall clock time."""
    counters: Mapping[str, int]
    """The store's counters (``status_2xx``, ``error:REASON``, ...)."""
    queued: int
    """URLs queued or handed out."""
    backing_off: int
    """Hosts backing off or given up (their state in the host table)."""


@dataclass(frozen=True, slots=True)
class Point:
    """A chart's point: the rates between two samples, the levels at the later one."""

    at: float
    pages_per_second: dict[str, float]
    """By status class (``2xx`` ...)."""
    errors_per_second: dict[str, float]
    """By error reason; reasons with no error in the span left out."""
    queued: int
    backing_off: int


class Samples:
    """The last samples of each crawl, a bounded ring per crawl."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._rings: dict[str, deque[Sample]] = {}

    def add(self, crawl_id: str, sample: Sample) -> None:
        ring = self._rings.setdefault(crawl_id, deque(maxlen=self._kept))
        ring.append(sample)

    def points(self, crawl_id: str) -> list[Point]:
        """The chart points of the crawl's samples, oldest first."""
        ring = list(self._rings.get(crawl_id, ()))
        return [_point(a, b) for a, b in itertools.pairwise(ring)]


def _point(a: Sample, b: Sample) -> Point:
    span = max(b.at - a.at, 1e-3)

    def rate(name: str) -> float:
        return round(max(0, b.counters.get(name, 0) - a.counters.get(name, 0)) / span, 3)

    reasons = sorted(name for name in b.counters if name.startswith(ERROR_PREFIX))
    errors = {name.removeprefix(ERROR_PREFIX): rate(name) for name in reasons}
    return Point(
        at=b.at,
        pages_per_second={c: rate(f"status_{c}") for c in STATUS_CLASSES},
        errors_per_second={reason: value for reason, value in errors.items() if value},
        queued=b.queued,
        backing_off=b.backing_off,
    )
