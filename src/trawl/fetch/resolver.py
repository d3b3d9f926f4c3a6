"""Name resolution for the fetcher: overrides, a TTL-honouring DNS cache, and the SSRF check.

trawl's HTTP client asks :class:`GuardedResolver` for a host's addresses whenever it
opens a connection, and connects only to what it gets back. So the
addresses checked against the :class:`~trawl.fetch.netguard.AddressPolicy` are the very ones
connected to: there is no second, unchecked lookup, and a DNS answer that changes from a
public address to a private one (rebinding) is checked again when it changes. Refused
addresses are dropped from an answer; when none is left the lookup fails with
:class:`BlockedAddress`, which the fetcher reports as ``blocked_address``. TLS is still
verified against the host name, since the client connects by address but names the host.

Where the addresses come from, in order:

- ``--resolve HOST=IP`` overrides (curl-style; tests map many names to loopback);
- the hosts file (``--hosts-file``, /etc/hosts by default), read once at the start, as
  the system's resolver reads it when nsswitch lists ``files`` before ``dns``;
- the cache: each host's answer is kept until its DNS TTL runs out (clamped to
  ``MIN_TTL`` .. ``MAX_TTL``), at most ``cache_size`` hosts or one and a half times the
  hosts the crawl may hold, whichever is more (:meth:`GuardedResolver.hold_hosts`),
  least recently used first out;
- a :class:`DnsBackend`: :class:`AiodnsBackend` (c-ares, asynchronous, A and AAAA)
  by default, against the system's name servers or ``--nameserver`` ones. c-ares keeps
  every answer it gets for the answer's TTL (up to an hour) in a cache of its own, about
  2 KB a name, which aiodns gives no way to turn off and which the cache above makes
  redundant; so a c-ares channel answers ``CHANNEL_NAMES`` lookups and is then replaced
  by a fresh one, closed once its last lookup is answered.

Lookups are made ahead of need, so that a slow resolver does not hold up a fetch at its
host's turn: :meth:`GuardedResolver.prefetch` is called when a host is leased and when
each of its turns ends, with the time of its next turn. A name whose cached answer will
not last until then is looked up in the background, ``PREFETCH_LEAD`` seconds before
that turn (at once if that is sooner), at most ``prefetch_limit`` such lookups at a
time, the rest waiting their turn. One lookup of a name is in flight at a time: a fetch
that needs the name meanwhile waits for that lookup instead of asking again, so the DNS
server sees each name once per TTL. A lookup's failure is remembered as any other
(``NEGATIVE_TTL``).

Every answer, wherever it came from, passes the address policy: a hosts-file name for
127.0.0.1 is refused as loopback unless ``--allow-network`` opens it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import aiodns

from trawl.fetch.netguard import AddressPolicy

log = logging.getLogger("trawl.fetch.resolver")

MIN_TTL = 5.0
MAX_TTL = 3600.0
NEGATIVE_TTL = 30.0
"""How long a name that does not resolve is remembered."""
PREFETCH_LIMIT = 64
"""Lookups made ahead of need at once (c-ares asks in parallel; the rest wait)."""
PREFETCH_LEAD = 2.0
"""Seconds before a host's turn that a lookup for it starts: room for a slow resolver
(a few hundred ms) and a retry."""
PREFETCH_MARGIN = 1.0
"""Seconds a cached answer must outlast a host's turn for no lookup to be needed (the
fetch connects a little after its turn)."""
CHANNEL_NAMES = 1_000
"""Lookups one c-ares channel makes before a fresh one takes over, which bounds c-ares's
own cache to about 2 MB: at a hundred new names a second it held 60-80 MB in the world
benchmark (TTLs of 5 minutes), and would hold 800 MB at TTLs of an hour."""


class BlockedAddress(OSError):
    """Every address of a host is refused by the address policy."""


class NameNotFound(OSError):
    """The name does not resolve to any address."""


Answer = list[tuple[str, float]]
"""Addresses with their TTLs in seconds."""


class DnsBackend(Protocol):
    """Looks names up in DNS."""

    async def lookup(self, host: str) -> Answer:
        """The host's A and AAAA addresses with their TTLs; NameNotFound if it has none."""
        ...

    async def close(self) -> None:
        """Release the backend's resources."""
        ...


