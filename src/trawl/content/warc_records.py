"""WARC 1.1 records as bytes: what trawl.content.warc writes, one gzip member each.

A fetch becomes a ``response`` record followed by its ``request`` record (which names the
response in WARC-Concurrent-To), both dated with the fetch time. The response record holds
the status line, the response headers in the order received and the body exactly as it
came off the wire (still content-encoded), so WARC-Payload-Digest is the SHA-1 of those
bytes and WARC-Block-Digest that of the status line, headers and body. The body is
already de-chunked, so a ``Transfer-Encoding`` header is kept as
``X-Crawler-Transfer-Encoding`` (the Common Crawl convention); otherwise readers would try
to de-chunk it again. A body cut short (at the body cap) is marked ``WARC-Truncated:
length``, and its record never claims more than it holds: the server's ``Content-Length``
is kept as ``X-Crawler-Content-Length`` and ``Content-Length`` gives the bytes stored, so
a replay serves what is there and ends.

A 304 answer to a conditional GET becomes a ``revisit`` record of the server-not-modified
profile instead of a response: it names the capture the server confirmed (the same URL,
``WARC-Refers-To-Target-URI``, fetched at ``WARC-Refers-To-Date``), carries no payload
digest (the WARC 1.1 profile has none) and has no block. The 304's own head is left out
because pywb replays a revisit whose block holds a 3xx status line as that status: the
page would be served as an empty 304 instead of the capture it stands for. Its request
record still shows the validators sent.

A page rendered in headless Chromium (trawl.render) gets a third record after its
request: a ``conversion`` record (WARC 1.1: "an alternative version of another record's
content that was created as the result of an archival process") holding the rendered
HTML as ``text/html; charset=utf-8``, with ``WARC-Refers-To`` naming the response
record it was made from, the same WARC-Target-URI and WARC-Date. The response record
stays the bytes the server sent, so a replay of the capture is unchanged: replay
indexes leave conversion records out (a ``resource`` record of the same URL would be
indexed beside the response and could be replayed in its place).

The records are built here as bytes, field for field as warcio writes them (the same
fields in the same order), rather than through warcio's objects, which made the same
bytes with more copies: 0.09 ms of Python a page, holding the interpreter lock against
the crawl, against 0.06 here (25 KB pages, compression apart). HTTP heads are stored as
the bytes that went over the wire (the request as the client encoded it, the response's
headers as received), where warcio would %-encode a value that is not ASCII. Records are
compressed by ISA-L (python-isal), which releases the interpreter lock while it works,
at level 2: on the crawl benchmark's pages (25 KB) 0.07 ms a page against zlib level 6's
0.75 ms, for output 7% larger (docs/PERFORMANCE.md has the table).
"""

from __future__ import annotations

import hashlib
import uuid
from base64 import b32encode
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from isal import isal_zlib

WARC_VERSION = "WARC/1.1"
LEVEL = 2
"""ISA-L compression level of the records (0-3)."""
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
"""The WARC-Profile of the revisit record a 304 answer becomes."""
_GZIP_WBITS = 16 + 15
_CONDITIONAL = frozenset({"if-none-match", "if-modified-since"})
_HIDDEN_ENCODING = "transfer-encoding"
_KEPT_ENCODING = "X-Crawler-Transfer-Encoding"
_HIDDEN_LENGTH = "content-length"
_KEPT_LENGTH = "X-Crawler-Content-Length"
_END = b"\r\n\r\n"
_EMPTY_DIGEST = "sha1:" + b32encode(hashlib.sha1(b"").digest()).decode("ascii")


