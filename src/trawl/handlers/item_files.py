"""Items files: with ``--output s3://...``, the items of each committed page of a handler
crawl also go to rotating gzip JSONL files in the data dir's ``items/``, for the uploader
(trawl.outputs.uploader) to send to the bucket.

Each line is an item as ``trawl export --items`` writes it in JSONL (trawl.ops.export):
the item's fields, then ``_url``, ``_key`` and ``_fetched_at``. The files rotate, and are
repaired after a kill -9, as trawl.content.jsonl_files says. The committer writes and
flushes a batch's items before the store commits the batch, so an item is never lost: a
page fetched again after a crash writes its items again, under the same ``_key`` (at
least once; a consumer upserts by ``_key``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from trawl.content.jsonl_files import DEFAULT_MAX_SIZE, JsonlWriter
from trawl.ops.export import item_line
from trawl.store.values import ItemRow, PageItems


class ItemWriter(JsonlWriter):
    """Writes the items of committed pages to rotating gzip JSONL files in ``directory``
    (named ``items-...`` by default)."""

    def __init__(
        self,
        directory: Path,
        *,
        max_size: int = DEFAULT_MAX_SIZE,
        prefix: str = "items",
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            directory, kind="items", max_size=max_size, prefix=prefix, on_closed=on_closed
        )

    def write(self, pages: Iterable[PageItems]) -> int:
        """Add the items of ``pages`` (of one commit: the last of a URL wins, as in the
        store) as lines; returns how many. They are safe from a kill -9 once
        :meth:`flush` returns."""
        latest = {page.url_id: page for page in pages}
        count = 0
        for page in latest.values():
            for seq, data in enumerate(page.items):
                row = ItemRow(page.url, page.url_id, seq, page.fetched_at, data)
                self.write_line((item_line(row) + "\n").encode("utf-8", "backslashreplace"))
                count += 1
        return count
