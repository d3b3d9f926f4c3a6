"""``trawl export`` of a crawl with ``--text``: what a corpus builder needs, without SQL;
and ``trawl export --items``: the items page handlers yielded.

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
from trawl.extract.urls import url_hash
from trawl.ops.export import COLUMNS
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import CommitBatch, NewURL, Outcome, PageItems, State


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


BOOKS = {
    "http://books.test/1": ('{"title": "Dune", "price": 9.5}', '{"title": "Émile", "tags": ["a"]}'),
    "http://books.test/2": ('{"title": "Ulysses", "isbn": "978", "in_stock": true}',),
}
"""Items of two pages, as their handlers yielded them (JSON object texts)."""


async def store_items(data_dir: Path) -> dict[str, int]:
    """A crawl whose two pages yielded :data:`BOOKS`, fetched at 2026-01-02 03:04:05 UTC;
    returns the URL ids."""
    ids = {url: url_hash(url) for url in BOOKS}
    async with SQLiteStore(data_dir) as store:
        urls = [NewURL(uid, url, "books.test", 0, label="book") for url, uid in ids.items()]
        await store.commit(CommitBatch(new_urls=urls))
        host = (await store.host_ids(["books.test"]))["books.test"]
        await store.claim({host: 10}, now=1e12)
        await store.commit(
            CommitBatch(
                outcomes=[Outcome(uid, host, State.DONE, 1, status=200) for uid in ids.values()],
                items=[PageItems(ids[url], 1767323045.0, BOOKS[url]) for url in BOOKS],
            )
        )
    return ids


def expected_items(ids: dict[str, int]) -> list[dict[str, object]]:
    """The items of :data:`BOOKS` as ``export --items`` writes them as JSON, in key order."""
    return [
        {
            **json.loads(data),
            "_url": url,
            "_key": f"{ids[url] % 2**64:016x}:{seq}",
            "_fetched_at": "2026-01-02T03:04:05+00:00",
        }
        for url in sorted(BOOKS, key=ids.__getitem__)
        for seq, data in enumerate(BOOKS[url])
    ]


async def test_export_items_as_json_lines(tmp_path: Path) -> None:
    ids = await store_items(tmp_path)
    run = trawl("export", "--items", "--data-dir", str(tmp_path))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert [json.loads(line) for line in lines] == expected_items(ids)
    assert list(json.loads(lines[0]))[-3:] == ["_url", "_key", "_fetched_at"]
    assert "Émile" in run.out


async def test_export_items_as_csv_to_a_file(tmp_path: Path) -> None:
    ids = await store_items(tmp_path / "crawl")
    out = tmp_path / "items.csv"
    data_dir = str(tmp_path / "crawl")
    run = trawl("export", "--items", "--format", "csv", "-o", str(out), "--data-dir", data_dir)
    assert run.code == 0, run.err
    assert run.out == ""
    reader = csv.DictReader(io.StringIO(out.read_text(encoding="utf-8")))
    records = expected_items(ids)
    first_seen = list(dict.fromkeys(key for r in records for key in r if not key.startswith("_")))
    assert reader.fieldnames == ["_url", "_key", "_fetched_at", *first_seen]
    assert list(reader) == [
        {name: csv_cell(r[name]) if name in r else "" for name in reader.fieldnames}
        for r in records
    ]


def csv_cell(value: object) -> str:
    """A value as an item CSV holds it: a list as JSON text, the others as Python prints them."""
    return json.dumps(value) if isinstance(value, list) else str(value)
