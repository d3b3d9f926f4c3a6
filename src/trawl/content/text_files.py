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

Files are named ``<prefix>-<UTC time to the second>-<serial>-<random>.jsonl.gz`` (six
hex digits of randomness, so that a writer started again within the same second never
picks a name an uploaded and removed file had) and each holds one gzip member. A file
is written as ``<name>.jsonl.gz.open`` and renamed once complete: at the first flush
after its compressed size passed the limit, or when the writer closes. A file under its
final name is never written again, and a record is never split across files.
``on_closed`` hears of each file closed (trawl.outputs.uploader).

Crash behaviour: :meth:`TextWriter.flush` ends the compressor's block with
``Z_SYNC_FLUSH`` and hands the bytes to the operating system, so after a kill -9 every
record written before the last flush can be decompressed from the ``.open`` file. The
next writer on the directory repairs such leftovers first (:func:`repair_open_files`):
it keeps every complete line and publishes them as a proper gzip file. Nothing is
fsynced, so the guarantee holds for a killed process, not for a power loss (as for the
store's ``synchronous=NORMAL``). The crawl flushes a batch's records before the store
commits the batch, so a record may be written twice (the page is fetched again on
resume), never lost: (``final_url``, ``content_hash``) identifies a repeat.
"""

from __future__ import annotations

import json
import os
import secrets
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from isal import isal_zlib

from trawl.content.rotation import check_rotation
from trawl.errors import TrawlError, UsageError
from trawl.resource import Resource

DEFAULT_MAX_SIZE = 1 << 30
"""Default compressed size after which a text file is closed at the next flush (1 GiB)."""
SUFFIX = ".jsonl.gz"
PARTIAL = ".open"
"""Added to the name of the file being written; dropped by a rename once it is complete."""
_LEVEL = isal_zlib.ISAL_BEST_COMPRESSION
"""ISA-L's level 3: on the extraction benchmark's texts 0.036 ms a page for 36% of the
size, against zlib level 6's 0.365 ms for 32% (on the crawl benchmark's pages 0.07 ms
against 1.15 ms, which held --text crawls back on the event loop)."""
_GZIP = 16 + zlib.MAX_WBITS
_CHUNK = 1 << 16
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


def json_line(value: Mapping[str, object]) -> bytes:
    """``value`` as one compact UTF-8 JSON line. A lone surrogate, which UTF-8 cannot
    hold, is written as a backslash-u escape of its code point, so the line stays valid
    JSON and UTF-8."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", "backslashreplace")


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


def repair_open_files(directory: Path) -> list[Path]:
    """Publish what killed writers left in ``directory``; returns the files published.

    Each ``*.jsonl.gz.open`` file is decompressed as far as it goes and its complete
    lines are written, as one gzip member, under its name without ``.open``; then it is
    deleted. A leftover without a complete line is only deleted.
    """
    published = []
    for partial in sorted(directory.glob(f"*{SUFFIX}{PARTIAL}")):
        final = partial.with_name(partial.name.removesuffix(PARTIAL))
        # A final name next to its .open file means a repair ended after its rename.
        if not final.exists():
            staged = partial.with_name(final.name + ".repair")
            if _recover(partial, staged):
                os.replace(staged, final)
                published.append(final)
            else:
                staged.unlink()
        partial.unlink()
    return published


def _inflate(source: IO[bytes]) -> Iterator[bytes]:
    """The decompressed bytes of a gzip stream, in bounded pieces, up to where it ends,
    breaks off or turns out corrupt."""
    decompressor = zlib.decompressobj(_GZIP)
    try:
        while not decompressor.eof and (chunk := source.read(_CHUNK)):
            while chunk:
                yield decompressor.decompress(chunk, _CHUNK)
                chunk = decompressor.unconsumed_tail
        yield decompressor.flush()
    except zlib.error:
        return


def _recover(partial: Path, staged: Path) -> bool:
    """Write the complete lines of ``partial`` to ``staged`` as one gzip member; returns
    whether there was any."""
    compressor = isal_zlib.compressobj(_LEVEL, isal_zlib.DEFLATED, _GZIP)
    pending = b""
    kept = False
    with partial.open("rb") as source, staged.open("wb") as sink:
        for piece in _inflate(source):
            pending += piece
            end = pending.rfind(b"\n") + 1
            if end:
                sink.write(compressor.compress(pending[:end]))
                pending = pending[end:]
                kept = True
        sink.write(compressor.flush())
    return kept


