"""Memory per connection of trawl's HTTP client, plain and TLS.

    python -m bench.connection_memory [--connections 400] [--loop uvloop|asyncio]

Opens ``--connections`` connections to a local aiohttp server (its own process, so only
the client's memory is counted), keeps them idle in the pool, then closes them, with the
cycle collector off throughout, as it nearly is in a crawl (trawl.crawl.gc_tuning):
first all at once, their handshakes at the same time (what is freed of each handshake
leaves holes that the RSS keeps), then in a fresh process one after another, as a
crawl's pool fills. Prints, per connection: the RSS, the bytes malloc holds (glibc's
``mallinfo2``: Python's and OpenSSL's, without the holes) and the traced Python memory
(tracemalloc) while open, and what stays traced after closing. The TLS certificate is
bench.world's wildcard one.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import ipaddress
import multiprocessing
import multiprocessing.queues
import resource
import ssl
import tempfile
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import uvloop
from aiohttp import web

from bench.world import make_certificates
from bench.world_map import ZONES
from trawl.fetch.client import HttpClient
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver


def _host(n: int) -> str:
    """The name the ``n``th connection is opened to: one each, so that each request opens
    a connection of its own (the certificate's wildcard covers them all)."""
    return f"h{n}.{ZONES[0]}.test"


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloced() -> int:
    """Bytes glibc's malloc has handed out and not had back (0 without glibc 2.33+)."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return 0
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


def _trusting(ca: Path) -> ssl.SSLContext:
    """The client's context as ``--ca-file`` makes it: the system's trust store and ``ca``."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=ca)
    return context


def rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _serve(cert: Path, key: Path, ports: multiprocessing.queues.Queue[int]) -> None:
    """Serve a small page over http and https for ever; put the two ports in ``ports``."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(text="<title>page</title>" * 20, content_type="text/html")

    async def run() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", page)
        runner = web.AppRunner(app, keepalive_timeout=600)
        await runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        for tls in (None, context):
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls, backlog=4096)
            await site.start()
            ports.put(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(run())


async def _measure(scheme: str, port: int, ca: Path, connections: int, at_once: bool) -> str:
    resolver = GuardedResolver(
        AddressPolicy([ipaddress.ip_network("127.0.0.0/8")]),
        overrides={_host(n): "127.0.0.1" for n in range(connections + 1)},
    )
    client = HttpClient(
        resolver,
        headers=[("User-Agent", "trawl-bench")],
        connect_timeout=30.0,
        max_idle=connections * 2,
        idle_timeout=600.0,
        ssl_context=_trusting(ca),
    )

    async def get(n: int) -> None:
        with await client.get(f"{scheme}://{_host(n)}:{port}/") as answer:
            async for _ in answer.chunks():
                pass

    await get(0)  # imports, contexts and first-use caches are not counted
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        rss_0, malloc_0, traced = rss(), malloced(), tracemalloc.get_traced_memory()[0]
        if at_once:
            await asyncio.gather(*(get(n) for n in range(1, connections + 1)))
        else:
            for n in range(1, connections + 1):
                await get(n)
        open_rss, open_malloced = rss() - rss_0, malloced() - malloc_0
        open_traced = tracemalloc.get_traced_memory()[0] - traced
        opened = client.idle - 1  # the first is not counted
        await client.close()
        await asyncio.sleep(0.5)  # TLS transports report their closing on a later turn
        kept = tracemalloc.get_traced_memory()[0] - traced
    finally:
        tracemalloc.stop()
        gc.enable()
    order = "at once" if at_once else "one by one"
    return (
        f"{scheme:5} {opened} open {order:10}: {open_rss / opened / 1024:5.1f} KB RSS, "
        f"{open_malloced / opened / 1024:5.1f} KB malloc'd, "
        f"{open_traced / opened / 1024:5.1f} KB traced a connection; after closing, "
        f"{kept / opened / 1024:4.1f} KB a connection still traced"
    )


def _measure_in_process(
    scheme: str, port: int, ca: Path, args: argparse.Namespace, at_once: bool
) -> None:
    """Measure in a process of its own, so that what one measurement leaves in the heap
    does not serve the next."""
    with asyncio.Runner(loop_factory=LOOPS[args.loop]) as runner:
        print(runner.run(_measure(scheme, port, ca, args.connections, at_once)), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=400)
    parser.add_argument("--loop", choices=sorted(LOOPS), default="uvloop")
    args = parser.parse_args(argv)
    if args.connections < 1:
        parser.error("--connections must be at least 1")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.connections)), hard))
    with tempfile.TemporaryDirectory(prefix="trawl-connmem-") as where:
        ca, cert, key = make_certificates(Path(where))
        ports: multiprocessing.queues.Queue[int] = multiprocessing.Queue()
        server = multiprocessing.Process(target=_serve, args=(cert, key, ports), daemon=True)
        server.start()
        try:
            http, https = ports.get(timeout=30), ports.get(timeout=30)
            for at_once in (True, False):
                for scheme, port in (("http", http), ("https", https)):
                    measuring = multiprocessing.Process(
                        target=_measure_in_process, args=(scheme, port, ca, args, at_once)
                    )
                    measuring.start()
                    measuring.join()
        finally:
            server.terminate()
            server.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
