"""What a fetch's result and a robots.txt answer mean (trawl.crawl.outcomes), decided on
constructed values: no server, no store."""

from __future__ import annotations

import random

import pytest

from trawl.crawl.outcomes import (
    NOT_ASKED_PAUSE,
    Answer,
    FetchDecision,
    RobotsVerdict,
    Verdict,
    answer_kind,
    classify_fetch,
    classify_robots,
    follow_redirect,
)
from trawl.extract.links import LinkFilter
from trawl.extract.scope import Scope
from trawl.extract.urls import DEFAULT_RULES, url_hash
from trawl.fetch.fetcher import FetchError, FetchResult
from trawl.fetch.retry import RetryPolicy, retry_delay
from trawl.politeness.robots import RobotsAnswer
from trawl.politeness.robots_parser import parse_robots, rules_for_response
from trawl.store.values import Kind, QueuedURL, RobotsRecord

URL = "http://www.example.test/a"
NOW = 1_700_000_000.0
POLICY = RetryPolicy(base=1.0, cap=60.0, attempts=3)


def fetched(status: int | None = None, **fields: object) -> FetchResult:
    return FetchResult(URL, status, fetched_at=NOW, **fields)  # type: ignore[arg-type]


def decide(result: FetchResult, attempts: int = 1, seed: int = 7) -> FetchDecision:
    return classify_fetch(result, attempts, POLICY, random.Random(seed))


def queued(url: str = URL, redirect_hops: int = 0, **fields: object) -> QueuedURL:
    """A claimed URL at depth 2, never tried before."""
    return QueuedURL(url_hash(url), url, 1, 2, redirect_hops, 0, **fields)  # type: ignore[arg-type]


# -- fetch results ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 204, 301, 304, 404, 410])
def test_an_answer_is_recorded_and_closes_the_breaker(status: int) -> None:
    assert decide(fetched(status)) == FetchDecision(Verdict.ANSWERED)


def test_a_5xx_not_worth_retrying_is_an_answer_that_counts_against_the_breaker() -> None:
    assert decide(fetched(501)) == FetchDecision(Verdict.ANSWERED, breaker_failure=True)


def test_a_5xx_is_retried_after_the_backoff_then_fails_at_the_last_attempt() -> None:
    first = decide(fetched(500), attempts=1)
    expected = retry_delay(POLICY, 1, None, random.Random(7))
    assert first == FetchDecision(Verdict.RETRY, "http_500", expected, 0.0, True)
    assert 0.0 <= first.delay <= POLICY.base
    last = decide(fetched(500), attempts=POLICY.attempts)
    assert last == FetchDecision(Verdict.FAIL, "http_500", breaker_failure=True)


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_hold_the_whole_host_for_their_retry_after(status: int) -> None:
    decision = decide(fetched(status, retry_after="30"))
    assert decision.verdict is Verdict.RETRY
    assert decision.error == f"http_{status}"
    assert decision.delay >= 30.0
    assert decision.host_wait == decision.delay
    assert decision.breaker_failure is (status >= 500)


def test_retry_after_as_an_http_date_counts_from_the_response() -> None:
    decision = decide(fetched(503, retry_after="Tue, 14 Nov 2023 22:13:40 GMT"))
    assert decision.delay == pytest.approx(20.0, abs=1.0)  # NOW is 22:13:20 GMT


def test_retry_after_is_capped_by_the_policy() -> None:
    decision = decide(fetched(429, retry_after="86400"))
    assert decision.delay == POLICY.cap
    assert decision.host_wait == POLICY.cap


def test_an_unreadable_retry_after_leaves_the_backoff() -> None:
    decision = decide(fetched(429, retry_after="soon"))
    assert decision.delay == retry_delay(POLICY, 1, None, random.Random(7))


def test_a_retried_502_waits_but_does_not_hold_the_host() -> None:
    decision = decide(fetched(502, retry_after="30"))
    assert decision.verdict is Verdict.RETRY
    assert decision.delay >= 30.0
    assert decision.host_wait == 0.0


def test_a_429_after_the_last_attempt_fails_without_a_back_off() -> None:
    decision = decide(fetched(429, retry_after="30"), attempts=POLICY.attempts)
    assert decision == FetchDecision(Verdict.FAIL, "http_429")


