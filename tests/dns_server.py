"""A real DNS server on loopback for resolver tests (dnslib, UDP, in a thread).

Each name answers from a script: a list of answers, one per query, the last one
repeated; an answer is a list of (address, ttl) records, empty for NXDOMAIN. Every
answer can be held back ``latency`` seconds (each query has a thread of its own), as a
slow resolver's would be; the A queries are counted and logged with when they came.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dnslib import AAAA, QTYPE, RCODE, RR, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from trawl.resource import Resource

Record = tuple[str, int]


class ScriptedDns(BaseResolver, Resource):  # type: ignore[misc]
    """Answers each name from its script and counts the queries it gets."""

    def __init__(
        self, script: Mapping[str, Sequence[Sequence[Record]]], *, latency: float = 0.0
    ) -> None:
        self._script = {name.rstrip("."): list(answers) for name, answers in script.items()}
        self._latency = latency
        self._lock = threading.Lock()
        self.queries: Counter[str] = Counter()
        self.asked: list[tuple[str, float]] = []
        """Each A query's name and when it came (``time.monotonic()``)."""
        self.inflight = self.peak_inflight = 0
        """A queries being answered now, and the most at once."""
        self._server: Any = None

    def resolve(self, request: Any, handler: Any) -> Any:
        came = time.monotonic()
        if not self._latency:
            return self._answer(request, came)
        counted = QTYPE[request.q.qtype] == "A"
        with self._lock:
            self.inflight += counted
            self.peak_inflight = max(self.peak_inflight, self.inflight)
        time.sleep(self._latency)
        try:
            return self._answer(request, came)
        finally:
            with self._lock:
                self.inflight -= counted

    def _answer(self, request: Any, came: float) -> Any:
        reply = request.reply()
        name = str(request.q.qname).rstrip(".")
        qtype = QTYPE[request.q.qtype]
        with self._lock:
            answers = self._script.get(name)
            if answers is None:
                reply.header.rcode = RCODE.NXDOMAIN
                return reply
            if qtype == "A":
                self.queries[name] += 1
                self.asked.append((name, came))
                answer = answers[0] if len(answers) == 1 else answers.pop(0)
            else:
                answer = answers[0]
        if not answer:
            reply.header.rcode = RCODE.NXDOMAIN
        for address, ttl in answer:
            version = ipaddress.ip_address(address).version
            if qtype == "A" and version == 4:
                reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=ttl))
            elif qtype == "AAAA" and version == 6:
                reply.add_answer(RR(request.q.qname, QTYPE.AAAA, rdata=AAAA(address), ttl=ttl))
        return reply

    def __enter__(self) -> ScriptedDns:
        self._server = DNSServer(
            self, port=0, address="127.0.0.1", logger=DNSLogger(log="-request,-reply")
        )
        self._server.start_thread()
        return self

    def close(self) -> None:
        """Stop the server; calling it again does nothing."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    @property
    def nameserver(self) -> str:
        """``127.0.0.1:PORT``, as ``--nameserver`` takes it."""
        return f"127.0.0.1:{self._server.server.server_address[1]}"
