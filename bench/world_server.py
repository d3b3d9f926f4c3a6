"""The world's HTTP/1.1 and HTTPS server: an asyncio Protocol on uvloop, cheap per request.

    python -m bench.world_server CONFIG_JSON

CONFIG_JSON is a `ServerConfig` as JSON. The server listens once on 0.0.0.0 at the
world's HTTP port and once at its HTTPS port (a wildcard certificate for every zone),
with SO_REUSEPORT so that several processes can share the ports. 0.0.0.0 because the
world has up to 100,000 loopback addresses and a socket per address would pass the
file-descriptor limit: a connection whose local or peer address is not in 127.0.0.0/8 is
aborted before a byte is read, so the server never talks to anything but loopback.

Each request is answered after a latency drawn from a log-normal distribution (median
`MEDIAN` s, p99 20 times that: sigma = ln(20)/2.326), capped at `CAP`, 5 times longer on
slow hosts, all scaled by ``latency_scale``; the Host header picks the world host, and a
host answers only on its own address and scheme. Connections are kept alive and closed
after ``idle_timeout`` seconds without a request, as Apache does after 5 s.

Access log, one line a request (space-separated)::

    host path status start_ns end_ns drawn_us local_address connection

``start_ns`` is when the request's first byte arrived, ``end_ns`` just before the response
is written (both CLOCK_MONOTONIC, shared by every process of the machine) and ``drawn_us``
the latency drawn for it, so ``end - start - drawn`` is the server's own lateness. A
request the client gave up on (closing the connection first) is logged too, with status
`ABANDONED` (0), so that the politeness checks see it in flight. Every
``stats_interval`` seconds the server prints one JSON line on stdout: requests in flight,
open connections, requests answered, connections refused, and the event loop's lag
samples (ms, measured every `LAG_PERIOD` s). It prints ``ready`` once it listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import resource
import signal
import socket
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

import uvloop

from bench.world_map import PRIVATE_PATH, Behaviour, Host, World, WorldParams

__all__ = ["MEDIAN", "ServerConfig", "WorldProtocol", "loopback_only", "main"]

MEDIAN = 0.1
SIGMA = math.log(20) / 2.326
CAP = 10.0
SLOW_FACTOR = 5.0
RETRY_AFTER = {429: 2, 503: 3}
ABANDONED = 0
"""The status logged for a request whose client closed the connection before the answer:
its end is when the server saw the close."""
LAG_PERIOD = 0.05
MAX_HEAD = 16_384
_REASONS = {200: "OK", 404: "Not Found", 421: "Misdirected Request", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip
_FILLER = " ".join(
    f"Paragraph {n} of the simulated web: words enough to look like a page of text."
    for n in range(60)
)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One server process: the world, where to write, and its timings."""

    hosts: int
    pages: int
    seed: int
    http_port: int
    https_port: int
    cert: str
    key: str
    log: str
    process: int = 0
    stats_interval: float = 10.0
    latency_scale: float = 1.0
    idle_timeout: float = 5.0


class Server:
    """The state every connection of one process shares."""

    def __init__(self, config: ServerConfig, log: TextIO) -> None:
        self.config = config
        self.world = World(
            WorldParams(config.hosts, config.pages, config.seed, config.http_port,
                        config.https_port)
        )  # fmt: skip
        self.random = random.Random(f"{config.seed}:{config.process}")
        self.log, self.lines = log, list[str]()
        self.attempts: dict[tuple[int, int], int] = {}
        self.inflight = self.connections = self.requests = self.refused = self.opened = 0
        self.lags: list[float] = []

    def latency(self, host: Host | None) -> float:
        drawn = min(CAP, self.random.lognormvariate(math.log(MEDIAN), SIGMA))
        if host is not None and host.behaviour is Behaviour.SLOW:
            drawn = min(CAP * SLOW_FACTOR, drawn * SLOW_FACTOR)
        return drawn * self.config.latency_scale

    def flush(self) -> None:
        self.log.write("".join(self.lines))
        self.log.flush()
        self.lines.clear()

    def respond(self, name: str, path: str, local: str, tls: bool) -> tuple[int, bytes, float]:
        """Status, response bytes and drawn latency for GET ``path`` on host ``name``."""
        index = self.world.index_of(name)
        host = None if index is None else self.world.host(index)
        latency = self.latency(host)
        if host is None or host.tls != tls:
            return 404, _response(404, b"no such host\n", "text/plain"), latency
        if host.address != local:
            return 421, _response(421, b"not on this address\n", "text/plain"), latency
        if path == "/robots.txt":
            return 200, _response(200, host.robots().encode(), "text/plain"), latency
        page = host.page_of(path)
        if page is None and path != PRIVATE_PATH:
            return 404, _response(404, b"not found\n", "text/html"), latency
        if page is not None and host.fault(page) != 200:
            key = (host.index, page)
            self.attempts[key] = self.attempts.get(key, 0) + 1
            if self.attempts[key] == 1:
                status = host.fault(page)
                extra = f"Retry-After: {RETRY_AFTER[status]}\r\n" if status in RETRY_AFTER else ""
                return status, _response(status, b"try again\n", "text/plain", extra), latency
        return 200, _response(200, self.page(host, page or 0).encode(), "text/html"), latency

    def page(self, host: Host, page: int) -> str:
        """The HTML of a page: its links (own host and other hosts) and some text."""
        links = [f'<a href="{path}">{path}</a>' for path in self.world.same_host_links(host, page)]
        for target in self.world.cross_links(host, page):
            links.append(f'<a href="{self.world.host(target).url(0)}">elsewhere</a>')
        return (
            f"<!DOCTYPE html><html><head><title>{host.name} page {page}</title></head><body>"
            f"<h1>{host.name} page {page}</h1><nav>{' '.join(links)}</nav>"
            f"<p>{_FILLER}</p></body></html>\n"
        )


