"""What a fetch's result means, for the URL and for its host.

For the URL: record the answer, queue the URL again after a delay, fail it, or follow
its redirect. For the host: a back-off (a 429 or 503 holds the whole host for the
retry delay), and whether the request counts against the host's circuit breaker
(trawl.politeness.scheduler). For a host's robots.txt answer: obey its rules, ask
again, or hold the host's URLs back (unavailable) or fail them (unreachable, refused).

Every function here decides on the values it is given and returns a frozen decision:
no network, no store, no clock. The page and host jobs (trawl.crawl.page_job,
trawl.crawl.host_jobs) apply the decisions.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from trawl.extract.links import LinkFilter
from trawl.extract.urls import NormalizeRules, Rejection, normalize
from trawl.fetch.fetcher import RETRYABLE_ERRORS, FetchError, FetchResult
from trawl.fetch.retry import RetryPolicy, parse_retry_after, retry_delay
from trawl.freshness.recrawl import NOT_MODIFIED
from trawl.politeness.robots import RobotsAnswer
from trawl.store.values import CommitBatch, Kind, NewURL, QueuedURL

BREAKER_ERRORS = frozenset(
    {
        FetchError.TIMEOUT, FetchError.CONNECT, FetchError.CONNECTION_REFUSED, FetchError.DNS,
        FetchError.TLS, FetchError.PROTOCOL,
    }
)  # fmt: skip
"""Fetch errors that count against a host's circuit breaker (as 5xx answers do). A proxy's
failure (``proxy_error``) does not: it says nothing of the host, and a proxy that is
down must not pause or give up every host behind it."""
UNREACHABLE_ERRORS = frozenset(
    {
        FetchError.DNS, FetchError.CONNECT, FetchError.CONNECTION_REFUSED, FetchError.TIMEOUT,
        FetchError.TLS, FetchError.PROXY,
    }
)  # fmt: skip
"""robots.txt fetch errors that mean the host itself cannot be reached (no such name, no
connection, no answer in time, a failed TLS handshake) or, through a proxy, the proxy
failing: after the last attempt its URLs fail with that error class, counted as failed,
instead of being held back as if robots.txt disallowed them (a 5xx or a broken answer
still does, as RFC 9309 says)."""
NOT_ASKED_PAUSE = 1.0
"""Seconds a host whose robots.txt got no connection (no file descriptor) waits."""
BACK_OFF_STATUSES = frozenset({429, 503})
"""Statuses that hold the whole host, not just the URL, for the retry delay."""


class Verdict(enum.Enum):
    """What becomes of a fetched URL."""

    RETRY = "retry"
    """Queue it again, due after the decision's ``delay``."""
    FAIL = "fail"
    """Record it as failed: no usable answer, and no try left or none worth making."""
    ANSWERED = "answered"
    """Record the answer (:func:`answer_kind` says how it is read)."""


@dataclass(frozen=True, slots=True)
class FetchDecision:
    """What one fetch's result means for its URL and its host."""

    verdict: Verdict
    error: str | None = None
    """The error class recorded for a retry or a failure (``http_<status>`` for an
    answer with a status worth retrying)."""
    delay: float = 0.0
    """Seconds until a retried URL is due again."""
    host_wait: float = 0.0
    """Seconds the whole host waits before its next request (a 429 or 503 retried)."""
    breaker_failure: bool = False
    """The request counts as a failure against the host's circuit breaker (a timeout,
    a connection error, a 5xx); any other result closes the breaker."""


def classify_fetch(
    result: FetchResult, attempts: int, policy: RetryPolicy, rng: random.Random
) -> FetchDecision:
    """The decision on ``result``, the ``attempts``-th try at its URL.

    A fetch error in ``RETRYABLE_ERRORS`` or a status in ``policy.statuses`` is retried
    while tries are left, after `retry_delay` (raised to the response's Retry-After,
    within the policy's cap), and failed after the last; any other fetch error fails at
    once; any other status is an answer.
    """
    status = result.status
    retryable = result.error in RETRYABLE_ERRORS or (
        status is not None and status in policy.statuses
    )
    failing = (status or 0) >= 500 or result.error in BREAKER_ERRORS
    error = str(result.error) if result.error else f"http_{status}"
    if retryable and attempts < policy.attempts:
        after = None
        if result.retry_after is not None:
            after = parse_retry_after(result.retry_after, result.fetched_at)
        delay = retry_delay(policy, attempts, after, rng)
        host_wait = delay if status in BACK_OFF_STATUSES else 0.0
        return FetchDecision(Verdict.RETRY, error, delay, host_wait, failing)
    if status is None or retryable:
        return FetchDecision(Verdict.FAIL, error, breaker_failure=failing)
    return FetchDecision(Verdict.ANSWERED, breaker_failure=failing)


