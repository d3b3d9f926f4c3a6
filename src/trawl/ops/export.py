"""``trawl export``: one row per known URL, or with ``--items`` one per stored item (what
page handlers yielded), as CSV or JSON lines."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from typing import TextIO

from trawl.store.location import StoreLocation
from trawl.store.values import ExportRow, ItemRow

COLUMNS = (
    "url", "status", "content_type", "length", "fetched_at", "depth", "redirect_to", "error",
    "revalidated_at", "revalidation", "duplicate_of", "near_duplicate_of", "alias_of",
    "canonical", "content_hash",
)  # fmt: skip
"""The columns in their order: new ones are appended, so a reader by position keeps
working."""


def _record(row: ExportRow) -> dict[str, object]:
    fetched = (
        datetime.fromtimestamp(row.fetched_at, UTC).isoformat(timespec="seconds")
        if row.fetched_at is not None
        else None
    )
    error = row.error
    if error is None and row.state.name == "BLOCKED":
        error = "robots"
    return {
        "url": row.url,
        "status": row.status,
        "content_type": row.content_type,
        "length": row.length,
        "fetched_at": fetched,
        "depth": row.depth,
        "redirect_to": row.redirect_to,
        "error": error,
        "revalidated_at": (
            datetime.fromtimestamp(row.revalidated_at, UTC).isoformat(timespec="seconds")
            if row.revalidated_at is not None
            else None
        ),
        "revalidation": row.revalidation,
        "duplicate_of": row.duplicate_of,
        "near_duplicate_of": row.near_duplicate_of,
        "alias_of": row.alias_of,
        "canonical": row.canonical,
        "content_hash": row.content_hash,
    }


async def export_rows(location: StoreLocation, fmt: str, out: TextIO) -> int:
    """Write every URL of the crawl at ``location`` to ``out``; return the row count."""
    count = 0
    async with location.open(readonly=True) as store:
        if fmt == "csv":
            writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            async for row in store.export():
                writer.writerow(_record(row))
                count += 1
        else:
            async for row in store.export():
                out.write(json.dumps(_record(row)) + "\n")
                count += 1
    return count


ITEM_FIELDS = ("_url", "_key", "_fetched_at")
"""The fields ``trawl export --items`` adds to every item, and the first CSV columns:
the page's URL, the item's key (trawl.store.values.ItemRow.key) and the page's fetch
time (ISO 8601, UTC, seconds). They take the place of item fields of the same names."""

_CELL_TYPES = (str, int, float, bool, type(None))
"""Item values a CSV cell holds as they are; any other value is written as JSON text."""


def _cell(value: object) -> object:
    """An item value as a CSV cell holds it."""
    return value if isinstance(value, _CELL_TYPES) else json.dumps(value, ensure_ascii=False)


def item_record(item: ItemRow) -> dict[str, object]:
    """An item's own fields, then :data:`ITEM_FIELDS`."""
    fields: dict[str, object] = json.loads(item.data)
    fetched = datetime.fromtimestamp(item.fetched_at, UTC).isoformat(timespec="seconds")
    fields.update(_url=item.url, _key=item.key, _fetched_at=fetched)
    return fields


def item_line(item: ItemRow) -> str:
    """An item as one JSON line of ``trawl export --items`` (without its newline): its
    :func:`item_record`, non-ASCII characters kept as they are."""
    return json.dumps(item_record(item), ensure_ascii=False)


async def export_items(location: StoreLocation, fmt: str, out: TextIO) -> int:
    """Write every stored item of the crawl at ``location`` to ``out``, in key order;
    return the item count.

    JSON lines hold one object an item: its fields and :data:`ITEM_FIELDS`. CSV has the
    columns :data:`ITEM_FIELDS`, then every item field in the order first met; items
    are read twice for it (once for the header), so the export holds none in RAM."""
    count = 0
    async with location.open(readonly=True) as store:
        if fmt != "csv":
            async for item in store.items():
                out.write(item_line(item) + "\n")
                count += 1
            return count
        names = dict.fromkeys(ITEM_FIELDS)
        async for item in store.items():
            names.update(dict.fromkeys(json.loads(item.data)))
        writer = csv.DictWriter(out, fieldnames=list(names), lineterminator="\n")
        writer.writeheader()
        async for item in store.items():
            record = item_record(item)
            writer.writerow({name: _cell(value) for name, value in record.items()})
            count += 1
    return count