@dataclass(frozen=True, slots=True)
class WarcExchange:
    """One fetch as the fetcher saw it on the wire.

    ``request_headers`` are the headers sent (Host, User-Agent, Accept, ...) and
    ``response_headers`` those received, both in their original order with repeats kept.
    ``body`` is the body as received, still content-encoded; ``truncated`` says the
    fetcher stopped reading it before its end. ``fetched_at`` is seconds since the epoch;
    ``ip`` the address connected to, when known. ``refers_to`` is, for a conditional GET,
    when the capture its validators came from was fetched (seconds since the epoch): the
    capture a 304 answer confirms.
    """

    url: str
    request_headers: Sequence[tuple[str, str]]
    status: int
    reason: str
    response_headers: Sequence[tuple[str, str]]
    body: bytes
    fetched_at: float
    ip: str | None = None
    truncated: bool = False
    method: str = "GET"
    http_version: str = "1.1"
    refers_to: float | None = None
    rendered: bytes | None = None
    """The page's HTML as headless Chromium rendered it, archived beside the response."""

    @property
    def not_modified(self) -> bool:
        """Whether this is a 304 answer to a conditional GET (archived as a revisit)."""
        return self.status == 304 and any(
            name.lower() in _CONDITIONAL for name, _ in self.request_headers
        )


@dataclass(frozen=True, slots=True)
class ExchangeRecords:
    """The records of one exchange, each one gzip member, and what its index entry
    takes from them."""

    response: bytes
    """The response record, or the revisit record of a 304 to a conditional GET."""
    request: bytes
    date: str
    """The WARC-Date of both."""
    payload_digest: str | None
    """The response record's WARC-Payload-Digest (a revisit record has none)."""
    conversion: bytes = b""
    """The conversion record of a rendered page's HTML (empty for any other exchange)."""

    @property
    def size(self) -> int:
        """Bytes of all the records."""
        return len(self.response) + len(self.request) + len(self.conversion)


def warc_date(epoch: float) -> str:
    """``epoch`` as a WARC-Date: UTC, to the microsecond when it has a fraction."""
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None).isoformat() + "Z"


def _digest(sha1: hashlib._Hash) -> str:
    return "sha1:" + b32encode(sha1.digest()).decode("ascii")


def _record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _member(head: str, block: Sequence[bytes]) -> bytes:
    """One gzip member holding the WARC head ``head`` (its fields, without the blank line
    that ends them) and the parts of its ``block``."""
    # Joined and compressed in one call: the writer's thread gives up and takes back the
    # interpreter lock once a member, not once a part.
    record = b"".join((head.encode("utf-8"), b"\r\n", *block, _END))
    return isal_zlib.compress(record, LEVEL, _GZIP_WBITS)


def _http_head(first_line: str, headers: Sequence[tuple[str, str]], encoding: str) -> bytes:
    """The head of an HTTP message as the bytes that went over the wire: the client sends
    its request as UTF-8 and the fetcher decodes the headers received as Latin-1 (a
    first line as UTF-8, bytes it cannot decode kept as surrogates), so encoding them the
    same way gives the bytes themselves. A head made by other code that Latin-1 cannot
    encode is stored as UTF-8."""
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
    try:
        encoded = lines.encode(encoding, "surrogateescape")
    except UnicodeEncodeError:
        encoded = lines.encode("utf-8", "surrogateescape")
    return first_line.encode("utf-8", "surrogateescape") + b"\r\n" + encoded


def _archived_headers(
    headers: Sequence[tuple[str, str]], stored: int, truncated: bool
) -> list[tuple[str, str]]:
    """The response head as archived: the body is stored de-chunked, so the transfer
    coding is relabelled; a body cut short has ``Content-Length`` set to the ``stored``
    bytes, the server's value relabelled."""
    kept = []
    for name, value in headers:
        lower = name.lower()
        if lower == _HIDDEN_ENCODING:
            kept.append((_KEPT_ENCODING, value))
        elif truncated and lower == _HIDDEN_LENGTH:
            kept.append((_KEPT_LENGTH, value))
        else:
            kept.append((name, value))
    if truncated:
        kept.append(("Content-Length", str(stored)))
    return kept


