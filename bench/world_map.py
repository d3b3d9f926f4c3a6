"""The simulated web of the world benchmark: hosts, pages, links and what trawl must record.

Everything is a pure function of `WorldParams` (host count, pages per host, seed, ports),
computed on demand from a 64-bit mix of the seed and a host's index, so the DNS server,
every HTTP server process and the driver agree on the world without storing it (100,000
hosts cost nothing until asked about).

A host ``h00042.<zone>.test`` (zones `ZONES`) has:

- an address: its own loopback address (`own_address`), or, for about a fifth of the
  hosts, one of `SHARED_ADDRESSES` (a CDN or a shared host);
- DNS behaviour (`Dns`): answers with a TTL (300 s mostly, 5-60 s for some), NXDOMAIN,
  SERVFAIL always, or SERVFAIL for its first `FLAKY_QUERIES` queries (flaky);
- a scheme: about a fifth of the hosts are served over TLS (their own port);
- a behaviour (`Behaviour`): normal, slow (5 times the latency), failing (pages
  `FAILING_PAGES` answer 500 to their first request) or throttled (pages
  `THROTTLED_PAGES` answer 429 or 503 with a Retry-After to their first request);
- a robots.txt that disallows ``/private/`` and, for some hosts, sets a Crawl-delay;
- ``pages`` pages: ``/`` and ``/p/<k>.html``; page k links to pages k+1, 2k+1, k+7 and
  ``/`` of its host, ``/`` links to ``/private/``, and every page links to the home pages
  of `CROSS_LINKS` other hosts (none from flaky-DNS hosts), so hosts are discovered
  progressively from the seeds (the first `seed_count` hosts, always plain).

The ground truth (`ground_truth`): a host is reached when a fetched page links to it; every
page of a reached host that resolves is fetched with 200 in the end (500s, 429s and 503s
are retried), ``/private/`` is discovered but not fetched, and a host that does not
resolve has only its home page discovered. A flaky-DNS host may end either way (trawl
may give up on it while its failure is cached), which is why it links nowhere: its
outcome changes nothing outside it.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "CROSS_LINKS", "FAILING_PAGES", "FLAKY_QUERIES", "SHARED_ADDRESSES", "THROTTLED_PAGES",
    "ZONES", "Behaviour", "Dns", "GroundTruth", "Host", "World", "WorldParams", "ground_truth",
    "mix",
    "own_address",
]  # fmt: skip

ZONES = ("alpha", "bravo", "charlie", "delta", "echo")
SHARED_ADDRESSES = tuple(f"127.255.0.{n}" for n in range(1, 9))
CROSS_LINKS = 2
"""Links from every page to the home pages of other hosts."""
FAILING_PAGES = (1, 4, 7)
"""Pages of a failing host that answer 500 to their first request: fewer than trawl's
breaker threshold (5), so even all of them in a row do not trip it."""
THROTTLED_PAGES = {2: 429, 5: 503}
"""Pages of a throttled host that answer this status to their first request."""
FLAKY_QUERIES = 2
"""Queries a flaky-DNS name answers SERVFAIL to before it resolves."""
PRIVATE_PATH = "/private/"
_MASK = (1 << 64) - 1
_UNIT = 1 / 2**64


def mix(*values: int) -> int:
    """A 64-bit hash of integers (splitmix64 steps): the world's only source of chance."""
    state = 0x9E3779B97F4A7C15
    for value in values:
        state = ((state ^ (value & _MASK)) * 0xBF58476D1CE4E5B9) & _MASK
        state ^= state >> 31
        state = (state * 0x94D049BB133111EB) & _MASK
        state ^= state >> 29
    return state


def own_address(index: int) -> str:
    """The loopback address of host ``index`` when it has one of its own: 127.1.0.1,
    127.1.0.2, ... (254 a block, 256 blocks a second octet; room for 16 million hosts)."""
    return f"127.{1 + index // 65024}.{index // 254 % 256}.{index % 254 + 1}"


class Dns(enum.StrEnum):
    """What the DNS server answers for a host's name."""

    OK = "ok"
    NXDOMAIN = "nxdomain"
    SERVFAIL = "servfail"
    FLAKY = "flaky"


