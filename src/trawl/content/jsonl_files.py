"""Rotating gzip JSONL files: one JSON object per line, written by the text output
(trawl.content.text_files) and the items output (trawl.handlers.item_files).

Files are named ``<prefix>-<UTC time to the second>-<serial>-<random>.jsonl.gz`` (six
hex digits of randomness, so that a writer started again within the same second never
picks a name an uploaded and removed file had) and each holds one gzip member. A file
is written as ``<name>.jsonl.gz.open`` and renamed once complete: at the first flush
after its compressed size passed the limit, or when the writer closes. A file under its
final name is never written again, and a line is never split across files.
``on_closed`` hears of each file closed (trawl.outputs.uploader).

Crash behaviour: :meth:`JsonlWriter.flush` ends the compressor's block with
``Z_SYNC_FLUSH`` and hands the bytes to the operating system, so after a kill -9 every
line written before the last flush can be decompressed from the ``.open`` file. The
next writer on the directory repairs such leftovers first (:func:`repair_open_files`):
it keeps every complete line and publishes them as a proper gzip file. Nothing is
fsynced, so the guarantee holds for a killed process, not for a power loss (as for the
store's ``synchronous=NORMAL``).
"""

from __future__ import annotations

import json
import os
import secrets
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from isal import isal_zlib

from trawl.content.rotation import check_rotation
from trawl.errors import TrawlError, UsageError
from trawl.resource import Resource

DEFAULT_MAX_SIZE = 1 << 30
"""Default compressed size after which a file is closed at the next flush (1 GiB)."""
SUFFIX = ".jsonl.gz"
PARTIAL = ".open"
"""Added to the name of the file being written; dropped by a rename once it is complete."""
_LEVEL = isal_zlib.ISAL_BEST_COMPRESSION
"""ISA-L's level 3: on the extraction benchmark's texts 0.036 ms a page for 36% of the
size, against zlib level 6's 0.365 ms for 32% (on the crawl benchmark's pages 0.07 ms
against 1.15 ms, which held --text crawls back on the event loop)."""
_GZIP = 16 + zlib.MAX_WBITS
_CHUNK = 1 << 16


def json_line(value: Mapping[str, object]) -> bytes:
    """``value`` as one compact UTF-8 JSON line. A lone surrogate, which UTF-8 cannot
    hold, is written as a backslash-u escape of its code point, so the line stays valid
    JSON and UTF-8."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", "backslashreplace")


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


class JsonlWriter(Resource):
    """Writes JSON lines to rotating gzip files in ``directory``; ``kind`` names the
    output in errors (``text``, ``items``).

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
        kind: str,
        max_size: int = DEFAULT_MAX_SIZE,
        prefix: str,
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        check_rotation(kind, prefix, max_size)
        self._kind = kind
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
            raise UsageError(f"cannot write {kind} files in {directory}: {exc.strerror}") from exc

    @property
    def files(self) -> list[Path]:
        """The files this writer wrote and closed, in order (repaired leftovers not included)."""
        return list(self._files)

    def write_line(self, line: bytes) -> None:
        """Add ``line`` (one JSON text ending in a newline, as :func:`json_line` makes
        it); it is safe from a kill -9 once :meth:`flush` returns."""
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} used after close")
        with self._failing():
            if self._file is None:
                self._start()
            self._append(self._compressor.compress(line))

    def flush(self) -> None:
        """Hand every line written so far to the operating system, decompressible from
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
            raise RuntimeError(f"no {self._kind} file is open")
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
            raise TrawlError(f"cannot write {self._kind} file {where}: {exc.strerror}") from exc
