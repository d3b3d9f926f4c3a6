"""What the world server's access log says: politeness, the server's own lateness, and
whether trawl's store agrees with what was served.

Politeness is read per host from the log alone, with the server's clocks. The server
takes a request's start when its first byte arrives (after trawl sent it) and its end
just before writing the response (before trawl reads it), so a gap the log shows between
a response and the host's next request is never shorter than the gap trawl kept: a gap
shorter than the rule here is a real violation, never an artefact. The rules: never two
requests of one host in flight, and after each response a rest of at least the crawl's
delay, the host's robots.txt Crawl-delay once trawl has read it, and the Retry-After of a
429 or 503. (One exception: a request the client abandoned ends in the log when the
server saw the connection close, after the client closed it, so the gap after it gets
`ABANDON_SLACK` of tolerance.)
"""

from __future__ import annotations

import itertools
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.world_map import GroundTruth, Host, World
from bench.world_server import ABANDONED, RETRY_AFTER
from trawl.config import Timeouts

__all__ = [
    "Audit", "Request", "StoredURL", "Violation", "audit_store", "max_inflight_by", "parse",
    "percentile", "politeness", "read_store",
]  # fmt: skip

ROBOTS = "/robots.txt"
ABANDON_SLACK = 0.01
"""Seconds a gap after an abandoned request may fall short: its logged end is when the
server saw the client close, a little after the client did."""
TIMEOUT = "timeout"
"""The error of a URL trawl gave up on in time: a 200 the server wrote as it did (a slow
page, a loaded machine) is recorded as that and queued again, so it is not unrecorded."""
DONE = 2
"""trawl's state of a URL fetched for good (trawl.store.values.State.DONE)."""
LATE_ANSWER = Timeouts().total - 1.0
"""Seconds after which an answer may land after trawl's fetch timeout fired (its clock
starts before the request is sent, the server's when it arrives): such a page, fetched
again, was served twice and read once."""


@dataclass(frozen=True, slots=True)
class Request:
    """One logged request; times are CLOCK_MONOTONIC nanoseconds."""

    host: str
    target: str
    status: int
    start: int
    end: int
    drawn_us: int
    local: str
    connection: str

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def lateness_ms(self) -> float:
        """How much longer than its drawn latency the server took to answer."""
        return (self.end - self.start) / 1e6 - self.drawn_us / 1e3


def parse(lines: Iterable[str]) -> list[Request]:
    """Requests of complete log lines; a malformed line is an error, never skipped."""
    requests = []
    for line in lines:
        if line.strip():
            host, target, status, start, end, drawn, local, connection = line.split()
            requests.append(
                Request(host, target, int(status), int(start), int(end), int(drawn), local,
                        connection)
            )  # fmt: skip
    return requests


@dataclass(frozen=True, slots=True)
class Violation:
    """A request of ``host`` that came too soon after the one before it."""

    host: str
    kind: str
    """``overlap`` (two in flight) or ``gap`` (rest too short)."""
    gap: float
    required: float
    after_status: int

    def line(self) -> str:
        return (
            f"{self.host}: {self.kind}, {self.gap:.3f} s after a {self.after_status} "
            f"(at least {self.required:g} s)"
        )


def politeness(requests: Sequence[Request], world: World, delay: float) -> list[Violation]:
    """Every breach of the politeness rules (module doc) in the log."""
    by_host: defaultdict[str, list[Request]] = defaultdict(list)
    for request in requests:
        by_host[request.host].append(request)
    violations = []
    for name, host_requests in by_host.items():
        index = world.index_of(name)
        crawl_delay = 0 if index is None else world.host(index).crawl_delay
        host_requests.sort(key=lambda r: r.start)
        robots_read = None
        for before, after in itertools.pairwise(host_requests):
            if before.path == ROBOTS and robots_read is None:
                robots_read = before.end
            required = delay
            if robots_read is not None and before.start > robots_read:
                required = max(required, crawl_delay)
            required = max(required, RETRY_AFTER.get(before.status, 0))
            if before.status == ABANDONED:
                required -= ABANDON_SLACK
            gap = (after.start - before.end) / 1e9
            if after.start < before.end:
                violations.append(Violation(name, "overlap", gap, required, before.status))
            elif gap < required:
                violations.append(Violation(name, "gap", gap, required, before.status))
    return violations


def max_inflight_by(requests: Iterable[Request], key: Callable[[Request], str]) -> dict[str, int]:
    """The most requests in flight at once for each value of ``key`` (a sweep; at equal
    times an end comes before a start)."""
    events: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
    for request in requests:
        events[key(request)] += [(request.start, 1), (request.end, -1)]
    peaks = {}
    for name, name_events in events.items():
        current = peak = 0
        for _, step in sorted(name_events):
            current += step
            peak = max(peak, current)
        peaks[name] = peak
    return peaks


