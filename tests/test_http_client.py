"""trawl's HTTP/1.1 client against raw loopback servers that answer with exact bytes.

Every test starts a `RawServer` (``asyncio.start_server`` on 127.0.0.1, port 0) whose
handler reads request heads and writes whatever bytes the test scripts, so keep-alive,
chunked, close-delimited, malformed and hostile answers are produced byte for byte. The
server records each connection, each request head it read on it, and whether the client
hung up: those records are the witnesses for connection reuse, alongside the client's own
``opened`` and ``idle`` counts. Names resolve through `GuardedResolver` overrides to
127.0.0.1 and the address policy allows only 127.0.0.0/8, so nothing here reaches past
loopback. IPv6 is not exercised.

Where a wrong client would wait for ever (a body it should not read, a head that never
ends), the server keeps the connection open and the test's deadline turns the hang into a
failure within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import random
import socket
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dns_server import ScriptedDns
from trawl.fetch.client import (
    MAX_HEAD,
    ConnectFailed,
    HttpClient,
    InvalidTarget,
    ProtocolFailed,
    Response,
    TlsFailed,
)
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import AiodnsBackend, BlockedAddress, GuardedResolver, NameNotFound
from trawl.fetch.target import BadTarget, split_general, split_url

pytestmark = pytest.mark.timeout(30)

LOOPBACK = AddressPolicy([ipaddress.ip_network("127.0.0.0/8")])
NAMES = {"a.test": "127.0.0.1", **{f"h{i}.test": "127.0.0.1" for i in range(6)}}
CLIENT_HEADERS = [("User-Agent", "trawl-test"), ("Accept", "*/*")]
MAX_IDLE = 4
DEADLINE = 3.0
"""Seconds any one fetch may take; a client that hangs fails here rather than at the
suite's timeout."""


# --- the raw server -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A request head as the server read it."""

    raw: bytes
    line: str
    headers: list[tuple[str, str]]

    @property
    def path(self) -> str:
        """The request target without its query."""
        return self.line.split(" ")[1].split("?")[0]


def parse_request(raw: bytes) -> Request:
    """Split a request head into its request line and (name, value) header pairs."""
    line, *fields = raw.decode("latin-1").removesuffix("\r\n\r\n").split("\r\n")
    headers = []
    for field in fields:
        name, _, value = field.partition(":")
        headers.append((name, value.strip()))
    return Request(raw=raw, line=line, headers=headers)


class Witness:
    """Wakes whoever waits for a server's records to change."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def changed(self) -> None:
        self._changed.set()

    async def until(self, predicate: Callable[[], bool], within: float = 2.0) -> None:
        """Return once ``predicate`` holds or ``within`` seconds passed; the caller asserts."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()


class Connection:
    """One accepted connection: its streams and what was seen on it."""

    def __init__(
        self,
        index: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        witness: Witness,
    ) -> None:
        self.index = index
        self.reader = reader
        self.writer = writer
        self.requests: list[Request] = []
        self.hung_up = False
        """The client closed its end (EOF or reset)."""
        self.sent = 0
        self._witness = witness

    async def read_request(self) -> Request | None:
        """The next request head, or None once the client hung up."""
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            self.saw_hangup()
            return None
        request = parse_request(raw)
        self.requests.append(request)
        self._witness.changed()
        return request

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()
        self.sent += len(data)

    async def wait_hangup(self) -> None:
        """Read and drop whatever comes until the client closes its end."""
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(65536):
                pass
        self.saw_hangup()

    def saw_hangup(self) -> None:
        self.hung_up = True
        self._witness.changed()


Handler = Callable[[Connection], Awaitable[None]]


