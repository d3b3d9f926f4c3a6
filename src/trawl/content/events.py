"""PageFetched events: one JSON line per new or changed page, appended to a file.

The file (``--events FILE``) is plain UTF-8 JSONL, opened for append, so a resumed crawl
adds to what earlier runs wrote. Each line is one object; its fields are a contract for
consumers:

``type``
    Always ``"PageFetched"``.
``url``
    The URL the page was fetched from.
``urlHash``
    trawl's 64-bit hash of ``url`` (the store's URL id), 16 lower-case hex digits of its
    unsigned value.
``fetchedAt``
    When it was fetched, RFC 3339 in UTC with milliseconds: ``2026-11-30T19:07:09.123Z``.
``httpStatus``
    The response's status code.
``contentHash``
    SHA-256 of the page's main text, or of its body when it has no main text; 64
    lower-case hex digits.
``simhash``
    64-bit SimHash of the main text as 16 hex digits, or null without main text.
``storageKey``
    Where the response is in the WARC output, ``{"file", "offset", "length"}`` (the
    file's name, the offset and length in bytes of the record's gzip member), or null
    when the crawl writes no WARC. With ``--output s3://...`` it also has ``bucket`` and
    ``key``, the object the file is uploaded to, so that a consumer can fetch the record
    with a ranged GET of bytes ``offset`` to ``offset + length - 1`` (once the file is
    closed and uploaded).
``outLinks``
    How many links the page holds (``nofollow`` links not counted).
``changed``
    Whether the content differs from the last fetch of the URL.

Delivery is at least once. The crawl flushes a batch's events before the store commits
the batch; after a kill -9 in between, the pages are fetched again on resume and their
events written again. (``urlHash``, ``contentHash``) is the idempotency key: a consumer
that has seen the pair can drop the repeat. :meth:`EventWriter.flush` hands the lines to
the operating system (no fsync), so a killed process loses no flushed event; a line torn
by a kill while it was being written is cut off when the file is next opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from trawl.content.text_files import hex64, json_line, rfc3339
from trawl.errors import TrawlError, UsageError
from trawl.resource import Resource
from trawl.store.values import StorageKey

_BLOCK = 1 << 16


@dataclass(frozen=True, slots=True)
class PageFetched:
    """A new or changed page. ``url_id`` and ``simhash`` are signed 64-bit (``simhash``
    None without main text), ``fetched_at`` is Unix time and ``storage_key`` None
    without WARC output."""

    url: str
    url_id: int
    fetched_at: float
    http_status: int
    content_hash: str
    simhash: int | None
    storage_key: StorageKey | None
    out_links: int
    changed: bool


def event_json(event: PageFetched) -> dict[str, object]:
    """The JSON object written for ``event`` (fields in the module doc)."""
    key = event.storage_key
    return {
        "type": "PageFetched",
        "url": event.url,
        "urlHash": hex64(event.url_id),
        "fetchedAt": rfc3339(event.fetched_at),
        "httpStatus": event.http_status,
        "contentHash": event.content_hash,
        "simhash": None if event.simhash is None else hex64(event.simhash),
        "storageKey": None if key is None else _storage_json(key),
        "outLinks": event.out_links,
        "changed": event.changed,
    }


def _storage_json(key: StorageKey) -> dict[str, object]:
    """The ``storageKey`` of an event: the file's record, and its object when uploaded."""
    value: dict[str, object] = {"file": key.file, "offset": key.offset, "length": key.length}
    if key.bucket is not None and key.key is not None:
        value["bucket"] = key.bucket
        value["key"] = key.key
    return value


def _drop_torn_line(path: Path) -> None:
    """Cut a regular file back to the end of its last complete line; leave a pipe alone."""
    if not path.is_file():
        return
    with path.open("r+b") as file:
        size = file.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - _BLOCK)
            file.seek(start)
            newline = file.read(end - start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            file.truncate(end)


class EventWriter(Resource):
    """Appends PageFetched events to ``path``, one line each.

    The parent directory is created if missing, and a torn last line left by a killed
    writer is cut off before the first event is appended. A failed write closes the
    writer; what it tore is cut off when the file is next opened.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._closed = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _drop_torn_line(path)
            self._file: IO[bytes] = path.open("ab")
        except OSError as exc:
            raise UsageError(f"cannot write events file {path}: {exc.strerror}") from exc

    def write(self, event: PageFetched) -> None:
        """Add ``event`` as one line; it is safe from a kill -9 once :meth:`flush` returns."""
        if self._closed:
            raise RuntimeError("EventWriter used after close")
        with self._failing():
            self._file.write(json_line(event_json(event)))

    def flush(self) -> None:
        """Hand every event written so far to the operating system."""
        if self._closed:
            return
        with self._failing():
            self._file.flush()

    def close(self) -> None:
        """Flush and close the file; idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._failing():
            self._file.close()

    @contextmanager
    def _failing(self) -> Iterator[None]:
        """Turn an OSError into a one-line TrawlError, after closing the writer so that
        nothing is appended after a torn line."""
        try:
            yield
        except OSError as exc:
            self._closed = True
            with suppress(OSError):
                self._file.close()
            raise TrawlError(f"cannot write events file {self.path}: {exc.strerror}") from exc
