"""Pages that change on a schedule and answer conditional requests, for recrawl tests.

A `Changing` page is at version ``floor((now - started) / period)`` by the server's
monotonic clock (always 0 with ``period`` 0: a page that never changes). Each version has
its own body, ETag (``"v<version>"``; none with ``etag`` off) and Last-Modified. With
``conditional`` on, a request whose If-None-Match names the current ETag, or (without
If-None-Match) whose If-Modified-Since is the current Last-Modified or later, gets a 304
without a body, as RFC 9110 section 13.1 has it; with it off the page sends no
validators and always answers 200.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime

from trawl.demo.site import Response

__all__ = ["Changing"]

EPOCH = 1_700_000_000
"""Last-Modified of version 0 (Unix time); version n is n x max(period, 1) s later."""


def _modified_since(header: str | None, modified: float) -> bool:
    """Whether an If-Modified-Since value is at or after ``modified`` (False if unreadable)."""
    if not header:
        return False
    try:
        return parsedate_to_datetime(header).timestamp() >= modified
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Changing:
    """A page whose body changes every ``period`` seconds, linking to ``links``."""

    period: float
    links: tuple[str, ...] = ()
    conditional: bool = True
    etag: bool = True
    """Send an ETag (off: Last-Modified alone, so only If-Modified-Since can match)."""
    started: float = field(default_factory=time.monotonic)

    def version(self) -> int:
        """The page's version now."""
        if self.period <= 0:
            return 0
        return int((time.monotonic() - self.started) / self.period)

    def __call__(self, headers: Mapping[str, str]) -> Response:
        """The answer to a request with ``headers``."""
        version = self.version()
        etag = f'"v{version}"'
        modified = float(EPOCH + version * max(self.period, 1.0))
        if not self.conditional:
            return Response(body=self._body(version))
        validators: tuple[tuple[str, str], ...] = (
            ("Last-Modified", formatdate(modified, usegmt=True)),
        )
        if self.etag:
            validators += (("ETag", etag),)
        match = headers.get("If-None-Match")
        if match is not None and self.etag:
            fresh = etag in (tag.strip() for tag in match.split(","))
        else:
            fresh = _modified_since(headers.get("If-Modified-Since"), modified)
        if fresh:
            return Response(status=304, content_type=None, headers=validators)
        return Response(body=self._body(version), headers=validators)

    def _body(self, version: int) -> bytes:
        anchors = "".join(f'<a href="{link}">{link}</a> ' for link in self.links)
        return (
            f"<!doctype html><title>version {version}</title>"
            f"<p>This is version {version} of the page.</p>{anchors}"
        ).encode()
