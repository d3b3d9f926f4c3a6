"""The fetcher: one GET, no automatic redirects, every size and time bounded.

Redirects are not followed here: the engine records a 3xx and queues its target through
scope, robots, the seen-set and that host's politeness. Bodies are read as a stream and
decompressed by hand so the cap applies to decompressed bytes (a gzip bomb stops at the
cap, the rest is never downloaded). The caller decides from the Content-Type and the
first bytes whether the body is wanted at all.

Errors never escape :meth:`Fetcher.fetch`; they come back as ``FetchResult.error``, one
of the classes in :class:`FetchError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import ipaddress
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, Self

import aiohttp
import brotli
import yarl

from trawl.config import Timeouts
from trawl.resolver import BlockedAddress, GuardedResolver, NameNotFound, ResolverStats
from trawl.resource import AsyncResource
from trawl.store.base import StorageKey
from trawl.warc import WarcExchange

CHUNK = 64 * 1024
BodyFilter = Callable[[str | None, bytes], bool]


class FetchError(enum.StrEnum):
    """Why a fetch produced no HTTP response (or an unusable one)."""

    TIMEOUT = "timeout"
    DNS = "dns"
    CONNECT = "connect"
    TLS = "tls"
    PROTOCOL = "protocol"
    DECODE = "decode"
    INVALID_URL = "invalid_url"
    BLOCKED_ADDRESS = "blocked_address"


RETRYABLE_ERRORS = frozenset(
    {FetchError.TIMEOUT, FetchError.DNS, FetchError.CONNECT, FetchError.PROTOCOL}
)


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
    error: FetchError | None = None
    archived: StorageKey | None = None
    """Where the exchange was archived (WARC file and offset), when a recorder is set."""
    received: int = 0
    """Body bytes read off the wire (before decompression)."""
    etag: str | None = None
    last_modified: str | None = None
    """The response's validators (ETag, Last-Modified), for the next conditional GET."""


@dataclass(frozen=True, slots=True)
class Validators:
    """What a conditional GET sends back: the ETag and Last-Modified of the last answer."""

    etag: str | None = None
    last_modified: str | None = None

    def headers(self) -> dict[str, str]:
        """The If-None-Match and If-Modified-Since headers these validators make."""
        sent = {}
        if self.etag:
            sent["If-None-Match"] = self.etag
        if self.last_modified:
            sent["If-Modified-Since"] = self.last_modified
        return sent


class Recorder(Protocol):
    """Archives every exchange the fetcher makes (a :class:`~trawl.warc.WarcWriter`)."""

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


def _peer_address(response: aiohttp.ClientResponse) -> str | None:
    """The address the response came from, while its connection is still held."""
    connection = response.connection
    transport = None if connection is None else connection.transport
    peer = None if transport is None else transport.get_extra_info("peername")
    return str(peer[0]) if peer else None


def _is_ip_literal(host: str) -> bool:
    # Most hosts are names: an IPv4 literal ends in a digit and an IPv6 one has a colon,
    # and ruling the rest out here spares three exceptions inside ipaddress per request.
    if not host[-1:].isdigit() and ":" not in host:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _error_class(exc: BaseException) -> FetchError:
    if isinstance(exc, TimeoutError):
        return FetchError.TIMEOUT
    if isinstance(exc, BlockedAddress) or (
        isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, BlockedAddress)
    ):
        return FetchError.BLOCKED_ADDRESS
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return FetchError.DNS
    if isinstance(exc, aiohttp.ClientSSLError):
        return FetchError.TLS
    if isinstance(exc, aiohttp.ClientConnectorError):
        return FetchError.CONNECT
    if isinstance(exc, aiohttp.InvalidURL):
        return FetchError.INVALID_URL
    if isinstance(exc, (zlib.error, brotli.error)):
        return FetchError.DECODE
    return FetchError.PROTOCOL