def exchange_records(exchange: WarcExchange) -> ExchangeRecords:
    """The response (or revisit) and request records of ``exchange``."""
    response_id = _record_id()
    date = warc_date(exchange.fetched_at)
    common = named = f"WARC-Target-URI: {exchange.url}\r\nWARC-Date: {date}\r\n"
    if exchange.ip:
        common += f"WARC-IP-Address: {exchange.ip}\r\n"
    protocol = f"HTTP/{exchange.http_version}"
    digest = None
    if exchange.not_modified:
        response = _revisit(exchange, response_id, common)
    else:
        digest = _digest(hashlib.sha1(exchange.body))
        response = _response(exchange, response_id, common, protocol, digest)
    parts = urlsplit(exchange.url)
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    request_line = f"{exchange.method} {target} {protocol}"
    head = _http_head(request_line, exchange.request_headers, "utf-8")
    request = _member(
        f"{WARC_VERSION}\r\nWARC-Type: request\r\nWARC-Record-ID: {_record_id()}\r\n{common}"
        f"WARC-Concurrent-To: {response_id}\r\n"
        f"WARC-Payload-Digest: {_EMPTY_DIGEST}\r\n"
        f"WARC-Block-Digest: {_digest(hashlib.sha1(head))}\r\n"
        "Content-Type: application/http; msgtype=request\r\n"
        f"Content-Length: {len(head)}\r\n",
        (head,),
    )
    conversion = b""
    if exchange.rendered is not None:
        conversion = _conversion(exchange.rendered, response_id, named)
    return ExchangeRecords(response, request, date, digest, conversion)


def _conversion(html: bytes, refers_to: str, common: str) -> bytes:
    digest = _digest(hashlib.sha1(html))
    return _member(
        f"{WARC_VERSION}\r\nWARC-Type: conversion\r\nWARC-Record-ID: {_record_id()}\r\n"
        f"{common}"
        f"WARC-Refers-To: {refers_to}\r\n"
        f"WARC-Payload-Digest: {digest}\r\n"
        f"WARC-Block-Digest: {digest}\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(html)}\r\n",
        (html,),
    )


def _response(
    exchange: WarcExchange, record_id: str, common: str, protocol: str, digest: str
) -> bytes:
    body = exchange.body
    status = f"{protocol} {exchange.status} {exchange.reason}".rstrip()
    headers = _archived_headers(exchange.response_headers, len(body), exchange.truncated)
    head = _http_head(status, headers, "latin-1")
    block = hashlib.sha1(head)
    block.update(body)
    truncated = "WARC-Truncated: length\r\n" if exchange.truncated else ""
    return _member(
        f"{WARC_VERSION}\r\nWARC-Type: response\r\nWARC-Record-ID: {record_id}\r\n{common}"
        f"{truncated}"
        f"WARC-Payload-Digest: {digest}\r\n"
        f"WARC-Block-Digest: {_digest(block)}\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(head) + len(body)}\r\n",
        (head, body),
    )


def _revisit(exchange: WarcExchange, record_id: str, common: str) -> bytes:
    refers_to = ""
    if exchange.refers_to is not None:
        refers_to = f"WARC-Refers-To-Date: {warc_date(exchange.refers_to)}\r\n"
    return _member(
        f"{WARC_VERSION}\r\nWARC-Type: revisit\r\nWARC-Record-ID: {record_id}\r\n{common}"
        f"WARC-Profile: {NOT_MODIFIED_PROFILE}\r\n"
        f"WARC-Refers-To-Target-URI: {exchange.url}\r\n"
        f"{refers_to}"
        f"WARC-Block-Digest: {_EMPTY_DIGEST}\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        "Content-Length: 0\r\n",
        (),
    )


def warcinfo_record(filename: str, info: Mapping[str, str], now: float) -> bytes:
    """The ``warcinfo`` record that starts the file ``filename``: ``info`` as its fields."""
    block = "".join(f"{name}: {value}\r\n" for name, value in info.items()).encode("utf-8")
    return _member(
        f"{WARC_VERSION}\r\nWARC-Type: warcinfo\r\nWARC-Record-ID: {_record_id()}\r\n"
        f"WARC-Filename: {filename}\r\n"
        f"WARC-Date: {warc_date(now)}\r\n"
        f"WARC-Block-Digest: {_digest(hashlib.sha1(block))}\r\n"
        "Content-Type: application/warc-fields\r\n"
        f"Content-Length: {len(block)}\r\n",
        (block,),
    )
