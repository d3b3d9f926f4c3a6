"""What a crawl keeps of one host (:class:`HostSlot`) and of one server address
(:class:`IpSlot`) while it holds the host: trawl.politeness.scheduler orders their turns.

A slot owns its state: the crawl's jobs change it only through the slot's methods, which
keep its circuit breaker (:meth:`HostSlot.count_request`), its robots.txt state (the
``robots_*`` methods) and whether its URLs are refused at all (:meth:`HostSlot.give_up`).
What of it the store does not keep, and until when that matters, is
:meth:`HostSlot.kept_until`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from trawl.config import Breaker
from trawl.politeness.robots_parser import DISALLOW_ALL, RobotsRules
from trawl.store.values import QueuedURL

FAILURES_KEPT = 600.0
"""Seconds a host given back after failed requests keeps their count once its rest is
over: leased again by then, it takes up its circuit breaker where it left off; not, it is
forgotten and starts anew (each URL still fails after its own retries, which the store
counts)."""
CROWD = 4
"""Hosts held on an address, in units of its limit, past which it is crowded: enough
that each host resting up to four of the address's delays between its own turns still
keeps the address at its limit."""


@dataclass(slots=True, eq=False)
class IpSlot:
    """Politeness state of one server address, shared by every host name on it."""

    address: str
    inflight: int = 0
    next_ready: float = 0.0
    waiting: tuple[int, ...] = ()
    """The hosts that wanted a turn while the address had no request slot, first first."""
    hosts: tuple[int, ...] = ()
    """The hosts seen on the address in this run, until there are enough for the largest
    limit (and at least two)."""
    held: tuple[int, ...] = ()
    """The hosts on the address this worker holds a lease on.

    Tuples, not sets or lists: most addresses have one site (48 bytes, or none for an
    empty one, where a list takes 56-88 and a set 216), and none counts more than the few
    hundred sites of the largest limit."""
    limit: int = 1
    """Requests in flight at most, and request starts per delay."""

    @property
    def crowded(self) -> bool:
        """Whether more hosts of the address would only wait for its turns."""
        return len(self.held) >= CROWD * self.limit


@dataclass(frozen=True, slots=True)
class BreakerVerdict:
    """What one request's outcome did to a host's circuit breaker."""

    tripped: bool = False
    """The host failed ``threshold`` times in a row."""
    pause: float = 0.0
    """Seconds the tripped host rests: ``pause``, doubled at each further trip."""
    gave_up: bool = False
    """The host tripped more than ``trips`` times: its URLs are failed from now on."""


CLOSED = BreakerVerdict()
"""The breaker lets the host's requests through."""