@pytest.mark.parametrize(
    "error", [FetchError.TIMEOUT, FetchError.CONNECT, FetchError.CONNECTION_REFUSED,
              FetchError.DNS, FetchError.PROTOCOL],
)  # fmt: skip
def test_timeouts_and_connection_errors_are_retried_and_count_against_the_breaker(
    error: FetchError,
) -> None:
    decision = decide(fetched(error=error))
    assert (decision.verdict, decision.error) == (Verdict.RETRY, error.value)
    assert decision.breaker_failure
    assert decision.host_wait == 0.0
    last = decide(fetched(error=error), attempts=POLICY.attempts)
    assert last == FetchDecision(Verdict.FAIL, error.value, breaker_failure=True)


def test_a_failed_tls_handshake_fails_at_once_and_counts_against_the_breaker() -> None:
    decision = decide(fetched(error=FetchError.TLS))
    assert decision == FetchDecision(Verdict.FAIL, "tls", breaker_failure=True)


@pytest.mark.parametrize(
    "error", [FetchError.DECODE, FetchError.INVALID_URL, FetchError.BLOCKED_ADDRESS]
)
def test_errors_of_the_url_itself_fail_at_once_and_leave_the_breaker_closed(
    error: FetchError,
) -> None:
    assert decide(fetched(error=error)) == FetchDecision(Verdict.FAIL, error.value)


def test_the_policy_decides_which_statuses_are_retried() -> None:
    policy = RetryPolicy(attempts=3, statuses=frozenset({404}))
    decision = classify_fetch(fetched(404), 1, policy, random.Random(1))
    assert (decision.verdict, decision.error) == (Verdict.RETRY, "http_404")
    assert classify_fetch(fetched(503), 1, policy, random.Random(1)) == FetchDecision(
        Verdict.ANSWERED, breaker_failure=True
    )


# -- how an answer is read -------------------------------------------------------------


def test_a_200_is_a_page_or_a_sitemap() -> None:
    assert answer_kind(queued(), fetched(200)) is Answer.PAGE
    assert answer_kind(queued(kind=Kind.SITEMAP), fetched(200)) is Answer.SITEMAP


def test_a_redirect_needs_a_location() -> None:
    assert answer_kind(queued(), fetched(301, location="/b")) is Answer.REDIRECT
    assert answer_kind(queued(), fetched(302)) is Answer.OTHER


def test_a_304_confirms_only_a_conditional_fetch() -> None:
    conditional = queued(status=200, etag='"v1"', revisit_interval=3600.0, fetched_at=NOW)
    assert conditional.conditional
    assert answer_kind(conditional, fetched(304)) is Answer.NOT_MODIFIED
    assert answer_kind(queued(), fetched(304)) is Answer.OTHER


@pytest.mark.parametrize("status", [204, 404, 500])
def test_other_answers_are_recorded_not_read(status: int) -> None:
    assert answer_kind(queued(), fetched(status)) is Answer.OTHER


# -- redirects -------------------------------------------------------------------------


def links(seed: str = "http://www.example.test/") -> LinkFilter:
    return LinkFilter(Scope([seed]), DEFAULT_RULES, max_depth=5)


def test_a_redirect_in_scope_is_followed_with_the_redirecting_urls_authority() -> None:
    redirect = follow_redirect(queued(), "/b?x=1", DEFAULT_RULES, 3, links())
    target = "http://www.example.test/b?x=1"
    assert redirect.target == target
    assert redirect.counters == ("redirects",)
    assert redirect.follow is not None
    assert redirect.follow.url == target
    assert redirect.follow.id == url_hash(target)
    assert (redirect.follow.depth, redirect.follow.redirect_hops) == (2, 1)
    assert redirect.follow.origin == URL


def test_a_redirect_keeps_the_first_urls_authority_along_a_chain() -> None:
    second = queued("http://www.example.test/b", origin=URL, redirect_hops=1)
    redirect = follow_redirect(second, "/c", DEFAULT_RULES, 3, links())
    assert redirect.follow is not None
    assert (redirect.follow.origin, redirect.follow.redirect_hops) == (URL, 2)


def test_a_redirect_target_keeps_the_label_of_the_url_that_redirected() -> None:
    for label in ("book", None):
        redirect = follow_redirect(queued(label=label), "/b", DEFAULT_RULES, 3, links())
        assert redirect.follow is not None
        assert redirect.follow.label == label


