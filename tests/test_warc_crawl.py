"""``--warc`` in a whole crawl: every fetch archived, exactly as served."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from conftest import CrawlRunner, loopback_fetcher
from trawl.config import Timeouts
from trawl.runner import WARC_DIR
from trawl.store.base import StorageKey
from trawl.testsite import Response, Site, SiteServer, canonical_url, generate_site, route_key
from trawl.warc import WarcExchange, WarcWriter


async def test_every_fetch_is_archived_as_served(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=8, seed=5)) as server:
        result = await crawl(server, warc=True)
        requests = server.requests
    files = sorted((result.data_dir / WARC_DIR).iterdir())
    assert files
    assert all(f.name.endswith(".warc.gz") for f in files)
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
        if answer.content_type and "html" in answer.content_type and answer.status == 200:
            assert bodies[0] == answer.body, uri
            checked += 1
    assert checked >= 10


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
