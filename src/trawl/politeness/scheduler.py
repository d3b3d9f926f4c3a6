"""The host scheduler: per-host and per-address politeness slots in a ready-time heap.

Each host has one :class:`HostSlot` holding its buffered URLs, its in-flight count, the
earliest time its next request may start, and its robots.txt state. The heap is keyed by
that ready time, so picking the next request is O(log hosts) and a throttled or slow host
simply sits further down the heap: it never stalls the others.

Hosts that resolve to the same address share an :class:`IpSlot`, so a server with 500
virtual hosts is not asked 500 things at once. An address that serves ``n`` distinct
host names (seen in this run) allows ``limit = per_ip x ceil(sqrt(n))`` requests in
flight, at most ``per_ip_max``, and at most ``limit`` request starts per delay: one site
on its own address is asked one thing at a time, a shared host of nine small sites three,
an address in front of hundreds of sites (a CDN) ``per_ip_max``. Each host keeps its own
limit and delay besides. A host whose address is busy waits on that address and is put
back in the heap when a request to it finishes; hosts whose turns fall together take
them first come, first served, so the host just served goes behind those that waited.

An address is *crowded* when this worker holds ``CROWD`` times its limit of hosts on it:
more would only wait for the address's turns while holding host slots that hosts with
addresses of their own could use. The frontier leases no host of a crowded address, and
gives back a host that turns out to be on one (trawl.frontier.queue), so a CDN in front
of thousands of sites is asked at its limit by a bounded cohort of them. A host given
back that way is still counted among the address's sites (:meth:`HostScheduler.seen_at`),
so the address's limit grows with the sites behind it, not with the cohort held.

Slots are kept for the hosts held, not for every host of the run: a host given back whose
release is committed, or whose lease was lost, is forgotten
(:meth:`HostScheduler.forget`), so the scheduler's memory follows the hosts held however
many hosts a crawl meets. What of a host the store does not keep is kept only while it
matters (:meth:`HostSlot.kept_until`): a refusal or an unavailable robots.txt until the
host is to be asked anew, breaker counts until ``FAILURES_KEPT`` after the host's rest
(:meth:`HostScheduler.sweep` forgets the host then); a host given up for the run leaves
only its reason, which a new slot of it takes up. A new lease of a forgotten host takes
its rest time and cached robots.txt from the store. Its address's slot goes with it when
it was the address's only site; an address of several sites keeps their count, and
stops counting once its limit is at ``per_ip_max``.

How long a host whose turn had come waited for a request slot (from its ready time, or
from when it was put in the heap when that is later: its buffer was empty, or its
address busy) is summed in ``waited`` over ``turns`` (trawl.crawl.capacity: hosts that
wait long for a slot are more hosts than the slots serve, and a server closes their idle
connections before their next turn).

Delay rule, applied when a response completes::

    next_ready = now + max(configured delay,
                           min(robots Crawl-delay, max_delay),
                           min(response_factor x response time, max_delay))

429 and 503 responses push ``next_ready`` further by the retry delay (Retry-After or
backoff), so the whole host waits, not just the URL.

The slots themselves, and the state they keep, are trawl.politeness.slots.

A host of a site with its own ``delay`` or ``per_host`` (trawl.sites) uses those in place
of the crawl's, for its own turns and for the spacing of its starts on its address; the
address's limit on requests in flight holds all the same.

Time comes from an injected clock (monotonic seconds) so the maths is testable exactly.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterable

from trawl.config import Politeness
from trawl.politeness.slots import HostSlot, IpSlot
from trawl.sites.rules import Sites
from trawl.store.values import QueuedURL

Clock = Callable[[], float]


def address_limit(hosts: int, politeness: Politeness) -> int:
    """Requests in flight allowed to an address that serves ``hosts`` distinct hosts."""
    root = math.isqrt(max(hosts - 1, 0)) + 1  # ceil(sqrt(hosts)), exactly
    return max(politeness.per_ip, min(politeness.per_ip_max, politeness.per_ip * root))


def _add(ids: tuple[int, ...], host_id: int, twin: tuple[int, ...] = ()) -> tuple[int, ...]:
    """One of an address's tuples of hosts with ``host_id`` in it, once: ``twin``, the
    address's other tuple of hosts, when the two are alike (an address of one site holds
    the one it has seen), so that the address keeps one tuple and one boxed id, not two."""
    if host_id in ids:
        return ids
    added = (*ids, host_id)
    return twin if added == twin else added


def _drop(ids: tuple[int, ...], host_id: int) -> tuple[int, ...]:
    """One of an address's tuples of hosts without ``host_id``."""
    return tuple(h for h in ids if h != host_id) if host_id in ids else ids