class AiodnsBackend:
    """DNS through c-ares (aiodns): A and AAAA queries, asked together, on a channel that
    is replaced after ``channel_names`` lookups (see ``CHANNEL_NAMES``)."""

    def __init__(self, nameservers: Sequence[str] = (), channel_names: int = CHANNEL_NAMES) -> None:
        self._nameservers = list(nameservers)
        self._channel_names = channel_names
        self._resolver: aiodns.DNSResolver | None = None
        self._asked = 0
        self._inflight: dict[aiodns.DNSResolver, int] = {}
        """Lookups not yet answered, per channel."""

    async def _channel(self) -> aiodns.DNSResolver:
        """The channel to ask next: a fresh one once the current one has made its
        lookups (that one is closed now if no lookup of it is in flight, else when its
        last one is answered)."""
        resolver = self._resolver
        if resolver is None or self._asked >= self._channel_names:
            if resolver is not None and resolver not in self._inflight:
                await resolver.close()
            resolver = self._resolver = aiodns.DNSResolver(nameservers=self._nameservers or None)
            self._asked = 0
        self._asked += 1
        self._inflight[resolver] = self._inflight.get(resolver, 0) + 1
        return resolver

    async def lookup(self, host: str) -> Answer:
        resolver = await self._channel()
        try:
            answers = await asyncio.gather(
                resolver.query_dns(host, "A"), resolver.query_dns(host, "AAAA"),
                return_exceptions=True,
            )  # fmt: skip
        finally:
            left = self._inflight.pop(resolver) - 1
            if left:
                self._inflight[resolver] = left
            elif resolver is not self._resolver:
                await resolver.close()
        found: Answer = []
        for answer in answers:
            if isinstance(answer, BaseException):
                if not isinstance(answer, aiodns.error.DNSError):
                    raise answer
                continue
            for record in answer.answer:
                address = getattr(record.data, "addr", None)
                if isinstance(address, str):
                    found.append((address, float(record.ttl)))
        if not found:
            raise NameNotFound(socket.EAI_NONAME, f"{host} does not resolve")
        return found

    async def close(self) -> None:
        channels = {*self._inflight, *([self._resolver] if self._resolver else [])}
        self._resolver = None
        self._inflight.clear()
        for resolver in channels:
            await resolver.close()