class Answer(enum.Enum):
    """How an answered URL is read."""

    NOT_MODIFIED = "not_modified"
    """A 304 to a conditional GET: the stored answer stands."""
    REDIRECT = "redirect"
    """A 3xx with a Location: the target may be followed (:func:`follow_redirect`)."""
    SITEMAP = "sitemap"
    """A 200 for a sitemap: its entries are read."""
    PAGE = "page"
    """A 200 for a page: its links and text are extracted, unless it is a soft 404."""
    OTHER = "other"
    """Any other answer (a 4xx, a 304 nobody asked for): recorded, not read."""


def answer_kind(url: QueuedURL, result: FetchResult) -> Answer:
    """How the answer ``result`` to a fetch of ``url`` is read."""
    status = result.status or 0
    if status == NOT_MODIFIED and url.conditional:
        return Answer.NOT_MODIFIED
    if 300 <= status < 400 and result.location:
        return Answer.REDIRECT
    if status == 200:
        return Answer.SITEMAP if url.kind == Kind.SITEMAP else Answer.PAGE
    return Answer.OTHER


@dataclass(frozen=True, slots=True)
class Redirect:
    """What a redirect leads to."""

    target: str
    """Recorded as the URL's redirect: the normalised target, or the Location as sent
    when it is no crawlable URL."""
    counters: tuple[str, ...]
    """The counters it bumps, once each."""
    follow: NewURL | None
    """The target to queue (in scope, within the hop limit), carrying the authority and
    the label of the URL that redirected; None when it is not followed."""


def follow_redirect(
    url: QueuedURL, location: str, rules: NormalizeRules, max_redirects: int, links: LinkFilter
) -> Redirect:
    """The decision on ``url`` redirecting to ``location``: the target is followed when
    it is a valid URL, within ``max_redirects`` hops of the first, and through the URL
    filter ``links`` (scope, include/exclude) at the redirecting URL's depth."""
    hops = url.redirect_hops + 1
    target = normalize(location, url.url, rules)
    if isinstance(target, Rejection):
        return Redirect(location, ("redirects", "invalid", f"invalid:{target.value}"), None)
    if hops > max_redirects:
        return Redirect(target, ("redirects", "redirect_limit"), None)
    dropped = CommitBatch()
    candidate = links.candidate(target, None, url.depth, dropped, hops)
    counters = ("redirects", *(name for name, n in dropped.counters.items() for _ in range(n)))
    if candidate is None:
        return Redirect(target, counters, None)
    return Redirect(
        target, counters, candidate._replace(origin=url.origin or url.url, label=url.label)
    )


class RobotsVerdict(enum.Enum):
    """What a host's robots.txt answer means for the host."""

    RULES = "rules"
    """Usable rules: obey them until they expire."""
    RETRY = "retry"
    """Unavailable or no answer, tries left: the host pauses, then asks again."""
    UNAVAILABLE = "unavailable"
    """Still unavailable (a 5xx, a broken answer) after the last try: every URL of the
    host is blocked, as if robots.txt disallowed it all (RFC 9309)."""
    UNREACHABLE = "unreachable"
    """No answer at all after the last try: the host's URLs fail with the error."""
    REFUSED = "refused"
    """The host's address is one trawl must not connect to: its URLs fail with that."""
    NOT_ASKED = "not_asked"
    """No connection could be opened (no file descriptor left): the host was not asked,
    and asks again after a short pause without counting a try."""


@dataclass(frozen=True, slots=True)
class RobotsDecision:
    """What a host's robots.txt answer means."""

    verdict: RobotsVerdict
    seconds: float
    """How long the verdict holds: the rules' time to live, the pause before the next
    try, or (unavailable, unreachable, refused) the retry cap, after which robots.txt
    is asked for anew."""
    error: FetchError | None = None
    """The error the host's URLs fail with (unreachable, refused)."""


def classify_robots(
    answer: RobotsAnswer, failures: int, policy: RetryPolicy, rng: random.Random
) -> RobotsDecision:
    """The decision on a robots.txt answer after ``failures`` failed tries before it."""
    if answer.refused:
        return RobotsDecision(RobotsVerdict.REFUSED, policy.cap, FetchError.BLOCKED_ADDRESS)
    if answer.failure is FetchError.FD_LIMIT:
        return RobotsDecision(RobotsVerdict.NOT_ASKED, NOT_ASKED_PAUSE)
    if answer.rules is not None:
        return RobotsDecision(RobotsVerdict.RULES, answer.expires_in)
    if failures + 1 < policy.attempts:
        return RobotsDecision(RobotsVerdict.RETRY, retry_delay(policy, failures + 1, None, rng))
    if answer.failure in UNREACHABLE_ERRORS:
        return RobotsDecision(RobotsVerdict.UNREACHABLE, policy.cap, answer.failure)
    return RobotsDecision(RobotsVerdict.UNAVAILABLE, policy.cap)
