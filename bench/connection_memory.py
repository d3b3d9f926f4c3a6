"""Memory per connection of trawl's HTTP client, plain and TLS.

    python -m bench.connection_memory [--connections 400]

Opens ``--connections`` connections at once to a local aiohttp server (its own process,
so only the client's memory is counted), keeps them idle in the pool, then closes them,
with the cycle collector off throughout, as it nearly is in a crawl
(trawl.crawl.gc_tuning). Prints, per connection: the RSS and the traced Python memory
(tracemalloc) while open, and what stays traced after closing. The TLS certificate is
bench.world's wildcard one.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import multiprocessing
import multiprocessing.queues
import resource
import ssl
import tempfile
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import uvloop
from aiohttp import web

from bench.world import make_certificates
from bench.world_map import ZONES
from trawl.fetch.client import HttpClient, tls_context
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver

HOST = f"h1.{ZONES[0]}.test"
"""The one name every connection is opened to (the certificate's wildcard covers it)."""


def _rss() -> int:
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


async def _measure(scheme: str, port: int, ca: Path, connections: int) -> str:
    resolver = GuardedResolver(
        AddressPolicy([ipaddress.ip_network("127.0.0.0/8")]), overrides={HOST: "127.0.0.1"}
    )
    client = HttpClient(
        resolver,
        headers=[("User-Agent", "trawl-bench")],
        connect_timeout=30.0,
        max_idle=connections * 2,
        idle_timeout=600.0,
        ssl_context=tls_context(ca),
    )

    async def get() -> None:
        with await client.get(f"{scheme}://{HOST}:{port}/") as answer:
            async for _ in answer.chunks():
                pass

    await get()  # imports, contexts and first-use caches are not counted
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        rss, traced = _rss(), tracemalloc.get_traced_memory()[0]
        await asyncio.gather(*(get() for _ in range(connections)))
        open_rss, open_traced = _rss() - rss, tracemalloc.get_traced_memory()[0] - traced
        opened = client.idle
        await client.close()
        await asyncio.sleep(0.5)  # TLS transports report their closing on a later turn
        kept = tracemalloc.get_traced_memory()[0] - traced
    finally:
        tracemalloc.stop()
        gc.enable()
    return (
        f"{scheme:5} {opened} open: {open_rss / opened / 1024:6.1f} KB RSS, "
        f"{open_traced / opened / 1024:6.1f} KB traced a connection; after closing, "
        f"{kept / opened / 1024:6.1f} KB a connection still traced"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=400)
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
            for scheme, port in (("http", http), ("https", https)):
                print(uvloop.run(_measure(scheme, port, ca, args.connections)))
        finally:
            server.terminate()
            server.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
