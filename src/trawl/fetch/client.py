"""trawl's HTTP/1.1 client: one GET at a time per connection, connections kept alive.

The fetcher needs little of a general client: GET only, no cookies, redirects or
automatic decompression, one request in flight per connection. This client does that
on an asyncio protocol with httptools' llhttp parser, at about 0.6 of aiohttp's CPU a
request (``python -m bench.client``), on the crawl's one event loop: every microsecond counts.

Every connection goes to an address the guarded resolver has checked, and TLS is
verified against the host name (trawl.fetch.tls: OpenSSL on the socket itself, without
the 256 KB buffer an asyncio TLS transport keeps in each connection). Idle connections
are pooled per route, the origin and any proxy (trawl.fetch.pool): at most
``max_idle``, each closed after ``idle_timeout`` (4.5 s, under Apache's 5 s) and a
host's at once on
:meth:`HttpClient.drop_idle`, called when the host goes to rest for longer. Open ones,
idle or not, stay within ``max_open``, what the file-descriptor limit leaves them
(trawl.fetch.fdlimit): the one idle longest makes room; with none idle, or on EMFILE or
ENFILE, :class:`OutOfFiles`, nothing asked.

With ``proxy_for``, a host's requests may go through a forward proxy (trawl.fetch.proxy):
https ones through a CONNECT tunnel to the target's checked address, TLS end to end
with the target; http ones in absolute form. The target's name is resolved and checked
first, as without a proxy; a failure of the proxy itself is :class:`ProxyFailed`, not
the target's, and :attr:`HttpClient.proxy_health` logs a proxy going down and back.

A request on a reused connection that the server ended before any byte of the answer (a
FIN, a reset as the request is written or its answer awaited, a write the transport
refuses) or answered with a 408 as it timed it out goes once more on a fresh connection:
a server may close an idle connection at any time. So only a fresh connection's failure,
or a reused one's that had begun to answer, reaches the caller and a host's breaker.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Self

from trawl.fetch.connection import MAX_HEAD as MAX_HEAD
from trawl.fetch.connection import Connection
from trawl.fetch.connection import HttpFailure as HttpFailure
from trawl.fetch.connection import ProtocolFailed as ProtocolFailed
from trawl.fetch.pool import IDLE_TIMEOUT, Pool, Route
from trawl.fetch.proxy import (
    AUTH_REQUIRED,
    Prelude,
    Proxy,
    ProxyFailed,
    ProxyFor,
    ProxyHealth,
    refusal,
    tunnel,
)
from trawl.fetch.resolver import GuardedResolver
from trawl.fetch.target import BadTarget, split_url
from trawl.fetch.tls import READ_BUFFER, default_context
from trawl.fetch.tls import connect as tls_connect

REQUEST_TIMEOUT = 408
Readable = Callable[[], Awaitable[None]]
_NO_FILES = frozenset({errno.EMFILE, errno.ENFILE})
"""Why ``socket()`` fails when the process (or the system) has no file descriptor left."""


class InvalidTarget(HttpFailure):
    """The URL is not one this client can fetch: not http(s), no host, a bad port."""


class ConnectFailed(HttpFailure):
    """No connection to any of the host's addresses."""


class ConnectRefused(ConnectFailed):
    """Every one of the host's addresses refused the connection: nothing listens there."""


class TlsFailed(HttpFailure):
    """The TLS handshake failed, or the certificate does not fit the host."""


class OutOfFiles(HttpFailure):
    """No connection could be opened for want of file descriptors: the process's limit
    (EMFILE), the system's (ENFILE), or the client's ``max_open`` budget. Nothing was
    asked of the host."""


