"""Where ``--output s3://BUCKET/PREFIX`` sends the closed WARC, text and items files, and
the key each file gets there.

A file's key names the crawl, the output, the day its writer started it and the file,
whose name carries the worker's tag (:func:`worker_tag`) and the time to the second or
finer::

    PREFIX/CRAWL/warc/2026/12/06/trawl-WORKER-20261206120501123456-00001-a1b2c3.warc.gz
    PREFIX/CRAWL/warc/2026/12/06/trawl-WORKER-20261206120501123456-00001-a1b2c3.cdxj
    PREFIX/CRAWL/text/2026/12/06/text-WORKER-20261206T120501-00000-d4e5f6.jsonl.gz
    PREFIX/CRAWL/items/2026/12/06/items-WORKER-20261206T120501-00000-0a1b2c.jsonl.gz

The key is a function of the file's name alone, so it is known while the file is still
being written (the ``storageKey`` of a PageFetched event names it) and is the same when
an upload is tried again after a crash. Only files named as the writers name them are
uploaded.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from dataclasses import dataclass
from typing import Literal

from trawl.errors import UsageError

Kind = Literal["warc", "text", "items"]
"""Which output a file belongs to: its directory in the data dir and in the key."""

MAX_OBJECT_SIZE = 5 * 1024**3
"""The largest object one S3 PUT takes (5 GiB); conditional puts are single PUTs."""
DEFAULT_WAIT = 60.0
"""Seconds the end of a crawl waits for the uploads still pending."""

_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SEGMENT_RE = re.compile(r"[A-Za-z0-9!_.*'()=-]+")
_TAG_CHARS = re.compile(r"[^A-Za-z0-9.-]+")
_NAMES: dict[Kind, re.Pattern[str]] = {
    "warc": re.compile(r".+-(\d{4})(\d{2})(\d{2})\d{12}-\d{5}-[0-9a-f]{6}(?:\.warc\.gz|\.cdxj)"),
    "text": re.compile(r".+-(\d{4})(\d{2})(\d{2})T\d{6}-\d{5}(?:-[0-9a-f]{6})?\.jsonl\.gz"),
    "items": re.compile(r".+-(\d{4})(\d{2})(\d{2})T\d{6}-\d{5}-[0-9a-f]{6}\.jsonl\.gz"),
}


@dataclass(frozen=True, slots=True)
class ObjectTarget:
    """A bucket and key prefix of an S3-API store, reached at ``endpoint`` (None: AWS)."""

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    keep_local: bool = False
    """Keep each file in the data dir after its upload."""
    wait: float = DEFAULT_WAIT
    """Seconds the end of a crawl waits for pending uploads."""

    @property
    def url(self) -> str:
        """``s3://BUCKET/PREFIX``, as the user gave it (without a trailing slash)."""
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def parse_output(
    output: str, endpoint: str | None, *, keep_local: bool = False, wait: float = DEFAULT_WAIT
) -> ObjectTarget:
    """The target of ``--output`` (``s3://BUCKET[/PREFIX]``) and ``--s3-endpoint``;
    anything else is a one-line :class:`UsageError` that never repeats a credential."""
    parts = urllib.parse.urlsplit(output)
    if parts.scheme != "s3":
        scheme = parts.scheme or "none"
        raise UsageError(f"--output: unknown scheme {scheme!r}; use s3://BUCKET/PREFIX")
    if "@" in parts.netloc:
        raise UsageError(
            "--output must not hold credentials: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or an AWS profile) instead"
        )
    bucket = parts.netloc
    if not bucket:
        raise UsageError("--output s3:// names no bucket; use s3://BUCKET/PREFIX")
    if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket:
        raise UsageError(
            f"--output: {bucket!r} is not a bucket name (3 to 63 lower-case letters, "
            "digits, . and -)"
        )
    if parts.query or parts.fragment:
        raise UsageError("--output s3://BUCKET/PREFIX takes no query or fragment")
    segments = [segment for segment in parts.path.split("/") if segment]
    for segment in segments:
        if segment in (".", "..") or not _SEGMENT_RE.fullmatch(segment):
            raise UsageError(
                f"--output: prefix part {segment!r} may hold only letters, digits and !_.*'()=-"
            )
    if wait < 0:
        raise UsageError("--upload-wait must not be negative")
    return ObjectTarget(
        bucket, "/".join(segments), _endpoint(endpoint), keep_local=keep_local, wait=wait
    )


def _endpoint(endpoint: str | None) -> str | None:
    """``--s3-endpoint``: an http(s) URL of a host, with no credentials, query or fragment."""
    if not endpoint:
        return None
    try:
        parts = urllib.parse.urlsplit(endpoint)
        port = parts.port
    except ValueError as exc:
        raise UsageError("--s3-endpoint is not a URL: use http(s)://HOST[:PORT]") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--s3-endpoint is not an http(s) URL: use http(s)://HOST[:PORT]")
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "--s3-endpoint must not hold credentials: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or an AWS profile) instead"
        )
    if parts.query or parts.fragment:
        raise UsageError("--s3-endpoint takes no query or fragment")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    where = host if port is None else f"{host}:{port}"
    return f"{parts.scheme}://{where}{parts.path.rstrip('/')}"


def worker_tag(worker: str) -> str:
    """A worker id as a part of a file name: its letters, digits, ``.`` and ``-`` (the
    rest as ``-``, at most 40 characters) and 6 hex digits of its hash, so that two
    workers of one crawl never get the same tag."""
    plain = _TAG_CHARS.sub("-", worker).strip("-.")[:40].rstrip("-.") or "worker"
    return f"{plain}-{hashlib.sha256(worker.encode()).hexdigest()[:6]}"


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """The keys of a crawl's files in ``target``'s bucket."""

    target: ObjectTarget
    crawl: str

    def key(self, kind: Kind, name: str) -> str | None:
        """The key of the file ``name`` of the ``kind`` output, or None for a name the
        writers do not give (such a file is not uploaded)."""
        found = _NAMES[kind].fullmatch(name)
        if found is None:
            return None
        parts = [self.target.prefix, self.crawl, kind, *found.groups(), name]
        return "/".join(part for part in parts if part)

    def locate(self, kind: Kind, name: str) -> tuple[str, str] | None:
        """The bucket and key of the file ``name`` of the ``kind`` output (None as for
        :meth:`key`)."""
        key = self.key(kind, name)
        return None if key is None else (self.target.bucket, key)
