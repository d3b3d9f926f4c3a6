"""The robots gate: a host's robots.txt rules, from the store's cache or the network.

A cached copy younger than ``ROBOTS_TTL`` (24 h) is used as it is, also across resumed
runs; the robots job (trawl.crawl.host_jobs) caches only usable answers, never an
unavailable one. Otherwise
robots.txt is fetched, following at most ``MAX_ROBOTS_REDIRECTS`` redirects (to any
host, as RFC 9309 allows), and only the first ``MAX_ROBOTS_BYTES`` are parsed. What the
rules are for a response status (4xx allow all, 5xx unavailable) is decided in
trawl.politeness.robots_parser.
When the host itself gave no answer (its address refused, no such name, no
connection, a timeout, a failed TLS handshake) the answer says why, so that an
unreachable host is told from one whose robots.txt is unavailable; what to do in either
case (wait and retry, then fail or block its URLs) is decided in trawl.crawl.outcomes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from trawl.extract.urls import NormalizeRules, Rejection, normalize
from trawl.fetch.fetcher import Fetcher, FetchError
from trawl.politeness.robots_parser import (
    MAX_ROBOTS_BYTES,
    MAX_ROBOTS_REDIRECTS,
    ROBOTS_TTL,
    RobotsRules,
    robots_url,
    rules_for_response,
)
from trawl.store.protocols import HostRecords
from trawl.store.values import RobotsRecord

REDIRECTS = frozenset({301, 302, 303, 307, 308})
# One byte more than is parsed: a longer file then arrives longer than the limit, and
# parse_robots cuts it back to its last complete line instead of reading a cut-off rule
# ("Disallow: /private" cut to "Disallow: /") as if the file ended there.
_READ_BYTES = MAX_ROBOTS_BYTES + 1


@dataclass(frozen=True, slots=True)
class RobotsAnswer:
    """A host's robots.txt verdict. ``rules`` None means unavailable (5xx, no answer);
    ``failure`` says why the host itself gave no HTTP answer, if it gave none."""

    rules: RobotsRules | None
    record: RobotsRecord
    fetched: bool
    expires_in: float
    failure: FetchError | None = None

    @property
    def refused(self) -> bool:
        """The host's address is one trawl must not connect to."""
        return self.failure == FetchError.BLOCKED_ADDRESS


class RobotsGate:
    """Finds the robots.txt rules that apply to a host."""

    def __init__(
        self,
        store: HostRecords,
        fetcher: Fetcher,
        agent_token: str,
        url_rules: NormalizeRules,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._fetcher = fetcher
        self._agent = agent_token
        self._url_rules = url_rules
        self._wall_clock = wall_clock

    async def check(self, host_id: int, some_url: str) -> RobotsAnswer:
        """The rules for the host of ``some_url`` (any normalised URL on that host)."""
        now = self._wall_clock()
        record = await self._store.robots(host_id)
        fetched = record is None or now - record.fetched_at >= ROBOTS_TTL
        failure = None
        if record is None or fetched:
            record, failure = await self._fetch(robots_url(some_url))
        rules = (
            None
            if record.status is None
            else rules_for_response(record.status, record.body, self._agent)
        )
        expires_in = ROBOTS_TTL - (now - record.fetched_at)
        return RobotsAnswer(rules, record, fetched, expires_in, failure)

    async def fetch_rules(self, some_url: str) -> tuple[RobotsRules | None, FetchError | None]:
        """The rules of the host of ``some_url`` read from the network now, not from the
        store (the hosts a rendered page loads subresources from; trawl.render), None
        when robots.txt is unavailable; and why the host gave no answer, if it gave none."""
        record, failure = await self._fetch(robots_url(some_url))
        if record.status is None:
            return None, failure
        return rules_for_response(record.status, record.body, self._agent), None

    async def _fetch(self, target: str) -> tuple[RobotsRecord, FetchError | None]:
        """The robots.txt record, and why the host itself gave no HTTP answer (None when
        it answered; a redirect's target failing leaves robots.txt unavailable)."""
        first = True
        for _ in range(MAX_ROBOTS_REDIRECTS):
            result = await self._fetcher.fetch(target, max_body=_READ_BYTES)
            if first and result.error is not None:
                return RobotsRecord(None, b"", self._wall_clock()), result.error
            first = False
            if result.status not in REDIRECTS or not result.location:
                break
            following = normalize(result.location, target, self._url_rules)
            if isinstance(following, Rejection):
                break
            target = following
        else:
            result = await self._fetcher.fetch(target, max_body=_READ_BYTES)
        record = RobotsRecord(status=result.status, body=result.body, fetched_at=self._wall_clock())
        return record, None
