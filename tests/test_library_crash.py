"""A library crawl killed with SIGKILL and run again gives exactly its items.

The crawl is a script run as ``python script.py`` with its handlers defined in the script
itself, as library.md's example has them: the extract worker loads them from the
script's file (its crawl does not start again there). The script is killed at a few
points of its crawl, then run until it finishes; the store then holds each book's item
once: a page committed before a kill is not fetched again, and one fetched but not
committed is fetched again and its items replace nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from catalogue_site import HOST, book_numbers, book_url, catalogue, expected_items
from conftest import page_requests
from trawl.demo import SiteServer
from trawl.store.location import StoreLocation

HANDLERS = Path(__file__).with_name("catalogue_handlers.py")


def script(server: SiteServer, data_dir: Path, delay: float) -> str:
    """The catalogue's crawl as a user's script: the handlers of
    tests/catalogue_handlers.py registered with the decorators."""
    source = HANDLERS.read_text(encoding="utf-8")
    source = source.replace("def listing(", "@crawler.handler()\ndef listing(")
    source = source.replace("def book(", '@crawler.handler(label="book")\ndef book(')
    head, _, rest = source.partition("import trawl\n")
    crawler = (
        "import trawl\n\n"
        f"crawler = trawl.Crawler({list(server.site.seeds)!r}, data_dir={str(data_dir)!r}, "
        f"delay={delay!r}, response_factor=0.0, resolve={server.resolve_map()!r}, "
        'allow_network=["127.0.0.0/8"], parse_workers=1)\n'
    )
    return head + crawler + rest + "\nprint(crawler.run().state)\n"


def fetched_books(server: SiteServer) -> int:
    requests = page_requests(server)
    return sum(1 for n in book_numbers() if requests[book_url(server.site, n)])


def start(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def stored(data_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    async with StoreLocation(data_dir).open(readonly=True) as store:
        return [(row.key, json.loads(row.data)) async for row in store.items()]


def test_a_script_killed_at_any_point_and_run_again_gives_each_item_once(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "books"
    with SiteServer(catalogue) as server:
        path = tmp_path / "books.py"
        path.write_text(script(server, data_dir, delay=0.04), encoding="utf-8")
        for books in (3, 12, 22):
            process = start(path)
            deadline = time.monotonic() + 60
            while fetched_books(server) < books and process.poll() is None:
                assert time.monotonic() < deadline, "the crawl made no progress"
                time.sleep(0.005)
            assert process.poll() is None, process.communicate()
            os.kill(process.pid, signal.SIGKILL)
            process.communicate()
        process = start(path)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert out.strip() == "done"
        requests = page_requests(server)
    rows = asyncio.run(stored(data_dir))
    assert len({key for key, _ in rows}) == len(rows)
    items = sorted((item for _, item in rows), key=lambda item: str(item["url"]))
    assert items == expected_items(server.site)
    assert requests[server.site.url(HOST, "/private/secret.html")] == 0