def _decode(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


class Response:
    """An answer's status and headers; its body is read with :meth:`chunks`."""

    def __init__(
        self,
        client: HttpClient,
        connection: Connection,
        request_headers: list[tuple[str, str]],
        started_at: float,
    ) -> None:
        self._client = client
        self._started_at = started_at
        self._connection: Connection | None = connection
        self.status, reason, self.version, self.raw_headers = connection.answer_head()
        self.reason = _decode(reason)
        self.request_headers = request_headers
        self.peer = connection.peer
        self._by_name: dict[str, list[str]] = {}
        for name, value in self.raw_headers:
            self._by_name.setdefault(name.decode("latin-1").lower(), []).append(
                _decode(value.strip(b" \t"))
            )

    @property
    def answered_in(self) -> float | None:
        """Seconds from the request going out (its connection being opened, for a new
        one, after the name was resolved) to the last byte of the answer arriving: the
        server's time, without the wait for the event loop to hand the answer over. None
        until the whole answer is in."""
        connection = self._connection
        if connection is None or connection.completed_at is None:
            return None
        return connection.completed_at - self._started_at

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        values = self._by_name.get(name.lower())
        return values[0] if values else None

    def header_all(self, name: str) -> tuple[str, ...]:
        """Every value of header ``name`` (any case), in order."""
        return tuple(self._by_name.get(name.lower(), ()))

    @property
    def content_length(self) -> int | None:
        """The declared body length, when the server declared a valid one."""
        value = self.header("content-length")
        if value is None or not value.strip().isdigit():
            return None
        return int(value)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, transfer coding removed, as it arrives."""
        if self._connection is None:
            return
        async for chunk in self._connection.chunks():
            yield chunk

    def close(self) -> None:
        """Done with the answer: a connection whose answer has wholly arrived, read or
        not (a small body comes with its head), goes back to the pool."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        self._client.release(connection)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HttpClient:
    """GETs over pooled HTTP/1.1 connections to addresses the resolver has checked."""

    def __init__(
        self,
        resolver: GuardedResolver,
        *,
        headers: Sequence[tuple[str, str]],
        connect_timeout: float,
        max_idle: int,
        idle_timeout: float = IDLE_TIMEOUT,
        ssl_context: ssl.SSLContext | None = None,
        max_open: int | None = None,
        proxy_for: ProxyFor | None = None,
    ) -> None:
        self._resolver = resolver
        self._proxy_for = proxy_for
        self.proxy_health = ProxyHealth()
        self._headers = list(headers)
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in self._headers)
        self._connect_timeout = connect_timeout
        self._pool: Pool[Connection] = Pool(max_idle, idle_timeout)
        self._ssl = ssl_context
        self._max_open = max_open
        self._tls_buffer: memoryview | None = None
        """Where TLS connections decrypt what they read, shared."""
        self.opened = 0
        self.closed = False

    @property
    def idle(self) -> int:
        """Idle connections kept for reuse."""
        return len(self._pool)

    @property
    def sockets(self) -> int:
        """Connections open or being opened, idle ones included."""
        return self._pool.sockets

    def has_idle(self, host: str) -> bool:
        """Whether an idle connection to ``host`` (a host key) is kept for it."""
        return self._pool.holds(host)

    def drop_idle(self, host: str) -> int:
        """Close the idle connections to ``host`` (``name`` or ``name:port`` when the
        port is not the scheme's default); how many there were."""
        return self._pool.drop_host(host)

    async def get(self, url: str, headers: Mapping[str, str] | None = None) -> Response:
        """Send a GET for ``url`` and return once the answer's headers are in."""
        if self.closed:
            raise RuntimeError("HttpClient used after close")
        try:
            origin, target, host_header = split_url(url)
        except BadTarget as exc:
            raise InvalidTarget(str(exc)) from exc
        scheme, host, port = origin
        proxy = None if self._proxy_for is None else self._proxy_for(host)
        line = target
        if proxy is not None and scheme == "http":
            line = f"http://{host_header}{target}"  # absolute form, for the proxy
        sent = [("Host", host_header), *self._headers]
        request = f"GET {line} HTTP/1.1\r\nHost: {host_header}\r\n{self._fixed}"
        if headers:
            for name, value in headers.items():
                if "\r" in value or "\n" in value:
                    raise ProtocolFailed(f"a line break in the value of header {name}")
                sent.append((name, value))
                request += f"{name}: {value}\r\n"
        if proxy is None:
            payload = (request + "\r\n").encode("utf-8", "surrogateescape")
            return await self._answer((scheme, host, port, ""), payload, sent, None)
        if scheme == "http" and proxy.authorization is not None:
            # For the proxy only, and not among the headers archived (``sent``).
            request += f"Proxy-Authorization: {proxy.authorization}\r\n"
        payload = (request + "\r\n").encode("utf-8", "surrogateescape")
        try:
            response = await self._answer((scheme, host, port, proxy.key), payload, sent, proxy)
            if scheme == "http" and response.status == AUTH_REQUIRED:
                response.close()
                raise refusal(proxy, AUTH_REQUIRED, response.reason, "GET")
        except ProxyFailed as exc:
            self.proxy_health.failed(proxy, exc)
            raise
        self.proxy_health.answered(proxy)
        return response

    async def _answer(
        self, route: Route, payload: bytes, sent: list[tuple[str, str]], proxy: Proxy | None
    ) -> Response:
        """The answer to ``payload``, on an idle connection for ``route`` or on a new one."""
        connection = self._pool.take(route)
        if connection is not None:
            try:
                response = await self._ask(connection, payload, sent, time.monotonic())
            except ProtocolFailed:
                if connection.answered:
                    raise
                # Closed while idle: the server never answered, so ask on a new connection.
            else:
                if response.status != REQUEST_TIMEOUT:
                    return response
                # The server timed the idle connection out as the request came: a 408
                # that does not answer it (RFC 9110, 15.5.9), so ask on a new connection.
                connection.close()
                response.close()
        connection = await self._connect(route, proxy)
        try:
            return await self._ask(connection, payload, sent, connection.opened_at)
        except ProtocolFailed as exc:
            if proxy is None or route[0] == "https" or connection.answered:
                raise
            closed = f"proxy {proxy.shown} closed the connection before answering"
            raise ProxyFailed(closed) from exc

    async def _ask(
        self, connection: Connection, payload: bytes, sent: list[tuple[str, str]], started: float
    ) -> Response:
        """Send ``payload`` on ``connection`` and wait for the answer's head; the
        connection is closed if none comes. A transport that refuses the write (reset,
        broken pipe, already closed) fails as a connection closed before any answer."""
        try:
            connection.send(payload)
        except (OSError, RuntimeError) as exc:
            connection.close()
            raise ProtocolFailed(f"the connection failed as the request was sent: {exc}") from exc
        try:
            await connection.head()
        except BaseException:
            connection.close()
            raise
        return Response(self, connection, sent, started)

    def release(self, connection: Connection) -> None:
        """Take back a connection whose answer is done with: pooled when the whole
        answer has arrived and it may carry another request, closed otherwise."""
        if connection.reusable and not self.closed:
            connection.discard_body()
            connection.rest()
            self._pool.put(connection)
        else:
            connection.close()

    async def _connect(self, route: Route, proxy: Proxy | None) -> Connection:
        scheme, host, port, _ = route
        addresses = await self._resolver.addresses(host)
        if proxy is not None:
            return await self._connect_through(route, proxy, addresses[0])
        context = None
        if scheme == "https":
            context = self._ssl or default_context()
        loop = asyncio.get_running_loop()
        failure: BaseException | None = None
        refused = 0
        asked = time.monotonic()
        for address in addresses:
            self._make_room(host)
            self._pool.sockets += 1
            connection = None
            try:
                async with asyncio.timeout(self._connect_timeout):
                    if context is None:
                        _, connection = await loop.create_connection(
                            lambda: Connection(route, self._pool), address, port
                        )
                    else:
                        connection = await self._connect_tls(route, address, port, context)
            except ssl.SSLError as exc:
                raise TlsFailed(f"TLS with {host}: {exc}") from exc
            except (OSError, TimeoutError) as exc:
                if isinstance(exc, OSError) and exc.errno in _NO_FILES:
                    raise OutOfFiles(f"no file descriptor to connect to {host}: {exc}") from exc
                failure = exc
                refused += isinstance(exc, ConnectionRefusedError)
                continue
            finally:
                # Counted from now on unless it failed, or was lost before this resumed.
                if connection is None or connection.closed:
                    self._pool.sockets -= 1
            return self._opened(connection, asked)
        if isinstance(failure, TimeoutError):
            raise ConnectFailed(f"connecting to {host}:{port} timed out")
        if isinstance(failure, ConnectionRefusedError) and refused == len(addresses):
            raise ConnectRefused(f"{host}:{port} refused the connection")
        raise ConnectFailed(f"cannot connect to {host}:{port}: {failure}")

    async def _connect_tls(
        self,
        route: Route,
        address: str,
        port: int,
        context: ssl.SSLContext,
        prelude: Prelude | None = None,
    ) -> Connection:
        """A TLS connection to ``address``:``port`` (after ``prelude``, a proxy's
        CONNECT), verified for ``route``'s host."""
        host = route[1]
        buffer = self._tls_buffer = self._tls_buffer or memoryview(bytearray(READ_BUFFER))
        connection = Connection(route, self._pool)
        await tls_connect(connection, address, port, context, host.strip("[]"), buffer, prelude)
        return connection

    async def _connect_through(self, route: Route, proxy: Proxy, address: str) -> Connection:
        """A connection to ``route``'s host through ``proxy``: to the proxy for an http
        URL; for https a tunnel to ``address`` (the host's checked address), TLS over it.
        A failure before the tunnel is open is the proxy's (:class:`ProxyFailed`); one
        after it, the target's."""
        scheme, host, port, _ = route
        where = await _proxy_address(proxy)
        loop = asyncio.get_running_loop()
        opened = False
        self._make_room(host)
        self._pool.sockets += 1
        connection = None
        asked = time.monotonic()
        try:
            async with asyncio.timeout(self._connect_timeout):
                if scheme == "http":
                    _, connection = await loop.create_connection(
                        lambda: Connection(route, self._pool), where, proxy.port
                    )
                else:
                    connect = tunnel(proxy, address, port, f"{host}:{port}")

                    async def prelude(sock: socket.socket, readable: Readable) -> None:
                        nonlocal opened
                        await connect(sock, readable)
                        opened = True

                    context = self._ssl or default_context()
                    connection = await self._connect_tls(route, where, proxy.port, context, prelude)
        except ssl.SSLError as exc:
            raise TlsFailed(f"TLS with {host} through proxy {proxy.shown}: {exc}") from exc
        except TimeoutError as exc:
            if opened:
                raise ConnectFailed(f"TLS with {host} through the proxy timed out") from exc
            raise ProxyFailed(f"proxy {proxy.shown}: no connection to {host} in time") from exc
        except OSError as exc:
            if exc.errno in _NO_FILES:
                raise OutOfFiles(f"no file descriptor to connect to {proxy.shown}: {exc}") from exc
            if opened:
                raise ConnectFailed(f"{host} through proxy {proxy.shown}: {exc}") from exc
            if isinstance(exc, ConnectionRefusedError):
                raise ProxyFailed(f"proxy {proxy.shown} refused the connection") from exc
            raise ProxyFailed(f"proxy {proxy.shown}: {exc}") from exc
        finally:
            if connection is None or connection.closed:
                self._pool.sockets -= 1
        return self._opened(connection, asked)

    def _opened(self, connection: Connection, asked: float) -> Connection:
        """``connection``, just opened (asked for at ``asked``), counted as open unless it
        was lost meanwhile."""
        connection.counted = not connection.closed
        self.opened += 1
        connection.opened_at = asked
        return connection

    def _make_room(self, host: str) -> None:
        """Room under ``max_open`` for one more socket: OutOfFiles if none is idle."""
        if self._max_open is None or self._pool.sockets < self._max_open:
            return
        if not self._pool.evict_oldest():
            raise OutOfFiles(
                f"{self._pool.sockets} connections open, the file-descriptor budget: "
                f"none left for {host}"
            )

    async def close(self) -> None:
        """Close every idle connection; the client takes no more requests."""
        self.closed = True
        self._pool.close()


async def _proxy_address(proxy: Proxy) -> str:
    """The address to reach ``proxy`` at: its IP address, or its name's first address
    by the system's resolver. The proxy is configuration, so no address policy applies."""
    try:
        return str(ipaddress.ip_address(proxy.host))
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(proxy.host, proxy.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ProxyFailed(f"proxy {proxy.shown} does not resolve: {exc}") from exc
    return str(found[0][4][0])