class RawServer:
    """A TCP server on 127.0.0.1 running ``handler`` for each connection, which is closed
    when the handler returns. Servers given one `Witness` can be waited on together."""

    def __init__(self, handler: Handler, witness: Witness | None = None) -> None:
        self._handler = handler
        self.witness = witness or Witness()
        self.connections: list[Connection] = []
        self.errors: list[BaseException] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        assert not self.errors, f"the test server's handler failed: {self.errors!r}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        connection = Connection(len(self.connections), reader, writer, self.witness)
        self.connections.append(connection)
        self.witness.changed()
        try:
            await self._handler(connection)
        except ConnectionError:
            connection.saw_hangup()
        except asyncio.CancelledError:
            pass  # __aexit__ ends handlers still running; asyncio would log the cancel
        except Exception as error:  # surfaced in __aexit__
            self.errors.append(error)
        finally:
            writer.close()
            self._tasks.discard(task)

    def url(self, path: str = "/", host: str = "a.test", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    @property
    def requests(self) -> list[Request]:
        """Every request read, connection by connection."""
        return [request for connection in self.connections for request in connection.requests]

    def paths(self) -> list[list[str]]:
        """The paths requested on each connection."""
        return [[request.path for request in c.requests] for c in self.connections]

    @property
    def hangups(self) -> int:
        return sum(connection.hung_up for connection in self.connections)


Action = bytes | Handler
"""How a route answers: bytes are sent and the connection waits for the next request; a
handler takes the connection over and it is closed when the handler returns."""


def answer(routes: Mapping[str, Action], pace: float | None = None) -> Handler:
    """Answer each request on a connection from ``routes``, by path. With ``pace``, bytes
    answers go out one byte at a time, ``pace`` seconds apart."""

    async def handler(connection: Connection) -> None:
        while (request := await connection.read_request()) is not None:
            action = routes[request.path]
            if not isinstance(action, bytes):
                await action(connection)
                return
            if pace is None:
                await connection.send(action)
                continue
            for offset in range(len(action)):
                await connection.send(action[offset : offset + 1])
                await asyncio.sleep(pace)

    return handler


def response(
    body: bytes = b"",
    *headers: bytes,
    status: bytes = b"200 OK",
    version: bytes = b"HTTP/1.1",
    length: bool = True,
) -> bytes:
    """A whole response: status line, ``headers`` as given, Content-Length unless told
    not to, then ``body``."""
    head = [version + b" " + status, *headers]
    if length:
        head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def chunked(pieces: Sequence[bytes]) -> bytes:
    """``pieces`` in chunked transfer coding, last chunk included, no trailers."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"


def then_close(data: bytes) -> Handler:
    """Send ``data`` and close the connection."""

    async def handler(connection: Connection) -> None:
        await connection.send(data)

    return handler


def then_wait(data: bytes) -> Handler:
    """Send ``data`` and keep the connection open until the client closes it."""

    async def handler(connection: Connection) -> None:
        await connection.send(data)
        await connection.wait_hangup()

    return handler


async def hang_up(connection: Connection) -> None:
    """Close the connection without a byte of answer."""


def digest(data: bytes) -> tuple[int, str]:
    """Length and hash: compares megabytes without printing them on failure."""
    return len(data), hashlib.sha256(data).hexdigest()


# --- the client ----------------------------------------------------------------------


def new_client(resolver: GuardedResolver | None = None) -> HttpClient:
    return HttpClient(
        resolver or GuardedResolver(LOOPBACK, overrides=NAMES),
        headers=CLIENT_HEADERS,
        connect_timeout=5.0,
        max_idle=MAX_IDLE,
    )


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    """A client whose names all resolve to 127.0.0.1, allowed to connect to loopback."""
    opened = new_client()
    yield opened
    await opened.close()


async def fetch(
    client: HttpClient, url: str, headers: Mapping[str, str] | None = None
) -> tuple[Response, bytes]:
    """GET ``url``, read the whole body, close the response."""
    async with asyncio.timeout(DEADLINE):
        response = await (client.get(url) if headers is None else client.get(url, headers))
        with response:
            body = b"".join([chunk async for chunk in response.chunks()])
    return response, body


async def read_into(response: Response, received: bytearray) -> None:
    """Append ``response``'s body to ``received`` as it arrives."""
    async for chunk in response.chunks():
        received += chunk


async def fetch_body(client: HttpClient, url: str) -> bytes:
    return (await fetch(client, url))[1]


# --- keep-alive and connection reuse ------------------------------------------------


async def test_sequential_gets_to_one_origin_share_one_connection(client: HttpClient) -> None:
    routes = {"/one": response(b"first"), "/two": response(b"second")}
    async with RawServer(answer(routes)) as server:
        first, first_body = await fetch(client, server.url("/one"))
        assert client.idle == 1
        second, second_body = await fetch(client, server.url("/two"))
    assert (first.status, first.reason, first.version, first_body) == (200, "OK", "1.1", b"first")
    assert (second.status, second_body) == (200, b"second")
    assert client.opened == 1
    assert server.paths() == [["/one", "/two"]]


@pytest.mark.parametrize("closing", ["close", "close twice", "with block"])
async def test_response_closed_mid_body_does_not_return_its_connection(
    client: HttpClient, closing: str
) -> None:
    routes: dict[str, Action] = {
        "/partial": then_wait(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"),
        "/full": response(b"full"),
    }
    async with RawServer(answer(routes)) as server:
        async with asyncio.timeout(DEADLINE):
            partial = await client.get(server.url("/partial"))
            if closing == "with block":
                with partial:
                    first = await anext(aiter(partial.chunks()))
            else:
                first = await anext(aiter(partial.chunks()))
                partial.close()
                if closing == "close twice":
                    partial.close()
        assert first
        assert b"hello".startswith(first)
        assert client.idle == 0
        await server.witness.until(lambda: server.connections[0].hung_up)
        assert server.connections[0].hung_up, "the half-read connection was left open"
        assert await fetch_body(client, server.url("/full")) == b"full"
    assert client.opened == 2
    assert server.paths() == [["/partial"], ["/full"]]


async def test_an_answer_wholly_arrived_but_unread_returns_its_connection(
    client: HttpClient,
) -> None:
    # A redirect or an unwanted page is not read, but its small body came with its head:
    # the connection is as good as one read to its end.
    routes = {
        "/moved": response(b"gone", b"Location: /full", status=b"301 Moved Permanently"),
        "/full": response(b"ok"),
    }
    async with RawServer(answer(routes)) as server:
        async with asyncio.timeout(DEADLINE):
            moved = await client.get(server.url("/moved"))  # the answer comes in one write
            moved.close()
        assert client.idle == 1
        assert await fetch_body(client, server.url("/full")) == b"ok"
    assert client.opened == 1
    assert server.paths() == [["/moved", "/full"]]


async def test_answered_in_is_the_servers_time_not_the_readers(client: HttpClient) -> None:
    async def slow_body(connection: Connection) -> None:
        await connection.read_request()
        await connection.send(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
        await asyncio.sleep(0.3)
        await connection.send(b"body")
        await connection.wait_hangup()

    async with RawServer(slow_body) as server, asyncio.timeout(DEADLINE):
        started = time.monotonic()
        answer = await client.get(server.url("/"))
        assert answer.answered_in is None  # the body is still on its way
        await asyncio.sleep(0.6)  # the reader is late: the body arrived meanwhile
        assert b"".join([chunk async for chunk in answer.chunks()]) == b"body"
        waited = time.monotonic() - started
        answered_in = answer.answered_in
        answer.close()
    assert answered_in is not None
    assert 0.3 <= answered_in < 0.55 < waited


@pytest.mark.parametrize(
    "first",
    [
        response(b"bye", b"Connection: close"),
        response(b"bye", b"connection: CLOSE"),
        response(b"bye", version=b"HTTP/1.0"),
    ],
    ids=["connection-close", "connection-close-any-case", "http-1.0"],
)
async def test_connection_the_server_means_to_close_is_not_reused(
    client: HttpClient, first: bytes
) -> None:
    # The server keeps the connection open regardless, so a client that reused it would
    # be answered on it and show up as two requests on one connection.
    routes = {"/first": first, "/second": response(b"again")}
    async with RawServer(answer(routes)) as server:
        assert await fetch_body(client, server.url("/first")) == b"bye"
        assert client.idle == 0
        assert await fetch_body(client, server.url("/second")) == b"again"
        await server.witness.until(lambda: server.connections[0].hung_up)
        assert server.connections[0].hung_up, "the finished connection was left open"
    assert client.opened == 2
    assert server.paths() == [["/first"], ["/second"]]


async def test_http_1_0_version_is_reported(client: HttpClient) -> None:
    async with RawServer(answer({"/": response(b"old", version=b"HTTP/1.0")})) as server:
        old, body = await fetch(client, server.url("/"))
    assert (old.version, old.status, body) == ("1.0", 200, b"old")


# --- body framing --------------------------------------------------------------------

CHUNKED_ANSWER = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
    b"5\r\nhello\r\n"
    b"7;name=value;flag\r\n, world\r\n"
    b"00000C\r\n\r\nline\r\nbr\r\n\r\n"
    b'1a;q="quoted;ext"\r\nabcdefghijklmnopqrstuvwxyz\r\n'
    b"0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
)
CHUNKED_BODY = b"hello, world\r\nline\r\nbr\r\nabcdefghijklmnopqrstuvwxyz"


@pytest.mark.parametrize("pace", [None, 0.0005], ids=["at-once", "byte-by-byte"])
async def test_chunked_body_is_reassembled_and_its_trailers_consumed(
    client: HttpClient, pace: float | None
) -> None:
    routes = {"/chunked": CHUNKED_ANSWER, "/after": response(b"after")}
    async with RawServer(answer(routes, pace=pace)) as server:
        chunked_response, body = await fetch(client, server.url("/chunked"))
        # Reuse proves the trailers were read to their end: leftovers would be read as
        # the next answer's status line.
        after = await fetch_body(client, server.url("/after"))
    assert body == CHUNKED_BODY
    assert chunked_response.content_length is None
    assert after == b"after"
    assert client.opened == 1
    assert server.paths() == [["/chunked", "/after"]]


@pytest.mark.parametrize("version", [b"HTTP/1.1", b"HTTP/1.0"])
async def test_body_without_length_is_read_to_eof(client: HttpClient, version: bytes) -> None:
    async def close_delimited(connection: Connection) -> None:
        await connection.send(version + b" 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst part, ")
        await asyncio.sleep(0.02)
        await connection.send(b"second part")

    routes: dict[str, Action] = {"/eof": close_delimited, "/next": response(b"next")}
    async with RawServer(answer(routes)) as server:
        eof, body = await fetch(client, server.url("/eof"))
        assert await fetch_body(client, server.url("/next")) == b"next"
    assert (eof.status, eof.content_length, body) == (200, None, b"first part, second part")
    assert client.opened == 2
    assert server.paths() == [["/eof"], ["/next"]]


@pytest.mark.parametrize(
    ("answer_bytes", "sent_body"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 40, b"x" * 40),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            b"hello",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\na\r\nwor",
            b"hellowor",
        ),
    ],
    ids=["short-of-content-length", "no-last-chunk", "cut-inside-a-chunk"],
)
async def test_body_cut_short_raises_protocol_failed(
    client: HttpClient, answer_bytes: bytes, sent_body: bytes
) -> None:
    async with RawServer(answer({"/cut": then_close(answer_bytes)})) as server:
        async with asyncio.timeout(DEADLINE):
            cut = await client.get(server.url("/cut"))
            received = bytearray()
            with cut, pytest.raises(ProtocolFailed):
                await read_into(cut, received)
    assert cut.status == 200
    assert sent_body.startswith(received)
    assert client.idle == 0


