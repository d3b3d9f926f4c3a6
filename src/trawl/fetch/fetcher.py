"""The fetcher: one GET, no automatic redirects, every size and time bounded.

Redirects are not followed here: the engine records a 3xx and queues its target through
scope, robots, the seen-set and that host's politeness. Bodies are read as a stream and
decompressed by hand so the cap applies to decompressed bytes (a gzip bomb stops at the
cap, the rest is never downloaded). The caller decides from the Content-Type and the
first bytes whether the body is wanted at all. A body not wanted is not read, unless a
recorder archives the exchange: an archive keeps what was fetched, so then it is read as
it comes (not decoded) up to the cap, and only the archive gets it.

A host of a site with request headers, cookies or credentials (trawl.sites.requests)
gets them on every request to it, and no other host does: they are chosen by the host
of the URL asked for, and a redirect is never followed here. An archived request keeps
their names, with the values of Authorization and of every secret ``[redacted]``.

Errors never escape :meth:`Fetcher.fetch`; they come back as ``FetchResult.error``, one
of the classes in :class:`FetchError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import ssl
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, Self

import brotli

from trawl.config import Timeouts
from trawl.content.warc_records import WarcExchange
from trawl.extract.urls import host_key, key_hostname
from trawl.fetch.client import (
    ConnectFailed,
    ConnectRefused,
    HttpClient,
    HttpFailure,
    InvalidTarget,
    OutOfFiles,
    Response,
    TlsFailed,
)
from trawl.fetch.fdlimit import current, fd_budget
from trawl.fetch.pool import KEEP_WINDOW
from trawl.fetch.proxy import ProxyFailed, ProxyFor
from trawl.fetch.resolver import BlockedAddress, GuardedResolver, NameNotFound, ResolverStats
from trawl.resource import AsyncResource
from trawl.sites.match import HostPatterns
from trawl.sites.requests import SiteRequest
from trawl.store.values import StorageKey

BodyFilter = Callable[[str | None, bytes], bool]

log = logging.getLogger("trawl.fetch.fetcher")


class FetchError(enum.StrEnum):
    """Why a fetch produced no HTTP response (or an unusable one)."""

    TIMEOUT = "timeout"
    DNS = "dns"
    CONNECT = "connect"
    CONNECTION_REFUSED = "connection_refused"
    TLS = "tls"
    PROTOCOL = "protocol"
    DECODE = "decode"
    INVALID_URL = "invalid_url"
    BLOCKED_ADDRESS = "blocked_address"
    FD_LIMIT = "fd_limit"
    """No file descriptor was left for a connection: nothing was asked of the host, and
    the URL is asked for again later without counting a try."""
    PROXY = "proxy_error"
    """The proxy failed (unreachable, a 407, a CONNECT refused, closed before answering):
    retried, and never counted against the target host's circuit breaker."""


