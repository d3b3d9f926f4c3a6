"""Replay as users do it: pywb serves a crawl's pages from its WARC files and the CDXJ
indexes beside them, also after a recrawl that got 304s.

pywb runs from an environment of its own, as its ``wayback`` command: it requires
brotlipy, whose ``brotli`` module would shadow the one trawl decodes with. The command is
``$TRAWL_PYWB``, or ``.venv-replay/bin/wayback`` in the checkout, which ``make test``
makes (``make replay-env``). Without it the test fails and says so: it is never skipped.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from changing_site import Changing
from conftest import CrawlRunner
from trawl.config import Freshness, RecrawlPass
from trawl.content.warc import SUFFIX
from trawl.crawl.runner import WARC_DIR
from trawl.demo import Response, Site, SiteServer

HOST = "replay.test"
STATIC = Changing(period=0)
"""A page that never changes and answers a conditional GET with 304."""
PDF = b"%PDF-1.4\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"
WAYBACK = Path(
    os.environ.get("TRAWL_PYWB") or Path(__file__).parents[1] / ".venv-replay/bin/wayback"
)
WAYBACK_INSTALLED = WAYBACK.exists()
LATEST = "29991231235959"


def site(port: int) -> Site:
    index = b'<!doctype html><a href="/static">s</a> <a href="/doc.pdf">d</a>'
    return Site.build(
        port,
        {
            f"http://{HOST}/": Response(body=index),
            f"http://{HOST}/static": STATIC,
            f"http://{HOST}/doc.pdf": Response(body=PDF, content_type="application/pdf"),
        },
        seeds=[f"http://{HOST}/"],
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def wayback(warc_dir: Path, work: Path) -> Iterator[str]:
    """pywb serving ``warc_dir`` (its WARC files and indexes) as collection ``crawl`` on
    loopback; yields the collection's base URL."""
    work.mkdir()
    (work / "config.yaml").write_text(
        f"collections:\n  crawl:\n    index_paths: {warc_dir}/\n    archive_paths: {warc_dir}/\n"
    )
    port = free_port()
    log = (work / "wayback.log").open("wb")
    process = subprocess.Popen(
        [str(WAYBACK), "-p", str(port), "-b", "127.0.0.1"],
        cwd=work, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/crawl/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5):
                    break
            except OSError:
                assert process.poll() is None, (work / "wayback.log").read_text()
                assert time.monotonic() < deadline, "pywb did not start in 60 s"
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def replay(base: str, timestamp: str, url: str) -> tuple[int, dict[str, str], bytes]:
    """What pywb serves for ``url`` at ``timestamp``, unrewritten (``id_``)."""
    try:
        with urllib.request.urlopen(f"{base}{timestamp}id_/{url}", timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def capture_times(warc_dir: Path, url: str) -> list[tuple[str, str]]:
    """(record type, 14-digit date) of each capture of ``url``, in the order written."""
    found = []
    for path in sorted(warc_dir.glob("*" + SUFFIX)):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit") and (
                    record.rec_headers["WARC-Target-URI"] == url
                ):
                    date = record.rec_headers["WARC-Date"]
                    moment = datetime.fromisoformat(date.replace("Z", "+00:00"))
                    found.append((record.rec_type, moment.astimezone(UTC).strftime("%Y%m%d%H%M%S")))
    return found


async def test_pywb_replays_the_crawl_and_after_a_304_still_the_original(
    crawl: CrawlRunner, tmp_path: Path
) -> None:
    if not WAYBACK_INSTALLED:
        pytest.fail(f"pywb is not installed ({WAYBACK}): run make replay-env", pytrace=False)
    recrawl = Freshness(recrawl_pass=RecrawlPass.ALL)
    with SiteServer(site) as server:
        first = await crawl(server, soft_404=False, warc=True)
        # Captures a second apart: pywb dates them to the second.
        await asyncio.sleep(1.0)
        await crawl(server, soft_404=False, warc=True, data_dir=first.data_dir, freshness=recrawl)
        statuses = [r.status for r in server.requests if r.path == "/static"]
        static = server.site.url(HOST, "/static")
        pdf = server.site.url(HOST, "/doc.pdf")
    assert statuses == [200, 304]
    warc_dir = first.data_dir / WARC_DIR
    captures = capture_times(warc_dir, static)
    [(_, fetched), (_, revisited)] = captures
    assert revisited > fetched
    page = STATIC({}).body

    def answers() -> list[tuple[int, dict[str, str], bytes]]:
        with wayback(warc_dir, tmp_path / "pywb") as base:
            return [
                replay(base, fetched, static),
                replay(base, revisited, static),
                replay(base, LATEST, static),
                replay(base, LATEST, pdf),
            ]

    at_first, at_revisit, latest, document = await asyncio.to_thread(answers)
    for status, _, body in (at_first, at_revisit, latest):
        assert (status, body) == (200, page)
    assert [kind for kind, _ in captures] == ["response", "revisit"]
    status, headers, body = document
    assert (status, body) == (200, PDF)
    assert headers["Content-Type"] == "application/pdf"
    assert headers.get("Content-Length") in (None, str(len(PDF)))
