"""Clean-text output: each page's main text as one JSON object per line, in gzip files.

One line per page written (``--text``), UTF-8, compact, non-ASCII characters kept as
they are. The fields, in this order, are a contract for consumers:

``url``
    The URL that led to the page: the first URL of its redirect chain.
``final_url``
    The URL the page was fetched from.
``fetched_at``
    When it was fetched, RFC 3339 in UTC with milliseconds: ``2026-11-30T19:07:09.123Z``.
``title``, ``language``
    The page's title and declared language (primary subtag, such as ``en``), or null.
``text``
    The main text: plain text, or Markdown with ``--text-format markdown``.
``content_hash``
    SHA-256 of the main text as plain text (whichever the format), 64 lower-case hex
    digits.
``simhash``
    64-bit SimHash of the main text as plain text, 16 lower-case hex digits of its
    unsigned value.
``near_duplicate_of``
    Only on a near duplicate: the URL of the earlier page it nearly duplicates.

Files rotate as trawl.content.jsonl_files says: written as ``<name>.jsonl.gz.open``,
renamed when complete, repaired after a kill -9 by the next writer on the directory
(every line written before the last flush is kept). The crawl flushes a batch's records
before the store commits the batch, so a record may be written twice (the page is
fetched again on resume), never lost: (``final_url``, ``content_hash``) identifies a
repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trawl.content.jsonl_files import (
    DEFAULT_MAX_SIZE,
    PARTIAL,
    SUFFIX,
    JsonlWriter,
    json_line,
    repair_open_files,
)

__all__ = [
    "DEFAULT_MAX_SIZE", "PARTIAL", "SUFFIX", "TextRecord", "TextWriter", "hex64", "json_line",
    "repair_open_files", "rfc3339", "text_json",
]  # fmt: skip

_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class TextRecord:
    """One page's text as written; ``simhash`` is signed 64-bit, ``fetched_at`` Unix time."""

    url: str
    final_url: str
    fetched_at: float
    title: str | None
    language: str | None
    text: str
    content_hash: str
    simhash: int
    near_duplicate_of: str | None = None


def rfc3339(ts: float) -> str:
    """Unix time ``ts`` as RFC 3339 in UTC with milliseconds: ``2026-11-30T19:07:09.123Z``."""
    moment = datetime.fromtimestamp(ts, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def hex64(value: int) -> str:
    """A signed 64-bit ``value`` as the 16 lower-case hex digits of its unsigned form."""
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"{value} is not a signed 64-bit integer")
    return f"{value & _MASK64:016x}"


def text_json(record: TextRecord) -> dict[str, object]:
    """The JSON object written for ``record`` (fields in the module doc)."""
    value: dict[str, object] = {
        "url": record.url,
        "final_url": record.final_url,
        "fetched_at": rfc3339(record.fetched_at),
        "title": record.title,
        "language": record.language,
        "text": record.text,
        "content_hash": record.content_hash,
        "simhash": hex64(record.simhash),
    }
    if record.near_duplicate_of is not None:
        value["near_duplicate_of"] = record.near_duplicate_of
    return value


class TextWriter(JsonlWriter):
    """Writes text records to rotating gzip JSONL files in ``directory``
    (trawl.content.jsonl_files.JsonlWriter, named ``text-...`` by default)."""

    def __init__(
        self,
        directory: Path,
        *,
        max_size: int = DEFAULT_MAX_SIZE,
        prefix: str = "text",
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            directory, kind="text", max_size=max_size, prefix=prefix, on_closed=on_closed
        )

    def write(self, record: TextRecord) -> None:
        """Add ``record`` as one line; it is safe from a kill -9 once :meth:`flush` returns."""
        self.write_line(json_line(text_json(record)))
