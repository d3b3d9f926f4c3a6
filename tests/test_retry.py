"""Retry policy validation, full-jitter backoff bounds and Retry-After handling."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from trawl.fetch.retry import RetryPolicy, backoff_delay, parse_retry_after, retry_delay

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": 0.0}, "base must be > 0"),
        ({"base": -1.0}, "base must be > 0"),
        ({"base": float("nan")}, "base must be > 0"),
        ({"base": 10.0, "cap": 5.0}, "cap .* must be >= base"),
        ({"attempts": 0}, "attempts must be >= 1"),
    ],
)
def test_policy_validation(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_policy_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.base, policy.cap, policy.attempts) == (1.0, 300.0, 5)
    assert policy.statuses == {429, 500, 502, 503, 504}
    assert RetryPolicy(base=2.0, cap=2.0, attempts=1).cap == 2.0


def _draws(policy: RetryPolicy, attempt: int, count: int = 2000) -> list[float]:
    rng = random.Random(attempt)
    return [backoff_delay(policy, attempt, rng) for _ in range(count)]


def test_backoff_stays_within_the_exponential_ceiling_and_the_cap() -> None:
    policy = RetryPolicy(base=0.5, cap=20.0)
    for attempt in range(1, 12):
        ceiling = min(policy.cap, policy.base * 2 ** (attempt - 1))
        draws = _draws(policy, attempt)
        assert all(0.0 <= d <= ceiling for d in draws)
        # Full jitter spreads over the whole range, not just near the ceiling.
        assert min(draws) < 0.1 * ceiling
        assert max(draws) > 0.9 * ceiling


def test_backoff_grows_with_attempt_until_the_cap() -> None:
    policy = RetryPolicy(base=1.0, cap=64.0)
    means = [statistics.fmean(_draws(policy, attempt)) for attempt in range(1, 10)]
    growing = means[:7]  # ceilings 1, 2, ..., 64
    assert all(later > 1.6 * earlier for earlier, later in itertools.pairwise(growing))
    assert all(abs(m - 32.0) < 3.0 for m in means[6:])  # capped: uniform(0, 64)


def test_backoff_is_reproducible_for_a_seed() -> None:
    policy = RetryPolicy()
    first = [backoff_delay(policy, 3, random.Random(7)) for _ in range(3)]
    assert first == [backoff_delay(policy, 3, random.Random(7)) for _ in range(3)]


def test_backoff_handles_huge_attempt_counts() -> None:
    policy = RetryPolicy(base=1.0, cap=300.0)
    assert 0.0 <= backoff_delay(policy, 100_000, random.Random(1)) <= 300.0


def test_backoff_rejects_attempt_zero() -> None:
    with pytest.raises(ValueError, match="attempt"):
        backoff_delay(RetryPolicy(), 0, random.Random(1))


def test_retry_after_is_a_lower_bound_on_the_delay() -> None:
    policy = RetryPolicy(base=1.0, cap=300.0)
    rng = random.Random(3)
    assert all(retry_delay(policy, 1, 120.0, rng) == 120.0 for _ in range(100))


def test_retry_after_never_pushes_the_delay_beyond_the_cap() -> None:
    policy = RetryPolicy(base=1.0, cap=60.0)
    rng = random.Random(3)
    assert retry_delay(policy, 1, 86_400.0, rng) == 60.0
    assert all(retry_delay(policy, 20, 86_400.0, rng) == 60.0 for _ in range(100))


def test_small_retry_after_does_not_shorten_the_backoff() -> None:
    policy = RetryPolicy(base=10.0, cap=300.0)
    with_header = [retry_delay(policy, 4, 0.0, random.Random(i)) for i in range(200)]
    without = [retry_delay(policy, 4, None, random.Random(i)) for i in range(200)]
    assert with_header == without
    assert all(0.0 <= d <= 80.0 for d in without)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("\t30\t", 30.0),
        ("Tue, 14 Nov 2023 22:14:20 GMT", 60.0),
        ("Tuesday, 14-Nov-23 22:14:20 GMT", 60.0),
        ("Tue Nov 14 22:14:20 2023", 60.0),
        ("Tue, 14 Nov 2023 22:13:19 GMT", 0.0),
        ("99999999999999999999999", 999_999_999_999.0),
    ],
)
def test_parse_retry_after_values(value: str, expected: float) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    "value",
    [
        "Tue, 31 Feb 2023 10:00:00 GMT",  # no such day
        "Tue, 14 Nov 2023 24:00:00 GMT",  # no such hour
        "Tue, 14 Nov 2023 22:14:20 UTC",  # HTTP-date is always "GMT"
        "Tue, 14 Nov 2023 22:14:20 +0000",
        "Tue, 14 Nov 23 22:14:20 GMT",  # two-digit year only in the RFC 850 form
        "Tue, 14 Nov 2023 22:14:20 GMT extra",
        "2023-11-14T22:14:20Z",
        "\uff11\uff12\uff10",  # FULLWIDTH DIGITS "120"
        "+120",
        "12 0",
    ],
)
def test_parse_retry_after_rejects(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


def test_rfc850_two_digit_year_more_than_50_years_ahead_is_in_the_past() -> None:
    # Seen in 2023: "94" would be 2094, more than 50 years ahead, so it is 1994 (past: 0);
    # "70" is 2070, within 50 years, so it is in the future.
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", NOW) == 0.0
    delay = parse_retry_after("Sunday, 06-Nov-70 08:49:37 GMT", NOW)
    assert delay is not None
    assert delay > 40 * 365 * 86_400