@pytest.mark.parametrize(
    "no_body",
    [
        b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n',
        b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\nContent-Length: 1234\r\n\r\n',
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ],
    ids=["304", "304-with-length-of-the-representation", "204"],
)
async def test_304_and_204_end_at_their_head(client: HttpClient, no_body: bytes) -> None:
    # RFC 9112 section 6.3: these answers have no body whatever their headers say. The
    # crawler's conditional GETs meet 304s all the time; reading one to EOF would hang.
    routes = {"/cond": no_body, "/next": response(b"next")}
    async with RawServer(answer(routes)) as server:
        _, body = await fetch(client, server.url("/cond"), {"If-None-Match": '"x"'})
        assert await fetch_body(client, server.url("/next")) == b"next"
    assert body == b""
    assert client.opened == 1
    assert server.paths() == [["/cond", "/next"]]


# --- the request as sent ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("/path?q=1", "GET /path?q=1 HTTP/1.1"),
        ("", "GET / HTTP/1.1"),
        ("/p?q=1#fragment", "GET /p?q=1 HTTP/1.1"),
    ],
    ids=["path-and-query", "empty-path", "fragment-dropped"],
)
async def test_request_line_and_headers_are_sent_as_reported(
    client: HttpClient, path: str, line: str
) -> None:
    routes = {"/path": response(b"ok"), "/": response(b"ok"), "/p": response(b"ok")}
    async with RawServer(answer(routes)) as server:
        sent, _ = await fetch(client, server.url(path), {"If-None-Match": '"x"'})
    [request] = server.requests
    assert request.line == line
    assert request.headers == list(sent.request_headers)
    assert [(name.lower(), value) for name, value in sent.request_headers] == [
        ("host", f"a.test:{server.port}"),
        ("user-agent", "trawl-test"),
        ("accept", "*/*"),
        ("if-none-match", '"x"'),
    ]
    assert sent.peer == "127.0.0.1"


