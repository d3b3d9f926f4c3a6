"""``--warc`` in a whole crawl: every fetch archived, exactly as served, bodies trawl
does not parse included, a 304 as a revisit of the capture it confirms, and each closed
file indexed (CDXJ) beside it."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from changing_site import Changing
from conftest import CrawlRunner, loopback_fetcher
from pg import URL as PG_URL
from pg import crawl_name
from trawl.config import Freshness, RecrawlPass, Timeouts
from trawl.content.cdxj import index_path
from trawl.content.warc import SUFFIX, WarcWriter
from trawl.content.warc_records import NOT_MODIFIED_PROFILE, WarcExchange
from trawl.crawl.runner import WARC_DIR
from trawl.demo import Response, Site, SiteServer, canonical_url, generate_site, route_key
from trawl.extract.parser import is_html
from trawl.store.location import StoreLocation
from trawl.store.values import StorageKey

__all__ = ["crawl_name"]

HOST = "archive.test"
PDF = b"%PDF-1.4\n" + random.Random(7).randbytes(15_000) + b"\n%%EOF\n"
BIG = random.Random(8).randbytes(50_000)
CAP = 20_000


async def test_every_fetch_is_archived_as_served(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=8, seed=5)) as server:
        result = await crawl(server, warc=True)
        requests = server.requests
    files = sorted((result.data_dir / WARC_DIR).glob("*" + SUFFIX))
    assert files
    # Every closed file has its index beside it, and nothing else is there.
    assert sorted((result.data_dir / WARC_DIR).iterdir()) == sorted(
        files + [index_path(f) for f in files]
    )
    check = await asyncio.create_subprocess_exec(
        Path(sys.executable).parent / "warcio", "check", *map(str, files),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await check.communicate()
    assert check.returncode == 0, output.decode()

    responses: dict[str, list[bytes]] = {}
    requested: list[str] = []
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    responses.setdefault(uri, []).append(record.raw_stream.read())
                elif record.rec_type == "request":
                    requested.append(uri)
    # One response and one request record per request the server answered.
    assert len(requested) == len(requests) == sum(map(len, responses.values()))
    served = {server.site.url(r.host, r.path) for r in requests}
    assert {canonical_url(u) for u in responses} == {canonical_url(u) for u in served}
    site = server.site
    checked = 0
    for uri, bodies in responses.items():
        parts = uri.split("/", 3)
        route = site.routes.get(route_key(parts[2], "/" + parts[3]))
        if route is None or len(route.responses) > 1:
            continue
        answer = route.responses[0]
        if answer.gzip or answer.body_size:
            continue
        if answer.status == 200:
            assert bodies[0] == answer.body, uri
            checked += 1
    assert checked >= 10
    # Bodies trawl does not parse are kept too (text, PDF), not only the HTML ones.
    pdfs = bodies_of(responses, "/features/doc.pdf")
    texts = bodies_of(responses, "/features/doc.txt")
    assert pdfs
    assert all(body.startswith(b"%PDF-1.4") for body in pdfs)
    assert texts
    assert all(body.startswith(b"see <a href") for body in texts)


def bodies_of(responses: dict[str, list[bytes]], path: str) -> list[bytes]:
    """The archived bodies of the URLs whose path is ``path``."""
    return [body for uri, bodies in responses.items() if uri.endswith(path) for body in bodies]


def one_page(port: int) -> Site:
    return Site.build(port, {"http://a.test/": Response(body=b"<p>hi</p>")})


class SlowDisk(WarcWriter):
    """A WARC writer on a disk that takes ``delay`` seconds per write."""

    def __init__(self, directory: Path, delay: float) -> None:
        super().__init__(directory)
        self.delay = delay

    async def write(self, exchange: WarcExchange) -> StorageKey:
        await asyncio.sleep(self.delay)
        return await super().write(exchange)


async def test_archiving_is_not_response_time_and_not_under_the_timeout(tmp_path: Path) -> None:
    """The host's politeness delay follows the server's response time, and a slow archive
    must neither stretch it nor time the fetch out."""
    with SiteServer(one_page) as server:
        async with (
            SlowDisk(tmp_path / "warc", delay=0.5) as recorder,
            loopback_fetcher(
                server, timeouts=Timeouts(connect=2.0, total=0.3), max_body=1 << 20,
                recorder=recorder,
            ) as fetcher,
        ):  # fmt: skip
            result = await fetcher.fetch(server.site.url("a.test", "/"))
    assert result.status == 200
    assert result.error is None
    assert result.archived is not None
    assert result.elapsed < 0.3


def binaries(port: int) -> Site:
    return Site.build(
        port,
        {
            f"http://{HOST}/doc.pdf": Response(body=PDF, content_type="application/pdf"),
            f"http://{HOST}/big.bin": Response(body=BIG, content_type="application/octet-stream"),
        },
    )


def read_at(path: Path, offset: int) -> tuple[Any, bytes]:
    """The record at ``offset`` of ``path`` and its payload as stored."""
    with path.open("rb") as stream:
        stream.seek(offset)
        record = next(iter(ArchiveIterator(stream)))
        return record, record.raw_stream.read()


async def test_an_archive_keeps_the_bodies_trawl_does_not_parse(tmp_path: Path) -> None:
    """A PDF is archived whole although it is not parsed, a body over the cap is cut
    there and its record says so in a head that matches its payload, and without an
    archive such bodies are still not downloaded."""
    timeouts = Timeouts(connect=2.0, total=10.0)
    with SiteServer(binaries) as server:
        async with (
            WarcWriter(tmp_path) as recorder,
            loopback_fetcher(server, timeouts=timeouts, max_body=CAP, recorder=recorder) as fetcher,
        ):  # fmt: skip
            pdf = await fetcher.fetch(server.site.url(HOST, "/doc.pdf"), accept=is_html)
            big = await fetcher.fetch(server.site.url(HOST, "/big.bin"), accept=is_html)
        async with loopback_fetcher(server, timeouts=timeouts, max_body=CAP) as bare:
            unread = await bare.fetch(server.site.url(HOST, "/doc.pdf"), accept=is_html)
    assert (pdf.status, pdf.body, pdf.content_type) == (200, b"", "application/pdf")
    assert pdf.archived is not None
    assert big.archived is not None
    record, payload = read_at(tmp_path / pdf.archived.file, pdf.archived.offset)
    assert payload == PDF
    assert record.rec_headers.get_header("WARC-Truncated") is None
    assert record.http_headers.get_header("Content-Length") == str(len(PDF))

    record, payload = read_at(tmp_path / big.archived.file, big.archived.offset)
    assert payload == BIG[:CAP]
    assert record.rec_headers.get_header("WARC-Truncated") == "length"
    assert record.http_headers.get_header("Content-Length") == str(CAP)
    assert record.http_headers.get_header("X-Crawler-Content-Length") == str(len(BIG))

    assert (unread.status, unread.received, unread.length) == (200, 0, len(PDF))


def unchanging(port: int) -> Site:
    """An index linking a page that answers conditional GETs with 304 and a PDF."""
    index = b'<!doctype html><a href="/static">s</a> <a href="/doc.pdf">d</a>'
    return Site.build(
        port,
        {
            f"http://{HOST}/": Response(body=index),
            f"http://{HOST}/static": Changing(period=0),
            f"http://{HOST}/doc.pdf": Response(body=PDF, content_type="application/pdf"),
        },
        seeds=[f"http://{HOST}/"],
    )


def records_of(directory: Path) -> list[tuple[Any, bytes]]:
    """Every record of the WARC files in ``directory``, in the order written."""
    found = []
    for path in sorted(directory.glob("*" + SUFFIX)):
        with path.open("rb") as stream:
            found += [(record, record.raw_stream.read()) for record in ArchiveIterator(stream)]
    return found


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_a_304_is_archived_as_a_revisit_of_the_capture_it_confirms(
    crawl: CrawlRunner, engine: str, crawl_name: str, tmp_path: Path
) -> None:
    """The revisit names the first capture by URL and by its exact WARC-Date (the run
    that wrote it had ended: the date comes from the store, either engine), has no block
    for a replay to serve as the page, and the CDXJ index lists both."""
    recrawl = Freshness(recrawl_pass=RecrawlPass.ALL)
    data_dir = tmp_path / "crawl"
    store = StoreLocation(data_dir, PG_URL, crawl_name) if engine == "postgresql" else None
    with SiteServer(unchanging) as server:
        first = await crawl(server, soft_404=False, warc=True, data_dir=data_dir, store=store)
        await crawl(
            server, soft_404=False, warc=True, data_dir=data_dir, store=store, freshness=recrawl
        )
        statuses = [r.status for r in server.requests if r.path == "/static"]
    assert statuses == [200, 304]
    directory = first.data_dir / WARC_DIR
    url = server.site.url(HOST, "/static")
    mine = [(r, p) for r, p in records_of(directory) if r.rec_headers["WARC-Target-URI"] == url]
    assert [r.rec_type for r, _ in mine] == ["response", "request", "revisit", "request"]
    (original, body), _, (revisit, block), (request, _) = mine
    assert body.startswith(b"<!doctype html><title>version 0</title>")
    fields = revisit.rec_headers
    assert fields["WARC-Profile"] == NOT_MODIFIED_PROFILE
    assert fields["WARC-Refers-To-Target-URI"] == url
    assert fields["WARC-Refers-To-Date"] == original.rec_headers["WARC-Date"]
    assert fields["WARC-Payload-Digest"] is None
    assert (fields["Content-Length"], block) == ("0", b"")
    assert request.http_headers.get_header("If-None-Match") == '"v0"'
    assert request.rec_headers["WARC-Concurrent-To"] == fields["WARC-Record-ID"]

    lines = []
    for path in sorted(directory.glob("*" + SUFFIX)):
        lines += [json.loads(line.split(" ", 2)[2]) for line in index_path(path).open()]
    indexed = [(entry["mime"], entry.get("status")) for entry in lines if entry["url"] == url]
    assert indexed == [("text/html", "200"), ("warc/revisit", None)]
    # The PDF sends no validators: fetched whole twice.
    pdfs = [entry for entry in lines if entry["url"].endswith("/doc.pdf")]
    assert [(entry["mime"], entry["status"]) for entry in pdfs] == [("application/pdf", "200")] * 2
