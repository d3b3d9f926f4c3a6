"""What the items files (``--output`` in a handler crawl) cost the committer: CPU an
item to write and flush them, as the committer does a batch at a time.

    python -m bench.item_files [--batches 200] [--pages 64] [--items 10]

Each batch is ``--pages`` pages of ``--items`` items (a book-shop item of six fields),
written by one :class:`~trawl.handlers.item_files.ItemWriter` and flushed; the figures
are this process's CPU (user and system, getrusage) an item and the compressed bytes an
item.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
from pathlib import Path

from trawl.handlers.item_files import ItemWriter
from trawl.store.values import PageItems

ITEM = {
    "title": "A Light in the Attic", "price": "£51.77", "stock": 22,
    "url": "http://books.test/book/1.html", "tags": ["poetry", "classic"],
}  # fmt: skip


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _batch(first: int, pages: int, items: int) -> list[PageItems]:
    return [
        PageItems(
            uid,
            1.7e9,
            tuple(json.dumps(ITEM | {"n": n}, ensure_ascii=False) for n in range(items)),
            f"http://books.test/book/{uid}.html",
        )
        for uid in range(first, first + pages)
    ]


def measure(batches: int, pages: int, items: int) -> tuple[float, float]:
    """CPU seconds an item, and compressed bytes an item."""
    work = [_batch(b * pages, pages, items) for b in range(batches)]
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        with ItemWriter(directory) as writer:
            start = _cpu()
            for batch in work:
                writer.write(batch)
                writer.flush()
            used = _cpu() - start
        size = sum(path.stat().st_size for path in directory.iterdir())
    count = batches * pages * items
    return used / count, size / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--pages", type=int, default=64)
    parser.add_argument("--items", type=int, default=10)
    args = parser.parse_args()
    cpu, size = measure(args.batches, args.pages, args.items)
    count = args.batches * args.pages * args.items
    print(f"{count} items: {cpu * 1e6:.1f} us CPU an item, {size:.1f} compressed bytes an item")


if __name__ == "__main__":
    main()