# --- response headers ----------------------------------------------------------------

HEADERS_ANSWER = (
    b"HTTP/1.1 404 Not Found\r\n"
    b"Content-Type: text/html; charset=utf-8\r\n"
    b"X-Robots-Tag: noindex\r\n"
    b'ETag: "v1"\r\n'
    b"x-robots-tag: nofollow\r\n"
    b"X-Latin: caf\xe9 \xff\r\n"
    b"Content-Length: 4\r\n"
    b"\r\n"
    b"gone"
)


async def test_headers_keep_order_case_and_repeats(client: HttpClient) -> None:
    async with RawServer(answer({"/": HEADERS_ANSWER})) as server:
        got, body = await fetch(client, server.url("/"))
    assert (got.status, got.reason, body) == (404, "Not Found", b"gone")
    assert got.raw_headers == [
        (b"Content-Type", b"text/html; charset=utf-8"),
        (b"X-Robots-Tag", b"noindex"),
        (b"ETag", b'"v1"'),
        (b"x-robots-tag", b"nofollow"),
        (b"X-Latin", b"caf\xe9 \xff"),
        (b"Content-Length", b"4"),
    ]
    assert got.header("CONTENT-type") == "text/html; charset=utf-8"
    assert got.header("etag") == '"v1"'
    assert got.header_all("X-Robots-Tag") == ("noindex", "nofollow")
    assert got.header("X-ROBOTS-TAG") == "noindex"
    assert got.header("x-latin") == "caf\udce9 \udcff"
    assert got.header("x-missing") is None
    assert got.header_all("x-missing") == ()
    assert got.content_length == 4


