"""The client's TLS transport (trawl.fetch.tls) on both event loops trawl meets (asyncio in
the library, uvloop on the command line): what an open idle connection holds, large and
slowly read bodies, and handshakes that time out or are hung up on.

The memory test's server runs in a process of its own (tests/tls_server.py), so only the
client's allocations are counted; the others use `TlsServer`, the raw server of
test_http_client behind TLS with the certificate of ``GOOD``.
"""

from __future__ import annotations

import asyncio
import gc
import ssl
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from malloc_stats import malloced
from test_connection_churn import LOOPS, TlsServer
from test_http_client import (
    BIG,
    LOOPBACK,
    SLOW_BODY,
    Action,
    Connection,
    RawServer,
    answer,
    big_chunks,
    chunked,
    digest,
    fetch_body,
    in_pieces,
    read_slowly,
    response,
    then_close,
)
from test_tls import GOOD, make_certificates
from trawl.fetch.client import ConnectFailed, HttpClient
from trawl.fetch.resolver import GuardedResolver
from trawl.fetch.tls import tls_context

pytestmark = pytest.mark.timeout(60)

IDLE = 32
"""Connections the memory test keeps open at once."""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("certificates")
    make_certificates(where)
    return where


@pytest.fixture(scope="module")
def server_apart(certificates: Path) -> Iterator[int]:
    """tests/tls_server.py in its own process; its port."""
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("tls_server.py")),
         str(certificates / "leaf.pem"), str(certificates / "leaf.key")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    assert server.stdin is not None
    try:
        yield int(server.stdout.readline())
    finally:
        server.stdin.close()
        server.wait(timeout=10)


def client_for(certificates: Path, max_idle: int = 4, connect_timeout: float = 5.0) -> HttpClient:
    return HttpClient(
        GuardedResolver(LOOPBACK, overrides={GOOD: "127.0.0.1"}),
        headers=[("User-Agent", "trawl-test")],
        connect_timeout=connect_timeout,
        max_idle=max_idle,
        ssl_context=tls_context(certificates / "ca.pem"),
    )


def server_context(certificates: Path) -> ssl.SSLContext:
    """The server's side of TLS: the certificate of ``GOOD``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates / "leaf.pem", certificates / "leaf.key")
    return context


def run(loop: str, coroutine: Callable[[], Any]) -> Any:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(coroutine())


async def open_idle(
    certificates: Path, port: int, count: Callable[[], int | None]
) -> tuple[float, float]:
    """What ``count`` grows by, a connection, while ``IDLE`` TLS connections opened at
    once wait idle in the pool (one of them opened before, and not counted), and once
    they are closed."""
    client = client_for(certificates, max_idle=IDLE)
    url = f"https://{GOOD}:{port}/"
    gc.disable()
    try:
        assert await fetch_body(client, url) == b"<title>secure</title>"  # first-use caches
        before = count()
        bodies = await asyncio.gather(*(fetch_body(client, url) for _ in range(IDLE)))
        opened = count()
        idle = client.idle
        await client.close()
        await asyncio.sleep(0.05)  # the connections hear of their closing
        closed = count()
    finally:
        gc.enable()
    assert bodies == [b"<title>secure</title>"] * IDLE
    assert (client.opened, idle, client.sockets) == (IDLE, IDLE, 0)
    assert before is not None
    assert opened is not None
    assert closed is not None
    return (opened - before) / (IDLE - 1), (closed - before) / (IDLE - 1)


@pytest.mark.parametrize("loop", LOOPS)
def test_an_open_idle_tls_connection_holds_no_large_buffer(
    loop: str, certificates: Path, server_apart: int
) -> None:
    """asyncio's and uvloop's TLS transports keep a 256 KB read buffer in each connection
    (265 KB traced a connection, 296 KB malloc'd); an idle connection here holds OpenSSL's
    state of the session and trawl's objects, about 20 KB malloc'd, of which Python's
    about 4.5 KB. Going idle frees the record buffer OpenSSL keeps after reading a
    session ticket (16 KB more without). Closing frees what OpenSSL held at once."""

    def traced() -> int:
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        python, _ = run(loop, lambda: open_idle(certificates, server_apart, traced))
    finally:
        tracemalloc.stop()
    assert python < 16 * 1024, f"{python:.0f} bytes traced a connection"
    if malloced() is None:
        pytest.skip("no mallinfo2: not glibc")
    everything, kept = run(loop, lambda: open_idle(certificates, server_apart, malloced))
    assert everything < 28 * 1024, f"{everything:.0f} bytes malloc'd a connection"
    assert kept < 4 * 1024, f"{kept:.0f} bytes a connection still malloc'd after closing"


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("framing", ["content-length", "chunked", "close-delimited"])
def test_a_large_body_over_tls_arrives_byte_exact(
    loop: str, framing: str, certificates: Path
) -> None:
    answers: dict[str, Action] = {
        "content-length": response(BIG),
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(big_chunks()),
        "close-delimited": then_close(response(BIG, length=False)),
    }

    async def fetch_big() -> bytes:
        client = client_for(certificates)
        try:
            routes = answer({"/big": answers[framing]})
            async with TlsServer(routes, server_context(certificates)) as server:
                async with asyncio.timeout(20):
                    return await fetch_body(client, server.url("/big", GOOD, "https"))
        finally:
            await client.close()

    assert digest(run(loop, fetch_big)) == digest(BIG)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_slow_reader_over_tls_holds_back_the_body(loop: str, certificates: Path) -> None:
    async def read() -> tuple[int, str, int]:
        client = client_for(certificates)
        try:
            routes = answer({"/slow": in_pieces})
            async with TlsServer(routes, server_context(certificates)) as server:
                return await read_slowly(client, server.url("/slow", GOOD, "https"))
        finally:
            await client.close()

    length, hashed, peak = run(loop, read)
    assert (length, hashed) == digest(SLOW_BODY)
    # A transport that read on while the reader slept would take the 16 MiB in.
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes while the reader slept"


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("server", ["silent", "hangs-up"])
def test_a_handshake_that_does_not_finish_is_a_connect_failure(
    loop: str, server: str, certificates: Path
) -> None:
    """A server that never answers the ClientHello is timed out by the connect timeout,
    one that hangs up on it fails as a connection would; neither is a TLS failure (a
    certificate that does not fit), and no socket is left open."""

    async def handshake(connection: Connection) -> None:
        await connection.reader.read(65536)  # the ClientHello
        if server == "silent":
            await connection.wait_hangup()

    async def connect() -> tuple[str, int]:
        client = client_for(certificates, connect_timeout=0.5)
        try:
            async with RawServer(handshake) as raw:
                with pytest.raises(ConnectFailed) as failure:
                    async with asyncio.timeout(5):
                        await client.get(raw.url("/", GOOD, "https"))
        finally:
            await client.close()
        return str(failure.value), client.sockets

    message, sockets = run(loop, connect)
    assert ("timed out" in message) == (server == "silent"), message
    assert sockets == 0
