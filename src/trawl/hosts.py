"""The host scheduler: per-host politeness slots in a ready-time heap.

Each host has one :class:`HostSlot` holding its buffered URLs, its in-flight count, the
earliest time its next request may start, and its robots.txt state. The heap is keyed by
that ready time, so picking the next request is O(log hosts) and a throttled or slow host
simply sits further down the heap: it never stalls the others.

Delay rule, applied when a response completes::

    next_ready = now + max(configured delay,
                           min(robots Crawl-delay, max_delay),
                           min(response_factor x response time, max_delay))

429 and 503 responses push ``next_ready`` further by the retry delay (Retry-After or
backoff), so the whole host waits, not just the URL.

Time comes from an injected clock (monotonic seconds) so the maths is testable exactly.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from trawl.config import Politeness
from trawl.robots import RobotsRules
from trawl.store.base import QueuedURL

Clock = Callable[[], float]


@dataclass(slots=True, eq=False)
class HostSlot:
    """Politeness and queue state of one host."""

    id: int
    name: str
    queue: deque[QueuedURL] = field(default_factory=deque)
    inflight: int = 0
    next_ready: float = 0.0
    robots: RobotsRules | None = None
    robots_expires: float = 0.0
    robots_pending: bool = False
    robots_failures: int = 0
    heap_key: float | None = None

    def needs_robots(self, now: float) -> bool:
        """True when robots.txt must be (re)fetched before the next URL."""
        return not self.robots_pending and (self.robots is None or now >= self.robots_expires)


class HostScheduler:
    """Chooses which host may send its next request, and when."""

    def __init__(self, politeness: Politeness, clock: Clock = time.monotonic) -> None:
        self._politeness = politeness
        self._clock = clock
        self._slots: dict[int, HostSlot] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._seq = itertools.count()
        self.buffered = 0
        self.inflight = 0

    def slot(self, host_id: int, name: str) -> HostSlot:
        """The slot of a host, created on first use."""
        found = self._slots.get(host_id)
        if found is None:
            found = self._slots[host_id] = HostSlot(host_id, name)
        return found

    def slots(self) -> Iterable[HostSlot]:
        """Every host slot known in this run."""
        return self._slots.values()

    def add(self, slot: HostSlot, urls: Iterable[QueuedURL]) -> None:
        """Buffer claimed URLs for a host and make it schedulable."""
        before = len(slot.queue)
        slot.queue.extend(urls)
        self.buffered += len(slot.queue) - before
        self._schedule(slot)

    def take(self, slot: HostSlot) -> QueuedURL:
        """Remove the next buffered URL of a host."""
        self.buffered -= 1
        return slot.queue.popleft()

    def drain(self, slot: HostSlot) -> list[QueuedURL]:
        """Remove every buffered URL of a host."""
        urls = list(slot.queue)
        slot.queue.clear()
        self.buffered -= len(urls)
        return urls

    def _wants_turn(self, slot: HostSlot) -> bool:
        if slot.inflight >= self._politeness.per_host or slot.robots_pending:
            return False
        return bool(slot.queue)

    def _schedule(self, slot: HostSlot) -> None:
        if not self._wants_turn(slot):
            return
        if slot.heap_key is not None and slot.heap_key <= slot.next_ready:
            return
        slot.heap_key = slot.next_ready
        heapq.heappush(self._heap, (slot.next_ready, next(self._seq), slot.id))

    def pop_ready(self) -> HostSlot | float | None:
        """The next host whose turn has come, else the time of the next turn, else None."""
        now = self._clock()
        while self._heap:
            ready, _, host_id = self._heap[0]
            slot = self._slots[host_id]
            if slot.heap_key != ready or not self._wants_turn(slot):
                heapq.heappop(self._heap)
                if slot.heap_key == ready:
                    slot.heap_key = None
                continue
            if slot.next_ready > ready:
                heapq.heapreplace(self._heap, (slot.next_ready, next(self._seq), host_id))
                slot.heap_key = slot.next_ready
                continue
            if ready > now:
                return ready
            heapq.heappop(self._heap)
            slot.heap_key = None
            return slot
        return None

    def requeue(self, slot: HostSlot) -> None:
        """Put a host back in the heap after a turn that sent no request."""
        self._schedule(slot)

    def started(self, slot: HostSlot) -> None:
        """A request to the host has started."""
        slot.inflight += 1
        self.inflight += 1
        if self._politeness.per_host > 1:
            slot.next_ready = max(slot.next_ready, self._clock() + self._politeness.delay)
        self._schedule(slot)

    def delay_after(self, slot: HostSlot, response_time: float) -> float:
        """Seconds the host must rest after a response that took ``response_time``."""
        p = self._politeness
        crawl_delay = slot.robots.crawl_delay if slot.robots and slot.robots.crawl_delay else 0.0
        return max(
            p.delay,
            min(crawl_delay, p.max_delay),
            min(p.response_factor * response_time, p.max_delay),
        )

    def finished(self, slot: HostSlot, response_time: float, extra_wait: float = 0.0) -> None:
        """A request to the host completed; ``extra_wait`` is a 429/503 back-off."""
        slot.inflight -= 1
        self.inflight -= 1
        now = self._clock()
        rest = max(self.delay_after(slot, response_time), extra_wait)
        slot.next_ready = max(slot.next_ready, now + rest)
        self._schedule(slot)

    def pause(self, slot: HostSlot, seconds: float) -> None:
        """Keep the host idle for ``seconds`` from now (robots.txt unavailable)."""
        slot.next_ready = max(slot.next_ready, self._clock() + seconds)
        self._schedule(slot)