def loopback_only(local: object, peer: object) -> bool:
    """Whether a connection's local and peer addresses (``sockname``, ``peername``) are
    both IPv4 addresses in 127.0.0.0/8: the only connections the server talks to."""
    return all(
        isinstance(end, tuple) and isinstance(end[0], str) and end[0].startswith("127.")
        and end[0].count(".") == 3
        for end in (local, peer)
    )  # fmt: skip


def _response(status: int, body: bytes, kind: str, extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {kind}; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


class WorldProtocol(asyncio.Protocol):
    """One connection: one request at a time, kept alive until idle too long."""

    def __init__(self, server: Server, tls: bool) -> None:
        self.server, self.tls = server, tls
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.start_ns = 0
        self.busy = False
        self.idle: asyncio.TimerHandle | None = None
        self.local = ""
        self.name = ""
        self.pending: tuple[asyncio.TimerHandle, str, str, float] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        local = transport.get_extra_info("sockname")
        peer = transport.get_extra_info("peername")
        if not loopback_only(local, peer):
            self.server.refused += 1
            transport.abort()
            return
        self.transport, self.local = transport, local[0]
        self.server.connections += 1
        self.server.opened += 1
        self.name = f"{self.server.config.process}-{self.server.opened}"
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.server.connections -= 1
            self.transport = None
        if self.idle is not None:
            self.idle.cancel()
        if self.busy and self.pending is not None:
            handle, host, target, latency = self.pending
            handle.cancel()
            self._log(host, target, ABANDONED, latency)
            self.server.inflight -= 1
            self.busy = False

    def _log(self, host: str, target: str, status: int, latency: float) -> None:
        """One access-log line for the request in hand, ending now."""
        self.server.lines.append(
            f"{host} {target} {status} {self.start_ns} {time.monotonic_ns()} "
            f"{round(latency * 1e6)} {self.local} {self.name}\n"
        )
        self.server.requests += 1

    def _arm_idle(self) -> None:
        loop = asyncio.get_running_loop()
        self.idle = loop.call_later(self.server.config.idle_timeout, self._close_idle)

    def _close_idle(self) -> None:
        if self.transport is not None and not self.busy and not self.buffer:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if not self.buffer and not self.busy:
            self.start_ns = time.monotonic_ns()
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_HEAD and self.transport is not None:
                self.transport.abort()
            return
        head, self.buffer = self.buffer[:end].decode("latin-1"), self.buffer[end + 4 :]
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        path = parts[1].split("?", 1)[0] if len(parts) == 3 else "-"
        host, close = "-", False
        for line in lines[1:]:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key == "host":
                host = value.strip().lower().rsplit(":", 1)[0].rstrip(".") or "-"
            elif key == "connection":
                close = value.strip().lower() == "close"
        status, reply, latency = self.server.respond(host, path, self.local, self.tls)
        self.busy = True
        self.server.inflight += 1
        target = parts[1] if len(parts) == 3 else "-"
        handle = asyncio.get_running_loop().call_later(
            latency, self._reply, host, target, status, reply, latency, close
        )
        self.pending = (handle, host, target, latency)

    def _reply(
        self, host: str, target: str, status: int, reply: bytes, latency: float, close: bool
    ) -> None:
        if self.transport is None:
            return
        self._log(host, target, status, latency)
        self.transport.write(reply)
        self.pending = None
        self.server.inflight -= 1
        self.busy = False
        if close:
            self.transport.close()
            return
        if self.buffer:
            self.start_ns = time.monotonic_ns()
            self._next_request()
        else:
            self._arm_idle()


def _listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


async def _watch_lag(server: Server) -> None:
    loop = asyncio.get_running_loop()
    while True:
        expected = loop.time() + LAG_PERIOD
        await asyncio.sleep(LAG_PERIOD)
        server.lags.append(round((loop.time() - expected) * 1000, 2))


def _quiet_churn(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Leave out the errors of connections a client dropped or a handshake it broke off:
    ordinary churn. Anything else is reported as usual."""
    if not isinstance(context.get("exception"), (ssl.SSLError, ConnectionError)):
        loop.default_exception_handler(context)


async def serve(config: ServerConfig, log: TextIO) -> None:
    """Serve until SIGTERM or SIGINT; the log is flushed at every stats line and at exit."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_quiet_churn)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(config.cert, config.key)
    server = Server(config, log)
    plain = await loop.create_server(
        lambda: WorldProtocol(server, False), sock=_listener(config.http_port)
    )
    secure = await loop.create_server(
        lambda: WorldProtocol(server, True), sock=_listener(config.https_port), ssl=context
    )
    lag = asyncio.ensure_future(_watch_lag(server))
    print("ready", flush=True)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), config.stats_interval)
        server.flush()
        stats = {
            "inflight": server.inflight, "connections": server.connections,
            "requests": server.requests, "refused": server.refused, "lags": server.lags,
        }  # fmt: skip
        server.lags = []
        print(json.dumps(stats), flush=True)
    lag.cancel()
    plain.close()
    secure.close()
    server.flush()


def main(argv: list[str]) -> int:
    config = ServerConfig(**json.loads(argv[0]))
    with Path(config.log).open("a", encoding="utf-8") as log:
        uvloop.run(serve(config, log))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
