"""``--output s3://...`` in a handler crawl: each committed page's items also go to
gzip JSONL files that land in the bucket under ``PREFIX/CRAWL/items/YYYY/MM/DD/``, line
for line as ``trawl export --items`` writes them, and a kill -9 loses none of them.

The catalogue (tests/catalogue_site.py) is served on loopback, the bucket is moto's
server on loopback (tests/s3_server.py).
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from catalogue_site import book_numbers, book_url, catalogue, expected_items
from conftest import page_requests
from s3_server import MotoServer, moto_s3, objects
from test_library import crawler_for, with_catalogue_handlers
from test_resume import run_to_end
from trawl.demo import SiteServer
from trawl.ops.export import export_items
from trawl.outputs.target import worker_tag
from trawl.store.location import StoreLocation

__all__ = ["moto_s3"]

PREFIX = "crawls/items-1"
HANDLERS = Path(__file__).with_name("catalogue_handlers.py")
ITEMS_KEY = re.compile(
    r"crawls/items-1/default/items/(\d{4})/(\d{2})/(\d{2})/"
    r"items-(.+)-(\d{8})T\d{6}-\d{5}-[0-9a-f]{6}\.jsonl\.gz"
)


def bucket_items(moto: MotoServer, bucket: str, worker: str) -> list[dict[str, Any]]:
    """Every line of the items files in ``bucket``, each file checked to be under its
    documented key and put once."""
    lines: list[dict[str, Any]] = []
    held = objects(moto, bucket)
    for key, held_object in held.items():
        found = ITEMS_KEY.fullmatch(key)
        assert found, key
        year, month, day, tag, stamp = found.groups()
        assert stamp == f"{year}{month}{day}"
        assert tag == worker_tag(worker)
        assert held_object["versions"] == 1, f"{key} was overwritten"
        body = gzip.decompress(held_object["body"]).decode("utf-8")
        lines += [json.loads(line) for line in body.splitlines()]
    assert held, "no items file was uploaded"
    return lines


def exported(data_dir: Path) -> list[dict[str, Any]]:
    """``trawl export --items`` (JSONL) of the crawl in ``data_dir``."""
    out = io.StringIO()
    asyncio.run(export_items(StoreLocation(data_dir), "jsonl", out))
    return [json.loads(line) for line in out.getvalue().splitlines()]


def by_key(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The lines by ``_key``: a key written more than once (a page fetched again) holds
    the same item each time, from the same page."""
    keyed: dict[str, dict[str, Any]] = {}
    for line in lines:
        seen = keyed.setdefault(line["_key"], line)
        assert without_time(seen) == without_time(line)
    return keyed


def without_time(line: dict[str, Any]) -> dict[str, Any]:
    """A line without its ``_fetched_at`` (a page fetched again has a later one)."""
    return {name: value for name, value in line.items() if name != "_fetched_at"}


def leftovers(data_dir: Path) -> list[str]:
    items = data_dir / "items"
    return sorted(path.name for path in items.iterdir()) if items.exists() else []


def test_a_handler_crawl_puts_its_items_in_the_bucket_as_the_export_writes_them(
    moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    data_dir = tmp_path / "books"
    with SiteServer(catalogue) as server:
        crawler = crawler_for(
            server, data_dir, output=f"s3://{bucket}/{PREFIX}", s3_endpoint=moto_s3.endpoint,
            worker_id="lib",
        )  # fmt: skip
        summary = with_catalogue_handlers(crawler).run()
    assert summary.state == "done"
    assert leftovers(data_dir) == []
    lines = bucket_items(moto_s3, bucket, "lib")
    export = exported(data_dir)
    assert len(lines) == len(export) == len(expected_items(server.site))
    assert by_key(lines) == {line["_key"]: line for line in export}


def test_kill_9_and_a_resume_leave_every_item_in_the_bucket(
    moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    data_dir = tmp_path / "books"
    module = tmp_path / "books.py"
    module.write_text(HANDLERS.read_text(encoding="utf-8"), encoding="utf-8")
    with SiteServer(catalogue) as server:
        command = [
            sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
            "--data-dir", str(data_dir), "--delay", "0.02", "--response-factor", "0",
            "--timeout", "1", "--no-progress", "--json", "--worker-id", "killed",
            "--handler", f"{module}:listing", "--handler", f"book={module}:book",
            "--output", f"s3://{bucket}/{PREFIX}", "--s3-endpoint", moto_s3.endpoint,
        ]  # fmt: skip
        books = len(book_numbers())
        at = 0
        for _ in range(3):
            at += random.randint(2, books // 4)
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 30
            while fetched_books(server) < at:
                assert proc.poll() is None, "the crawl ended before it could be killed"
                assert time.monotonic() < deadline, "the crawl made no progress"
                time.sleep(0.002)
            proc.kill()
            proc.communicate(timeout=10)
        run_to_end(command)
    assert leftovers(data_dir) == []
    keyed = by_key(bucket_items(moto_s3, bucket, "killed"))
    export = {line["_key"]: line for line in exported(data_dir)}
    assert keyed.keys() == export.keys()
    for key, line in export.items():
        assert without_time(keyed[key]) == without_time(line)
    items = [{k: v for k, v in line.items() if not k.startswith("_")} for line in keyed.values()]
    assert sorted(items, key=lambda item: str(item["url"])) == expected_items(server.site)


def fetched_books(server: SiteServer) -> int:
    requests = page_requests(server)
    return sum(1 for n in book_numbers() if requests[book_url(server.site, n)])
