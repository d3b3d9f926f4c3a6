"""``--warc`` in a whole crawl: every fetch archived, exactly as served."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from conftest import CrawlRunner
from trawl.runner import WARC_DIR
from trawl.testsite import SiteServer, canonical_url, generate_site, route_key


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