def percentile(values: Sequence[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (nearest rank; 0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


StoredURL = tuple[int, int | None, str | None]
"""A URL's state, status and error as trawl's store holds them."""


def read_store(data_dir: Path) -> dict[str, StoredURL]:
    """trawl's URLs with their state, status and error, read from its SQLite store."""
    with sqlite3.connect(f"file:{data_dir / 'crawl.db'}?mode=ro", uri=True) as db:
        return {url: (state, status, error) for url, state, status, error in db.execute(
            "SELECT url, state, status, error FROM urls"
        )}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Audit:
    """The crawl as the log and the store tell it, against the ground truth."""

    missing: int
    """Ground-truth URLs trawl did not fetch (a complete crawl only)."""
    unexpected: int
    """URLs trawl fetched that the ground truth does not."""
    discovered_diff: int
    """URLs in trawl's store but not in the ground truth's discovered set, and the other
    way round (a complete crawl only)."""
    duplicate_200s: int
    """200s served for a page beyond the first, but for those after an answer at trawl's
    timeout (``late_repeats``)."""
    late_repeats: int
    """200s served for a page again after an answer that took ``LATE_ANSWER`` or more."""
    unrecorded_200s: int
    """Pages served with 200 before trawl was stopped that trawl's store lacks."""
    disallowed_requests: int
    """Requests for paths robots.txt disallows."""
    flaky_recovered: int
    flaky_reached: int
    examples: tuple[str, ...]

    def problems(self, complete: bool) -> list[str]:
        found = []
        if complete and (self.missing or self.unexpected or self.discovered_diff):
            found.append(
                f"store differs from the ground truth: {self.missing} missing, "
                f"{self.unexpected} unexpected fetches, {self.discovered_diff} URLs discovered "
                "differently"
            )
        if self.duplicate_200s:
            found.append(f"{self.duplicate_200s} pages served with 200 more than once")
        if self.unrecorded_200s:
            found.append(f"{self.unrecorded_200s} pages served with 200 missing from the store")
        if self.disallowed_requests:
            found.append(f"{self.disallowed_requests} requests for robots-disallowed paths")
        return found


def _page_url(world: World, request: Request) -> tuple[Host, str] | None:
    index = world.index_of(request.host)
    if index is None:
        return None
    host = world.host(index)
    if host.page_of(request.path) is None:
        return None
    return host, host.root + request.path


def audit_store(
    world: World,
    truth: GroundTruth,
    requests: Sequence[Request],
    store: dict[str, StoredURL],
    stopped_ns: int | None,
) -> Audit:
    """Compare the store with the log and, when the crawl was not stopped (``stopped_ns``
    None, the monotonic time trawl was sent SIGINT otherwise), with the ground truth.
    A 200 written after trawl was stopped may never have been read, so it is excused."""
    latest_served: dict[str, Request] = {}
    unrecorded = disallowed = duplicates = late_repeats = 0
    examples: list[str] = []
    for request in requests:
        if request.path == "/private/":
            disallowed += 1
        found = _page_url(world, request) if request.status == 200 else None
        if found is None:
            continue
        url = found[1]
        earlier = latest_served.get(url)
        if earlier is not None:
            took = (earlier.end - earlier.start) / 1e9
            if took >= LATE_ANSWER:
                late_repeats += 1
            else:
                duplicates += 1
                examples.append(f"served twice: {url} (the first answer took {took:.2f} s)")
        latest_served[url] = request
        state, _, error = store.get(url, (None, None, None))
        # Given up just as the answer came (a loaded machine, a slow page): the URL is
        # recorded as a timeout and queued again, not lost.
        if state != DONE and error != TIMEOUT and (stopped_ns is None or request.end < stopped_ns):
            unrecorded += 1
            examples.append(f"served, not recorded: {url}")
    fetched = {url for url, (state, status, _) in store.items() if state == DONE and status == 200}
    flaky_recovered = 0
    expected_fetched, expected_discovered = set(truth.fetched), set(truth.discovered)
    for name, beyond in truth.flaky.items():
        index = world.index_of(name)
        assert index is not None
        home = world.host(index).url(0)
        if home in fetched:
            flaky_recovered += 1
        else:
            expected_fetched -= {*beyond, home}
            expected_discovered -= beyond
    unexpected = fetched - expected_fetched
    missing = expected_fetched - fetched if stopped_ns is None else set()
    discovered_diff = set(store) ^ expected_discovered if stopped_ns is None else set()
    examples += [f"missing: {url}" for url in sorted(missing)[:5]]
    examples += [f"unexpected: {url}" for url in sorted(unexpected)[:5]]
    examples += [f"discovered differently: {url}" for url in sorted(discovered_diff)[:5]]
    return Audit(
        missing=len(missing),
        unexpected=len(unexpected),
        discovered_diff=len(discovered_diff),
        duplicate_200s=duplicates,
        late_repeats=late_repeats,
        unrecorded_200s=unrecorded,
        disallowed_requests=disallowed,
        flaky_recovered=flaky_recovered,
        flaky_reached=len(truth.flaky),
        examples=tuple(examples[:15]),
    )
