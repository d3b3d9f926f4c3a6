"""How much one crawl process does at once, sized while it runs.

Two limits bound the work in hand: requests in flight (with the pages fetched and not
yet committed: ``--concurrency``) and hosts held (``--max-hosts``). A politeness-bound
crawl needs both large: at one request per host every second or more, each host gives
well under one page a second, so a thousand pages a second need thousands of hosts held
and hundreds of requests in flight. A crawl of a few fast hosts needs neither. Fixed
defaults fit only one of the two, so :class:`Capacity` starts at the old defaults (64
and 1,024) and moves the limits once a second by what it sees:

- **Busy**: the event loop's thread spent more than ``CPU_HIGH`` of the second on a
  CPU, or a 50 ms timer fired more than ``LAG_HIGH`` late on average. The request limit
  shrinks by ``SHRINK`` (never below where it started); nothing grows.
- **Room**: the loop is below ``CPU_LOW`` and ``LAG_LOW``. The request limit grows by
  ``GROW`` when a host was ready while the limit was reached and most of what is in hand
  is on the network (not waiting for the extract workers, where more requests would only
  queue); the host limit grows by ``GROW`` when every host slot was taken, at least half
  the held hosts had work (not idle for want of claims from a slow store), request slots
  went unused and the store holds more URLs than the buffers.
- In between, the limits stay.
- **Hosts waiting**: whatever the loop's load, when the hosts whose turn had come waited
  more than ``WAIT_HIGH`` on average for a request slot, the host limit shrinks by
  ``SHRINK`` from the hosts held (never below ``HOSTS_FLOOR``), and the frontier gives
  back hosts as their buffers empty until it holds no more than the limit. Hosts held
  beyond what the request slots serve take turns ever further apart, and a server closes
  a connection idle for a few seconds (Apache's default keep-alive is 5 s), so each turn
  would open a new connection, and a TLS host a new handshake: the CPU a page rises, the
  loop stays busy, the request limit stays down, and the crawl collapses to a fraction of
  its rate (``bench.world``, 100,000 hosts: 460-570 pages/s at 2.3-3.7 ms a page).

Explicit ``--concurrency`` and ``--max-hosts`` are ceilings: the limits start at the
smaller of the default start and the ceiling and never pass it. Without them the
ceilings are ``AUTO_REQUESTS`` (and half the file descriptors the process may open) and
``AUTO_HOSTS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trawl.config import START_HOSTS, START_REQUESTS

TICK = 1.0
"""Seconds between moves of the limits."""
PROBE = 0.05
"""Seconds between probes of the event loop's lateness."""
AUTO_REQUESTS = 4096
AUTO_HOSTS = 65_536
GROW = 1.25
SHRINK = 0.85
CPU_LOW, CPU_HIGH = 0.80, 0.95
LAG_LOW, LAG_HIGH = 0.010, 0.050
NETWORK_SHARE = 0.5
"""Requests in flight must be at least this share of the work in hand for the request
limit to grow: otherwise the pages wait for the extract workers or the store."""
HOSTS_FLOOR = 64
"""Hosts held at least, however long their turns wait: as many as the requests in flight
start at."""
WAIT_HIGH = 1.0
"""Seconds a host whose turn has come may wait for a request slot on average before the
host limit shrinks: well within the seconds a server keeps an idle connection open."""
IDLE_SLOTS = 0.75
"""Hosts may grow only while the requests in flight averaged below this share of their
limit: the request limit, not the hosts, was not what held the crawl back."""


@dataclass(frozen=True, slots=True)
class Load:
    """What the crawl process saw over the last second."""

    cpu: float
    """Share of the wall time the event loop's thread was on a CPU."""
    lag: float
    """Mean seconds a 50 ms timer fired late."""
    requests_capped: bool
    """A host was ready while the work in hand was at the request limit."""
    network_share: float
    """Requests in flight over all work in hand (in flight, extracting, committing)."""
    inflight: float
    """Mean requests in flight."""
    hosts_capped: bool
    """Every host slot was taken, at least half the held hosts had work (URLs buffered or
    a request out), and the store had URLs beyond the buffers."""
    turn_wait: float = 0.0
    """Mean seconds a host whose turn had come waited for a request slot."""
    held: int = 0
    """Hosts held."""


class Capacity:
    """The live request and host limits of one crawl process."""

    def __init__(self, requests: int | None, hosts: int | None, open_files: int) -> None:
        self.requests_ceiling = requests or max(1, min(AUTO_REQUESTS, open_files // 2))
        self.hosts_ceiling = hosts or AUTO_HOSTS
        self.requests = self._requests_floor = min(START_REQUESTS, self.requests_ceiling)
        self.hosts = min(START_HOSTS, self.hosts_ceiling)
        self._hosts_floor = min(HOSTS_FLOOR, self.hosts)
        self.turn_wait = 0.0
        """The last second's mean wait of a host's turn for a request slot."""

    def adjust(self, load: Load) -> None:
        """Move the limits by what the last second's ``load`` says."""
        self.turn_wait = load.turn_wait
        waiting = load.turn_wait > WAIT_HIGH
        if waiting:
            held = min(self.hosts, load.held)
            self.hosts = max(self._hosts_floor, int(held * SHRINK))
        if load.cpu > CPU_HIGH or load.lag > LAG_HIGH:
            self.requests = max(self._requests_floor, int(self.requests * SHRINK))
            return
        if load.cpu > CPU_LOW or load.lag > LAG_LOW:
            return
        if load.requests_capped and load.network_share >= NETWORK_SHARE:
            self.requests = min(self.requests_ceiling, math.ceil(self.requests * GROW))
        elif not waiting and load.hosts_capped and load.inflight < IDLE_SLOTS * self.requests:
            self.hosts = min(self.hosts_ceiling, math.ceil(self.hosts * GROW))


class LoadMeter:
    """Gathers a :class:`Load` over one second from 50 ms probes on the event loop."""

    _since: float
    _cpu_since: float
    _late: float
    _inflight: int
    _probes: int
    requests_capped: bool
    """Set by the dispatcher: a host was ready while the request limit was reached."""

    def __init__(self, now: float, cpu: float) -> None:
        self._restart(now, cpu)

    def _restart(self, now: float, cpu: float) -> None:
        """Start a window at wall time ``now`` and thread CPU time ``cpu``."""
        self._since, self._cpu_since = now, cpu
        self._late = 0.0
        self._inflight = self._probes = 0
        self.requests_capped = False

    def probe(self, late: float, inflight: int) -> None:
        """A probe timer fired ``late`` seconds late with ``inflight`` requests out."""
        self._late += max(0.0, late)
        self._inflight += inflight
        self._probes += 1

    def load(
        self,
        now: float,
        cpu: float,
        network_share: float,
        hosts_capped: bool,
        turn_wait: float,
        held: int,
    ) -> Load:
        """The load since the last call (or the start), and a fresh start."""
        wall = max(now - self._since, 1e-9)
        probes = max(self._probes, 1)
        load = Load(
            cpu=(cpu - self._cpu_since) / wall,
            lag=self._late / probes,
            requests_capped=self.requests_capped,
            network_share=network_share,
            inflight=self._inflight / probes,
            hosts_capped=hosts_capped,
            turn_wait=turn_wait,
            held=held,
        )
        self._restart(now, cpu)
        return load
