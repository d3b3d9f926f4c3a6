"""``trawl export``: one row per known URL, as CSV or JSON lines."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from typing import TextIO

from trawl.store.location import StoreLocation
from trawl.store.values import ExportRow

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
