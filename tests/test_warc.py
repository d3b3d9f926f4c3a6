"""The WARC writer against real HTTP exchanges with the loopback test site.

Exchanges are captured with trawl's own HTTP client, which leaves bodies encoded, so the
bytes written are the bytes the server sent. Files are checked with warcio's own command
line (``warcio check`` verifies every digest) and read back with its ``ArchiveIterator``;
digests and offsets are also recomputed here from the raw gzip members.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import gzip
import hashlib
import json
import pickle
import random
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import surt
from warcio.archiveiterator import ArchiveIterator

from trawl.content.cdxj import INDEX_SUFFIX, index_in_child, index_path, lines_path
from trawl.content.warc import PARTIAL, SUFFIX, WarcWriter
from trawl.content.warc_records import NOT_MODIFIED_PROFILE, WarcExchange
from trawl.demo import Response, Site, SiteServer
from trawl.errors import TrawlError, UsageError
from trawl.fetch.client import HttpClient
from trawl.fetch.fetcher import exchange_of
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver
from trawl.store.values import StorageKey

WARCIO = Path(sys.executable).parent / "warcio"
HOST = "warc.test"
PAGE = b"<!doctype html><title>harbour</title>" + b"<p>tide net rope</p>" * 60
PAGE_GZIP = gzip.compress(b"<!doctype html><title>gz</title>" + b"<p>keel mast</p>" * 80)
NOISE = random.Random(5).randbytes(6000)
STREAMED = 3000
ROBOTS = b"User-agent: *\nDisallow: /private/\n"

SERVED: dict[str, tuple[Response, bytes]] = {
    "/page": (Response(body=PAGE), PAGE),
    "/page.gz": (
        Response(body=PAGE_GZIP, headers=(("Content-Encoding", "gzip"),)),
        PAGE_GZIP,
    ),
    "/streamed": (Response(body_size=STREAMED), b" " * STREAMED),
    "/robots.txt": (Response(body=ROBOTS, content_type="text/plain"), ROBOTS),
    "/noise": (Response(body=NOISE, content_type="application/octet-stream"), NOISE),
    "/headers": (
        Response(
            status=503,
            body=b"busy",
            content_type="text/plain",
            headers=(
                ("X-Robots-Tag", "noindex"),
                ("Retry-After", "7"),
                ("X-Robots-Tag", "nofollow"),
            ),
        ),
        b"busy",
    ),
}
"""Each path's answer and the body bytes the server sends for it."""


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    """The site, one host, served for the whole module."""
    routes = {f"http://{HOST}{path}": answer for path, (answer, _) in SERVED.items()}
    with SiteServer(lambda port: Site.build(port, routes, [f"http://{HOST}/page"])) as served:
        yield served


@pytest.fixture
async def session(server: SiteServer) -> AsyncIterator[HttpClient]:
    """A client that reaches the site through trawl's resolver (it never decodes bodies)."""
    resolver = GuardedResolver(
        AddressPolicy(server.allow_networks()), overrides=server.resolve_map()
    )
    client = HttpClient(
        resolver,
        headers=[
            ("User-Agent", "trawl-test/1"),
            ("Accept", "text/html,*/*;q=0.5"),
            ("Accept-Encoding", "gzip, deflate, br"),
        ],
        connect_timeout=10,
        max_idle=4,
    )
    yield client
    await client.close()
    await resolver.close()


async def capture(
    session: HttpClient, server: SiteServer, path: str, *, limit: int | None = None
) -> WarcExchange:
    """GET ``path`` and return the exchange as seen on the wire, with the address the
    resolver gave; with ``limit`` only that many body bytes are read and the exchange is
    marked truncated."""
    url = server.site.url(HOST, path)
    fetched_at = time.time()
    with await session.get(url) as response:
        body = b""
        async for chunk in response.chunks():
            body += chunk
            if limit is not None and len(body) >= limit:
                body = body[:limit]
                break
        ip = server.resolve_map()[HOST]
        return exchange_of(url, response, body, fetched_at, ip, truncated=limit is not None)


