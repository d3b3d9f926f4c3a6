"""Page handlers on a PostgreSQL crawl: ``trawl crawl --store --handler`` stores its
handlers with the crawl, and every ``trawl worker`` runs them.

The crawl's first process is killed (SIGKILL) while it holds the catalogue's host; a
worker started without ``--handler`` (the stored handlers) and one with its own for the
same labels take the host over once the lease has run out, and the store ends with
exactly the catalogue's items.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from catalogue_site import book_numbers, book_url, catalogue, expected_items
from conftest import page_requests
from pg import URL as PG_URL
from pg import crawl_name
from test_cli import assert_one_error_line, trawl
from trawl.demo import SiteServer
from trawl.store.location import StoreLocation

__all__ = ["crawl_name"]

HANDLERS = Path(__file__).with_name("catalogue_handlers.py")


def fetched_books(server: SiteServer) -> int:
    requests = page_requests(server)
    return sum(1 for n in book_numbers() if requests[book_url(server.site, n)])


async def stored(crawl: str) -> list[dict[str, Any]]:
    async with StoreLocation(Path("."), PG_URL, crawl).open(readonly=True) as store:
        return [json.loads(row.data) async for row in store.items()]


def test_every_worker_runs_the_crawls_handlers(crawl_name: str, tmp_path: Path) -> None:
    (tmp_path / "books.py").write_text(HANDLERS.read_text(encoding="utf-8"), encoding="utf-8")
    module = str(tmp_path / "books.py")
    handlers = ["--handler", f"{module}:listing", "--handler", f"book={module}:book"]
    procs: list[subprocess.Popen[str]] = []
    with SiteServer(catalogue) as server:

        def start(name: str, *command: str) -> subprocess.Popen[str]:
            args = [
                *command, "--store", PG_URL, "--crawl", crawl_name, "--worker-id", name,
                "--data-dir", str(tmp_path / name), "--concurrency", "4", "--lease-ttl", "2",
                "--parse-workers", "1", "--no-progress", "--json", *server.resolve_args(),
            ]  # fmt: skip
            proc = subprocess.Popen(
                [sys.executable, "-m", "trawl", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            procs.append(proc)
            return proc

        def wait_for(books: int) -> None:
            deadline = time.monotonic() + 60
            while fetched_books(server) < books:
                assert time.monotonic() < deadline, "the crawl made no progress"
                time.sleep(0.005)

        try:
            first = start(
                "w0", "crawl", server.site.seeds[0], "--delay", "0.05", "--timeout", "1",
                "--response-factor", "0", *handlers,
            )  # fmt: skip
            wait_for(3)
            first.kill()
            first.communicate(timeout=10)
            wrong = trawl(
                "worker", "--store", PG_URL, "--crawl", crawl_name, "--data-dir",
                str(tmp_path / "wrong"), "--handler", f"{module}:book",
            )  # fmt: skip
            assert "--handler must name the labels the crawl's handlers have: (no label), book" in (
                assert_one_error_line(wrong)
            )
            # A machine where the stored handlers' module is missing is told so, at once.
            aside = tmp_path / "books.py.aside"
            (tmp_path / "books.py").rename(aside)
            missing = trawl(
                "worker", "--store", PG_URL, "--crawl", crawl_name, "--data-dir",
                str(tmp_path / "missing"),
            )  # fmt: skip
            aside.rename(tmp_path / "books.py")
            assert f"handler '{module}:listing'" in assert_one_error_line(missing)
            stored_handlers = start("w1", "worker")
            own_handlers = start("w2", "worker", *handlers)
            taken_over = 0
            for proc in (stored_handlers, own_handlers):
                out, err = proc.communicate(timeout=90)
                assert proc.returncode == 0, err
                summary = json.loads(out)
                assert summary["state"] == "done"
                taken_over += summary["fetched_this_run"]
            assert taken_over > 0
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate(timeout=10)
    items = asyncio.run(stored(crawl_name))
    assert sorted(items, key=lambda item: str(item["url"])) == expected_items(server.site)