RETRYABLE_ERRORS = frozenset(
    {
        FetchError.TIMEOUT, FetchError.DNS, FetchError.CONNECT, FetchError.CONNECTION_REFUSED,
        FetchError.PROTOCOL, FetchError.PROXY,
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FetchResult:
    """The outcome of one GET."""

    url: str
    status: int | None
    content_type: str | None = None
    location: str | None = None
    retry_after: str | None = None
    robots_tags: tuple[str, ...] = ()
    body: bytes = b""
    length: int | None = None
    truncated: bool = False
    elapsed: float = 0.0
    response_time: float = 0.0
    """The server's time to answer (`Response.answered_in`): what the host's politeness
    delay scales with. The whole fetch's ``elapsed`` when the answer was not read to its
    end or never came."""
    error: FetchError | None = None
    archived: StorageKey | None = None
    """Where the exchange was archived (WARC file and offset), when a recorder is set."""
    received: int = 0
    """Body bytes read off the wire (before decompression)."""
    etag: str | None = None
    last_modified: str | None = None
    """The response's validators (ETag, Last-Modified), for the next conditional GET."""
    fetched_at: float = 0.0
    """When the fetch ended (seconds since the epoch): the archived exchange's WARC-Date,
    so the time stored for the fetch names its record."""


@dataclass(frozen=True, slots=True)
class Validators:
    """What a conditional GET sends back: the ETag and Last-Modified of the last answer,
    and when that answer was fetched (the capture a 304 confirms, for the archive)."""

    etag: str | None = None
    last_modified: str | None = None
    fetched_at: float | None = None

    def headers(self) -> dict[str, str]:
        """The If-None-Match and If-Modified-Since headers these validators make."""
        sent = {}
        if self.etag:
            sent["If-None-Match"] = self.etag
        if self.last_modified:
            sent["If-Modified-Since"] = self.last_modified
        return sent


async def archived(result: FetchResult, archiving: asyncio.Task[StorageKey] | None) -> FetchResult:
    """``result`` naming where its exchange was archived, once ``archiving`` (from
    :meth:`Fetcher.fetch_then_archive`) is done; ``result`` itself without one."""
    if archiving is None:
        return result
    return dataclasses.replace(result, archived=await archiving)


class Recorder(Protocol):
    """Archives every exchange the fetcher makes (a :class:`~trawl.content.warc.WarcWriter`)."""

    async def write(self, exchange: WarcExchange) -> StorageKey: ...


class _Decoder(Protocol):
    def feed(self, data: bytes, limit: int) -> bytes: ...

    @property
    def complete(self) -> bool:
        """True once the compressed stream has ended properly."""
        ...


class _Identity:
    complete = True

    def feed(self, data: bytes, limit: int) -> bytes:
        return data[:limit]


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self._wbits = wbits
        self._obj = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        try:
            out = self._obj.decompress(data, limit)
        except zlib.error:
            if self._started or self._wbits != zlib.MAX_WBITS:
                raise
            self._wbits = -zlib.MAX_WBITS  # "deflate" sent raw, as some servers do
            self._obj = zlib.decompressobj(self._wbits)
            out = self._obj.decompress(data, limit)
        self._started = True
        return out

    @property
    def complete(self) -> bool:
        return bool(self._obj.eof)


class _Brotli:
    def __init__(self) -> None:
        self._obj = brotli.Decompressor()

    def feed(self, data: bytes, limit: int) -> bytes:
        out: bytes = self._obj.process(data, output_buffer_limit=limit)
        return out

    @property
    def complete(self) -> bool:
        return bool(self._obj.is_finished())


def _decoder(encoding: str | None) -> _Decoder | None:
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return _Identity()
    if name in ("gzip", "x-gzip"):
        return _Zlib(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return _Zlib(zlib.MAX_WBITS)
    if name == "br":
        return _Brotli()
    return None


def _error_class(exc: BaseException) -> FetchError:
    if isinstance(exc, ProxyFailed):
        return FetchError.PROXY
    if isinstance(exc, TimeoutError):
        return FetchError.TIMEOUT
    if isinstance(exc, BlockedAddress):
        return FetchError.BLOCKED_ADDRESS
    if isinstance(exc, NameNotFound):
        return FetchError.DNS
    if isinstance(exc, TlsFailed):
        return FetchError.TLS
    if isinstance(exc, ConnectRefused):
        return FetchError.CONNECTION_REFUSED
    if isinstance(exc, ConnectFailed):
        return FetchError.CONNECT
    if isinstance(exc, InvalidTarget):
        return FetchError.INVALID_URL
    if isinstance(exc, OutOfFiles):
        return FetchError.FD_LIMIT
    if isinstance(exc, (zlib.error, brotli.error)):
        return FetchError.DECODE
    return FetchError.PROTOCOL


class Fetcher(AsyncResource):
    """trawl's HTTP client configured for polite, bounded crawling."""

    def __init__(
        self,
        *,
        user_agent: str,
        timeouts: Timeouts,
        max_body: int,
        resolver: GuardedResolver,
        recorder: Recorder | None = None,
        tls: ssl.SSLContext | None = None,
        sites: HostPatterns[SiteRequest] | None = None,
        proxy_for: ProxyFor | None = None,
    ) -> None:
        self._user_agent = user_agent
        self._sites = sites if sites else None
        self._proxy_for = proxy_for
        self._tls = tls
        self._timeouts = timeouts
        self._max_body = max_body
        self._resolver = resolver
        self._recorder = recorder
        self._client: HttpClient | None = None
        self.fd_limit_hits = 0
        """Connections not opened for want of a file descriptor."""

    @property
    def resolver_stats(self) -> ResolverStats:
        """DNS cache hits and misses, and hosts refused by the address policy."""
        return self._resolver.stats

    async def address_of(self, host: str) -> str | None:
        """The first address of ``host`` trawl may connect to, None when it does not
        resolve; BlockedAddress when every address it has is refused."""
        try:
            return (await self._resolver.addresses(host))[0]
        except NameNotFound:
            return None

    async def __aenter__(self) -> Self:
        # Every new connection asks the guarded resolver, which caches by TTL and checks
        # each answer before the client connects to it. Open connections, idle or not,
        # stay within what the file-descriptor limit leaves for them, and no other number
        # caps the idle ones: a polite crawl has many more hosts resting between turns
        # than requests in flight, and a cap below that closed the connection idle
        # longest, whose host's turn comes first, so that each turn opened a connection
        # anew (a 20,000-host world run past a cap of 4,096: a connection for every 1.8
        # requests, against 2.7-3.2 in runs that stayed under it). An
        # idle connection is closed when idle for ``IDLE_TIMEOUT``, when its host rests
        # longer than ``KEEP_WINDOW`` or has nothing waiting (:meth:`host_rests`), or to
        # make room for a new one when the budget binds.
        budget = fd_budget()
        self._client = HttpClient(
            self._resolver,
            headers=[
                ("User-Agent", self._user_agent),
                ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"),
                ("Accept-Encoding", "gzip, deflate, br"),
            ],
            connect_timeout=self._timeouts.connect,
            max_idle=budget,
            max_open=budget,
            ssl_context=self._tls,
            proxy_for=self._proxy_for,
        )
        return self

    def host_rests(self, host: str, turn_in: float, waiting: bool) -> None:
        """A turn of ``host`` (its host key) ended; its next may come in ``turn_in``
        seconds, and ``waiting`` says whether it has (or may be about to get) a URL for
        it. Its idle connection is kept only for such a turn within ``KEEP_WINDOW``,
        which the server probably still holds it for; otherwise it is closed now rather
        than left to pile up with those of other hosts at rest. A turn that will need a
        new connection has its host's name looked up ahead of it (:meth:`prefetch`)."""
        client = self._client
        if client is None:
            return
        kept = waiting and turn_in <= KEEP_WINDOW
        if not kept:
            client.drop_idle(host)
        if waiting and not (kept and client.has_idle(host)):
            self.prefetch(host, turn_in)

    def prefetch(self, host: str, turn_in: float = 0.0) -> None:
        """Have ``host``'s (a host key's) addresses looked up ahead of its turn,
        ``turn_in`` seconds from now, unless the cached answer lasts until then."""
        self._resolver.prefetch(key_hostname(host), turn_in)

    def hold_hosts(self, hosts: int) -> None:
        """Size the resolver's cache for a crawl that may hold ``hosts`` hosts."""
        self._resolver.hold_hosts(hosts)

    async def close(self) -> None:
        """Close the client and its connections; safe to call more than once."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
            await self._resolver.close()

    async def fetch(
        self,
        url: str,
        *,
        accept: BodyFilter | None = None,
        max_body: int | None = None,
        validators: Validators | None = None,
    ) -> FetchResult:
        """GET ``url``; read the body only if ``accept(content_type, first_bytes)`` says so.

        With ``validators`` the GET is conditional: a 304 answer has no body and means
        the page has not changed since the answer that gave them. With a recorder, the
        result names where the exchange was archived."""
        result, archiving = await self.fetch_then_archive(
            url, accept=accept, max_body=max_body, validators=validators
        )
        return await archived(result, archiving)

    async def fetch_then_archive(
        self,
        url: str,
        *,
        accept: BodyFilter | None = None,
        max_body: int | None = None,
        validators: Validators | None = None,
    ) -> tuple[FetchResult, asyncio.Task[StorageKey] | None]:
        """:meth:`fetch`, returning as soon as the response is read, with the archiving
        of the exchange under way (None without a recorder or an exchange): the caller
        ends the host's turn first, then waits for the archive. On the crawl benchmark
        (20 hosts, one request each in flight) hosts held until their records were written
        kept ``--warc`` at a median 72% of metadata-only pages/s; freed first, 78%."""
        result, exchange = await self.fetch_exchange(
            url, accept=accept, max_body=max_body, validators=validators
        )
        return result, self.archive(exchange)

    def archive(self, exchange: WarcExchange | None) -> asyncio.Task[StorageKey] | None:
        """Start archiving ``exchange`` (from :meth:`fetch_exchange`); None without one."""
        if self._recorder is None or exchange is None:
            return None
        # Archived after the fetch: the time the archive takes is neither the server's
        # response time (which sets the host's politeness delay) nor under the timeout.
        return asyncio.ensure_future(self._recorder.write(exchange))

    async def fetch_exchange(
        self,
        url: str,
        *,
        accept: BodyFilter | None = None,
        max_body: int | None = None,
        validators: Validators | None = None,
    ) -> tuple[FetchResult, WarcExchange | None]:
        """:meth:`fetch`, returning what to archive of the exchange (None without a
        recorder) instead of archiving it: a page to be rendered is archived with its
        rendered HTML (:meth:`archive`)."""
        if self._client is None:
            raise RuntimeError("Fetcher used outside its context")
        cap = self._max_body if max_body is None else max_body
        started = time.monotonic()
        site = None if self._sites is None else self._sites.find(host_key(url))
        try:
            async with asyncio.timeout(self._timeouts.total):
                headers = None if validators is None else validators.headers()
                if site is not None:
                    headers = {**site.headers, **(headers or {})}
                with await self._client.get(url, headers) as response:
                    result, exchange = await self._read(url, response, accept, cap, started)
                    if exchange is not None and validators is not None:
                        exchange = dataclasses.replace(exchange, refers_to=validators.fetched_at)
                    if exchange is not None and site is not None and site.archived:
                        exchange = dataclasses.replace(
                            exchange, request_headers=site.redact(exchange.request_headers)
                        )
        except (HttpFailure, ProxyFailed, OSError, TimeoutError, zlib.error, brotli.error) as exc:
            elapsed = time.monotonic() - started
            if isinstance(exc, OutOfFiles):
                self._out_of_files(exc)
            failed = FetchResult(
                url=url,
                status=None,
                elapsed=elapsed,
                response_time=elapsed,
                error=_error_class(exc),
                fetched_at=time.time(),
            )
            return failed, None
        return result, exchange

    def _out_of_files(self, exc: OutOfFiles) -> None:
        """Count a connection the file-descriptor limit kept from being opened; say so,
        with how to raise the limit, the first time."""
        self.fd_limit_hits += 1
        if self.fd_limit_hits > 1:
            return
        limit = current()
        log.warning(
            "the file-descriptor limit binds (%d open files allowed, %d of them for "
            "connections): URLs wait for a free one; %s (%s)", limit.soft, fd_budget(),
            limit.advice(), exc,
            extra={"fd_limit": limit.soft, "fd_hard_limit": limit.hard},
        )  # fmt: skip

    async def _read(
        self,
        url: str,
        response: Response,
        accept: BodyFilter | None,
        cap: int,
        started: float,
    ) -> tuple[FetchResult, WarcExchange | None]:
        """The response read as far as wanted, and what to archive of it (None without
        a recorder)."""
        content_type = response.header("Content-Type")
        declared = response.content_length
        decoder = _decoder(response.header("Content-Encoding"))
        body = bytearray()
        truncated = False
        # What the archive keeps: the body as received (still content-encoded), capped.
        wire: bytearray | None = None if self._recorder is None else bytearray()
        cut = False
        peer = response.peer
        if decoder is None:
            wanted = False
        elif accept is not None and content_type:
            wanted = accept(content_type, b"")
        else:
            wanted = True
        sniff = accept is not None and not content_type
        received = 0
        if wanted or wire is not None:
            async for chunk in response.chunks():
                received += len(chunk)
                if wire is not None:
                    room = cap - len(wire)
                    wire += chunk[:room]
                    cut = len(chunk) > room
                if wanted and decoder is not None:
                    body += decoder.feed(chunk, cap - len(body) + 1)
                    if len(body) > cap:
                        del body[cap:]
                        truncated = True
                        break
                    if sniff and body and accept is not None:
                        sniff = False
                        wanted = accept(None, bytes(body[:512]))
                if cut or not (wanted or wire is not None):
                    break
            else:
                # The stream ended: a compressed body cut off early is partial content.
                truncated = wanted and decoder is not None and not decoder.complete
            # The bytes received reached the cap before the decoded body did (a body that
            # compression made larger): what was decoded is partial too.
            truncated = truncated or cut
        answered_in = response.answered_in  # known only until the response is closed
        fetched_at = time.time()
        if not wanted:
            response.close()
            length = declared
            body = bytearray()
            truncated = False
        else:
            if truncated:
                response.close()
            length = len(body)
        exchange = None
        if wire is not None:
            # Cut at the cap (of the decoded body, or of the bytes received).
            exchange = exchange_of(
                url, response, bytes(wire), fetched_at, peer, truncated=truncated or cut
            )
        elapsed = time.monotonic() - started
        result = FetchResult(
            url=url,
            status=response.status,
            content_type=content_type,
            location=response.header("Location"),
            retry_after=response.header("Retry-After"),
            robots_tags=response.header_all("X-Robots-Tag"),
            body=bytes(body),
            length=length,
            truncated=truncated,
            elapsed=elapsed,
            response_time=elapsed if answered_in is None else answered_in,
            received=received,
            etag=response.header("ETag"),
            last_modified=response.header("Last-Modified"),
            fetched_at=fetched_at,
        )
        return result, exchange


def exchange_of(
    url: str,
    response: Response,
    body: bytes,
    fetched_at: float,
    ip: str | None,
    *,
    truncated: bool = False,
) -> WarcExchange:
    """What the WARC recorder archives of ``response``: the request headers sent, the
    status line and headers received as they came, and ``body`` as read off the wire."""
    return WarcExchange(
        url=url,
        request_headers=list(response.request_headers),
        status=response.status,
        reason=response.reason,
        response_headers=[
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in response.raw_headers
        ],
        body=body,
        fetched_at=fetched_at,
        ip=ip,
        truncated=truncated,
        http_version=response.version,
    )
