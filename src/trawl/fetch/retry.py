"""When to try a failed fetch again: exponential backoff with full jitter, and Retry-After.

The delay after the n-th failed try is drawn uniformly from [0, min(cap, base * 2**(n-1))]
("full jitter"), which spreads retries from many workers instead of synchronising them. A
server's Retry-After (RFC 9110 10.2.3) is honoured as a lower bound but never beyond the
policy's cap, so one host cannot park a worker's slot for hours; the host scheduler keeps
the host ineligible for that long while the other hosts proceed.
"""

from __future__ import annotations

import calendar
import random
import re
import time
from dataclasses import dataclass

# Larger delay-seconds values are clamped: they only need to exceed any sane cap, and
# unbounded digit strings would make int() slow or float() overflow.
_MAX_DELAY_DIGITS = 12
_MAX_EXPONENT = 1000

_DELAY_SECONDS = re.compile(r"[0-9]+", re.ASCII)
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_MONTH_NUMBER = {name: number for number, name in enumerate(_MONTHS.split("|"), start=1)}
_TIME = r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
# RFC 9110 5.6.7: IMF-fixdate, then the obsolete RFC 850 and asctime forms. All are
# case-sensitive; IMF-fixdate and RFC 850 dates are in GMT, asctime is read as UTC.
_IMF_FIXDATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (?P<day>[0-9]{2}) "
    rf"(?P<month>{_MONTHS}) (?P<year>[0-9]{{4}}) {_TIME} GMT",
    re.ASCII,
)
_RFC850_DATE = re.compile(
    r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
    rf"(?P<day>[0-9]{{2}})-(?P<month>{_MONTHS})-(?P<year>[0-9]{{2}}) {_TIME} GMT",
    re.ASCII,
)
_ASCTIME_DATE = re.compile(
    rf"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<month>{_MONTHS}) (?P<day>[0-9]{{2}}| [0-9]) "
    rf"{_TIME} (?P<year>[0-9]{{4}})",
    re.ASCII,
)
_OWS = " \t"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a fetch.

    ``attempts`` counts every try including the first; ``statuses`` are the HTTP statuses
    worth retrying. Delays are in seconds.
    """

    base: float = 1.0
    cap: float = 300.0
    attempts: int = 5
    statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise ValueError(f"retry base must be > 0 seconds, got {self.base!r}")
        if not self.cap >= self.base:
            raise ValueError(f"retry cap ({self.cap!r}) must be >= base ({self.base!r})")
        if self.attempts < 1:
            raise ValueError(f"retry attempts must be >= 1 (the first try), got {self.attempts}")


def _check_attempt(attempt: int) -> None:
    if attempt < 1:
        raise ValueError(f"attempt counts failed tries and must be >= 1, got {attempt}")


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Full-jitter delay after ``attempt`` failed tries: uniform in [0, min(cap, base*2**(n-1))]."""
    _check_attempt(attempt)
    ceiling = min(policy.cap, policy.base * 2.0 ** min(attempt - 1, _MAX_EXPONENT))
    return rng.uniform(0.0, ceiling)


def retry_delay(
    policy: RetryPolicy, attempt: int, retry_after: float | None, rng: random.Random
) -> float:
    """Seconds to wait before the next try: the backoff, raised to Retry-After if larger.

    ``retry_after`` (from ``parse_retry_after``) is capped at ``policy.cap``: a server may
    slow trawl down, but not beyond the configured patience. The result is never above
    the cap.
    """
    delay = backoff_delay(policy, attempt, rng)
    if retry_after is None:
        return delay
    return max(delay, min(max(retry_after, 0.0), policy.cap))


def _two_digit_year(year: int, now: float) -> int:
    """RFC 9110 5.6.7: a two-digit year more than 50 years ahead is in the last century."""
    this_year = time.gmtime(now).tm_year
    full = this_year - this_year % 100 + year
    return full - 100 if full > this_year + 50 else full


def _http_date(value: str, now: float) -> float | None:
    """The UNIX time of an HTTP-date in any of its three forms, or None if invalid."""
    match = _IMF_FIXDATE.fullmatch(value) or _ASCTIME_DATE.fullmatch(value)
    year: int
    if match:
        year = int(match["year"])
    else:
        match = _RFC850_DATE.fullmatch(value)
        if not match:
            return None
        year = _two_digit_year(int(match["year"]), now)
    month = _MONTH_NUMBER[match["month"]]
    day = int(match["day"])
    hour, minute, second = int(match["hour"]), int(match["minute"]), int(match["second"])
    if not (
        year >= 1
        and 1 <= day <= calendar.monthrange(year, month)[1]
        and hour <= 23
        and minute <= 59
        and second <= 60
    ):
        return None
    return float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait according to a Retry-After field value, or None if it is invalid.

    ``value`` is delay-seconds (1*DIGIT) or an HTTP-date, with surrounding whitespace
    allowed; ``now`` is the UNIX time the response arrived. A date in the past gives 0.
    Parsing is strict (RFC 9110 grammar, case-sensitive dates): a value trawl cannot read
    is ignored rather than guessed.
    """
    text = value.strip(_OWS)
    if _DELAY_SECONDS.fullmatch(text):
        digits = text.lstrip("0") or "0"
        if len(digits) > _MAX_DELAY_DIGITS:
            digits = "9" * _MAX_DELAY_DIGITS
        return float(int(digits))
    when = _http_date(text, now)
    if when is None:
        return None
    return max(0.0, when - now)
