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
  ``MIN_TTL`` .. ``MAX_TTL``), at most ``cache_size`` hosts, least recently used first out;
- a :class:`DnsBackend`: :class:`AiodnsBackend` (c-ares, asynchronous, A and AAAA)
  by default, against the system's name servers or ``--nameserver`` ones. c-ares keeps
  its own TTL-bounded query cache behind this one.

Every answer, wherever it came from, passes the address policy: a hosts-file name for
127.0.0.1 is refused as loopback unless ``--allow-network`` opens it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import aiodns

from trawl.fetch.netguard import AddressPolicy

MIN_TTL = 5.0
MAX_TTL = 3600.0
NEGATIVE_TTL = 30.0
"""How long a name that does not resolve is remembered."""


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
    """DNS through c-ares (aiodns): A and AAAA queries, asked together."""

    def __init__(self, nameservers: Sequence[str] = ()) -> None:
        self._nameservers = list(nameservers)
        self._resolver: aiodns.DNSResolver | None = None

    async def lookup(self, host: str) -> Answer:
        if self._resolver is None:
            self._resolver = aiodns.DNSResolver(nameservers=self._nameservers or None)
        resolver = self._resolver
        answers = await asyncio.gather(
            resolver.query_dns(host, "A"), resolver.query_dns(host, "AAAA"),
            return_exceptions=True,
        )  # fmt: skip
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
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None


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
    """What the resolver did: cache hits and misses, and addresses it refused."""

    cache_hits: int = 0
    cache_misses: int = 0
    blocked: int = 0

    def as_counters(self) -> dict[str, int]:
        """The figures under their counter names."""
        return {
            "dns_cache_hits": self.cache_hits,
            "dns_cache_misses": self.cache_misses,
            "dns_blocked": self.blocked,
        }


@dataclass(frozen=True, slots=True)
class _Cached:
    addresses: tuple[str, ...]
    expires: float


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
    ) -> None:
        self._policy = policy
        self._overrides = {host.lower(): ip for host, ip in (overrides or {}).items()}
        self._hosts = hosts or HostsFile()
        self._backend = backend or AiodnsBackend()
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_size = cache_size
        self._min_ttl = min_ttl
        self._clock = clock
        self.stats = ResolverStats()

    @property
    def cached(self) -> int:
        """How many hosts' answers the cache holds."""
        return len(self._cache)

    async def addresses(self, host: str) -> tuple[str, ...]:
        """The permitted addresses of ``host``; BlockedAddress or NameNotFound if none."""
        name = host.lower().rstrip(".")
        try:
            literal: str | None = str(ipaddress.ip_address(name.strip("[]")))
        except ValueError:
            literal = None
        if literal is not None:
            found: tuple[str, ...] = (literal,)
        elif name in self._overrides:
            found = (self._overrides[name],)
        else:
            found = self._hosts.addresses(name) or await self._lookup(name)
        if not found:
            raise NameNotFound(socket.EAI_NONAME, f"{host} does not resolve")
        permitted = tuple(a for a in found if self._policy.permits(a))
        if not permitted:
            self.stats.blocked += 1
            reason = self._policy.refusal(found[0])
            raise BlockedAddress(f"{host} resolves to {found[0]}, a {reason} address")
        return permitted

    async def _lookup(self, name: str) -> tuple[str, ...]:
        now = self._clock()
        entry = self._cache.get(name)
        if entry is not None and entry.expires > now:
            self.stats.cache_hits += 1
            self._cache.move_to_end(name)
            return entry.addresses
        self.stats.cache_misses += 1
        try:
            answer = await self._backend.lookup(name)
        except NameNotFound:
            self._remember(name, (), now + NEGATIVE_TTL)
            raise
        ttl = min(max(min(t for _, t in answer), self._min_ttl), MAX_TTL)
        addresses = tuple(dict.fromkeys(address for address, _ in answer))
        self._remember(name, addresses, now + ttl)
        return addresses

    def _remember(self, name: str, addresses: tuple[str, ...], expires: float) -> None:
        self._cache[name] = _Cached(addresses, expires)
        self._cache.move_to_end(name)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def close(self) -> None:
        await self._backend.close()
