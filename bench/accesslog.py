"""The servers' access log, and the correctness figures the benchmark reads from it.

Both servers write one line per request: ``$host $request_uri $status $msec
$request_time`` (nginx's variables; the built-in server writes the same fields). The end of
a request is ``msec`` and its start ``msec - request_time``, both from one clock, so two
requests to one host overlap when one starts strictly before the other ends.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from bench.site import TRACKING_PARAMS
from trawl.extract.soft404 import PROBE_PREFIX

__all__ = [
    "LogRecord",
    "canonical_url",
    "duplicate_gets",
    "max_inflight_per_host",
    "page_requests",
    "parse_log",
]

ROBOTS_PATH = "/robots.txt"
_END, _POINT, _START = 0, 1, 2
"""Sweep event kinds, in their order at equal times."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One request as the server logged it; times in seconds since the epoch."""

    host: str
    uri: str
    status: int
    end: float
    duration: float

    @property
    def start(self) -> float:
        return self.end - self.duration


def parse_log(text: str) -> list[LogRecord]:
    """Records of every complete line; a malformed line is an error, never skipped."""
    records = []
    for line in text.splitlines():
        if not line:
            continue
        host, uri, status, end, duration = line.split(" ")
        records.append(LogRecord(host, uri, int(status), float(end), float(duration)))
    return records


def canonical_url(host: str, uri: str, port: int) -> str:
    """The request in ground-truth spelling: tracking parameters dropped, the rest sorted.

    The site's paths need no escaping and its only query parameters are tracking ones, so
    this is enough to tell every spelling of one page apart from any other page.
    """
    parts = urlsplit(uri)
    kept = sorted(
        piece
        for piece in parts.query.split("&")
        if piece and piece.split("=", 1)[0].lower() not in TRACKING_PARAMS
    )
    query = "?" + "&".join(kept) if kept else ""
    return f"http://{host.lower().removesuffix('.')}:{port}{parts.path}{query}"


def page_requests(records: Iterable[LogRecord], port: int) -> Counter[str]:
    """Requests per page URL in ground-truth spelling, robots.txt and trawl's soft-404
    probe left out."""
    return Counter(
        canonical_url(r.host, r.uri, port)
        for r in records
        if urlsplit(r.uri).path != ROBOTS_PATH and not r.uri.startswith(PROBE_PREFIX)
    )


def duplicate_gets(requests: Mapping[str, int]) -> int:
    """Requests beyond the first for each URL."""
    return sum(n - 1 for n in requests.values() if n > 1)


def max_inflight_per_host(records: Iterable[LogRecord]) -> dict[str, int]:
    """The most requests each host had in flight at once, robots.txt included.

    A sweep over the start and end of every request. Two requests overlap when one starts
    strictly before the other ends: at equal times ends come first, so back-to-back
    requests on one connection do not count. A request logged with zero duration (shorter
    than the log's resolution, 1 ms for nginx) is in flight at its instant only, so it adds
    to requests spanning that instant but not to others logged at the same instant: an
    overlap shorter than the resolution is not seen, and none is invented.
    """
    events: defaultdict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in records:
        if r.end > r.start:
            events[r.host] += [(r.start, _START), (r.end, _END)]
        else:
            events[r.host].append((r.end, _POINT))
    peaks = {}
    for host, host_events in events.items():
        current = peak = 0
        for _, kind in sorted(host_events):
            if kind == _POINT:
                peak = max(peak, current + 1)
                continue
            current += 1 if kind == _START else -1
            peak = max(peak, current)
        peaks[host] = peak
    return peaks
