"""``trawl export`` of a crawl with ``--text``: what a corpus builder needs, without SQL.

The news site of tests/test_content_crawl has exact and near duplicates, a page whose
canonical link names another crawled page, and a template whose canonical link names a
page the crawl never saw. Each exported row must say what crawl.db says of its URL.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CrawlRunner
from test_cli import trawl
from test_content_crawl import TEMPLATE_CANONICAL, make_site, path_of
from trawl.demo import SiteServer
from trawl.ops.export import COLUMNS
from trawl.store.sqlite.store import DB_NAME


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site) as s:
        yield s


CONTENT_COLUMNS = ("duplicate_of", "near_duplicate_of", "alias_of", "canonical", "content_hash")
"""The export columns that say what the crawl knows of a page's content and aliases."""


def stored(data_dir: Path) -> dict[str, tuple[object, ...]]:
    """Per URL, read from crawl.db directly: the URLs it duplicates exactly and nearly
    and is an alias of, its canonical link and content hash."""
    with contextlib.closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        urls = dict(db.execute("SELECT id, url FROM urls").fetchall())
        rows = db.execute(
            "SELECT url, duplicate_of, near_duplicate_of, alias_of, canonical, content_hash "
            "FROM urls"
        ).fetchall()
    return {
        url: (urls.get(dup), urls.get(near), urls.get(alias), canonical, content_hash)
        for url, dup, near, alias, canonical, content_hash in rows
    }


def exported(data_dir: Path, fmt: str) -> list[dict[str, object]]:
    run = trawl("export", "--data-dir", str(data_dir), "--format", fmt)
    assert run.code == 0, run.err
    if fmt == "jsonl":
        return [json.loads(line) for line in run.out.splitlines()]
    reader = csv.DictReader(io.StringIO(run.out))
    assert tuple(reader.fieldnames or ()) == COLUMNS
    return [{k: v or None for k, v in row.items()} for row in reader]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
async def test_export_says_what_the_store_knows_of_duplicates_aliases_and_content(
    crawl: CrawlRunner, server: SiteServer, fmt: str
) -> None:
    result = await crawl(server, text=True)
    truth = stored(result.data_dir)
    rows = exported(result.data_dir, fmt)
    assert COLUMNS[:8] == (
        "url", "status", "content_type", "length", "fetched_at", "depth", "redirect_to", "error",
    )  # fmt: skip
    assert all(tuple(row) == COLUMNS for row in rows)
    assert set(CONTENT_COLUMNS) <= set(COLUMNS)
    got = {row["url"]: tuple(row[c] for c in CONTENT_COLUMNS) for row in rows}
    assert got == truth
    columns = {name: [row[name] for row in rows if row[name]] for name in CONTENT_COLUMNS}
    assert len(columns["duplicate_of"]) == 2
    assert len(columns["near_duplicate_of"]) == 2
    assert [path_of(str(url)) for url in columns["alias_of"]] == ["/news"]
    assert TEMPLATE_CANONICAL in columns["canonical"]
    by_path = {path_of(str(row["url"])): row for row in rows}
    assert by_path["/copy"]["content_hash"] == by_path["/news"]["content_hash"]
    assert (str(by_path["/"]["depth"]), str(by_path["/news"]["depth"])) == ("0", "1")
