"""WARC records built as bytes (trawl.content.warc_records) read back by warcio, the index
lines the writer makes beside them against cdxj-indexer's reading of the same file, and
exchanges written in batches.

Records are checked as a reader sees them: each is one gzip member that warcio parses,
whose Content-Length, WARC-Block-Digest and WARC-Payload-Digest match the bytes stored.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gzip
import hashlib
import io
import json
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from trawl.content.cdxj import index_path, lines_path, write_index
from trawl.content.warc import SUFFIX, WarcWriter
from trawl.content.warc_records import (
    NOT_MODIFIED_PROFILE,
    WarcExchange,
    exchange_records,
    warcinfo_record,
)

WARCIO = Path(sys.executable).parent / "warcio"
URL = "http://records.test/a/page?q=1"
HTML = b"<!doctype html><title>quay</title>" + b"<p>buoy anchor chain</p>" * 200
FETCHED_AT = 1_765_000_000.123456


def exchange(
    body: bytes = HTML,
    headers: Sequence[tuple[str, str]] = (("Content-Type", "text/html"),),
    *,
    status: int = 200,
    request: Sequence[tuple[str, str]] = (),
    **fields: Any,
) -> WarcExchange:
    return WarcExchange(
        url=URL,
        request_headers=[("Host", "records.test"), ("User-Agent", "trawl-test"), *request],
        status=status,
        reason="OK" if status == 200 else "Other",
        response_headers=list(headers),
        body=body,
        fetched_at=FETCHED_AT,
        ip="127.0.0.1",
        **fields,
    )


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def one_member(data: bytes) -> bytes:
    """The content of ``data``, which must be exactly one gzip member."""
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    content = decompressor.decompress(data)
    assert decompressor.eof
    assert decompressor.unused_data == b""
    return content


def read_back(data: bytes) -> list[tuple[Any, bytes]]:
    """Each record of ``data`` as warcio reads it, with its payload as stored."""
    return [(record, record.raw_stream.read()) for record in ArchiveIterator(io.BytesIO(data))]


def warc_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*" + SUFFIX))


def check_record(member: bytes) -> tuple[Any, bytes, bytes]:
    """The record in ``member``, its digests and length checked; its block and its
    payload as warcio reads them."""
    content = one_member(member)
    head, _, rest = content.partition(b"\r\n\r\n")
    assert head.startswith(b"WARC/1.1\r\n")
    assert rest.endswith(b"\r\n\r\n")
    block = rest[:-4]
    [(record, payload)] = read_back(member)
    assert int(record.rec_headers.get_header("Content-Length")) == len(block)
    assert record.rec_headers.get_header("WARC-Block-Digest") == sha1_b32(block)
    return record, block, payload


def test_response_records_hold_the_bytes_received_with_their_digests() -> None:
    """An identity body, a gzip body (stored still encoded), a chunked answer (stored
    de-chunked, its coding relabelled) and a body cut short."""
    gzipped = gzip.compress(HTML)
    cases = [
        (exchange(), HTML, "text/html"),
        (exchange(gzipped, [("Content-Encoding", "gzip")]), gzipped, None),
        (exchange(headers=[("Transfer-Encoding", "chunked")]), HTML, None),
        (
            exchange(HTML[:500], [("Content-Length", str(len(HTML)))], truncated=True),
            HTML[:500],
            None,
        ),
    ]
    for case, body, content_type in cases:
        records = exchange_records(case)
        record, block, payload = check_record(records.response)
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Target-URI") == URL
        assert record.rec_headers.get_header("WARC-Date") == "2025-12-06T05:46:40.123456Z"
        assert record.rec_headers.get_header("WARC-IP-Address") == "127.0.0.1"
        assert record.rec_headers.get_header("WARC-Payload-Digest") == sha1_b32(body)
        assert records.payload_digest == sha1_b32(body)
        assert block.endswith(b"\r\n\r\n" + body)
        assert payload == body
        assert record.http_headers.get_statuscode() == "200"
        assert record.http_headers.get_header("Content-Type") == content_type
        request, request_block, _ = check_record(records.request)
        assert request.rec_type == "request"
        assert request.rec_headers.get_header("WARC-Concurrent-To") == (
            record.rec_headers.get_header("WARC-Record-ID")
        )
        assert request_block == (
            b"GET /a/page?q=1 HTTP/1.1\r\nHost: records.test\r\nUser-Agent: trawl-test\r\n\r\n"
        )
    chunked = exchange_records(cases[2][0])
    _, block, _ = check_record(chunked.response)
    assert b"\r\nX-Crawler-Transfer-Encoding: chunked\r\n" in block
    assert b"\r\nTransfer-Encoding" not in block
    cut, _, _ = check_record(exchange_records(cases[3][0]).response)
    assert cut.rec_headers.get_header("WARC-Truncated") == "length"
    assert cut.http_headers.get_header("Content-Length") == "500"
    assert cut.http_headers.get_header("X-Crawler-Content-Length") == str(len(HTML))


def test_a_304_to_a_conditional_get_is_a_revisit_with_no_block() -> None:
    answer = exchange(
        b"",
        [("ETag", '"v1"')],
        status=304,
        request=[("If-None-Match", '"v1"')],
        refers_to=1_764_000_000.0,
    )
    records = exchange_records(answer)
    revisit, block, _ = check_record(records.response)
    assert block == b""
    assert revisit.rec_type == "revisit"
    assert revisit.rec_headers.get_header("WARC-Profile") == NOT_MODIFIED_PROFILE
    assert revisit.rec_headers.get_header("WARC-Refers-To-Target-URI") == URL
    assert revisit.rec_headers.get_header("WARC-Refers-To-Date") == "2025-11-24T16:00:00Z"
    assert revisit.rec_headers.get_header("WARC-Payload-Digest") is None
    assert records.payload_digest is None
    _, request, _ = check_record(records.request)
    assert b'\r\nIf-None-Match: "v1"\r\n' in request


def test_heads_keep_the_bytes_that_went_over_the_wire() -> None:
    """A header received with a byte that is not ASCII (decoded as Latin-1 by the fetcher)
    is stored as that byte, and a request header sent as UTF-8 as those bytes."""
    odd = exchange(
        headers=[("Content-Type", "text/html"), ("X-Place", "Cura\xe7ao")],
        request=[("From", "caf\u00e9@records.test")],
    )
    records = exchange_records(odd)
    _, block, _ = check_record(records.response)
    assert b"\r\nX-Place: Cura\xe7ao\r\n" in block
    _, request, _ = check_record(records.request)
    assert "\r\nFrom: caf\u00e9@records.test\r\n".encode() in request


def test_files_of_built_records_pass_warcio_check(tmp_path: Path) -> None:
    """A file of warcinfo, response, revisit and request records: every digest checked by
    warcio's own command line."""
    path = tmp_path / ("built" + SUFFIX)
    records = [
        exchange_records(exchange()),
        exchange_records(exchange(gzip.compress(HTML), [("Content-Encoding", "gzip")])),
        exchange_records(
            exchange(b"", status=304, request=[("If-Modified-Since", "x")], refers_to=1.5)
        ),
    ]
    info = warcinfo_record(path.name, {"software": "trawl-test"}, FETCHED_AT)
    path.write_bytes(info + b"".join(r.response + r.request for r in records))
    done = subprocess.run(
        [str(WARCIO), "check", "-v", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    types = [record.rec_type for record, _ in read_back(path.read_bytes())]
    assert types == ["warcinfo", *["response", "request"] * 2, "revisit", "request"]


async def test_the_index_made_while_writing_is_the_one_cdxj_indexer_makes(
    tmp_path: Path,
) -> None:
    """Content types of every shape (parameters, none, empty, not ASCII), another status,
    a revisit and a 304 that is not one: the writer's sorted lines are, byte for byte,
    what cdxj-indexer writes reading the closed file back."""
    exchanges = [
        exchange(headers=[("Content-Type", "Text/HTML ; charset=utf-8")]),
        exchange(headers=[]),
        exchange(headers=[("content-type", "")]),
        exchange(headers=[("Content-Type", "  image/png")]),
        exchange(headers=[("Content-Type", "t\xc3\xa9xt/html")]),
        exchange(headers=[("Content-Type", "text/plain;x=\xe9")], status=404),
        exchange(b"", [("ETag", '"x"')], status=304, request=[("If-None-Match", '"x"')]),
        exchange(b"", [("ETag", '"x"')], status=304),
    ]
    async with WarcWriter(tmp_path) as writer:
        for one in exchanges:
            await writer.write(one)
    [warc] = warc_files(tmp_path)
    index = index_path(warc)
    made = index.read_bytes()
    assert len(made.splitlines()) == len(exchanges)
    assert not lines_path(warc).exists()
    index.unlink()
    write_index(warc)
    assert index.read_bytes() == made


async def test_writes_in_flight_together_each_get_their_own_record(tmp_path: Path) -> None:
    """Many exchanges handed over at once are written in batches that cross file
    rotations; each caller gets the place of its own record."""
    bodies = [HTML[: 300 + 37 * n] for n in range(120)]
    exchanges = [
        dataclasses.replace(exchange(body), url=f"http://records.test/{n}")
        for n, body in enumerate(bodies)
    ]
    async with WarcWriter(tmp_path, max_size=20_000) as writer:
        keys = await asyncio.gather(*(writer.write(one) for one in exchanges))
        stats = writer.statistics()
    files = warc_files(tmp_path)
    assert len(files) > 3
    assert {key.file for key in keys} == {path.name for path in files}
    assert stats.exchanges == len(exchanges)
    assert stats.bytes == sum(path.stat().st_size for path in files)
    for one, key in zip(exchanges, keys, strict=True):
        with (tmp_path / key.file).open("rb") as stream:
            stream.seek(key.offset)
            member = stream.read(key.length)
        record, _, payload = check_record(member)
        assert record.rec_headers.get_header("WARC-Target-URI") == one.url
        assert payload == one.body
    for path in files:
        assert path.stat().st_size <= 20_000


FULL_DISK = """
import asyncio, json, os, resource, signal, sys
from pathlib import Path
from trawl.content.warc import WarcWriter
from trawl.content.warc_records import WarcExchange
from trawl.errors import TrawlError

def exchange(name, size):
    return WarcExchange(
        url=f"http://records.test/{name}", request_headers=[("Host", "records.test")],
        status=200, reason="OK", response_headers=[("Content-Type", "application/x-noise")],
        body=os.urandom(size), fetched_at=1765000000.5,
    )

async def main():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    out = []
    async with WarcWriter(Path(sys.argv[1])) as writer:
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        for name, size in (("first", 2000), ("huge", 100_000), ("after", 2000)):
            try:
                key = await writer.write(exchange(name, size))
                out.append([name, key.file, key.offset, key.length])
            except TrawlError as exc:
                out.append([name, str(exc)])
    print(json.dumps(out))

asyncio.run(main())
"""


def test_a_write_the_disk_refuses_fails_alone_and_leaves_no_torn_record(tmp_path: Path) -> None:
    """A file that cannot grow (the file size limit, as a full disk would): the exchange
    whose records do not fit gets one error, the file is cut back to its last whole
    record, and the writer goes on with the next exchange."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, huge, after = json.loads(done.stdout)
    assert huge[0] == "huge"
    assert huge[1].startswith("cannot write WARC file ")
    assert huge[1].endswith(": File too large")
    [path] = warc_files(tmp_path)
    assert first[1] == after[1] == path.name
    records = read_back(path.read_bytes())
    assert [record.rec_type for record, _ in records] == ["warcinfo", *["response", "request"] * 2]
    urls = [record.rec_headers.get_header("WARC-Target-URI") for record, _ in records[1::2]]
    assert urls == ["http://records.test/first", "http://records.test/after"]
    data = path.read_bytes()
    for _, _, offset, length in (first, after):
        record, _, _ = check_record(data[offset : offset + length])
        assert record.rec_type == "response"
