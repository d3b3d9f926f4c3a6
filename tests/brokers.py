"""The brokers the event tests publish to: NATS JetStream at 127.0.0.1:4222 and RabbitMQ
at 127.0.0.1:5672 (guest/guest), each test under names of its own, deleted after it; a
site whose every page is one event; and a TCP proxy a test stops and starts to take a
broker away mid-crawl.

A broker that does not answer fails the test with how to start it, never skips it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aio_pika
import nats
import pytest
from nats.js.errors import NotFoundError

from trawl.demo import Site
from trawl.demo.site import Response

NATS = ("127.0.0.1", 4222)
AMQP = ("127.0.0.1", 5672)
KINDS = ("nats", "amqp")


def require(address: tuple[str, int]) -> None:
    """Fail the test, saying so, when nothing listens at ``address``."""
    try:
        socket.create_connection(address, timeout=2).close()
    except OSError as exc:
        pytest.fail(
            f"no broker answers on {address[0]}:{address[1]} ({exc.strerror}): start NATS "
            "with JetStream (nats-server -js) and RabbitMQ before the tests",
            pytrace=False,
        )


@dataclass(frozen=True)
class Message:
    """One message as the broker holds it."""

    body: bytes
    key: str | None
    """``Nats-Msg-Id`` or ``message_id``."""
    headers: dict[str, Any]


@dataclass
class Destination:
    """A subject and stream, or an exchange and queue, of one test."""

    kind: str
    name: str
    port: int = 0

    def url(self, port: int | None = None, credentials: str = "") -> str:
        """The ``--events`` URL, through ``port`` (a proxy) if given."""
        if self.kind == "nats":
            at = port or NATS[1]
            return f"nats://{credentials}127.0.0.1:{at}/{self.name}.pages?stream={self.stream}"
        at = port or AMQP[1]
        user = credentials or "guest:guest@"
        return (
            f"amqp://{user}127.0.0.1:{at}/?exchange={self.name}&queue={self.name}.q"
            f"&routing_key=pages"
        )

    @property
    def stream(self) -> str:
        return self.name.upper().replace(".", "_")

    async def read(self) -> list[Message]:
        """Every message the stream or queue holds, in order (a queue is drained)."""
        return await (_nats_messages(self) if self.kind == "nats" else _amqp_messages(self))

    def messages(self) -> list[Message]:
        """:meth:`read`, from outside an event loop."""
        return asyncio.run(self.read())

    def delete(self) -> None:
        asyncio.run(_nats_delete(self) if self.kind == "nats" else _amqp_delete(self))


async def _nats_messages(dest: Destination) -> list[Message]:
    client = await nats.connect(f"nats://{NATS[0]}:{NATS[1]}")
    try:
        js = client.jetstream()
        info = await js.stream_info(dest.stream)
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            raw = await js.get_msg(dest.stream, seq)
            headers = dict(raw.headers or {})
            found.append(Message(raw.data or b"", headers.get("Nats-Msg-Id"), headers))
        return found
    finally:
        await client.close()


async def _nats_delete(dest: Destination) -> None:
    client = await nats.connect(f"nats://{NATS[0]}:{NATS[1]}")
    try:
        with contextlib.suppress(NotFoundError):
            await client.jetstream().delete_stream(dest.stream)
    finally:
        await client.close()


async def _amqp_messages(dest: Destination) -> list[Message]:
    connection = await aio_pika.connect(host=AMQP[0], port=AMQP[1])
    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(f"{dest.name}.q")
        found = []
        while (message := await queue.get(no_ack=True, fail=False)) is not None:
            headers = {
                "content_type": message.content_type,
                "delivery_mode": int(message.delivery_mode),
                "type": message.type,
            }
            found.append(Message(message.body, message.message_id, headers))
        return found


async def _amqp_delete(dest: Destination) -> None:
    connection = await aio_pika.connect(host=AMQP[0], port=AMQP[1])
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(f"{dest.name}.q")
        await channel.exchange_delete(dest.name)


@pytest.fixture(params=KINDS)
def destination(request: pytest.FixtureRequest) -> Iterator[Destination]:
    """A NATS subject and stream, or a RabbitMQ exchange and queue, of this test alone."""
    kind: str = request.param
    require(NATS if kind == "nats" else AMQP)
    dest = Destination(kind, f"t{uuid.uuid4().hex[:10]}")
    yield dest
    dest.delete()


HOSTS = 4


def events_site(port: int, pages: int = 30) -> Site:
    """``HOSTS`` hosts of ``pages`` HTML pages each, every one with a text of its own and
    so one event; each links to the next two of its host and to its twin on the next
    host."""
    routes = {}
    for h in range(HOSTS):
        host = f"h{h}.events.test"
        for i in range(pages):
            links = "".join(
                f'<a href="/p{j}.html">page {j}</a> ' for j in (i + 1, i + 2) if j < pages
            )
            twin = f"http://h{(h + 1) % HOSTS}.events.test:{port}/{'' if i == 0 else f'p{i}.html'}"
            words = " ".join(f"w{h}x{i}y{k}" for k in range(40))
            body = (
                f"<html><head><title>{host} page {i}</title></head><body><article>"
                f"<h1>Page {i} of {host}</h1><p>This page is number {i} of host {h}. "
                f'{words}.</p><p>{links}<a href="{twin}">twin</a></p></article>'
                "</body></html>"
            )
            path = "/" if i == 0 else f"/p{i}.html"
            routes[f"http://{host}{path}"] = Response(body=body.encode())
    return Site.build(
        port, routes, seeds=[f"http://h{h}.events.test/" for h in range(HOSTS)],
        ground_truth=routes,
    )  # fmt: skip


class Proxy:
    """A TCP proxy on loopback to ``target``: :meth:`stop` closes its port and every
    connection through it (the broker is gone), :meth:`start` opens the same port again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._pairs.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def proxy_to(target: tuple[str, int]) -> Iterator[Proxy]:
    proxy = Proxy(target)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