async def test_header_values_lose_surrounding_whitespace(client: HttpClient) -> None:
    padded = b"HTTP/1.1 200 OK\r\nContent-Type:text/plain  \r\nX-Tab:\t\ttabbed\t\r\n"
    async with RawServer(answer({"/": padded + b"Content-Length: 0\r\n\r\n"})) as server:
        got, _ = await fetch(client, server.url("/"))
    assert (got.header("content-type"), got.header("x-tab")) == ("text/plain", "tabbed")


@pytest.mark.parametrize("pause", [False, True], ids=["one-write", "informational-apart"])
async def test_informational_answers_are_skipped(client: HttpClient, pause: bool) -> None:
    interim = [
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    ]
    final = response(b"hello", b"X-Final: yes")

    async def hints(connection: Connection) -> None:
        for part in interim:
            await connection.send(part)
            await asyncio.sleep(0.02)
        await connection.send(final)
        await answer({"/next": response(b"next")})(connection)

    routes: dict[str, Action] = {
        "/hints": hints if pause else b"".join(interim) + final,
        "/next": response(b"next"),
    }
    async with RawServer(answer(routes)) as server:
        got, body = await fetch(client, server.url("/hints"))
        assert await fetch_body(client, server.url("/next")) == b"next"
    assert (got.status, got.reason, body) == (200, "OK", b"hello")
    assert got.header("x-final") == "yes"
    assert got.header("link") is None
    assert got.raw_headers == [(b"X-Final", b"yes"), (b"Content-Length", b"5")]
    assert client.opened == 1
    assert server.paths() == [["/hints", "/next"]]


# --- malformed and hostile answers -------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"<html>no status line at all</html>\r\n\r\n",
        b"HTTP/1.1 OK\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"\x16\x03\x03\x00\x02\x02\x28\r\n\r\n",
    ],
    ids=["ssh-banner", "html", "no-status-code", "bad-status-code", "binary"],
)
async def test_garbage_status_line_raises_protocol_failed(
    client: HttpClient, garbage: bytes
) -> None:
    async with RawServer(answer({"/": then_wait(garbage)})) as server:
        with pytest.raises(ProtocolFailed):
            await fetch(client, server.url("/"))
        await server.witness.until(lambda: server.connections[0].hung_up)
        assert server.connections[0].hung_up, "the failed connection was left open"
    assert client.idle == 0


