"""CDXJ indexes of WARC files, so that a replay tool finds each capture without a scan.

Each closed ``<name>.warc.gz`` gets ``<name>.cdxj`` beside it, made by cdxj-indexer (the
indexer of pywb's authors): one line per response, revisit and metadata record, keyed by
the URL's SURT form and the record's 14-digit date, with its file, offset and length,
sorted. pywb takes the directory as both its index and its archive path. An index is
written under a temporary name and renamed when complete, so an index under its final
name is always whole; two writers that index one file write the same lines.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

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
