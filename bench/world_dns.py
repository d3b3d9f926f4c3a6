"""The world's DNS server: UDP on 127.0.0.1, the wire format written by hand.

    python -m bench.world_dns HOSTS PAGES SEED HTTP_PORT HTTPS_PORT DNS_PORT COUNTS_FILE

Answers every query for a world host after a few milliseconds (`LATENCY`), as its `Dns`
says: A with the host's address and TTL, AAAA with no data (NOERROR, no answer), NXDOMAIN,
or SERVFAIL (always, or for a flaky name's first `FLAKY_QUERIES` queries). A name outside
the world is NXDOMAIN. It counts queries per name; on SIGTERM or SIGINT it writes the
counts to COUNTS_FILE as JSON (``{"queries": {name: n}, "answers": {rcode: n}}``) and
exits. It prints ``ready`` once it listens.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import struct
import sys
from collections import Counter
from pathlib import Path
from typing import cast

import uvloop

from bench.world_map import FLAKY_QUERIES, Dns, World, WorldParams

__all__ = ["DnsServer", "answer", "main"]

LATENCY = (0.001, 0.005)
"""Seconds an answer takes, drawn uniformly."""
TYPE_A, TYPE_AAAA, CLASS_IN = 1, 28, 1
NOERROR, SERVFAIL, NXDOMAIN, FORMERR = 0, 2, 3, 1
_HEADER = struct.Struct("!HHHHHH")


def _question(packet: bytes) -> tuple[str, int, int] | None:
    """The name, type and end offset of the query's one question; None when malformed."""
    labels, offset = [], _HEADER.size
    try:
        while packet[offset]:
            length = packet[offset]
            if length > 63:
                return None
            labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii"))
            offset += 1 + length
        qtype, _qclass = struct.unpack_from("!HH", packet, offset + 1)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return ".".join(labels).lower(), qtype, offset + 5


def answer(packet: bytes, rcode: int, qtype: int, end: int, address: str, ttl: int) -> bytes:
    """The response to ``packet`` (its question ends at ``end``): ``rcode``, and for an A
    query answered NOERROR one A record of ``address`` with ``ttl``."""
    ident, flags = struct.unpack_from("!HH", packet)
    has_answer = rcode == NOERROR and qtype == TYPE_A
    header = _HEADER.pack(
        ident, 0x8400 | (flags & 0x0100) | 0x0080 | rcode, 1, int(has_answer), 0, 0
    )
    reply = header + packet[_HEADER.size : end]
    if has_answer:
        octets = bytes(int(part) for part in address.split("."))
        reply += struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, ttl, 4) + octets
    return reply


class DnsServer(asyncio.DatagramProtocol):
    """Answers queries for one world and counts them per name."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.queries: Counter[str] = Counter()
        self.rcodes: Counter[str] = Counter()
        self._transport: asyncio.DatagramTransport | None = None
        self._random = random.Random(world.params.seed)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)  # uvloop's is no subclass

    def datagram_received(self, data: bytes, addr: tuple[str | int, int]) -> None:
        question = _question(data)
        if question is None or len(data) < _HEADER.size:
            return
        name, qtype, end = question
        self.queries[name] += 1
        index = self.world.index_of(name)
        rcode, address, ttl = NXDOMAIN, "", 0
        if index is not None:
            host = self.world.host(index)
            address, ttl = host.address, host.ttl
            if host.dns is Dns.OK or (host.dns is Dns.FLAKY and self.queries[name] > FLAKY_QUERIES):
                rcode = NOERROR
            elif host.dns is not Dns.NXDOMAIN:
                rcode = SERVFAIL
        self.rcodes[{NOERROR: "noerror", SERVFAIL: "servfail", NXDOMAIN: "nxdomain"}[rcode]] += 1
        reply = answer(data, rcode, qtype, end, address, ttl)
        asyncio.get_running_loop().call_later(
            self._random.uniform(*LATENCY), self._send, reply, addr
        )

    def _send(self, reply: bytes, addr: tuple[str | int, int]) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(reply, addr)


async def serve(world: World, port: int) -> dict[str, dict[str, int]]:
    """Answer on 127.0.0.1:``port`` until SIGTERM or SIGINT; the counts."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    transport, server = await loop.create_datagram_endpoint(
        lambda: DnsServer(world), local_addr=("127.0.0.1", port)
    )
    print("ready", flush=True)
    await stop.wait()
    transport.close()
    return {"queries": dict(server.queries), "answers": dict(server.rcodes)}


def main(argv: list[str]) -> int:
    hosts, pages, seed, http_port, https_port, port = (int(a) for a in argv[:6])
    world = World(WorldParams(hosts, pages, seed, http_port, https_port))
    counts = uvloop.run(serve(world, port))
    Path(argv[6]).write_text(json.dumps(counts), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
