"""CPU of trawl's HTTP client over TLS: a request on a kept-alive connection, and a fresh
connection's handshake.

    python -m bench.tls_client [--requests 3000] [--handshakes 300] [--connections 16]
                               [--runs 3] [--loop uvloop|asyncio]

A server in its own process (uvloop, a fixed answer a request, so that its own cost stays
out of the figures) answers http and https on loopback with a small page (2 KB) or a
large one (100 KB). The client GETs, reading every body to its end: ``--requests`` small
pages one after another on one kept-alive connection, then on ``--connections`` at a
time, then as many large pages; the same small pages over plain http for reference; and
``--handshakes`` small pages each on a fresh connection (a TLS handshake each, and the
request). The process's CPU time over each part is divided by its requests. Parts run in
that order ``--runs`` times, each run on a fresh event loop after one warm-up run, and the
medians are printed. The certificate is bench.world's (ECDSA P-256).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import multiprocessing
import multiprocessing.queues
import resource
import ssl
import statistics
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import uvloop

from bench.world import make_certificates
from bench.world_map import ZONES
from trawl.fetch.client import HttpClient
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver

HOST = f"h1.{ZONES[0]}.test"
"""The one name every connection is opened to (the certificate's wildcard covers it)."""
PAGES = {"/small": 2 * 1024, "/large": 100 * 1024}
"""Body bytes of each page the server answers."""
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


class _Answer(asyncio.Protocol):
    """Answers every GET on a connection with its page, kept alive."""

    ANSWERS: ClassVar[dict[bytes, bytes]] = {
        path.encode(): b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
        + str(size).encode()
        + b"\r\n\r\n"
        + b"<p>trawl</p>".ljust(size, b".")
        for path, size in PAGES.items()
    }

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._pending = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._pending += data
        while b"\r\n\r\n" in self._pending and self._transport is not None:
            head, self._pending = self._pending.split(b"\r\n\r\n", 1)
            path = head.split(b" ", 2)[1]
            answer = self.ANSWERS.get(path)
            if answer is None:
                self._transport.close()
                return
            self._transport.write(answer)


def _serve(cert: Path, key: Path, ports: multiprocessing.queues.Queue[int]) -> None:
    """Serve the pages over http and https for ever; put the two ports in ``ports``."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        for tls in (None, context):
            server = await loop.create_server(_Answer, "127.0.0.1", 0, ssl=tls, backlog=4096)
            ports.put(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    uvloop.run(run())


def _trusting(ca: Path) -> ssl.SSLContext:
    """The client's context as ``--ca-file`` makes it: the system's trust store and ``ca``."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=ca)
    return context


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run(ports: dict[str, int], ca: Path, args: argparse.Namespace) -> dict[str, float]:
    """CPU microseconds a request of each part."""
    resolver = GuardedResolver(
        AddressPolicy([ipaddress.ip_network("127.0.0.0/8")]), overrides={HOST: "127.0.0.1"}
    )
    context = _trusting(ca)
    results: dict[str, float] = {}

    def client(max_idle: int) -> HttpClient:
        return HttpClient(
            resolver,
            headers=[("User-Agent", "trawl-bench")],
            connect_timeout=30.0,
            max_idle=max_idle,
            ssl_context=context,
        )

    async def get(http: HttpClient, url: str) -> None:
        with await http.get(url) as answer:
            assert answer.status == 200
            async for _ in answer.chunks():
                pass

    async def part(name: str, http: HttpClient, url: str, requests: int, at_once: int) -> None:
        async def worker(count: int) -> None:
            for _ in range(count):
                await get(http, url)

        await asyncio.gather(*(get(http, url) for _ in range(at_once)))  # connections opened
        cpu = _cpu()
        share, extra = divmod(requests, at_once)
        await asyncio.gather(*(worker(share + (k < extra)) for k in range(at_once)))
        results[name] = 1e6 * (_cpu() - cpu) / requests

    kept = client(args.connections)
    https = f"https://{HOST}:{ports['https']}"
    await part("https small, 1 connection", kept, f"{https}/small", args.requests, 1)
    await part(f"https small, {args.connections} connections", kept, f"{https}/small",
               args.requests, args.connections)  # fmt: skip
    await part(f"https large, {args.connections} connections", kept, f"{https}/large",
               args.requests, args.connections)  # fmt: skip
    await part(f"http small, {args.connections} connections", kept,
               f"http://{HOST}:{ports['http']}/small", args.requests, args.connections)  # fmt: skip
    await kept.close()
    fresh = client(0)
    await part("https small, a fresh connection each", fresh, f"{https}/small", args.handshakes, 1)
    await fresh.close()
    await resolver.close()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tls_client", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--handshakes", type=int, default=300)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loop", choices=sorted(LOOPS), default="uvloop")
    args = parser.parse_args(argv)
    if min(args.requests, args.handshakes, args.connections, args.runs) < 1:
        parser.error("--requests, --handshakes, --connections and --runs must be positive")
    with tempfile.TemporaryDirectory(prefix="trawl-tlscpu-") as where:
        ca, cert, key = make_certificates(Path(where))
        queue: multiprocessing.queues.Queue[int] = multiprocessing.Queue()
        server = multiprocessing.Process(target=_serve, args=(cert, key, queue), daemon=True)
        server.start()
        try:
            ports = {"http": queue.get(timeout=30), "https": queue.get(timeout=30)}
            runs: list[dict[str, float]] = []
            for turn in range(args.runs + 1):
                coroutine: Coroutine[Any, Any, dict[str, float]] = _run(ports, ca, args)
                with asyncio.Runner(loop_factory=LOOPS[args.loop]) as runner:
                    result = runner.run(coroutine)
                if turn:
                    runs.append(result)
        finally:
            server.terminate()
            server.join()
    print(f"CPU us a request, median of {args.runs} runs ({args.loop}):")
    for name in runs[0]:
        values = [run[name] for run in runs]
        print(f"  {name:<40}{statistics.median(values):>9.1f}   "
              f"({', '.join(f'{value:.1f}' for value in values)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