class Fetcher(AsyncResource):
    """An aiohttp session configured for polite, bounded crawling."""

    def __init__(
        self,
        *,
        user_agent: str,
        timeouts: Timeouts,
        max_body: int,
        concurrency: int,
        resolver: GuardedResolver,
        recorder: Recorder | None = None,
    ) -> None:
        self._user_agent = user_agent
        self._timeouts = timeouts
        self._max_body = max_body
        self._concurrency = concurrency
        self._resolver = resolver
        self._recorder = recorder
        self._session: aiohttp.ClientSession | None = None

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
        # aiohttp's own DNS cache is off: every new connection asks the guarded resolver,
        # which caches by TTL and checks each answer before aiohttp connects to it. The
        # whole fetch is bounded by `fetch`'s own timeout, so aiohttp keeps only the
        # connect one: a second total timer per request was pure cost.
        connector = aiohttp.TCPConnector(
            resolver=self._resolver,
            limit=self._concurrency,
            limit_per_host=0,
            use_dns_cache=False,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeouts.connect),
            auto_decompress=False,
            headers={
                "User-Agent": self._user_agent,
                "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5",
                "Accept-Encoding": "gzip, deflate, br",
            },
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        return self

    async def close(self) -> None:
        """Close the session and its connections; safe to call more than once."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
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
        the page has not changed since the answer that gave them."""
        if self._session is None:
            raise RuntimeError("Fetcher used outside its context")
        cap = self._max_body if max_body is None else max_body
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._timeouts.total):
                # The URL is already normalised and percent-encoded: tell yarl not to
                # parse and re-quote it (a measurable share of each request's CPU).
                target = yarl.URL(url, encoded=True)
                if target.raw_host is not None and _is_ip_literal(target.raw_host):
                    # aiohttp connects to an IP literal without asking the resolver.
                    await self._resolver.addresses(target.raw_host)
                headers = None if validators is None else validators.headers()
                async with self._session.get(
                    target, allow_redirects=False, headers=headers
                ) as response:
                    result, exchange = await self._read(url, response, accept, cap, started)
        except (
            aiohttp.ClientError, BlockedAddress, TimeoutError, zlib.error, brotli.error, ValueError
        ) as exc:  # fmt: skip
            return FetchResult(
                url=url, status=None, elapsed=time.monotonic() - started, error=_error_class(exc)
            )
        if self._recorder is None or exchange is None:
            return result
        # Archived after the fetch: the time the archive takes is neither the server's
        # response time (which sets the host's politeness delay) nor under the timeout.
        return dataclasses.replace(result, archived=await self._recorder.write(exchange))

    async def _read(
        self,
        url: str,
        response: aiohttp.ClientResponse,
        accept: BodyFilter | None,
        cap: int,
        started: float,
    ) -> tuple[FetchResult, WarcExchange | None]:
        """The response read as far as wanted, and what to archive of it (None without
        a recorder)."""
        headers = response.headers
        content_type = headers.get("Content-Type")
        declared = response.content_length
        decoder = _decoder(headers.get("Content-Encoding"))
        body = bytearray()
        truncated = False
        # What the archive keeps: the body as received (still content-encoded), capped.
        wire: bytearray | None = None if self._recorder is None else bytearray()
        peer = _peer_address(response)
        if decoder is None:
            wanted = False
        elif accept is not None and content_type:
            wanted = accept(content_type, b"")
        else:
            wanted = True
        sniff = accept is not None and not content_type
        received = 0
        if wanted and decoder is not None:
            async for chunk in response.content.iter_chunked(CHUNK):
                received += len(chunk)
                if wire is not None:
                    wire += chunk[: cap - len(wire)]
                body += decoder.feed(chunk, cap - len(body) + 1)
                if len(body) > cap:
                    del body[cap:]
                    truncated = True
                    break
                if sniff and body and accept is not None:
                    sniff = False
                    wanted = accept(None, bytes(body[:512]))
                    if not wanted:
                        break
            else:
                # The stream ended: a compressed body cut off early is partial content.
                truncated = not decoder.complete
        if not wanted:
            response.close()
            length = declared
            body = bytearray()
        else:
            if truncated:
                response.close()
            length = len(body)
        exchange = None
        if wire is not None:
            # Not read to its end: cut at the cap, or not wanted (not HTML).
            exchange = exchange_of(
                url, response, bytes(wire), time.time(), peer, truncated=truncated or not wanted
            )
        result = FetchResult(
            url=url,
            status=response.status,
            content_type=content_type,
            location=headers.get("Location"),
            retry_after=headers.get("Retry-After"),
            robots_tags=tuple(headers.getall("X-Robots-Tag", ())),
            body=bytes(body),
            length=length,
            truncated=truncated,
            elapsed=time.monotonic() - started,
            received=received,
            etag=headers.get("ETag"),
            last_modified=headers.get("Last-Modified"),
        )
        return result, exchange


def exchange_of(
    url: str,
    response: aiohttp.ClientResponse,
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
        request_headers=list(response.request_info.headers.items()),
        status=response.status,
        reason=response.reason or "",
        response_headers=[
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in response.raw_headers
        ],
        body=body,
        fetched_at=fetched_at,
        ip=ip,
        truncated=truncated,
        http_version="{}.{}".format(*(response.version or aiohttp.HttpVersion11)),
    )