@pytest.mark.parametrize(
    "framing",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    ],
    ids=["length-not-a-number", "negative-length", "conflicting-lengths", "bad-chunk-size"],
)
async def test_broken_framing_raises_protocol_failed(client: HttpClient, framing: bytes) -> None:
    async with RawServer(answer({"/": then_wait(framing)})) as server:
        with pytest.raises(ProtocolFailed):
            await fetch(client, server.url("/"))
    assert client.idle == 0


def endless(kind: str, limit: int = 16 * 1024 * 1024) -> Handler:
    """A head that never ends: many header lines, one endless header line, or an endless
    status line; given up after ``limit`` bytes or when the client hangs up."""
    starts = {
        "many-lines": b"HTTP/1.1 200 OK\r\n",
        "one-long-line": b"HTTP/1.1 200 OK\r\nX-Filler: ",
        "long-status-line": b"HTTP/1.1 200 ",
    }
    filler = (b"X-Filler: " + b"a" * 1014 + b"\r\n") * 64 if kind == "many-lines" else b"a" * 65536

    async def handler(connection: Connection) -> None:
        await connection.send(starts[kind])
        while connection.sent < limit:
            await connection.send(filler)

    return handler


@pytest.mark.parametrize("kind", ["many-lines", "one-long-line", "long-status-line"])
async def test_endless_head_fails_fast_with_bounded_memory(client: HttpClient, kind: str) -> None:
    async with RawServer(answer({"/": endless(kind)})) as server:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            started = time.monotonic()
            with pytest.raises(ProtocolFailed):
                await fetch(client, server.url("/"))
            elapsed = time.monotonic() - started
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    assert elapsed < 2.0
    # The server offers 16 MiB; a client that kept it all would peak far above this.
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes for a head capped at {MAX_HEAD}"


@pytest.mark.parametrize(
    "before_close",
    [b"", b"HTTP/1.1 200", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"],
    ids=["nothing", "part-of-status-line", "part-of-head"],
)
async def test_fresh_connection_closed_before_a_whole_head_raises_protocol_failed(
    client: HttpClient, before_close: bytes
) -> None:
    async with RawServer(answer({"/": then_close(before_close)})) as server:
        with pytest.raises(ProtocolFailed):
            await fetch(client, server.url("/"))
    # No second try: only a reused connection may have been closed by a keep-alive timer.
    assert client.opened == 1
    assert server.paths() == [["/"]]


# --- stale pooled connections ------------------------------------------------------------


async def test_pooled_connection_closed_by_the_server_is_replaced(client: HttpClient) -> None:
    async def answer_then_close(connection: Connection) -> None:
        await connection.send(response(b"one"))
        await asyncio.sleep(0.05)

    routes: dict[str, Action] = {"/one": answer_then_close, "/two": response(b"two")}
    async with RawServer(answer(routes)) as server:
        assert await fetch_body(client, server.url("/one")) == b"one"
        assert client.idle == 1
        await asyncio.sleep(0.2)  # the server has closed the pooled connection meanwhile
        assert await fetch_body(client, server.url("/two")) == b"two"
    assert client.opened == 2
    assert server.paths() == [["/one"], ["/two"]]


async def test_request_on_reused_connection_closed_unanswered_is_sent_once_more(
    client: HttpClient,
) -> None:
    # The keep-alive race: the server closes the idle connection just as the second
    # request arrives, so the client cannot know beforehand.
    async def first_connection_drops_second_request(connection: Connection) -> None:
        if connection.index == 0:
            await connection.read_request()
            await connection.send(response(b"one"))
            await connection.read_request()
            return
        await answer({"/two": response(b"two")})(connection)

    async with RawServer(first_connection_drops_second_request) as server:
        assert await fetch_body(client, server.url("/one")) == b"one"
        assert await fetch_body(client, server.url("/two")) == b"two"
    assert client.opened == 2
    assert server.paths() == [["/one", "/two"], ["/two"]]


async def test_retry_after_a_stale_connection_happens_once(client: HttpClient) -> None:
    async def only_the_first_answer(connection: Connection) -> None:
        if connection.index == 0:
            await connection.read_request()
            await connection.send(response(b"one"))
        await connection.read_request()

    async with RawServer(only_the_first_answer) as server:
        assert await fetch_body(client, server.url("/one")) == b"one"
        with pytest.raises(ProtocolFailed):
            await fetch(client, server.url("/two"))
    assert client.opened == 2
    assert server.paths() == [["/one", "/two"], ["/two"]]


async def test_reused_connection_cut_mid_answer_is_not_retried(client: HttpClient) -> None:
    async def cut_second_answer(connection: Connection) -> None:
        await connection.read_request()
        await connection.send(response(b"one"))
        await connection.read_request()
        await connection.send(b"HTTP/1.1 200 OK\r\nContent-")

    async with RawServer(cut_second_answer) as server:
        assert await fetch_body(client, server.url("/one")) == b"one"
        with pytest.raises(ProtocolFailed):
            await fetch(client, server.url("/two"))
    assert client.opened == 1
    assert server.paths() == [["/one", "/two"]]


# --- errors before any answer ------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://a.test/",
        "http:///nohost",
        "http://a.test:port/",
        "http://a.test:70000/",
        "mailto:someone@a.test",
    ],
)
async def test_unusable_url_raises_invalid_target(client: HttpClient, url: str) -> None:
    with pytest.raises(InvalidTarget):
        await client.get(url)
    assert client.opened == 0