class HostsFile:
    """Names and addresses from a file in /etc/hosts format.

    Each line holds an address (IPv4 or IPv6) and one or more names; ``#`` starts a
    comment. Names match case-insensitively and without wildcards; the first line that
    names a host gives its address of each family (IPv4 and IPv6), in file order.
    """

    def __init__(self, entries: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self._entries = dict(entries or {})

    @classmethod
    def parse(cls, text: str) -> HostsFile:
        """The entries of ``text``; lines without a valid address are skipped."""
        found: dict[str, dict[int, str]] = {}
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2:
                continue
            try:
                address = ipaddress.ip_address(fields[0])
            except ValueError:
                continue
            for name in fields[1:]:
                families = found.setdefault(name.lower().rstrip("."), {})
                families.setdefault(address.version, str(address))
        return cls({name: tuple(families.values()) for name, families in found.items()})

    @classmethod
    def read(cls, path: Path | None) -> HostsFile:
        """The entries of the file at ``path``; none when it is None, missing or
        unreadable (as the system's resolver treats such a file)."""
        if path is None:
            return cls()
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return cls()
        return cls.parse(text)

    def addresses(self, name: str) -> tuple[str, ...]:
        """The addresses listed for ``name`` (lower-case, no trailing dot); () if none."""
        return self._entries.get(name, ())


@dataclass(slots=True)
class ResolverStats:
    """What the resolver did: cache hits and misses, lookups made ahead of need, and
    addresses it refused."""

    cache_hits: int = 0
    cache_misses: int = 0
    """Lookups a fetch waited for: its own, or one in flight it joined (``joined``)."""
    blocked: int = 0
    prefetches: int = 0
    """Lookups made ahead of a host's turn."""
    joined: int = 0
    """Of ``cache_misses``, those that waited for a lookup already in flight."""

    def as_counters(self) -> dict[str, int]:
        """The figures under their counter names."""
        return {
            "dns_cache_hits": self.cache_hits,
            "dns_cache_misses": self.cache_misses,
            "dns_blocked": self.blocked,
            "dns_prefetches": self.prefetches,
            "dns_joined": self.joined,
        }


@dataclass(frozen=True, slots=True)
class _Cached:
    addresses: tuple[str, ...]
    expires: float


def _cache_name(host: str) -> str:
    """``host`` in lower case without a final dot: the string itself when it is so
    already (as a crawl's host names are), so that the cache's key is no copy of it."""
    return (host if host.islower() else host.lower()).rstrip(".")


def _literal(name: str) -> str | None:
    """``name`` (lower case, bracketed or not) as an IP address literal, or None when it
    is a host name. Only a name that starts with a digit (IPv4) or holds a colon (IPv6)
    can be one, so a host name is told without a parse and its exception."""
    if not (name.lstrip("[")[:1].isdigit() or ":" in name):
        return None
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return None


class GuardedResolver:
    """The HTTP client's resolver: overrides, the hosts file, a TTL cache of DNS answers
    and the address policy."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        overrides: Mapping[str, str] | None = None,
        hosts: HostsFile | None = None,
        backend: DnsBackend | None = None,
        cache_size: int = 10_000,
        min_ttl: float = MIN_TTL,
        clock: Callable[[], float] = time.monotonic,
        prefetch_limit: int = PREFETCH_LIMIT,
        prefetch_lead: float = PREFETCH_LEAD,
    ) -> None:
        self._policy = policy
        self._overrides = {host.lower(): ip for host, ip in (overrides or {}).items()}
        self._hosts = hosts or HostsFile()
        self._backend = backend or AiodnsBackend()
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._least_size = self._cache_size = cache_size
        self._min_ttl = min_ttl
        self._clock = clock
        self._prefetch_limit = prefetch_limit
        self._lead = prefetch_lead
        self._inflight: dict[str, asyncio.Task[tuple[str, ...]]] = {}
        """The lookup in flight for each name being looked up."""
        self._prefetching = 0
        self._waiting: dict[str, None] = {}
        """Names to look up ahead of need once fewer than the limit are in flight."""
        self._timers: dict[str, asyncio.TimerHandle] = {}
        """Lookups ahead of need not due yet, by name."""
        self.stats = ResolverStats()

    def hold_hosts(self, hosts: int) -> None:
        """Keep the answers of at least one and a half times ``hosts`` names: the hosts a
        crawl holds come back to their names turn after turn, and a cache smaller than
        them drops the name of the host whose turn is next."""
        self._cache_size = max(self._least_size, hosts * 3 // 2)

    @property
    def cached(self) -> int:
        """How many hosts' answers the cache holds."""
        return len(self._cache)

    async def addresses(self, host: str) -> tuple[str, ...]:
        """The permitted addresses of ``host``; BlockedAddress or NameNotFound if none."""
        name = _cache_name(host)
        literal = _literal(name)
        if literal is not None:
            found: tuple[str, ...] = (literal,)
        elif name in self._overrides:
            found = (self._overrides[name],)
        else:
            found = self._hosts.addresses(name) or await self._cached_or_looked_up(name)
        if not found:
            raise NameNotFound(socket.EAI_NONAME, f"{host} does not resolve")
        permitted = tuple(a for a in found if self._policy.permits(a))
        if not permitted:
            self.stats.blocked += 1
            reason = self._policy.refusal(found[0])
            raise BlockedAddress(f"{host} resolves to {found[0]}, a {reason} address")
        return permitted

    def _resolved(self, name: str) -> bool:
        """Whether ``name`` is answered without DNS (an IP literal, an override, the
        hosts file)."""
        if _literal(name) is not None:
            return True
        return name in self._overrides or bool(self._hosts.addresses(name))

    async def _cached_or_looked_up(self, name: str) -> tuple[str, ...]:
        entry = self._cache.get(name)
        if entry is not None and entry.expires > self._clock():
            self.stats.cache_hits += 1
            self._cache.move_to_end(name)
            return entry.addresses
        self.stats.cache_misses += 1
        task = self._inflight.get(name)
        if task is None:
            self._waiting.pop(name, None)
            task = self._start(name)
        else:
            self.stats.joined += 1
        # Shielded: a fetch that gives up waiting leaves the lookup to the others.
        return await asyncio.shield(task)

    def _start(self, name: str) -> asyncio.Task[tuple[str, ...]]:
        """Look ``name`` up in a task of its own, the one in flight for it."""
        task = asyncio.get_running_loop().create_task(self._lookup(name))
        self._inflight[name] = task
        task.add_done_callback(lambda _: self._landed(name, task))
        return task

    def _landed(self, name: str, task: asyncio.Task[tuple[str, ...]]) -> None:
        """The lookup of ``name`` ended; its failure, cached or not, is seen here even
        when nobody waits for it any more (a lookup ahead of need, a fetch that gave up)."""
        self._inflight.pop(name, None)
        if not task.cancelled() and task.exception() is not None:
            log.debug("lookup of %s failed: %s", name, task.exception())

    async def _lookup(self, name: str) -> tuple[str, ...]:
        now = self._clock()
        try:
            answer = await self._backend.lookup(name)
        except NameNotFound:
            self._remember(name, (), now + NEGATIVE_TTL)
            raise
        ttl = min(max(min(t for _, t in answer), self._min_ttl), MAX_TTL)
        addresses = tuple(dict.fromkeys(address for address, _ in answer))
        self._remember(name, addresses, now + ttl)
        return addresses

    def prefetch(self, host: str, within: float = 0.0) -> None:
        """Make sure an answer for ``host`` is cached ``within`` seconds from now (its
        next turn), looking it up in the background ahead of then if it will not be.
        Returns at once."""
        name = _cache_name(host)
        entry = self._cache.get(name)
        if entry is not None and entry.expires > self._clock() + within + PREFETCH_MARGIN:
            return
        if name in self._inflight or name in self._waiting or self._resolved(name):
            return
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        start_in = within - self._lead
        if start_in > 0:
            loop = asyncio.get_running_loop()
            self._timers[name] = loop.call_later(start_in, self._due, name)
        else:
            self._queue(name)

    def _due(self, name: str) -> None:
        """A lookup ahead of need has come due (the turn is ``PREFETCH_LEAD`` away),
        unless a fetch has looked the name up meanwhile."""
        del self._timers[name]
        entry = self._cache.get(name)
        fresh = entry is not None and entry.expires > self._clock() + self._lead + PREFETCH_MARGIN
        if not fresh and name not in self._inflight:
            self._queue(name)

    def _queue(self, name: str) -> None:
        if self._prefetching >= self._prefetch_limit:
            self._waiting[name] = None
            return
        self._prefetching += 1
        self.stats.prefetches += 1
        self._start(name).add_done_callback(self._prefetched)

    def _prefetched(self, _: asyncio.Task[tuple[str, ...]]) -> None:
        """A lookup ahead of need ended: the next waiting name goes."""
        self._prefetching -= 1
        now = self._clock()
        while self._waiting and self._prefetching < self._prefetch_limit:
            name = next(iter(self._waiting))
            del self._waiting[name]
            entry = self._cache.get(name)
            if name not in self._inflight and (entry is None or entry.expires <= now):
                self._queue(name)

    def _remember(self, name: str, addresses: tuple[str, ...], expires: float) -> None:
        self._cache[name] = _Cached(addresses, expires)
        self._cache.move_to_end(name)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def close(self) -> None:
        """Stop the lookups ahead of need and release the backend."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._waiting.clear()
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._backend.close()
