"""CDXJ indexes of WARC files, so that a replay tool finds each capture without a scan.

Each closed ``<name>.warc.gz`` gets ``<name>.cdxj`` beside it, made by cdxj-indexer (the
indexer of pywb's authors): one line per response, revisit and metadata record, keyed by
the URL's SURT form and the record's 14-digit date, with its file, offset and length,
sorted. pywb takes the directory as both its index and its archive path. An index is
written under a temporary name and renamed when complete, so an index under its final
name is always whole; two writers that index one file write the same lines.

A writer indexes in a child process (``python -m trawl.content.cdxj FILE...``): reading a file
back is Python work, about 14 MB of WARC a second, which on a thread would take the
interpreter lock from the crawl for over a minute per 1 GiB file.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from trawl.errors import TrawlError

WARC_SUFFIX = ".warc.gz"
INDEX_SUFFIX = ".cdxj"


def index_path(warc: Path) -> Path:
    """Where the index of the WARC file ``warc`` goes: beside it, ``.cdxj`` for
    ``.warc.gz``."""
    return warc.with_name(warc.name.removesuffix(WARC_SUFFIX) + INDEX_SUFFIX)


def write_index(warc: Path) -> Path:
    """Index the closed WARC file ``warc``; returns the index's path."""
    # Imported here: it takes about 0.1 s (surt, tldextract, requests), which every
    # trawl process would pay, with --warc or not.
    from cdxj_indexer.main import CDXJIndexer

    target = index_path(warc)
    partial = target.with_name(f"{target.name}.{secrets.token_hex(3)}.tmp")
    try:
        CDXJIndexer(output=str(partial), inputs=[str(warc)], sort=True).process_all()
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        os.rename(partial, target)
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