class HostScheduler:
    """Chooses which host may send its next request, and when."""

    def __init__(
        self, politeness: Politeness, clock: Clock = time.monotonic, sites: Sites | None = None
    ) -> None:
        self._politeness = politeness
        self._sites = sites if sites else None
        self.site_budgets = sites is not None and sites.budgets
        """Whether a site sets its own page budget (the slots' ``page_budget``)."""
        self._clock = clock
        self._slots: dict[int, HostSlot] = {}
        self._ips: dict[str, IpSlot] = {}
        self._heap: list[tuple[float, int, int]] = []
        """Hosts by when their turn comes, then first come first served: (time, sequence
        number, host id). A host just served queues behind those that waited on its
        address, so hosts whose turns fall together take them in order."""
        self._kept: dict[int, float] = {}
        """Hosts given back and not forgotten, and when their state lapses (:meth:`sweep`)."""
        self._lapses: list[tuple[float, int]] = []
        """The same, soonest first (a heap; an entry that ``_kept`` no longer has is stale)."""
        self._given_up: dict[int, str] = {}
        """Why each host given up for the run and forgotten is refused."""
        self._seq = itertools.count()
        self.buffered = 0
        self.inflight = 0
        self.on_emptied: Callable[[HostSlot], None] | None = None
        """Hears of each host whose buffer became empty (the frontier's refills)."""
        self.crowded: set[str] = set()
        """The addresses that are crowded (:attr:`IpSlot.crowded`) now."""
        self.waited = 0.0
        """Seconds the turns handed out so far waited for a request slot: from their
        ready time, or from their host's return to the heap when that is later."""
        self.turns = 0
        """Turns handed out so far."""

    def slot(self, host_id: int, name: str) -> HostSlot:
        """The slot of a host, created on first use."""
        found = self._slots.get(host_id)
        if found is None:
            found = self._slots[host_id] = HostSlot(host_id, name)
            found.per_host, found.delay = self._politeness.per_host, self._politeness.delay
            reason = self._given_up.pop(host_id, None)
            if reason is not None:
                found.give_up(reason)
            site = None if self._sites is None else self._sites.for_host(name)
            if site is not None:
                if site.per_host is not None:
                    found.per_host = site.per_host
                if site.delay is not None:
                    found.delay = site.delay
                found.page_budget = site.max_pages
        return found

    def find(self, host_id: int) -> HostSlot | None:
        """The slot of a host, None when it has none yet."""
        return self._slots.get(host_id)

    def slots(self) -> Iterable[HostSlot]:
        """Every host slot kept: the held hosts', and those of hosts given back that were
        not forgotten (:meth:`forget`)."""
        return self._slots.values()

    def add(self, slot: HostSlot, urls: list[QueuedURL]) -> None:
        """Buffer claimed URLs for a host and make it schedulable. The buffer becomes a new
        list of just its URLs (one extended would keep room for more in every host held)."""
        slot.queue = slot.queue + urls
        self.buffered += len(urls)
        self._schedule(slot)

    def take(self, slot: HostSlot) -> QueuedURL:
        """Remove the next buffered URL of a host."""
        self.buffered -= 1
        url = slot.queue.pop(0)
        if not slot.queue and self.on_emptied is not None:
            self.on_emptied(slot)
        return url

    def drain(self, slot: HostSlot) -> list[QueuedURL]:
        """Remove every buffered URL of a host."""
        urls = list(slot.queue)
        slot.queue.clear()
        self.buffered -= len(urls)
        if self.on_emptied is not None:
            self.on_emptied(slot)
        return urls

    def lease(self, slot: HostSlot, generation: int, deadline: float) -> None:
        """This worker holds the host (:meth:`HostSlot.lease`), counted on its address."""
        slot.lease(generation, deadline)
        if slot.ip is not None:
            self._hold_on(slot.ip, slot.id)

    def end_lease(self, slot: HostSlot) -> None:
        """The host is no longer held (:meth:`HostSlot.end_lease`)."""
        slot.end_lease()
        if slot.ip is not None:
            self._let_go(slot.ip, slot.id)

    def crowds(self, address: str) -> bool:
        """Whether a host resolved to ``address`` would join a crowded address."""
        return address in self.crowded

    def assign_address(self, slot: HostSlot, address: str | None) -> None:
        """Record the address a host resolved to (None: no address to share limits on)."""
        slot.resolved = True
        slot.resolving = False
        if slot.ip is not None:
            self._let_go(slot.ip, slot.id)
        slot.ip = None
        if address is not None:
            ip = slot.ip = self._site_on(address, slot.id)
            if slot.generation is not None:
                ip.held = _add(ip.held, slot.id, ip.hosts)
            self._judge(ip)
        self._schedule(slot)

    def seen_at(self, slot: HostSlot, address: str) -> None:
        """Count the host among the sites of ``address`` without placing it there (it is
        given back: the address is crowded)."""
        self._judge(self._site_on(address, slot.id))

    def _site_on(self, address: str, host_id: int) -> IpSlot:
        """The address's slot, with the host counted among its sites until the address's
        limit is at its most (more sites would not change it) and two are counted (so
        an address that counts one site has no other: :meth:`forget`)."""
        ip = self._ips.get(address) or self._ips.setdefault(address, IpSlot(address))
        if ip.limit < self._politeness.per_ip_max or len(ip.hosts) < 2:
            ip.hosts = _add(ip.hosts, host_id, ip.held)
            ip.limit = address_limit(len(ip.hosts), self._politeness)
        return ip

    def forget(self, host_id: int) -> bool:
        """Drop the state of an idle host given back, unless what the store does not keep
        of it still matters (:meth:`HostSlot.kept_until`: it is then forgotten when that
        lapses, by :meth:`sweep`). Its rest time went to the store with its release and
        its robots.txt is cached there, so a new lease of it starts from those; a host
        given up leaves its reason, for a new slot of it. The slot of its address goes too
        when the host was the only site seen there; an address of more sites keeps its
        count of them. Returns whether the host was forgotten (False too when it has no
        slot)."""
        slot = self._slots.get(host_id)
        if slot is None or slot.generation is not None or not slot.idle():
            return False
        if slot.refused is not None and slot.refused_until == math.inf:
            self._given_up[host_id] = slot.refused
        else:
            until = slot.kept_until()
            if until > self._clock():
                if self._kept.get(host_id) != until:
                    self._kept[host_id] = until
                    heapq.heappush(self._lapses, (until, host_id))
                return False
        self._kept.pop(host_id, None)
        del self._slots[host_id]
        ip = slot.ip
        if ip is not None:
            ip.waiting = _drop(ip.waiting, host_id)
            if not ip.held and not ip.inflight and all(h == host_id for h in ip.hosts):
                del self._ips[ip.address]
                self.crowded.discard(ip.address)
        return True

    def sweep(self) -> int:
        """Forget the hosts given back whose kept state has lapsed; returns how many."""
        now = self._clock()
        lapses = self._lapses
        forgotten = 0
        while lapses and lapses[0][0] <= now:
            until, host_id = heapq.heappop(lapses)
            if self._kept.get(host_id) == until:
                del self._kept[host_id]
                forgotten += self.forget(host_id)
        return forgotten

    def _hold_on(self, ip: IpSlot, host_id: int) -> None:
        ip.held = _add(ip.held, host_id, ip.hosts)
        self._judge(ip)

    def _let_go(self, ip: IpSlot, host_id: int) -> None:
        ip.held = _drop(ip.held, host_id)
        self._judge(ip)

    def _judge(self, ip: IpSlot) -> None:
        if ip.crowded:
            self.crowded.add(ip.address)
        else:
            self.crowded.discard(ip.address)

    def _wants_turn(self, slot: HostSlot) -> bool:
        if slot.inflight >= slot.per_host or slot.robots_pending or slot.resolving:
            return False
        if slot.ip is not None and slot.ip.inflight >= slot.ip.limit:
            slot.ip.waiting = _add(slot.ip.waiting, slot.id)
            return False
        return bool(slot.queue)

    @staticmethod
    def _ready_at(slot: HostSlot) -> float:
        if slot.ip is None:
            return slot.next_ready
        return max(slot.next_ready, slot.ip.next_ready)

    def _schedule(self, slot: HostSlot) -> None:
        if not self._wants_turn(slot):
            return
        ready = self._ready_at(slot)
        if slot.heap_key <= ready:
            return
        slot.heap_key = ready
        slot.queued_at = self._clock()
        heapq.heappush(self._heap, (ready, next(self._seq), slot.id))

    def pop_ready(self) -> HostSlot | float | None:
        """The next host whose turn has come, else the time of the next turn, else None."""
        now = self._clock()
        while self._heap:
            ready, seq, host_id = self._heap[0]
            slot = self._slots.get(host_id)
            if slot is None:
                heapq.heappop(self._heap)
                continue
            if slot.heap_key != ready or not self._wants_turn(slot):
                heapq.heappop(self._heap)
                if slot.heap_key == ready:
                    slot.heap_key = math.inf
                continue
            later = self._ready_at(slot)
            if later > ready:
                # Put off to its address's next turn, the host keeps its place in line.
                heapq.heapreplace(self._heap, (later, seq, host_id))
                slot.heap_key = later
                continue
            if ready > now:
                return ready
            heapq.heappop(self._heap)
            slot.heap_key = math.inf
            self.waited += now - max(ready, slot.queued_at)
            self.turns += 1
            return slot
        return None

    def ready_now(self) -> bool:
        """Whether a host's turn has probably come (the heap's first entry is due; it
        may be stale, which :meth:`pop_ready` would find out)."""
        return bool(self._heap) and self._heap[0][0] <= self._clock()

    def requeue(self, slot: HostSlot) -> None:
        """Put a host back in the heap after a turn that sent no request."""
        self._schedule(slot)

    def started(self, slot: HostSlot) -> None:
        """A request to the host has started."""
        slot.inflight += 1
        self.inflight += 1
        now = self._clock()
        if slot.per_host > 1:
            slot.next_ready = max(slot.next_ready, now + slot.delay)
        ip = slot.ip
        if ip is not None:
            ip.inflight += 1
            # Spaced even while the limit is still 1: a second site seen on the address
            # raises it, and the start after must keep its distance.
            ip.next_ready = max(ip.next_ready, now + slot.delay / ip.limit)
        self._schedule(slot)

    def delay_after(self, slot: HostSlot, response_time: float) -> float:
        """Seconds the host must rest after a response that took ``response_time``."""
        p = self._politeness
        crawl_delay = slot.robots.crawl_delay if slot.robots and slot.robots.crawl_delay else 0.0
        return max(
            slot.delay,
            min(crawl_delay, p.max_delay),
            min(p.response_factor * response_time, p.max_delay),
        )

    def finished(self, slot: HostSlot, response_time: float, extra_wait: float = 0.0) -> None:
        """A request to the host completed; ``extra_wait`` is a 429/503 back-off."""
        slot.inflight -= 1
        self.inflight -= 1
        now = self._clock()
        delay = self.delay_after(slot, response_time)
        slot.next_ready = max(slot.next_ready, now + max(delay, extra_wait))
        self._schedule(slot)
        ip = slot.ip
        if ip is not None:
            ip.inflight -= 1
            ip.next_ready = max(ip.next_ready, now + delay / ip.limit)
            waiting = ip.waiting
            ip.waiting = ()
            for host_id in waiting:
                waiter = self._slots.get(host_id)
                if waiter is not None:
                    self._schedule(waiter)

    def turn_in(self, slot: HostSlot) -> float:
        """Seconds until the host's next turn may come, its address's rest included."""
        return max(0.0, self._ready_at(slot) - self._clock())

    def hold(self, slot: HostSlot, until: float) -> None:
        """Keep the host idle until clock time ``until`` (the time a previous owner of its
        lease left it at)."""
        slot.next_ready = max(slot.next_ready, until)
        self._schedule(slot)

    def pause(self, slot: HostSlot, seconds: float) -> None:
        """Keep the host idle for ``seconds`` from now (robots.txt unavailable)."""
        self.hold(slot, self._clock() + seconds)