async def capture_all(
    session: HttpClient, server: SiteServer, paths: Sequence[str]
) -> list[WarcExchange]:
    """One exchange per path, in order."""
    return [await capture(session, server, path) for path in paths]


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def warcio(*args: str) -> str:
    """Run warcio's command line; fail the test on a non-zero exit."""
    done = subprocess.run(
        [str(WARCIO), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def read_records(path: Path) -> list[tuple[Any, bytes]]:
    """Every record of a file with its raw payload (the HTTP body, as stored)."""
    with path.open("rb") as stream:
        return [(record, record.raw_stream.read()) for record in ArchiveIterator(stream)]


def record_at(path: Path, offset: int) -> tuple[Any, bytes]:
    """The record that starts at ``offset``, read by warcio from there."""
    with path.open("rb") as stream:
        stream.seek(offset)
        record = next(iter(ArchiveIterator(stream)))
        return record, record.raw_stream.read()


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def member(path: Path, key: StorageKey) -> bytes:
    """The decompressed gzip member ``key`` names, read without warcio."""
    with path.open("rb") as stream:
        stream.seek(key.offset)
        raw = stream.read(key.length)
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = decompressor.decompress(raw)
    assert decompressor.eof
    assert decompressor.unused_data == b""
    return data


def warc_files(directory: Path) -> list[Path]:
    """The finished WARC files in ``directory``, by name."""
    return sorted(directory.glob("*" + SUFFIX))


def partial_files(directory: Path) -> list[Path]:
    """The WARC files still being written in ``directory``, by name."""
    return sorted(directory.glob("*" + SUFFIX + PARTIAL))


def contents(paths: Sequence[Path]) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in paths}


async def test_records_give_back_the_bytes_served(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    exchanges = await capture_all(session, server, list(SERVED))
    async with WarcWriter(tmp_path, info={"http-header-user-agent": "trawl-test/1"}) as writer:
        keys = [await writer.write(exchange) for exchange in exchanges]
    files = warc_files(tmp_path)
    assert [path.name for path in files] == [keys[0].file]
    warcio("check", "-v", str(files[0]))
    index = [json.loads(line) for line in warcio("index", str(files[0])).splitlines()]
    assert [entry["warc-type"] for entry in index] == ["warcinfo"] + ["response", "request"] * 6
    responses = [entry for entry in index if entry["warc-type"] == "response"]
    assert [int(entry["offset"]) for entry in responses] == [key.offset for key in keys]

    records = read_records(files[0])
    info = records[0][0]
    assert info.rec_type == "warcinfo"
    assert info.rec_headers.get_header("WARC-Filename") == files[0].name
    assert b"http-header-user-agent: trawl-test/1" in records[0][1]
    served = [(record, payload) for record, payload in records if record.rec_type == "response"]
    for exchange, (record, payload) in zip(exchanges, served, strict=True):
        assert record.rec_headers.get_header("WARC-Target-URI") == exchange.url
        assert payload == SERVED[path_of(exchange.url)][1]
        assert record.rec_headers.get_header("WARC-IP-Address") == server.resolve_map()[HOST]
        assert record.http_headers.protocol == "HTTP/1.1"
        assert record.http_headers.get_statuscode() == str(exchange.status)
        assert record.rec_headers.get_header("WARC-Truncated") is None
    # The gzip body is stored encoded; warcio decodes it on request.
    by_path = {path_of(e.url): record for e, (record, _) in zip(exchanges, served, strict=True)}
    with files[0].open("rb") as stream:
        decoded = {
            record.rec_headers.get_header("WARC-Target-URI"): record.content_stream().read()
            for record in ArchiveIterator(stream)
            if record.rec_type == "response"
        }
    assert decoded[server.site.url(HOST, "/page.gz")] == gzip.decompress(PAGE_GZIP)
    assert decoded[server.site.url(HOST, "/streamed")] == b" " * STREAMED
    # Response headers keep their order and repeats; the chunked one is relabelled.
    assert by_path["/headers"].http_headers.headers[:3] == [
        ("X-Robots-Tag", "noindex"),
        ("Retry-After", "7"),
        ("X-Robots-Tag", "nofollow"),
    ]
    streamed = by_path["/streamed"].http_headers
    assert streamed.get_header("Transfer-Encoding") is None
    assert streamed.get_header("X-Crawler-Transfer-Encoding") == "chunked"


async def test_request_and_response_are_paired_and_digests_hold(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    exchanges = await capture_all(session, server, ["/page", "/page.gz", "/robots.txt"])
    async with WarcWriter(tmp_path) as writer:
        keys = [await writer.write(exchange) for exchange in exchanges]
    path = tmp_path / keys[0].file
    records = read_records(path)
    requests = {
        record.rec_headers.get_header("WARC-Concurrent-To"): record
        for record, _ in records
        if record.rec_type == "request"
    }
    assert len(requests) == len(exchanges)
    for exchange, key in zip(exchanges, keys, strict=True):
        response, payload = record_at(path, key.offset)
        assert response.rec_type == "response"
        request = requests[response.rec_headers.get_header("WARC-Record-ID")]
        for field in ("WARC-Target-URI", "WARC-Date", "WARC-IP-Address"):
            assert request.rec_headers.get_header(field) == response.rec_headers.get_header(field)
        assert request.http_headers.protocol == "GET"
        assert request.http_headers.statusline == f"{path_of(exchange.url)} HTTP/1.1"
        assert request.http_headers.headers == list(exchange.request_headers)
        assert request.http_headers.get_header("Host") == f"{HOST}:{server.port}"
        date = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(exchange.fetched_at))
        assert response.rec_headers.get_header("WARC-Date").startswith(date)

        assert response.rec_headers.get_header("WARC-Payload-Digest") == sha1_b32(payload)
        head, _, block = member(path, key).partition(b"\r\n\r\n")
        block = block[: int(response.rec_headers.get_header("Content-Length"))]
        assert block.endswith(payload)
        assert response.rec_headers.get_header("WARC-Block-Digest") == sha1_b32(block)
        assert head.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n")


async def test_truncated_body_is_marked_and_its_head_says_what_is_stored(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    """A replay serves the record's head: a Content-Length larger than the payload would
    leave the client waiting for bytes that never come."""
    exchange = await capture(session, server, "/noise", limit=1000)
    async with WarcWriter(tmp_path) as writer:
        key = await writer.write(dataclasses.replace(exchange, ip=None))
    warcio("check", str(tmp_path / key.file))
    record, payload = record_at(tmp_path / key.file, key.offset)
    assert record.rec_headers.get_header("WARC-Truncated") == "length"
    assert record.rec_headers.get_header("WARC-IP-Address") is None
    assert payload == NOISE[:1000]
    assert record.http_headers.get_header("Content-Length") == "1000"
    assert record.http_headers.get_header("X-Crawler-Content-Length") == str(len(NOISE))
    assert [name.lower() for name, _ in record.http_headers.headers].count("content-length") == 1


async def test_files_rotate_at_the_size_limit(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    limit = 4000
    paths = list(SERVED) * 3
    exchanges = await capture_all(session, server, paths)
    writer = await WarcWriter(tmp_path, prefix="crawl-a", max_size=limit).__aenter__()
    try:
        keys = [await writer.write(exchange) for exchange in exchanges[:-1]]
        # While the writer runs, only the current file is partial; finished ones are final.
        assert partial_files(tmp_path) == [tmp_path / (keys[-1].file + PARTIAL)]
        sealed = contents(warc_files(tmp_path))
        assert {path.name for path in sealed} == {key.file for key in keys} - {keys[-1].file}
        keys.append(await writer.write(exchanges[-1]))
    finally:
        await writer.close()
    await writer.close()

    files = warc_files(tmp_path)
    assert partial_files(tmp_path) == []
    assert len(files) >= 4
    # Files finished before the last write were not touched again.
    assert contents(list(sealed)) == sealed
    # Names sort in the order the files were written.
    order = list(dict.fromkeys(key.file for key in keys))
    assert [path.name for path in files] == order
    assert all(path.name.startswith("crawl-a-") for path in files)
    warcio("check", *map(str, files))
    stats = writer.statistics()
    assert (stats.exchanges, stats.files) == (len(exchanges), len(files))
    assert stats.bytes == sum(path.stat().st_size for path in files)
    for path in files:
        exchanges_in_file = sum(1 for key in keys if key.file == path.name)
        assert path.stat().st_size <= limit or exchanges_in_file == 1
        types = [record.rec_type for record, _ in read_records(path)]
        assert types == ["warcinfo"] + ["response", "request"] * exchanges_in_file
    # An exchange larger than the limit still gets written, alone in its file.
    assert any(path.stat().st_size > limit for path in files)
    ids = set()
    for exchange, key in zip(exchanges, keys, strict=True):
        record, payload = record_at(tmp_path / key.file, key.offset)
        assert record.rec_headers.get_header("WARC-Target-URI") == exchange.url
        assert payload == SERVED[path_of(exchange.url)][1]
        assert len(member(tmp_path / key.file, key)) > len(payload)
        ids.add(record.rec_headers.get_header("WARC-Record-ID"))
    assert len(ids) == len(keys)


async def test_writers_sharing_a_directory_never_collide(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    exchange = await capture(session, server, "/page")
    async with (
        WarcWriter(tmp_path, max_size=1) as first,
        WarcWriter(tmp_path, max_size=1) as second,
    ):
        keys = await asyncio.gather(
            *(writer.write(exchange) for _ in range(20) for writer in (first, second))
        )
    assert len({key.file for key in keys}) == 40
    assert sorted(path.name for path in warc_files(tmp_path)) == sorted(key.file for key in keys)


CHILD = """
import asyncio, json, pickle, sys
from pathlib import Path
from trawl.content.warc import WarcWriter

async def main() -> None:
    exchanges = pickle.loads(Path(sys.argv[1]).read_bytes())
    writer = await WarcWriter(Path(sys.argv[2])).__aenter__()
    for exchange in exchanges:
        key = await writer.write(exchange)
        print(json.dumps([key.file, key.offset, key.length]), flush=True)
    print("written", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def keys_then_kill(exchanges: Sequence[WarcExchange], tmp_path: Path) -> list[StorageKey]:
    """Write ``exchanges`` in a child process, then kill it with SIGKILL; the keys it got."""
    saved = tmp_path / "exchanges.pickle"
    saved.write_bytes(pickle.dumps(list(exchanges)))
    out = tmp_path / "warc"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(saved), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    keys: list[StorageKey] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "written":
                break
            file, offset, length = json.loads(line)
            keys.append(StorageKey(file, offset, length))
    finally:
        proc.send_signal(signal.SIGKILL)
        _, errors = proc.communicate(timeout=10)
    assert len(keys) == len(exchanges), errors
    return keys


async def test_killed_writer_leaves_a_readable_partial_file(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    paths = ["/page", "/page.gz", "/noise", "/robots.txt"]
    exchanges = await capture_all(session, server, paths)
    keys = await asyncio.to_thread(keys_then_kill, exchanges, tmp_path)
    out = tmp_path / "warc"
    assert warc_files(out) == []
    partial = out / (keys[0].file + PARTIAL)
    # Beside it, the index lines written so far, which a later run does not trust: they
    # may lack the last records.
    assert sorted(out.iterdir()) == [lines_path(out / keys[0].file), partial]
    warcio("check", str(partial))
    for exchange, key in zip(exchanges, keys, strict=True):
        record, payload = record_at(partial, key.offset)
        assert record.rec_headers.get_header("WARC-Target-URI") == exchange.url
        assert payload == SERVED[path_of(exchange.url)][1]

    # A write torn by a power cut: every record before the tear still reads back.
    torn = tmp_path / "torn.warc.gz"
    torn.write_bytes(partial.read_bytes()[: keys[-1].offset + keys[-1].length // 2])
    read: list[tuple[str, bytes]] = []
    # warcio raises at the tear, with an error class that depends on where it falls.
    with torn.open("rb") as stream, contextlib.suppress(Exception):
        for record in ArchiveIterator(stream):
            if record.rec_type == "response":
                read.append(
                    (record.rec_headers.get_header("WARC-Target-URI"), record.raw_stream.read())
                )
    assert read[: len(keys) - 1] == [
        (exchange.url, SERVED[path_of(exchange.url)][1]) for exchange in exchanges[:-1]
    ]
    assert {key.file for key in keys} == {keys[0].file}

    # The next writer publishes it under its final name, indexed by reading it back.
    lines_path(out / keys[0].file).write_text("")
    async with WarcWriter(out):
        pass
    final = out / keys[0].file
    assert sorted(out.iterdir()) == [index_path(final), final]
    for exchange, key in zip(exchanges, keys, strict=True):
        assert lookup(out, exchange.url)[0]["offset"] == str(key.offset)


def test_bad_settings_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="prefix"):
        WarcWriter(tmp_path, prefix="../escape")
    with pytest.raises(UsageError, match="size limit"):
        WarcWriter(tmp_path, max_size=0)


def lookup(directory: Path, url: str) -> list[dict[str, str]]:
    """The CDXJ entries of ``url`` in the indexes of ``directory``, as a replay tool finds
    them: by the line's SURT key, in index order."""
    key = surt.surt(url)
    entries = []
    for path in sorted(directory.glob("*" + INDEX_SUFFIX)):
        lines = path.read_text().splitlines()
        assert lines == sorted(lines)
        for line in lines:
            urlkey, stamp, fields = line.split(" ", 2)
            if urlkey == key:
                entries.append({"timestamp": stamp, **json.loads(fields)})
    return entries


async def test_each_closed_file_is_indexed_and_the_index_finds_its_records(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    exchanges = await capture_all(session, server, list(SERVED) * 2)
    async with WarcWriter(tmp_path, max_size=8000) as writer:
        keys = [await writer.write(exchange) for exchange in exchanges]
    files = warc_files(tmp_path)
    assert len(files) > 1
    assert all(index_path(f).exists() for f in files)
    for exchange, key in zip(exchanges, keys, strict=True):
        entries = lookup(tmp_path, exchange.url)
        assert len(entries) == 2
        [entry] = [
            e for e in entries if e["filename"] == key.file and int(e["offset"]) == key.offset
        ]
        assert int(entry["length"]) == key.length
        assert entry["status"] == str(exchange.status)
        date = time.strftime("%Y%m%d%H%M%S", time.gmtime(exchange.fetched_at))
        assert entry["timestamp"] == date
        record, payload = record_at(tmp_path / entry["filename"], int(entry["offset"]))
        assert record.rec_headers.get_header("WARC-Target-URI") == exchange.url
        assert payload == SERVED[path_of(exchange.url)][1]
        assert entry["digest"] == sha1_b32(payload)


async def test_a_starting_writer_indexes_closed_files_left_without_one(
    server: SiteServer, session: HttpClient, tmp_path: Path
) -> None:
    """A run stopped between closing a file and indexing it, or a crawl archived before
    indexes were written: the next writer in the directory indexes what has none."""
    exchanges = await capture_all(session, server, ["/page", "/noise"])
    async with WarcWriter(tmp_path) as writer:
        key = await writer.write(exchanges[0])
    index = index_path(tmp_path / key.file)
    before = index.read_bytes()
    index.unlink()
    async with WarcWriter(tmp_path) as writer:
        later = await writer.write(exchanges[1])
    assert index.read_bytes() == before
    assert index_path(tmp_path / later.file).exists()
    assert [e["offset"] for e in lookup(tmp_path, exchanges[0].url)] == [str(key.offset)]


def exchange(status: int, request: Sequence[tuple[str, str]], **fields: Any) -> WarcExchange:
    return WarcExchange(
        url=f"http://{HOST}/page",
        request_headers=[("Host", HOST), *request],
        status=status,
        reason="Not Modified" if status == 304 else "OK",
        response_headers=[("ETag", '"v1"')],
        body=b"",
        fetched_at=1_800_000_000.25,
        **fields,
    )


async def test_a_304_to_a_conditional_get_is_a_revisit_and_any_other_a_response(
    tmp_path: Path,
) -> None:
    confirmed = exchange(304, [("If-None-Match", '"v1"')], refers_to=1_700_000_000.5)
    undated = exchange(304, [("If-Modified-Since", "Tue, 14 Nov 2023 22:13:20 GMT")])
    unasked = exchange(304, [])
    async with WarcWriter(tmp_path) as writer:
        keys = [await writer.write(e) for e in (confirmed, undated, unasked)]
    path = tmp_path / keys[0].file
    warcio("check", str(path))
    revisit, block = record_at(path, keys[0].offset)
    assert revisit.rec_type == "revisit"
    assert revisit.rec_headers.get_header("WARC-Profile") == NOT_MODIFIED_PROFILE
    assert revisit.rec_headers.get_header("WARC-Refers-To-Target-URI") == confirmed.url
    assert revisit.rec_headers.get_header("WARC-Refers-To-Date") == "2023-11-14T22:13:20.500000Z"
    assert revisit.rec_headers.get_header("WARC-Date") == "2027-01-15T08:00:00.250000Z"
    assert revisit.rec_headers.get_header("WARC-Payload-Digest") is None
    assert revisit.rec_headers.get_header("Content-Length") == "0"
    assert block == b""
    # Without a known date, the revisit names the URL alone (a replay takes the closest).
    plain, _ = record_at(path, keys[1].offset)
    assert plain.rec_type == "revisit"
    assert plain.rec_headers.get_header("WARC-Refers-To-Date") is None
    # A 304 nobody asked for confirms nothing: kept as the response it was.
    odd, _ = record_at(path, keys[2].offset)
    odd_url = unasked.url
    assert odd.rec_type == "response"
    assert odd.http_headers.get_statuscode() == "304"
    indexed = sorted((e.get("mime", ""), e.get("status", "")) for e in lookup(tmp_path, odd_url))
    assert indexed == [("", "304"), ("warc/revisit", ""), ("warc/revisit", "")]


def test_an_index_that_cannot_be_made_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(TrawlError, match=r"cannot write CDXJ index .*gone\.warc\.gz"):
        index_in_child([tmp_path / "gone.warc.gz"])
    assert list(tmp_path.iterdir()) == []