class Behaviour(enum.StrEnum):
    """How a host's HTTP server behaves."""

    NORMAL = "normal"
    SLOW = "slow"
    FAILING = "failing"
    THROTTLED = "throttled"


@dataclass(frozen=True, slots=True)
class WorldParams:
    """What a world is made of; the same parameters always make the same world."""

    hosts: int
    pages: int
    seed: int = 1
    http_port: int = 18480
    https_port: int = 18481

    @property
    def seed_count(self) -> int:
        """Seed hosts: one per 500 hosts, at least one per zone."""
        return min(self.hosts, max(len(ZONES), self.hosts // 500))

    @property
    def width(self) -> int:
        """Digits of a host number in its name."""
        return max(5, len(str(self.hosts - 1)))


@dataclass(frozen=True, slots=True)
class Host:
    """One host of the world."""

    index: int
    name: str
    tls: bool
    address: str
    shared: bool
    dns: Dns
    ttl: int
    behaviour: Behaviour
    crawl_delay: int
    """robots.txt Crawl-delay in seconds; 0 when it sets none."""
    pages: int
    root: str
    """``scheme://name:port`` of its URLs."""

    @property
    def resolves(self) -> bool:
        return self.dns in (Dns.OK, Dns.FLAKY)

    def path(self, page: int) -> str:
        return "/" if page == 0 else f"/p/{page}.html"

    def page_of(self, path: str) -> int | None:
        """The page number a path names, or None when it names no page."""
        if path == "/":
            return 0
        if path.startswith("/p/") and path.endswith(".html"):
            number = path[3:-5]
            if number.isdigit() and 0 < int(number) < self.pages and str(int(number)) == number:
                return int(number)
        return None

    def url(self, page: int) -> str:
        return self.root + self.path(page)

    def robots(self) -> str:
        delay = f"Crawl-delay: {self.crawl_delay}\n" if self.crawl_delay else ""
        return f"User-agent: *\nDisallow: {PRIVATE_PATH}\n{delay}"

    def fault(self, page: int) -> int:
        """The status the page answers its first request with (200: no fault)."""
        if self.behaviour is Behaviour.FAILING and page in FAILING_PAGES:
            return 500
        if self.behaviour is Behaviour.THROTTLED:
            return THROTTLED_PAGES.get(page, 200)
        return 200


class World:
    """The hosts and links of `WorldParams`, computed on demand."""

    def __init__(self, params: WorldParams) -> None:
        self.params = params
        self._by_zone = {zone: n for n, zone in enumerate(ZONES)}

    def _unit(self, index: int, salt: int) -> float:
        return mix(self.params.seed, index, salt) * _UNIT

    def host(self, index: int) -> Host:
        """Host number ``index`` (0 <= index < hosts)."""
        p = self.params
        plain = index < p.seed_count
        tls = self._unit(index, 1) < 0.2
        shared = not plain and self._unit(index, 2) < 0.2
        address = (
            SHARED_ADDRESSES[mix(p.seed, index, 3) % len(SHARED_ADDRESSES)]
            if shared
            else own_address(index)
        )
        u = self._unit(index, 4)
        dns = (
            Dns.OK if plain or u >= 0.035
            else Dns.NXDOMAIN if u < 0.01
            else Dns.SERVFAIL if u < 0.015
            else Dns.FLAKY
        )  # fmt: skip
        ttl = 300 if self._unit(index, 5) < 0.8 else (5, 15, 30, 60)[mix(p.seed, index, 6) % 4]
        u = self._unit(index, 7)
        behaviour = (
            Behaviour.NORMAL if plain or u >= 0.11
            else Behaviour.SLOW if u < 0.05
            else Behaviour.FAILING if u < 0.08
            else Behaviour.THROTTLED
        )  # fmt: skip
        crawl_delay = 0 if plain or self._unit(index, 8) >= 0.05 else 2 + mix(p.seed, index, 9) % 2
        pages = max(1, round(p.pages * (0.5 + self._unit(index, 10))))
        zone = ZONES[index % len(ZONES)]
        name = f"h{index:0{p.width}d}.{zone}.test"
        scheme, port = ("https", p.https_port) if tls else ("http", p.http_port)
        return Host(
            index, name, tls, address, shared, dns, ttl, behaviour, crawl_delay, pages,
            f"{scheme}://{name}:{port}",
        )  # fmt: skip

    def index_of(self, name: str) -> int | None:
        """The index of the host called ``name`` (any case, trailing dot allowed)."""
        label, _, zone = name.lower().rstrip(".").partition(".")
        zone = zone.removesuffix(".test") if zone.endswith(".test") else ""
        number = label[1:]
        if not label.startswith("h") or not number.isdigit() or len(number) != self.params.width:
            return None
        index = int(number)
        if index >= self.params.hosts or self._by_zone.get(zone) != index % len(ZONES):
            return None
        return index

    def cross_links(self, host: Host, page: int) -> list[int]:
        """The hosts whose home pages page ``page`` of ``host`` links to."""
        if host.dns is Dns.FLAKY:
            return []
        n = self.params.hosts
        return [mix(self.params.seed, host.index, page, k, 11) % n for k in range(CROSS_LINKS)]

    def same_host_links(self, host: Host, page: int) -> list[str]:
        """The paths page ``page`` links to on its own host."""
        n = host.pages
        pages = dict.fromkeys(((page + 1) % n, (2 * page + 1) % n, (page + 7) % n, 0))
        paths = [host.path(k) for k in pages]
        return [*paths, PRIVATE_PATH] if page == 0 else paths

    def seeds(self) -> list[str]:
        return [self.host(i).url(0) for i in range(self.params.seed_count)]

    def hosts(self) -> Iterator[Host]:
        return (self.host(i) for i in range(self.params.hosts))


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """What a complete crawl of the world records."""

    discovered: frozenset[str]
    """Every URL trawl learns of: pages, ``/private/`` and home pages of dead hosts."""
    fetched: frozenset[str]
    """Every URL fetched with 200 in the end."""
    flaky: dict[str, frozenset[str]]
    """Per flaky-DNS host reached, its URLs beyond its home page: all of them fetched (the
    name resolved in time) or none discovered (trawl gave up on its home page)."""
    hosts_reached: int
    max_depth: int
    """Links from a seed to the deepest URL, the shortest way."""


def ground_truth(world: World) -> GroundTruth:
    """A breadth-first walk of the world's links from its seeds."""
    discovered: set[str] = set()
    fetched: set[str] = set()
    flaky: dict[str, frozenset[str]] = {}
    depth_of: dict[int, int] = {}
    queue: deque[int] = deque()
    for index in range(world.params.seed_count):
        depth_of[index] = 0
        queue.append(index)
    max_depth = 0
    while queue:
        index = queue.popleft()
        host = world.host(index)
        discovered.add(host.url(0))
        if not host.resolves:
            continue
        depths = _page_depths(world, host)
        home_depth = depth_of[index]
        max_depth = max(max_depth, home_depth + max(depths) + 1)
        urls = {host.url(page) for page in range(host.pages)}
        beyond = {*urls, host.root + PRIVATE_PATH} - {host.url(0)}
        discovered |= beyond
        fetched |= urls
        if host.dns is Dns.FLAKY:
            flaky[host.name] = frozenset(beyond)
        for page, depth in enumerate(depths):
            for target in world.cross_links(host, page):
                if target not in depth_of:
                    depth_of[target] = home_depth + depth + 1
                    queue.append(target)
    return GroundTruth(frozenset(discovered), frozenset(fetched), flaky, len(depth_of), max_depth)


def _page_depths(world: World, host: Host) -> list[int]:
    """Links from a host's home page to each of its pages, the shortest way."""
    depths = [math.inf] * host.pages
    depths[0] = 0
    queue = deque([0])
    while queue:
        page = queue.popleft()
        for path in world.same_host_links(host, page):
            target = host.page_of(path)
            if target is not None and depths[target] == math.inf:
                depths[target] = depths[page] + 1
                queue.append(target)
    return [int(d) for d in depths]