@pytest.mark.parametrize("host", ["127.0.0.1", "a.test"])
async def test_address_the_policy_refuses_is_never_connected(host: str) -> None:
    strict = new_client(GuardedResolver(AddressPolicy(), overrides=NAMES))
    try:
        async with RawServer(answer({"/": response(b"secret")})) as server:
            with pytest.raises(BlockedAddress):
                await strict.get(server.url("/", host=host))
            await asyncio.sleep(0.05)
    finally:
        await strict.close()
    assert strict.opened == 0
    assert server.connections == []


async def test_name_that_does_not_resolve_raises_name_not_found() -> None:
    with ScriptedDns({}) as dns:
        resolver = GuardedResolver(LOOPBACK, backend=AiodnsBackend([dns.nameserver]))
        dns_client = new_client(resolver)
        try:
            with pytest.raises(NameNotFound):
                await dns_client.get("http://missing.test/")
        finally:
            await dns_client.close()
            await resolver.close()
    assert dns_client.opened == 0


async def test_closed_port_raises_connect_failed(client: HttpClient) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = sock.getsockname()[1]
        with pytest.raises(ConnectFailed):
            await client.get(f"http://a.test:{port}/")
    assert client.idle == 0


async def test_https_to_a_plain_http_server_raises_tls_failed(client: HttpClient) -> None:
    async def plain_http(connection: Connection) -> None:
        await connection.reader.read(65536)  # the ClientHello, read as if a request
        await connection.send(response(b"not tls", status=b"400 Bad Request"))

    async with RawServer(plain_http) as server:
        with pytest.raises(TlsFailed):
            async with asyncio.timeout(DEADLINE):
                await client.get(server.url("/", scheme="https"))
    assert client.idle == 0


# --- large bodies and flow control -------------------------------------------------------

BIG = random.Random(7).randbytes(5_000_000)


def big_chunks() -> list[bytes]:
    """``BIG`` cut into chunks of uneven sizes, one byte to 700 kB."""
    sizes = [1, 4096, 65_539, 700_000, 17, 100_000]
    pieces, offset, turn = [], 0, 0
    while offset < len(BIG):
        size = sizes[turn % len(sizes)]
        pieces.append(BIG[offset : offset + size])
        offset += size
        turn += 1
    return pieces


@pytest.mark.parametrize("framing", ["content-length", "chunked", "close-delimited"])
async def test_large_body_arrives_byte_exact(client: HttpClient, framing: str) -> None:
    answers: dict[str, Action] = {
        "content-length": response(BIG),
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(big_chunks()),
        "close-delimited": then_close(response(BIG, length=False)),
    }
    async with RawServer(answer({"/big": answers[framing]})) as server:
        _, body = await fetch(client, server.url("/big"))
    assert digest(body) == digest(BIG)


SLOW_BODY = random.Random(11).randbytes(16 * 1024 * 1024)


async def in_pieces(connection: Connection) -> None:
    """Answer with `SLOW_BODY` in 64 KiB writes, then wait for the client to hang up."""
    await connection.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(SLOW_BODY))
    view = memoryview(SLOW_BODY)
    for offset in range(0, len(SLOW_BODY), 65536):
        await connection.send(bytes(view[offset : offset + 65536]))
    await connection.wait_hangup()


