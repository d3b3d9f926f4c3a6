"""CDXJ indexes of WARC files, so that a replay tool finds each capture without a scan.

Each closed ``<name>.warc.gz`` gets ``<name>.cdxj`` beside it, as cdxj-indexer (the
indexer of pywb's authors) writes it: one line per response, revisit and metadata
record, keyed by the URL's SURT form and the record's 14-digit date, with its file,
offset and length, sorted. pywb takes the directory as both its index and its archive
path. An index is written under a temporary name and renamed when complete, so an index
under its final name is always whole; two writers that index one file write the same
lines.

The writer makes each file's index lines as it writes its records (:func:`index_line`,
the line cdxj-indexer writes for that record, byte for byte) into ``<name>.cdxj.open``
beside the file, so a closed file's index is those lines sorted: reading the file back
took cdxj-indexer about 0.3 ms of CPU an exchange. A closed file without its lines
(written by an earlier trawl, or whose lines could not be written) is read back by
cdxj-indexer. Either is done in a child process (``python -m trawl.content.cdxj
FILE...``): reading a file back is Python work, and sorting the lines of a 1 GiB file
holds tens of MB, neither of which belongs in the crawl's process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from trawl.content.warc_records import ExchangeRecords, WarcExchange
from trawl.errors import TrawlError

WARC_SUFFIX = ".warc.gz"
INDEX_SUFFIX = ".cdxj"
LINES_SUFFIX = ".open"
"""Added to the index's name for the unsorted lines of a file being written."""
_MIME_END = re.compile(r"[;\s]")
_surt: Callable[[str], str] | None = None


def index_path(warc: Path) -> Path:
    """Where the index of the WARC file ``warc`` goes: beside it, ``.cdxj`` for
    ``.warc.gz``."""
    return warc.with_name(warc.name.removesuffix(WARC_SUFFIX) + INDEX_SUFFIX)


def lines_path(warc: Path) -> Path:
    """Where the writer of ``warc`` puts its index lines, unsorted, as it writes."""
    index = index_path(warc)
    return index.with_name(index.name + LINES_SUFFIX)


def load_surt() -> Callable[[str], str]:
    """surt's function, imported on first use: the import takes about 0.1 s (tldextract,
    requests), which every trawl process would pay at start, with --warc or not."""
    global _surt
    if _surt is None:
        from surt import surt

        _surt = surt
    return _surt


def index_line(exchange: WarcExchange, records: ExchangeRecords, filename: str, offset: int) -> str:
    """The line cdxj-indexer writes for the response (or revisit) record of ``records``,
    which is at ``offset`` in the file ``filename``: the same fields, in the same order,
    as it reads them back from the record (so a Content-Type that is not ASCII is decoded
    as UTF-8 where it can be)."""
    surt = _surt or load_surt()
    fields: dict[str, str] = {"url": exchange.url}
    if records.payload_digest is None:
        fields["mime"] = "warc/revisit"
    else:
        mime = _content_type(exchange.response_headers)
        if mime is not None:
            fields["mime"] = _MIME_END.split(mime, 1)[0].strip() if mime else mime
        fields["status"] = str(exchange.status)
        fields["digest"] = records.payload_digest
    fields["length"] = str(len(records.response))
    fields["offset"] = str(offset)
    fields["filename"] = filename
    stamp = records.date[:19].replace("-", "").replace("T", "").replace(":", "")
    return f"{surt(exchange.url)} {stamp} {json.dumps(fields)}\n"


def _content_type(headers: Sequence[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if name.rstrip(" \t").lower() == "content-type":
            value = value.strip()
            if not value.isascii():
                with contextlib.suppress(UnicodeError):
                    value = value.encode("latin-1").decode("utf-8")
            return value
    return None


def write_index(warc: Path) -> Path:
    """Index the closed WARC file ``warc``, from the lines its writer left when there are
    any; returns the index's path."""
    target = index_path(warc)
    partial = target.with_name(f"{target.name}.{secrets.token_hex(3)}.tmp")
    lines = lines_path(warc)
    try:
        if lines.exists():
            with lines.open(encoding="utf-8") as unsorted:
                entries = sorted(unsorted)
            with partial.open("w", encoding="utf-8") as index:
                index.writelines(entries)
        else:
            # Imported here: it takes about 0.1 s (surt, tldextract, requests).
            from cdxj_indexer.main import CDXJIndexer

            CDXJIndexer(output=str(partial), inputs=[str(warc)], sort=True).process_all()
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        os.rename(partial, target)
        lines.unlink(missing_ok=True)
    finally:
        partial.unlink(missing_ok=True)
    return target


def unindexed(directory: Path) -> list[Path]:
    """The closed WARC files in ``directory`` that have no index yet, by name."""
    return sorted(
        path for path in directory.glob("*" + WARC_SUFFIX) if not index_path(path).exists()
    )


def index_in_child(warcs: Sequence[Path]) -> None:
    """Index the WARC files ``warcs`` in one child process; raises TrawlError with the
    child's error."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trawl.content.cdxj", *map(str, warcs)],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise TrawlError(f"cannot start the CDXJ indexer: {exc.strerror}") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise TrawlError(lines[-1].removeprefix("trawl: error: "))


def main(paths: list[str]) -> int:
    """Index each WARC file of ``paths``; one error line and 1 for a failure."""
    for name in paths:
        try:
            write_index(Path(name))
        except OSError as exc:
            where = exc.filename or name
            print(f"trawl: error: cannot write CDXJ index {where}: {exc.strerror}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
