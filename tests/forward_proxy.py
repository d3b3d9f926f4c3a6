"""A forward HTTP proxy on loopback, for the tests of crawling through one.

It opens CONNECT tunnels and forwards absolute-form requests (``GET http://host/path``),
any number on one client connection (kept alive while the answers are framed), each on
a connection of its own to the target (``Connection: close``, with a ``Via`` header the
origin's log shows), logs what it saw (:class:`ProxyRecord`), may require
Proxy-Authorization (Basic), and can be stopped mid-crawl: after ``stop_after``
requests it closes its listening socket and every connection, as a proxy that dies.
Target names are mapped to addresses by ``resolve`` (the site server's map); a name
not in it goes to ``default_address``, or is taken as an address.

Run alone, for the benchmark of a crawl through it (docs/PERFORMANCE.md), it sends
every name to 127.0.0.1, serves until its standard input closes and then prints how
many requests came on how many connections:

    python tests/forward_proxy.py PORT
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

from trawl.demo.loop import BackgroundLoop
from trawl.resource import Resource

VIA = "1.1 trawl-test-proxy"
_DROPPED = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}
_FRAMING = {"content-length", "transfer-encoding"}


@dataclass(frozen=True, slots=True)
class ProxyRecord:
    """One request the proxy received and what it answered."""

    method: str
    target: str
    """The CONNECT authority or the absolute URL, as received."""
    host: str | None
    """The Host header, as received."""
    authorization: str | None
    """The Proxy-Authorization header, as received."""
    status: int
    """200 for a tunnel opened or a request forwarded; else the proxy's own answer."""


class _Framing:
    """Whether an answer fed to llhttp has ended."""

    def __init__(self) -> None:
        self.complete = False

    def on_message_complete(self) -> None:
        self.complete = True


async def _relay_answer(upstream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Relay one answer from the target to the client, its Connection headers dropped;
    whether the client's connection may carry another request (the answer was framed
    by its length, not by the end of the connection)."""
    head = await upstream.readuntil(b"\r\n\r\n")
    framing = _Framing()
    parser = httptools.HttpResponseParser(framing)
    parser.feed_data(head)
    status, *lines = head.decode("latin-1").split("\r\n")
    kept = [line for line in lines if line and line.split(":", 1)[0].lower() not in _DROPPED]
    framed = any(line.split(":", 1)[0].lower() in _FRAMING for line in kept)
    # The head goes with the body's first bytes, in one write, as the target sent them.
    pending = "\r\n".join([status, *kept, "", ""]).encode("latin-1")
    while not framing.complete:
        data = await upstream.read(65536)
        if not data:
            break
        parser.feed_data(data)
        writer.write(pending + data)
        pending = b""
        await writer.drain()
    writer.write(pending)
    await writer.drain()
    return framed and framing.complete


class ForwardProxy(Resource):
    """The proxy on ``address`` (a free port); a context manager."""

    def __init__(
        self,
        resolve: Mapping[str, str],
        *,
        address: str = "127.0.0.1",
        credentials: tuple[str, str] | None = None,
        stop_after: int | None = None,
        default_address: str | None = None,
        port: int = 0,
    ) -> None:
        self.address = address
        self.port = port
        self._default = default_address
        self._resolve = dict(resolve)
        self._expected = None
        if credentials is not None:
            pair = f"{credentials[0]}:{credentials[1]}".encode()
            self._expected = "Basic " + base64.b64encode(pair).decode()
        self._stop_after = stop_after
        self._records: list[ProxyRecord] = []
        self.connections = 0
        """Client connections accepted."""
        self._lock = threading.Lock()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._background = BackgroundLoop("trawl-test-proxy")

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    @property
    def records(self) -> list[ProxyRecord]:
        """Every request received so far (a copy)."""
        with self._lock:
            return list(self._records)

    def __enter__(self) -> ForwardProxy:
        self._background.start(self._start)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._client, self.address, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        self._background.stop(self._stop)

    async def _stop(self) -> None:
        """Stop listening and drop every connection, as a proxy that dies."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()

    def _record(self, record: ProxyRecord) -> None:
        with self._lock:
            self._records.append(record)
            count = len(self._records)
        if self._stop_after is not None and count >= self._stop_after:
            asyncio.get_running_loop().create_task(self._stop())

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections += 1
        try:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                # Requests in absolute form, one after another on the connection, until
                # either side closes or a CONNECT turns it into a tunnel.
                while await self._serve(await reader.readuntil(b"\r\n\r\n"), reader, writer):
                    pass
        finally:
            self._writers.discard(writer)
            writer.close()  # what was relayed is sent first
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _serve(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; whether the connection may carry another."""
        request_line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines if line]
        named = {name.lower(): value for name, value in headers}
        authorization = named.get("proxy-authorization")

        def record(status: int) -> None:
            self._record(ProxyRecord(method, target, named.get("host"), authorization, status))

        if self._expected is not None and authorization != self._expected:
            record(407)
            writer.write(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
            )
            await writer.drain()
            return True
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = await self._open(host.strip("[]"), int(port), writer, record)
            if upstream is None:
                return True
            record(200)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await self._pipe(reader, writer, *upstream)
            return False
        parts = urlsplit(target)
        upstream = await self._open(parts.hostname or "", parts.port or 80, writer, record)
        if upstream is None:
            return True
        record(200)
        up_reader, up_writer = upstream
        self._writers.add(up_writer)
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            forwarded = [f"{method} {path} HTTP/1.1"]
            forwarded += [f"{n}: {v}" for n, v in headers if n.lower() not in _DROPPED]
            forwarded += ["Connection: close", f"Via: {VIA}", "", ""]
            up_writer.write("\r\n".join(forwarded).encode("latin-1"))
            return await _relay_answer(up_reader, writer)
        finally:
            self._writers.discard(up_writer)
            up_writer.transport.abort()

    async def _open(
        self, host: str, port: int, writer: asyncio.StreamWriter, record: Callable[[int], None]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the target, or None after answering 502."""
        try:
            address = self._resolve.get(host, self._default or host)
            return await asyncio.open_connection(address, port)
        except OSError:
            record(502)
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return None

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """Relay bytes both ways until either side closes."""
        self._writers.add(up_writer)

        async def relay(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()

        try:
            tasks = [
                asyncio.ensure_future(relay(reader, up_writer)),
                asyncio.ensure_future(relay(up_reader, writer)),
            ]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._writers.discard(up_writer)
            up_writer.transport.abort()


if __name__ == "__main__":
    with ForwardProxy({}, default_address="127.0.0.1", port=int(sys.argv[1])) as running:
        sys.stdin.read()
        print(f"{len(running.records)} requests on {running.connections} connections")
