"""docs/API.md's examples run as written, against the book catalogue on loopback.

Each fenced ``python`` block of docs/API.md is run as a script of its own (``python
example.py``, its handlers loaded by the extract workers from its file), with the
catalogue's URL for ``https://books.example/`` and loopback options beside its
``delay``. So is the command line of its "From the command line" section, with the
catalogue's handlers in ``books.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from catalogue_site import (
    CATEGORIES,
    PER_PAGE,
    book_numbers,
    books,
    catalogue,
    expected_items,
    price,
    title,
)
from test_cli import trawl
from trawl.demo import SiteServer
from trawl.store.location import StoreLocation

API = Path(__file__).resolve().parent.parent / "docs" / "API.md"
HANDLERS = Path(__file__).with_name("catalogue_handlers.py")
EXAMPLES = re.findall(r"^```python\n(.*?)^```$", API.read_text(encoding="utf-8"), re.M | re.S)


def on_loopback(code: str, server: SiteServer) -> str:
    """``code`` crawling the served catalogue instead of books.example."""
    assert "https://books.example/" in code
    assert "delay=1.0" in code
    options = (
        f"delay=0.0, response_factor=0.0, resolve={server.resolve_map()!r}, "
        'allow_network=["127.0.0.0/8"]'
    )
    return code.replace("https://books.example/", server.site.seeds[0]).replace(
        "delay=1.0", options
    )


async def stored(data_dir: Path) -> list[dict[str, Any]]:
    async with StoreLocation(data_dir).open(readonly=True) as store:
        return [json.loads(row.data) async for row in store.items()]


def run_example(index: int, tmp_path: Path) -> tuple[str, list[dict[str, Any]], SiteServer]:
    """Run example ``index``; its output and the items its store holds."""
    with SiteServer(catalogue) as server:
        script = tmp_path / "example.py"
        script.write_text(on_loopback(EXAMPLES[index], server), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout, asyncio.run(stored(tmp_path / "books")), server


def test_the_docs_have_the_examples_these_tests_run() -> None:
    assert len(EXAMPLES) == 3


def test_the_first_crawl_gives_every_book_once(tmp_path: Path) -> None:
    out, items, server = run_example(0, tmp_path)
    listings = sum(-(-len(books(c)) // PER_PAGE) for c in CATEGORIES)
    assert out.split() == ["done", str(1 + listings + len(book_numbers()))]
    assert sorted(items, key=lambda item: str(item["url"])) == expected_items(server.site)


def test_priorities_and_returned_lists_give_books_within_the_budget(tmp_path: Path) -> None:
    _, items, _ = run_example(1, tmp_path)
    assert items
    for item in items:
        number = int(str(item["url"]).rsplit("/", 1)[1].removesuffix(".html"))
        assert item == {"title": title(number), "url": item["url"]}


def test_async_with_prints_each_book_as_it_is_committed(tmp_path: Path) -> None:
    out, items, _ = run_example(2, tmp_path)
    lines = out.splitlines()
    assert lines[-1] == "done"
    books = sorted(lines[:-1])
    assert books == sorted(f"{title(n)} {price(n)}" for n in book_numbers())
    assert sorted(items, key=str) == sorted(
        ({"title": title(n), "price": price(n)} for n in book_numbers()), key=str
    )


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_command_line_runs_the_same_handlers(tmp_path: Path, workers: str) -> None:
    (tmp_path / "books.py").write_text(HANDLERS.read_text(encoding="utf-8"), encoding="utf-8")
    handlers = str(tmp_path / "books.py")
    with SiteServer(catalogue) as server:
        run = trawl(
            "crawl", server.site.seeds[0], "--data-dir", str(tmp_path / "d"), "--delay", "0",
            "--handler", f"{handlers}:listing", "--handler", f"book={handlers}:book",
            "--parse-workers", workers, "--no-progress", *server.resolve_args(), timeout=120,
        )  # fmt: skip
        assert run.code == 0, run.err
        exported = trawl("export", "--items", "--data-dir", str(tmp_path / "d"))
    assert exported.code == 0, exported.err
    rows = [json.loads(line) for line in exported.out.splitlines()]
    assert len({row["_key"] for row in rows}) == len(rows)
    items = [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows]
    assert sorted(items, key=lambda item: str(item["url"])) == expected_items(server.site)


def test_a_handler_that_cannot_be_loaded_is_a_usage_error(tmp_path: Path) -> None:
    run = trawl("crawl", "http://a.test/", "--data-dir", str(tmp_path / "d"),
                "--handler", "no_such_module_here:listing")  # fmt: skip
    assert run.code == 2
    assert run.err.startswith("trawl: error: handler 'no_such_module_here:listing'")
    assert not (tmp_path / "d").exists()