def test_a_redirect_out_of_scope_is_recorded_not_followed() -> None:
    redirect = follow_redirect(queued(), "http://elsewhere.test/", DEFAULT_RULES, 3, links())
    assert redirect.target == "http://elsewhere.test/"
    assert redirect.counters == ("redirects", "off_scope")
    assert redirect.follow is None


def test_a_redirect_past_the_hop_limit_is_recorded_not_followed() -> None:
    url = queued(redirect_hops=3)
    redirect = follow_redirect(url, "/b", DEFAULT_RULES, 3, links())
    assert redirect.target == "http://www.example.test/b"
    assert redirect.counters == ("redirects", "redirect_limit")
    assert redirect.follow is None


def test_a_redirect_to_no_crawlable_url_records_the_location_as_sent() -> None:
    redirect = follow_redirect(queued(), "ftp://www.example.test/x", DEFAULT_RULES, 3, links())
    assert redirect.target == "ftp://www.example.test/x"
    assert redirect.counters == ("redirects", "invalid", "invalid:scheme")
    assert redirect.follow is None


# -- robots.txt ------------------------------------------------------------------------


def robots(
    status: int | None, body: bytes = b"", failure: FetchError | None = None
) -> RobotsAnswer:
    rules = None if status is None else rules_for_response(status, body, "trawl")
    return RobotsAnswer(rules, RobotsRecord(status, body, NOW), True, 86_400.0, failure)


def judge(answer: RobotsAnswer, failures: int = 0) -> tuple[RobotsVerdict, float, object]:
    decision = classify_robots(answer, failures, POLICY, random.Random(3))
    return decision.verdict, decision.seconds, decision.error


def test_usable_robots_rules_hold_for_their_time_to_live() -> None:
    answer = robots(200, b"User-agent: *\nDisallow: /private\n")
    assert answer.rules == parse_robots(b"User-agent: *\nDisallow: /private\n", "trawl")
    assert judge(answer) == (RobotsVerdict.RULES, 86_400.0, None)


def test_a_4xx_robots_txt_allows_everything() -> None:
    assert judge(robots(404))[0] is RobotsVerdict.RULES


@pytest.mark.parametrize(
    "answer", [robots(503), robots(None, failure=FetchError.TIMEOUT)], ids=["5xx", "timeout"]
)
def test_robots_txt_unavailable_or_unanswered_is_asked_for_again_while_tries_are_left(
    answer: RobotsAnswer,
) -> None:
    for failures in range(POLICY.attempts - 1):
        verdict, pause, error = judge(answer, failures)
        assert (verdict, error) == (RobotsVerdict.RETRY, None)
        assert pause == retry_delay(POLICY, failures + 1, None, random.Random(3))


def test_robots_txt_still_unavailable_after_the_last_try_disallows_all() -> None:
    last = POLICY.attempts - 1
    assert judge(robots(503), last) == (RobotsVerdict.UNAVAILABLE, POLICY.cap, None)
    # A protocol error is a broken answer, not an unreachable host.
    broken = robots(None, failure=FetchError.PROTOCOL)
    assert judge(broken, last) == (RobotsVerdict.UNAVAILABLE, POLICY.cap, None)


def test_robots_txt_not_asked_for_want_of_a_file_descriptor_is_no_try() -> None:
    # Even after the last try: nothing reached the host, so nothing is given up.
    answer = robots(None, failure=FetchError.FD_LIMIT)
    assert judge(answer, POLICY.attempts - 1) == (RobotsVerdict.NOT_ASKED, NOT_ASKED_PAUSE, None)


@pytest.mark.parametrize(
    "error", [FetchError.DNS, FetchError.CONNECT, FetchError.CONNECTION_REFUSED,
              FetchError.TIMEOUT, FetchError.TLS],
)  # fmt: skip
def test_a_host_that_never_answers_is_unreachable_after_the_last_try(error: FetchError) -> None:
    answer = robots(None, failure=error)
    assert judge(answer, POLICY.attempts - 1) == (RobotsVerdict.UNREACHABLE, POLICY.cap, error)


def test_a_refused_address_fails_the_host_at_once() -> None:
    answer = robots(None, failure=FetchError.BLOCKED_ADDRESS)
    assert answer.refused
    expected = (RobotsVerdict.REFUSED, POLICY.cap, FetchError.BLOCKED_ADDRESS)
    assert judge(answer) == expected
    assert judge(answer, POLICY.attempts - 1) == expected
