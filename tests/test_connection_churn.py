"""A kept-alive connection the server closes is never a failure: every way it can happen.

The server (`RawServer` of test_http_client, over TLS too) answers a first request, then
ends the connection one way or another before answering the second: a FIN or a reset
while the connection is idle (the client blocked meanwhile, so the close is still unread
when the request is written), a FIN or a reset once the request has arrived, or a 408 as
it times the connection out. Each runs on both event loops trawl meets (asyncio in the
library, uvloop on the command line), over plain TCP and TLS: the second request must be
answered on a fresh connection. A crawl whose server resets every kept-alive connection
then completes with no failure and no breaker trip.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import struct
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from test_http_client import LOOPBACK, Connection, RawServer, answer, fetch_body, response
from test_tls import GOOD, make_certificates
from trawl.config import Breaker, CrawlConfig, Politeness, Timeouts
from trawl.crawl.runner import build_engine
from trawl.fetch.client import HttpClient
from trawl.fetch.resolver import GuardedResolver

pytestmark = pytest.mark.timeout(30)

WAYS = ["fin-idle", "rst-idle", "fin-waiting", "rst-waiting", "408"]
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop] | None] = {
    "asyncio": None,
    "uvloop": uvloop.new_event_loop,
}
PAGES = 12


def reset(connection: Connection) -> None:
    """End the connection with a RST (SO_LINGER 0), not a FIN."""
    sock = connection.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.writer.transport.abort()


def closing(way: str) -> Callable[[Connection], Coroutine[Any, Any, None]]:
    """The first connection answers one request, then ends ``way``; later ones answer."""

    async def handler(connection: Connection) -> None:
        if connection.index > 0:
            await answer({"/two": response(b"two")})(connection)
            return
        await connection.read_request()
        await connection.send(response(b"one"))
        if way.endswith("idle"):
            await asyncio.sleep(0.05)
        else:
            await connection.read_request()
        if way.startswith("rst"):
            reset(connection)
        elif way == "408":
            await connection.send(
                response(b"", b"Connection: close", status=b"408 Request Timeout")
            )

    return handler


class TlsServer(RawServer):
    """`RawServer` behind TLS, with the certificate of ``GOOD``."""

    def __init__(self, handler: Callable[[Connection], Any], context: ssl.SSLContext) -> None:
        super().__init__(handler)
        self._context = context

    async def __aenter__(self) -> TlsServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("certificates")
    make_certificates(where)
    return where


async def second_request_after(way: str, scheme: str, certificates: Path) -> tuple[bytes, int]:
    """The second request's body, and the connections the client opened."""
    server: RawServer
    client_context = None
    if scheme == "https":
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_context.load_cert_chain(certificates / "leaf.pem", certificates / "leaf.key")
        server = TlsServer(closing(way), server_context)
        client_context = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
    else:
        server = RawServer(closing(way))
    client = HttpClient(
        GuardedResolver(LOOPBACK, overrides={GOOD: "127.0.0.1"}),
        headers=[("User-Agent", "trawl-test")],
        connect_timeout=5.0,
        max_idle=4,
        ssl_context=client_context,
    )
    try:
        async with server:
            assert await fetch_body(client, server.url("/one", GOOD, scheme)) == b"one"
            if way.endswith("idle"):
                await asyncio.sleep(0.01)
                time.sleep(0.3)  # noqa: ASYNC251 - the close arrives while the loop is blocked
            body = await fetch_body(client, server.url("/two", GOOD, scheme))
            assert server.paths() == [
                ["/one"] + ([] if way.endswith("idle") else ["/two"]),
                ["/two"],
            ]
    finally:
        await client.close()
    return body, client.opened


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("way", WAYS)
def test_a_request_on_a_connection_the_server_ended_goes_out_again_on_a_fresh_one(
    way: str, scheme: str, loop: str, certificates: Path
) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        body, opened = runner.run(second_request_after(way, scheme, certificates))
    assert (body, opened) == (b"two", 2)


async def test_a_crawl_whose_server_resets_every_kept_connection_has_no_failure(
    tmp_path: Path,
) -> None:
    links = "".join(f'<a href="/p{n}">p</a>' for n in range(1, PAGES))
    home = response(f"<html>{links}</html>".encode(), b"Content-Type: text/html")
    leaf = response(b"<html></html>", b"Content-Type: text/html")

    async def one_answer_then_reset(connection: Connection) -> None:
        request = await connection.read_request()
        if request is None:
            return
        await connection.send(home if request.path == "/" else leaf)
        if await connection.read_request() is not None:
            reset(connection)

    async with RawServer(one_answer_then_reset) as server:
        config = CrawlConfig(
            seeds=(server.url("/", "churn.test"),),
            data_dir=tmp_path / "crawl",
            resolve={"churn.test": "127.0.0.1"},
            allow_networks=(ipaddress.ip_network("127.0.0.0/8"),),
            politeness=Politeness(delay=0.0, response_factor=0.0),
            breaker=Breaker(threshold=2, pause=60.0, trips=1),
            timeouts=Timeouts(connect=2.0, total=10.0),
            rng_seed=1,
        )
        async with build_engine(config) as crawler:
            summary = await crawler.run()
        connections = len(server.connections)
    assert summary.state == "done"
    assert summary.fetched == PAGES
    assert (summary.failed, summary.retries, summary.errors_by_class) == (0, 0, {})
    assert summary.limits.get("breaker_trips", 0) == 0
    # robots.txt, the soft-404 probe and the pages: each reused connection was reset.
    assert connections >= PAGES + 2
