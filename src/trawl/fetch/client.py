"""trawl's HTTP/1.1 client: one GET at a time per connection, connections kept alive.

The fetcher needs little of a general client: GET only, no cookies, redirects, proxies
or automatic decompression, one request in flight per connection. This client does that
on an asyncio protocol with httptools' llhttp parser, at about 0.6 of aiohttp's CPU a
request (``python -m bench.client``), on the crawl's one event loop: every microsecond counts.

Every connection goes to an address the guarded resolver has checked, and TLS is
verified against the host name (trawl.fetch.tls: OpenSSL on the socket itself, without
the 256 KB buffer an asyncio TLS transport keeps in each connection). Idle connections
are pooled per origin (trawl.fetch.pool): at most ``max_idle``, each closed after
``idle_timeout`` (4.5 s, under Apache's 5 s) and a host's at once on
:meth:`HttpClient.drop_idle`, called when the host goes to rest for longer. Open ones,
idle or not, stay within ``max_open``, what the file-descriptor limit leaves them
(trawl.fetch.fdlimit): the one idle longest makes room; with none idle, or on EMFILE or
ENFILE, :class:`OutOfFiles`, nothing asked.

A request on a reused connection that the server ended before any byte of the answer (a
FIN, a reset as the request is written or its answer awaited, a write the transport
refuses) or answered with a 408 as it timed it out goes once more on a fresh connection:
a server may close an idle connection at any time. So only a fresh connection's failure,
or a reused one's that had begun to answer, reaches the caller and a host's breaker.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Self, cast

import httptools

from trawl.fetch.pool import IDLE_TIMEOUT, Origin, Pool
from trawl.fetch.resolver import GuardedResolver
from trawl.fetch.target import BadTarget, split_url
from trawl.fetch.tls import READ_BUFFER, TlsTransport, default_context
from trawl.fetch.tls import connect as tls_connect

MAX_HEAD = 64 * 1024
"""Bytes of status line and headers an answer may have (aiohttp allowed 8 KiB a line)."""
BUFFER_HIGH = 256 * 1024
"""Body bytes buffered before the connection stops reading until the reader catches up."""
REQUEST_TIMEOUT = 408
_NO_FILES = frozenset({errno.EMFILE, errno.ENFILE})
"""Why ``socket()`` fails when the process (or the system) has no file descriptor left."""


class HttpFailure(Exception):
    """A GET that produced no usable response."""


class InvalidTarget(HttpFailure):
    """The URL is not one this client can fetch: not http(s), no host, a bad port."""


class ConnectFailed(HttpFailure):
    """No connection to any of the host's addresses."""


class ConnectRefused(ConnectFailed):
    """Every one of the host's addresses refused the connection: nothing listens there."""


class TlsFailed(HttpFailure):
    """The TLS handshake failed, or the certificate does not fit the host."""


class ProtocolFailed(HttpFailure):
    """The server's answer is not valid HTTP/1.x, or ended before it was complete."""


class OutOfFiles(HttpFailure):
    """No connection could be opened for want of file descriptors: the process's limit
    (EMFILE), the system's (ENFILE), or the client's ``max_open`` budget. Nothing was
    asked of the host."""