@dataclass(slots=True, eq=False)
class HostSlot:
    """Politeness and queue state of one host."""

    id: int
    name: str
    queue: list[QueuedURL] = field(default_factory=list)
    """The host's buffered URLs, next first: at most a few hundred (trawl.frontier.queue
    ``MAX_BATCH``), so a list, 56 bytes empty for every host of the run where a deque
    takes 760."""
    inflight: int = 0
    next_ready: float = 0.0
    robots: RobotsRules | None = None
    robots_expires: float = 0.0
    robots_pending: bool = False
    robots_failures: int = 0
    refused: str | None = None
    """Why the host's URLs are not fetched at all (its address is not allowed, or it
    kept failing)."""
    refused_until: float = math.inf
    """When the refusal lapses (clock time): the end of a robots.txt shut-out; never for a
    host given up."""
    ip: IpSlot | None = None
    resolved: bool = False
    resolving: bool = False
    failures: int = 0
    """Consecutive failed requests (timeouts, connection errors, 5xx)."""
    trips: int = 0
    """Times the circuit breaker has paused the host."""
    heap_key: float = math.inf
    """When the host's entry in the scheduler's heap says its turn comes (infinity: it has
    none); a plain float, so that the compiled slot keeps it unboxed."""
    queued_at: float = 0.0
    """When the host's heap entry was made: its turn may come no earlier, for the wait
    for a request slot (:attr:`HostScheduler.waited`)."""
    generation: int | None = None
    """The generation of this worker's lease on the host (None: not held)."""
    lease_deadline: float = 0.0
    """When the lease runs out unless renewed (clock time)."""
    unsettled: int = 0
    """Jobs of the host started and not yet handed to the committer."""
    per_host: int = 1
    """Requests in flight at most: the crawl's ``per_host``, or its site's."""
    delay: float = 0.0
    """Least seconds between requests: the crawl's ``delay``, or its site's."""
    page_budget: int | None = None
    """Its site's fetches per host, when the site sets one (trawl.sites.rules)."""

    def lease(self, generation: int, deadline: float) -> None:
        """This worker holds the host under lease ``generation`` until clock time
        ``deadline`` unless renewed."""
        self.generation = generation
        self.lease_deadline = deadline

    def renew_lease(self, deadline: float) -> None:
        """The held lease was extended to clock time ``deadline``."""
        self.lease_deadline = deadline

    def end_lease(self) -> None:
        """The host is no longer held: given back, or its lease lost to another worker."""
        self.generation = None

    def backing_off(self) -> bool:
        """Whether the host's last requests or robots.txt fetches failed."""
        return bool(self.failures or self.robots_failures)

    def count_request(self, failed: bool, breaker: Breaker) -> BreakerVerdict:
        """Count a request's outcome against the host's circuit breaker: a success closes
        it; ``breaker.threshold`` failures in a row trip it."""
        if not failed:
            self.failures = self.trips = 0
            return CLOSED
        self.failures += 1
        if self.failures < breaker.threshold:
            return CLOSED
        self.failures = 0
        self.trips += 1
        if self.trips > breaker.trips:
            return BreakerVerdict(tripped=True, gave_up=True)
        return BreakerVerdict(tripped=True, pause=breaker.pause * 2.0 ** (self.trips - 1))

    def give_up(self, reason: str) -> None:
        """Refuse the host's URLs from now on, with ``reason`` as their error."""
        self.refused = reason
        self.refused_until = math.inf

    def kept_until(self) -> float:
        """Until when (clock time) the slot holds what the store does not: a refusal until
        it lapses (never, for a host given up), an unavailable robots.txt until it is
        asked for anew, failure counts until ``FAILURES_KEPT`` after the host's rest.
        0.0: nothing."""
        until = 0.0
        if self.refused is not None:
            until = self.refused_until
        if self.robots is DISALLOW_ALL:
            until = max(until, self.robots_expires)
        if self.backing_off() or self.trips:
            until = max(until, self.next_ready + FAILURES_KEPT)
        return until

    def start_resolving(self) -> None:
        """The host's address is being looked up."""
        self.resolving = True

    def stop_resolving(self) -> None:
        """The host's address was looked up, and the host is not kept (another worker
        serves that address, or it is crowded)."""
        self.resolving = False

    def start_robots(self) -> None:
        """The host's robots.txt is being read."""
        self.robots_pending = True

    def robots_loaded(self, rules: RobotsRules, expires: float) -> None:
        """The host's robots.txt gave ``rules``, obeyed until clock time ``expires``."""
        self.refused = None
        self.robots_failures = 0
        self.robots = rules
        self.robots_expires = expires
        self.robots_pending = False

    def robots_retry(self) -> int:
        """The host's robots.txt was unavailable and is asked for again: the number of
        failed tries so far."""
        self.robots_failures += 1
        self.robots_pending = False
        return self.robots_failures

    def robots_not_asked(self) -> None:
        """The host's robots.txt could not be asked for (no connection could be opened):
        it is asked again, no failed try counted."""
        self.robots_pending = False

    def robots_unavailable(self, until: float) -> None:
        """The host's robots.txt stayed unavailable: everything is disallowed until clock
        time ``until``, when it is read anew (RFC 9309)."""
        self.robots_failures = 0
        self.robots = DISALLOW_ALL
        self.robots_expires = until
        self.robots_pending = False

    def robots_shut_out(self, reason: str, until: float) -> None:
        """The host may not be asked (its address is refused) or gave no robots.txt
        answer at all: its URLs are refused with ``reason`` until clock time ``until``,
        when the host is tried anew."""
        self.robots_unavailable(until)
        self.refused = reason
        self.refused_until = until

    def job_started(self) -> None:
        """A job of the host started; it is unsettled until handed to the committer."""
        self.unsettled += 1

    def job_settled(self) -> None:
        """A job of the host handed its results to the committer (or ended without)."""
        self.unsettled -= 1

    def lower_depth(self, url_id: int, depth: int) -> None:
        """A buffered URL was found at a smaller ``depth``: it is fetched at that depth."""
        for n, held in enumerate(self.queue):
            if held.id == url_id:
                if held.depth > depth:
                    self.queue[n] = dataclasses.replace(held, depth=depth)
                return

    def needs_robots(self, now: float) -> bool:
        """True when robots.txt must be (re)fetched before the next URL."""
        return not self.robots_pending and (self.robots is None or now >= self.robots_expires)

    def idle(self) -> bool:
        """Nothing buffered, in flight, being resolved or waiting to be committed."""
        return not (
            self.queue or self.inflight or self.unsettled or self.robots_pending or self.resolving
        )
