"""Settings shared by the writers of rotated output files (WARC, clean text)."""

from __future__ import annotations

import re

from trawl.errors import UsageError

_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_rotation(kind: str, prefix: str, max_size: int) -> None:
    """Refuse a file-name ``prefix`` that is not a plain name, or a size limit that is not
    positive, with a one-line usage error naming the ``kind`` of file."""
    if not _PREFIX_RE.fullmatch(prefix):
        raise UsageError(f"{kind} file prefix {prefix!r} may hold only letters, digits, . _ -")
    if max_size <= 0:
        raise UsageError(f"{kind} file size limit must be positive, not {max_size}")
