"""A misbehaving HTTP server on 127.0.0.1, for tests that one bad host cannot hurt a crawl.

aiohttp's server only ever speaks well-formed HTTP, so this one is a raw asyncio TCP
server: an answer may drip one byte a second, never end its body, send a gzip bomb,
reset the connection half way, send a header no client should accept, or send garbage
instead of HTTP. Like `SiteServer` it listens on one port from a background thread,
answers for many host names (the Host header and the path pick the `Answer` from the
routes, looked up with `route_key`; anything else is a 404) and logs every request.

Each connection carries one request. Well-formed answers say ``Connection: close`` and
the server closes the connection after them, so no client reuses a connection this
server has given up on. While an answer runs, the server watches the connection: when
the client hangs up, the answer is cancelled at once and the log says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import socket
import struct
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from trawl.demo.loop import BackgroundLoop
from trawl.demo.server import LoopbackServer, listening_socket
from trawl.demo.site import route_key

__all__ = [
    "Answer",
    "Connection",
    "HostileRecord",
    "HostileServer",
    "drip",
    "endless",
    "garbage",
    "gzip_bomb",
    "huge_header",
    "page",
    "raw",
    "redirect",
    "reset_mid_body",
]

_LOOPBACK = "127.0.0.1"
_HEAD_LIMIT = 64 * 1024
_CHUNK = 64 * 1024
_BOMB_BLOCK = 1 << 20
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, mtime 0
_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 404: "Not Found"}


class Connection:
    """The client end of one request, as an answer writes to it: counted bytes, or a reset."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.sent = 0
        # drain() returns only once everything written is in the kernel, so a reset
        # after it cannot discard bytes an answer meant the client to see.
        writer.transport.set_write_buffer_limits(0)

    async def send(self, data: bytes) -> None:
        """Write ``data`` and wait until the kernel has taken it."""
        self._writer.write(data)
        self.sent += len(data)
        await self._writer.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP reset instead of an orderly close."""
        sock = self._writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._writer.transport.abort()


@dataclass(frozen=True, slots=True)
class Answer:
    """A named way of answering one request."""

    name: str
    write: Callable[[Connection], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class HostileRecord:
    """One request as the server saw it: `start`/`end` are `time.monotonic()` values,
    `sent` the bytes written back, `hung_up` whether the client left before the end."""

    host: str
    path: str
    answer: str
    start: float
    end: float
    sent: int
    hung_up: bool


def _head(status: int, headers: tuple[tuple[str, str], ...]) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
        *(f"{k}: {v}" for k, v in headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def page(
    body: bytes,
    *,
    status: int = 200,
    content_type: str = "text/html; charset=utf-8",
    headers: tuple[tuple[str, str], ...] = (),
) -> Answer:
    """A well-formed response: whatever the body holds, the framing is correct."""
    framing = (
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Connection", "close"),
    )

    async def write(conn: Connection) -> None:
        await conn.send(_head(status, (*headers, *framing)))
        for offset in range(0, len(body), _CHUNK):
            await conn.send(body[offset : offset + _CHUNK])

    return Answer("page", write)


def redirect(location: str, status: int = 302) -> Answer:
    """A redirect to ``location`` with an empty body."""
    answer = page(b"", status=status, headers=(("Location", location),))
    return Answer("redirect", answer.write)


def drip(interval: float = 1.0, size: int = 1_000_000) -> Answer:
    """A 200 text/html promising ``size`` bytes, then sending one every ``interval`` seconds."""
    text = b"<!doctype html><title>drip</title><p>" + b"." * 64

    async def write(conn: Connection) -> None:
        framing = (("Content-Type", "text/html"), ("Content-Length", str(size)))
        await conn.send(_head(200, framing))
        for index in range(size):
            await conn.send(text[index % len(text) : index % len(text) + 1])
            await asyncio.sleep(interval)

    return Answer("drip", write)


def endless(unit: bytes = b"and more ") -> Answer:
    """A chunked 200 text/html that starts a page and then repeats ``unit`` forever."""
    chunk = unit * max(1, _CHUNK // len(unit))
    frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    start = b"<!doctype html><p>"

    async def write(conn: Connection) -> None:
        framing = (("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"))
        await conn.send(_head(200, framing) + b"%x\r\n%s\r\n" % (len(start), start))
        while True:
            await conn.send(frame)

    return Answer("endless", write)


@functools.lru_cache(maxsize=4)
def _bomb_parts(head: bytes) -> tuple[bytes, bytes, bytes]:
    """Raw deflate pieces: ``head``, one block of zeros, and the final empty block.

    Each piece ends in a full flush, which empties the compressor's window, so the zeros
    block compresses to the same bytes every time and repeating it is a valid stream.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = compressor.compress(head) + compressor.flush(zlib.Z_FULL_FLUSH)
    zeros = compressor.compress(bytes(_BOMB_BLOCK)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return first, zeros, compressor.flush()


def gzip_bomb(size: int = 1 << 30, head: bytes = b"<!doctype html><title>bomb</title>") -> Answer:
    """A 200 text/html, Content-Encoding gzip: ``head``, then ``size`` zero bytes (rounded
    up to whole MiB). 1 GiB is about 1 MB on the wire and is never held anywhere: one
    compressed block is repeated, and the checksum is computed as blocks go out."""
    first, zeros, last = _bomb_parts(head)
    blocks = -(-size // _BOMB_BLOCK)
    length = len(_GZIP_HEADER) + len(first) + blocks * len(zeros) + len(last) + 8
    block = bytes(_BOMB_BLOCK)

    async def write(conn: Connection) -> None:
        framing = (
            ("Content-Type", "text/html"),
            ("Content-Encoding", "gzip"),
            ("Content-Length", str(length)),
            ("Connection", "close"),
        )
        await conn.send(_head(200, framing) + _GZIP_HEADER + first)
        crc = zlib.crc32(head)
        for _ in range(blocks):
            await conn.send(zeros)
            crc = zlib.crc32(block, crc)
        total = len(head) + blocks * _BOMB_BLOCK
        await conn.send(last + struct.pack("<II", crc, total & 0xFFFFFFFF))

    return Answer("gzip_bomb", write)


def raw(data: bytes, name: str = "raw") -> Answer:
    """``data`` exactly as given, HTTP or not, then an orderly close."""

    async def write(conn: Connection) -> None:
        await conn.send(data)

    return Answer(name, write)


def garbage(size: int = 4096, seed: int = 0) -> Answer:
    """Random bytes instead of an HTTP response, then an orderly close."""
    return raw(b"\x00" + random.Random(seed).randbytes(size - 1), "garbage")


def reset_mid_body(body: bytes, pause: float = 0.05) -> Answer:
    """A 200 promising all of ``body``; half of it, a ``pause``, then a TCP reset."""

    async def write(conn: Connection) -> None:
        framing = (("Content-Type", "text/html"), ("Content-Length", str(len(body))))
        await conn.send(_head(200, framing) + body[: len(body) // 2])
        await asyncio.sleep(pause)
        conn.reset()

    return Answer("reset_mid_body", write)


def huge_header(size: int = 100 * 1024, body: bytes = b"<!doctype html><title>x</title>") -> Answer:
    """A response whose one ``X-Padding`` header line is ``size`` bytes long."""
    answer = page(body, headers=(("X-Padding", "a" * size),))
    return Answer("huge_header", answer.write)


_NOT_FOUND = page(b"<!doctype html><title>Not found</title>", status=404)


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str] | None:
    """(Host header, request target) of the request, or None if it is not one."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    host = ""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "host":
            host = value.strip()
    return host, parts[1]


async def _hung_up(reader: asyncio.StreamReader) -> None:
    """Return once the client has closed its end (a client sends nothing after a GET)."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(_CHUNK):
            pass


class HostileServer(LoopbackServer):
    """Serves `routes` (absolute URLs, any port, to answers); a context manager whose
    close is idempotent."""

    port: int

    def __init__(self, routes: Mapping[str, Answer], *, port: int = 0) -> None:
        self._routes = {
            route_key(parts.netloc, parts.path + (f"?{parts.query}" if parts.query else "")): answer
            for parts, answer in ((urlsplit(url), answer) for url, answer in routes.items())
        }
        self._wanted_port = port
        self._lock = threading.Condition()
        self._active = 0
        self._log: list[HostileRecord] = []
        self._background = BackgroundLoop("trawl-hostile")
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host name with a route, in first-seen order."""
        return tuple(dict.fromkeys(host for host, _ in self._routes))

    def url(self, host: str, target: str = "/") -> str:
        """The absolute URL of ``target`` on ``host`` at this server's port."""
        return f"http://{host}:{self.port}{target}"

    def __enter__(self) -> HostileServer:
        sock = listening_socket(_LOOPBACK, self._wanted_port)
        self.port = sock.getsockname()[1]
        try:
            self._background.start(lambda: self._start(sock))
        except BaseException:
            sock.close()
            raise
        return self

    def close(self) -> None:
        """Stop serving, drop every connection and join the thread; idempotent."""
        self._background.stop(self._stop)

    async def _start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._accept, sock=sock, limit=_HEAD_LIMIT)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        # Dropping every connection ends its answer the way a client hanging up does.
        for writer in list(self._writers):
            writer.transport.abort()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        with self._lock:
            self._active += 1
        try:
            await self._serve(reader, writer)
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.transport.abort()
            with self._lock:
                self._active -= 1
                self._lock.notify_all()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        start = time.monotonic()
        request = await _read_head(reader)
        if request is None:
            return
        key = route_key(*request)
        answer = self._routes.get(key, _NOT_FOUND)
        conn = Connection(writer)
        run = asyncio.ensure_future(answer.write(conn))
        watch = asyncio.ensure_future(_hung_up(reader))
        try:
            await asyncio.wait((run, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            hung_up = not run.done() or run.exception() is not None
            for task in (run, watch):
                task.cancel()
            await asyncio.gather(run, watch, return_exceptions=True)
            record = HostileRecord(
                host=key[0],
                path=request[1],
                answer=answer.name,
                start=start,
                end=time.monotonic(),
                sent=conn.sent,
                hung_up=hung_up,
            )
            with self._lock:
                self._log.append(record)

    @property
    def requests(self) -> list[HostileRecord]:
        """Every request answered so far, in completion order (a copy); answers still
        running are waited for, briefly."""
        with self._lock:
            self._lock.wait_for(lambda: self._active == 0, timeout=5)
            return list(self._log)

    def resolve_map(self) -> dict[str, str]:
        """Every host name with a route, mapped to loopback."""
        return dict.fromkeys(self.hosts, _LOOPBACK)
