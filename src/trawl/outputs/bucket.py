"""The bucket client of the uploads: obstore, an S3-API client written in Rust.

A file goes up in one PUT with ``If-None-Match: *`` (never over an existing key) and
``x-amz-checksum-sha256`` (the store refuses a body that does not match it), and its
SHA-256 is kept as the object's metadata ``x-amz-meta-sha256``. When the key exists
already (an upload that a kill cut off after the store took it), that metadata tells
whether it holds this very file (done) or another one (a conflict, never overwritten).

The file is handed to the client as a memory map, so the body is neither read into the
heap nor copied: the client hashes and sends it from the page cache on its own threads,
with the GIL released. Credentials and region come from the standard AWS chain that
obstore reads (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
``AWS_REGION``, web identity, ECS and EC2 instance roles) and, when the environment holds
no key, from the shared files' profile (trawl.outputs.profile). Nothing here logs or
keeps them.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trawl.errors import UsageError
from trawl.outputs.profile import shared_profile
from trawl.outputs.target import ObjectTarget

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config, S3Store

SHA256_META = "sha256"
"""The user metadata (``x-amz-meta-sha256``) holding an object's SHA-256, hex."""
MISSING_CLIENT = "--output s3:// needs the S3 client: pip install 'trawl[s3]'"
_MAX_REASON = 200
_CODE_RE = re.compile(r"<Code>([^<]{1,64})</Code>")
_STATUS_RE = re.compile(r"status code: (\d{3})")


class PutOutcome(enum.Enum):
    """What a conditional put came to."""

    CREATED = "created"
    SAME = "same"
    """The key held this file already: an earlier upload reached the store."""
    CONFLICT = "conflict"
    """The key holds other content; it was left as it is."""


@dataclass(frozen=True, slots=True)
class Put:
    """A file put: what came of it, and the file's size and SHA-256 (hex)."""

    outcome: PutOutcome
    size: int
    sha256: str


class StoreRefused(Exception):
    """The store could not be reached or refused a request; the message is one line."""


def check_client() -> None:
    """Raise a one-line :class:`UsageError` naming the extra when obstore is missing."""
    try:
        import obstore  # noqa: F401
    except ImportError as exc:
        raise UsageError(MISSING_CLIENT) from exc


def reason(exc: BaseException) -> str:
    """What the store said: its HTTP status and S3 error code when it answered, else the
    first line of ``exc``'s message; at most 200 characters."""
    text = str(exc).strip()
    code = _CODE_RE.search(text)
    status = _STATUS_RE.search(text)
    if code is not None:
        line = f"{status.group(1) + ' ' if status else ''}{code.group(1)}"
    else:
        line = (text.splitlines() or [type(exc).__name__])[0]
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 3] + "..."


class Bucket:
    """Puts files into ``target``'s bucket; its methods block (run them off the loop)."""

    def __init__(self, target: ObjectTarget) -> None:
        check_client()
        from obstore.store import S3Store

        self.target = target
        options: ClientConfig = {
            "connect_timeout": timedelta(seconds=5),
            "timeout": timedelta(hours=1),
        }
        settings: dict[str, Any] = {"checksum_algorithm": "sha256", **shared_profile()}
        if target.endpoint is not None:
            settings["endpoint"] = target.endpoint
            options["allow_http"] = target.endpoint.startswith("http://")
        try:
            self._store: S3Store = S3Store(
                target.bucket,
                config=cast("S3Config", settings),
                client_options=options,
                # One quick retry in the client; the uploader backs off between attempts.
                retry_config={"max_retries": 1, "retry_timeout": timedelta(seconds=30)},
            )
        except Exception as exc:
            raise UsageError(f"--output {target.url}: {reason(exc)}") from exc

    def put_new(self, key: str, path: Path) -> Put:
        """Put the file at ``path`` under ``key`` unless the key exists; raises
        :class:`StoreRefused` when the store cannot take it now, OSError for the file."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        with path.open("rb") as file, _mapped(file.fileno()) as body:
            size = len(body)
            digest = hashlib.sha256(body).hexdigest()
            try:
                obstore.put(self._store, key, body, mode="create", attributes={SHA256_META: digest})
                return Put(PutOutcome.CREATED, size, digest)
            except (AlreadyExistsError, PreconditionError):
                pass
            except Exception as exc:
                # obstore's errors (some of them OSError's kinds: a missing bucket is a
                # FileNotFoundError) are the store's, never the local file's.
                raise StoreRefused(reason(exc)) from exc
        same = self.sha256_of(key) == digest
        return Put(PutOutcome.SAME if same else PutOutcome.CONFLICT, size, digest)

    def sha256_of(self, key: str) -> str:
        """The SHA-256 of the object at ``key``: its metadata's, else hashed from its body."""
        import obstore

        try:
            head = obstore.get(self._store, key, options={"head": True})
            known = head.attributes.get(SHA256_META)
            if isinstance(known, str):
                return known
            digest = hashlib.sha256()
            for chunk in obstore.get(self._store, key):
                digest.update(chunk)
            return digest.hexdigest()
        except Exception as exc:
            raise StoreRefused(reason(exc)) from exc


@contextlib.contextmanager
def _mapped(fileno: int) -> Iterator[memoryview]:
    """A read-only memory map of a whole file, as a memoryview (empty for an empty file)."""
    if not os.fstat(fileno).st_size:
        yield memoryview(b"")
        return
    with mmap.mmap(fileno, 0, access=mmap.ACCESS_READ) as whole, memoryview(whole) as view:
        yield view