async def read_slowly(client: HttpClient, url: str) -> tuple[int, str, int]:
    """GET ``url`` and read its body, sleeping after the first and the fifth chunk: the
    body's length and SHA-256, and the most memory traced meanwhile."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        async with asyncio.timeout(30):
            slow = await client.get(url)
            hashed, length, reads = hashlib.sha256(), 0, 0
            with slow:
                async for chunk in slow.chunks():
                    hashed.update(chunk)
                    length += len(chunk)
                    reads += 1
                    if reads in (1, 5):
                        await asyncio.sleep(0.3)  # the server pushes on meanwhile
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return length, hashed.hexdigest(), peak


async def test_slow_reader_gets_exact_bytes_without_buffering_the_body(
    client: HttpClient,
) -> None:
    async with RawServer(answer({"/slow": in_pieces})) as server:
        length, hashed, peak = await read_slowly(client, server.url("/slow"))
    assert (length, hashed) == digest(SLOW_BODY)
    # A client without flow control takes all 16 MiB in while the reader sleeps.
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes while the reader slept"


# --- the pool ----------------------------------------------------------------------------


async def test_idle_connections_are_capped_at_max_idle(client: HttpClient) -> None:
    witness = Witness()
    everyone = asyncio.Event()
    arrived = 0

    async def all_at_once(connection: Connection) -> None:
        nonlocal arrived
        if await connection.read_request() is None:
            return
        arrived += 1
        if arrived == 6:
            everyone.set()
        await everyone.wait()  # six connections open at once
        await connection.send(response(b"done"))
        while await connection.read_request() is not None:
            pass

    async with contextlib.AsyncExitStack() as stack:
        servers = [
            await stack.enter_async_context(RawServer(all_at_once, witness)) for _ in range(6)
        ]
        bodies = await asyncio.gather(
            *(fetch_body(client, s.url("/", host=f"h{i}.test")) for i, s in enumerate(servers))
        )
        assert bodies == [b"done"] * 6
        assert client.opened == 6
        assert client.idle <= MAX_IDLE

        def closed() -> int:
            return sum(server.hangups for server in servers)

        await witness.until(lambda: closed() == 6 - client.idle)
        assert closed() == 6 - client.idle, "connections beyond max_idle were left open"


async def test_close_hangs_up_idle_connections_and_refuses_new_gets() -> None:
    closing = new_client()
    async with RawServer(answer({"/": response(b"ok")})) as server:
        try:
            assert await fetch_body(closing, server.url("/")) == b"ok"
            assert closing.idle == 1
        finally:
            await closing.close()
        assert closing.idle == 0
        await server.witness.until(lambda: server.connections[0].hung_up)
        assert server.connections[0].hung_up
        with pytest.raises(RuntimeError):
            await closing.get(server.url("/"))
    assert server.paths() == [["/"]]


_URL_TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30)


@settings(max_examples=500, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "ftp"]),
    host=st.from_regex(r"[a-zA-Z0-9.\-]{1,20}", fullmatch=True),
    port=st.one_of(st.none(), st.integers(0, 70_000)),
    rest=st.one_of(_URL_TEXT.map(lambda text: "/" + text), _URL_TEXT),
)
@example(scheme="http", host="a.test", port=None, rest="/x?")
@example(scheme="http", host="a.test", port=None, rest="/x?a?b")
@example(scheme="https", host="a.test", port=443, rest="/")
@example(scheme="http", host="a.test", port=0, rest="/")
@example(scheme="http", host="a.test", port=65_536, rest="/")
@example(scheme="http", host="a.test.", port=None, rest="/p#frag")
def test_a_normalised_url_is_split_as_urlsplit_splits_it(
    scheme: str, host: str, port: int | None, rest: str
) -> None:
    """The one-expression reading of a URL trawl normalised gives what urlsplit's gives,
    for the URLs it reads (the rest go to urlsplit's): origin, target and Host header."""
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}{rest}"
    try:
        expected: object = split_general(url)
    except BadTarget as exc:
        expected = str(exc)
    try:
        got: object = split_url(url)
    except BadTarget as exc:
        got = str(exc)
    assert got == expected