def _decode(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the answer to its current request."""

    def __init__(self, origin: Origin, pool: Pool[_Connection]) -> None:
        self.origin = origin
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.opened_at = 0.0
        """When the connection was asked for (after the name was resolved)."""
        self.completed_at: float | None = None
        """When the whole answer to the current request had arrived (monotonic clock)."""
        self.closed = False
        self.counted = False
        """The connection counts against the pool's open sockets until it closes."""
        self._parser: httptools.HttpResponseParser | None = None
        self._head_bytes = self._head_size = 0
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._status = 0
        self._version = "1.1"
        self._keep_alive = False
        self._body: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._complete = False
        self._spoiled = False
        self._headers_done = False
        self._received_any = False
        self._error: HttpFailure | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()  # made by the loop's connection factory

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TLS one is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else None

    def data_received(self, data: bytes | memoryview) -> None:
        parser = self._parser
        if parser is None or self._complete or self._error is not None:
            # Bytes nobody asked for (an idle connection): it cannot be trusted again.
            self._abort()
            return
        self._received_any = True
        if not self._headers_done:
            self._head_bytes += len(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolFailed("the server switched protocols"))
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if not isinstance(cause, ProtocolFailed):
                cause = ProtocolFailed(f"malformed response: {exc}")
            self._fail(cause)
        else:
            if not self._headers_done and self._head_bytes > MAX_HEAD:
                self._fail(ProtocolFailed(f"response head longer than {MAX_HEAD} bytes"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        self._pool.uncount(self)
        # Cycles back to self: left to the rare collections, they kept what the transport holds.
        parser, self._parser, self.transport = self._parser, None, None
        if parser is None or self._complete or self._error is not None:
            return
        if self._headers_done and self._until_close():
            self._complete = True
            self.completed_at = time.monotonic()
            self._wake()
        else:
            self._fail(ProtocolFailed("the connection closed before the response was complete"))

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self._complete:
            self._spoiled = True  # a second answer to one request

    def on_status(self, reason: bytes) -> None:
        if not self._complete:
            self._reason += reason
            self._count_head(len(reason))

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._complete:
            self._headers.append((name, value))
            self._count_head(len(name) + len(value))

    def _count_head(self, size: int) -> None:
        # Bytes counted as they arrive miss a head that came whole with its body.
        self._head_size += size
        if self._head_size > MAX_HEAD:
            raise ProtocolFailed(f"response head longer than {MAX_HEAD} bytes")

    def on_headers_complete(self) -> None:
        parser = self._parser
        if self._complete:
            return
        assert parser is not None
        self._status = parser.get_status_code()
        if self._status < 200:
            return
        self._headers_done = True
        self._version = parser.get_http_version()
        self._keep_alive = bool(parser.should_keep_alive())
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._complete:
            return
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > BUFFER_HIGH and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._complete:
            return
        if self._status < 200:
            # An interim answer (103 Early Hints, 100 Continue): the real one follows.
            self._reason, self._headers, self._head_bytes, self._head_size = b"", [], 0, 0
            return
        self._complete = True
        self.completed_at = time.monotonic()
        self._wake()

    # the request

    def send(self, request: bytes) -> None:
        """Write ``request`` and make ready to read its answer."""
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self._head_bytes = self._head_size = 0
        self._reason = b""
        self._headers = []
        self._status = 0
        self._body.clear()
        self._buffered = 0
        self._complete = self._spoiled = self._headers_done = self._received_any = False
        self.completed_at = None
        self._error = None
        self.transport.write(request)

    async def head(self) -> None:
        """Wait for the status line and headers; raises the connection's failure."""
        while not self._headers_done:
            if self._error is not None:
                raise self._error
            await self._wait()

    def answer_head(self) -> tuple[int, bytes, str, list[tuple[bytes, bytes]]]:
        """The answer's status, reason phrase, HTTP version and raw headers."""
        return self._status, self._reason, self._version, self._headers

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; ProtocolFailed when it is cut short."""
        while True:
            if self._body:
                data = self._body[0] if len(self._body) == 1 else b"".join(self._body)
                self.discard_body()
                yield data
            elif self._complete:
                return
            elif self._error is not None:
                raise self._error
            else:
                await self._wait()

    @property
    def reusable(self) -> bool:
        """True when the whole answer has arrived (read or not) and the connection may
        carry another request."""
        return (
            self._complete
            and not self._spoiled
            and self._keep_alive
            and self._error is None
            and not self.closed
        )

    def rest(self) -> None:
        """The connection goes idle in the pool: it drops the answer's parser and head
        (the next request makes its own) and TLS frees what it need not keep."""
        self._parser = None
        self._reason, self._headers = b"", []
        if isinstance(self.transport, TlsTransport):
            self.transport.rest()

    def discard_body(self) -> None:
        """Drop what is buffered of the answer, and read on if reading was paused."""
        self._body.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    @property
    def answered(self) -> bool:
        """True once any byte of the current answer has arrived."""
        return self._received_any

    def _until_close(self) -> bool:
        """True when the answer's body ends only where the connection does."""
        names = {name.lower() for name, _ in self._headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: HttpFailure) -> None:
        if self._error is None:
            self._error = error
        self._abort()
        self._wake()

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Drop the connection."""
        self.closed = True
        self._pool.forget(self)
        self._pool.uncount(self)
        if self.transport is not None:
            self.transport.close()


class Response:
    """An answer's status and headers; its body is read with :meth:`chunks`."""

    def __init__(
        self,
        client: HttpClient,
        connection: _Connection,
        request_headers: list[tuple[str, str]],
        started_at: float,
    ) -> None:
        self._client = client
        self._started_at = started_at
        self._connection: _Connection | None = connection
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
    ) -> None:
        self._resolver = resolver
        self._headers = list(headers)
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in self._headers)
        self._connect_timeout = connect_timeout
        self._pool: Pool[_Connection] = Pool(max_idle, idle_timeout)
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
        sent = [("Host", host_header), *self._headers]
        request = f"GET {target} HTTP/1.1\r\nHost: {host_header}\r\n{self._fixed}"
        if headers:
            for name, value in headers.items():
                if "\r" in value or "\n" in value:
                    raise ProtocolFailed(f"a line break in the value of header {name}")
                sent.append((name, value))
                request += f"{name}: {value}\r\n"
        payload = (request + "\r\n").encode("utf-8", "surrogateescape")
        connection = self._pool.take(origin)
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
        connection = await self._connect(origin)
        return await self._ask(connection, payload, sent, connection.opened_at)

    async def _ask(
        self, connection: _Connection, payload: bytes, sent: list[tuple[str, str]], started: float
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

    def release(self, connection: _Connection) -> None:
        """Take back a connection whose answer is done with: pooled when the whole
        answer has arrived and it may carry another request, closed otherwise."""
        if connection.reusable and not self.closed:
            connection.discard_body()
            connection.rest()
            self._pool.put(connection)
        else:
            connection.close()

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        addresses = await self._resolver.addresses(host)
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
                            lambda: _Connection(origin, self._pool), address, port
                        )
                    else:
                        connection = await self._connect_tls(origin, address, context)
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
            connection.counted = not connection.closed
            self.opened += 1
            connection.opened_at = asked
            return connection
        if isinstance(failure, TimeoutError):
            raise ConnectFailed(f"connecting to {host}:{port} timed out")
        if isinstance(failure, ConnectionRefusedError) and refused == len(addresses):
            raise ConnectRefused(f"{host}:{port} refused the connection")
        raise ConnectFailed(f"cannot connect to {host}:{port}: {failure}")

    async def _connect_tls(
        self, origin: Origin, address: str, context: ssl.SSLContext
    ) -> _Connection:
        """A TLS connection to ``address``, verified for ``origin``'s host."""
        _, host, port = origin
        buffer = self._tls_buffer = self._tls_buffer or memoryview(bytearray(READ_BUFFER))
        connection = _Connection(origin, self._pool)
        await tls_connect(connection, address, port, context, host.strip("[]"), buffer)
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