class TextWriter(Resource):
    """Writes text records to rotating gzip JSONL files in ``directory``.

    The directory is created if missing and leftovers of a killed writer are repaired
    (:func:`repair_open_files`) before anything else. A file is started at the first
    write after a rotation and closed at the first flush after its compressed size
    passed ``max_size`` bytes. A failed write leaves the current file under its
    ``.open`` name, for the next writer's repair, and closes the writer.
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_size: int = DEFAULT_MAX_SIZE,
        prefix: str = "text",
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        check_rotation("text", prefix, max_size)
        self._on_closed = on_closed
        self.directory = directory
        self._prefix = prefix
        self._max_size = max_size
        self._file: IO[bytes] | None = None
        self._compressor = isal_zlib.compressobj(_LEVEL, isal_zlib.DEFLATED, _GZIP)
        self._partial = directory
        self._size = 0
        self._serial = 0
        self._closed = False
        self._files: list[Path] = []
        try:
            directory.mkdir(parents=True, exist_ok=True)
            repair_open_files(directory)
        except OSError as exc:
            raise UsageError(f"cannot write text files in {directory}: {exc.strerror}") from exc

    @property
    def files(self) -> list[Path]:
        """The files this writer wrote and closed, in order (repaired leftovers not included)."""
        return list(self._files)

    def write(self, record: TextRecord) -> None:
        """Add ``record`` as one line; it is safe from a kill -9 once :meth:`flush` returns."""
        if self._closed:
            raise RuntimeError("TextWriter used after close")
        line = json_line(text_json(record))
        with self._failing():
            if self._file is None:
                self._start()
            self._append(self._compressor.compress(line))

    def flush(self) -> None:
        """Hand every record written so far to the operating system, decompressible from
        the file as it stands; close the file if it has passed the size limit."""
        if self._file is None:
            return
        with self._failing():
            self._append(self._compressor.flush(isal_zlib.Z_SYNC_FLUSH))
            self._file.flush()
            if self._size > self._max_size:
                self._seal()

    def close(self) -> None:
        """End the gzip stream and give the file its final name; idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._failing():
            self._seal()

    def _append(self, data: bytes) -> None:
        if self._file is None:
            raise RuntimeError("no text file is open")
        self._file.write(data)
        self._size += len(data)

    def _start(self) -> None:
        """Create the next file under a name that no file has yet."""
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S}"
        while True:
            name = f"{self._prefix}-{stamp}-{self._serial:05d}-{secrets.token_hex(3)}{SUFFIX}"
            self._serial += 1
            if (self.directory / name).exists():
                continue
            try:
                # Kept open across calls and closed by _seal, hence no ``with`` (SIM115).
                self._file = open(self.directory / (name + PARTIAL), "xb")  # noqa: SIM115
            except FileExistsError:
                continue
            break
        self._partial = self.directory / (name + PARTIAL)
        self._size = 0
        self._compressor = isal_zlib.compressobj(_LEVEL, isal_zlib.DEFLATED, _GZIP)

    def _seal(self) -> None:
        """Finish the current file's gzip member and rename it to its final name."""
        if self._file is None:
            return
        self._append(self._compressor.flush())
        file, self._file = self._file, None
        file.close()
        final = self._partial.with_name(self._partial.name.removesuffix(PARTIAL))
        os.rename(self._partial, final)
        self._files.append(final)
        if self._on_closed is not None:
            self._on_closed()

    @contextmanager
    def _failing(self) -> Iterator[None]:
        """Turn an OSError in the file work into a one-line TrawlError, after abandoning
        the file so that a torn gzip stream is never published."""
        try:
            yield
        except OSError as exc:
            where = exc.filename or self._partial
            self._closed = True
            file, self._file = self._file, None
            if file is not None:
                with suppress(OSError):
                    file.close()
            raise TrawlError(f"cannot write text file {where}: {exc.strerror}") from exc
