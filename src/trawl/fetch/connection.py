"""One connection of trawl's HTTP client and the answer to its current request: an
asyncio protocol feeding httptools' llhttp parser (trawl.fetch.client).

The parser's callbacks collect the status, the raw headers and the body; body bytes
wait in a buffer that pauses the socket past ``BUFFER_HIGH``, so a slow reader never
holds a whole large body, and the head is capped at ``MAX_HEAD``. A connection whose
whole answer has arrived (read or not) and whose server did not ask to close it may
carry the next request (:attr:`Connection.reusable`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import cast

import httptools

from trawl.fetch.pool import Pool, Route
from trawl.fetch.tls import TlsTransport

MAX_HEAD = 64 * 1024
"""Bytes of status line and headers an answer may have (aiohttp allowed 8 KiB a line)."""
BUFFER_HIGH = 256 * 1024
"""Body bytes buffered before the connection stops reading until the reader catches up."""


class HttpFailure(Exception):
    """A GET that produced no usable response."""


class ProtocolFailed(HttpFailure):
    """The server's answer is not valid HTTP/1.x, or ended before it was complete."""


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the answer to its current request."""

    def __init__(self, route: Route, pool: Pool[Connection]) -> None:
        self.route = route
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
