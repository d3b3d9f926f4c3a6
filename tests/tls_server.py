"""An HTTPS server in a process of its own, for tests that measure the client's memory:
every GET is answered with a small page and the connection kept open.

    python tests/tls_server.py CERT KEY

Listens on 127.0.0.1 (a port of the kernel's choice, printed as one line) until its
standard input closes.
"""

from __future__ import annotations

import asyncio
import ssl
import sys

ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 21\r\n\r\n<title>secure</title>"
)


class _Answer(asyncio.Protocol):
    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._pending = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._pending += data
        while b"\r\n\r\n" in self._pending and self._transport is not None:
            _, self._pending = self._pending.split(b"\r\n\r\n", 1)
            self._transport.write(ANSWER)


async def _serve(cert: str, key: str) -> None:
    loop = asyncio.get_running_loop()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = await loop.create_server(_Answer, "127.0.0.1", 0, ssl=context, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], sys.argv[2]))
