"""The items files (trawl.handlers.item_files): each line an item as ``trawl export
--items`` writes it, the last fetch of a URL in one commit winning, and every flushed
line kept after a kill -9."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from trawl.content.jsonl_files import PARTIAL, SUFFIX
from trawl.handlers.item_files import ItemWriter
from trawl.ops.export import item_line
from trawl.store.values import ItemRow, PageItems
from writer_child import write_then_kill

NAME_RE = re.compile(r"items-\d{8}T\d{6}-\d{5}-[0-9a-f]{6}\.jsonl\.gz")


def lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def data(title: str) -> str:
    """An item's JSON text, with a field of the name the export gives the page's URL."""
    return json.dumps({"title": title, "_url": "its own"}, ensure_ascii=False)


def page(url_id: int, fetched_at: float, *titles: str) -> PageItems:
    return PageItems(url_id, fetched_at, tuple(map(data, titles)), f"http://books.test/{url_id}")


def row(url_id: int, seq: int, fetched_at: float, title: str) -> ItemRow:
    return ItemRow(f"http://books.test/{url_id}", url_id, seq, fetched_at, data(title))


def test_each_line_is_the_export_s_line_and_the_last_fetch_of_a_url_wins(
    tmp_path: Path,
) -> None:
    with ItemWriter(tmp_path) as writer:
        written = writer.write([page(-5, 1.0, "a", "b", "c"), page(7, 2.0, "Grüße 東京")])
        writer.flush()
        written += writer.write([page(-5, 3.0, "x", "y"), page(8, 3.0), page(-5, 4.0, "z")])
    assert written == 5
    (path,) = writer.files
    assert NAME_RE.fullmatch(path.name)
    expected = [
        row(-5, 0, 1.0, "a"), row(-5, 1, 1.0, "b"), row(-5, 2, 1.0, "c"),
        row(7, 0, 2.0, "Grüße 東京"), row(-5, 0, 4.0, "z"),
    ]  # fmt: skip
    assert lines(path) == [item_line(item) for item in expected]
    assert json.loads(lines(path)[0]) == {
        "title": "a", "_url": "http://books.test/-5", "_key": "fffffffffffffffb:0",
        "_fetched_at": "1970-01-01T00:00:01+00:00",
    }  # fmt: skip


def test_a_killed_writer_loses_no_flushed_item(tmp_path: Path) -> None:
    commits = [[page(n, float(n), f"book {n}", f"review {n}")] for n in range(1, 31)]
    directory = tmp_path / "items"
    write_then_kill(
        "trawl.handlers.item_files.ItemWriter", directory, commits, tmp_path, flush_every=7
    )
    (partial,) = directory.iterdir()
    assert partial.name.endswith(SUFFIX + PARTIAL)
    ItemWriter(directory).close()
    (path,) = directory.iterdir()
    assert path.name == partial.name.removesuffix(PARTIAL)
    titles = [json.loads(line)["title"] for line in lines(path)]
    flushed = [title for n in range(1, 30) for title in (f"book {n}", f"review {n}")]
    assert titles[: len(flushed)] == flushed
    assert len(titles) <= len(flushed) + 2
