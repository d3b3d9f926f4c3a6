"""Seed URLs as people type them, checked before a crawl creates or changes anything.

A seed that cannot be crawled is one line that says why and, where it can guess, what
was meant: ``example.com`` gets ``did you mean https://example.com/?``, and one quoted
argument holding two URLs is refused instead of being crawled as a single URL with
``%20`` in its path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trawl.errors import UsageError
from trawl.extract.urls import DEFAULT_RULES, NormalizeRules, Rejection, normalize

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:(?!\d)", re.IGNORECASE)
"""A URL scheme at the start (``host:port`` is not one)."""
_REASONS = {
    Rejection.UNPARSABLE: "is not a URL",
    Rejection.SCHEME: "is not an http(s) URL: trawl crawls http:// and https:// only",
    Rejection.NO_HOST: "has no host",
    Rejection.TOO_LONG: "is too long",
    Rejection.CREDENTIALS: "holds a user name or password",
    Rejection.BAD_PORT: "has a port outside 1-65535",
    Rejection.BAD_HOST: "has no valid host name",
    Rejection.DEEP_PATH: "has too many path segments",
    Rejection.REPEATED_PATH: "repeats a path segment too often",
}


def check_seeds(seeds: Iterable[str], rules: NormalizeRules = DEFAULT_RULES) -> None:
    """Raise `UsageError` for the first seed that cannot be crawled under ``rules``."""
    for seed in seeds:
        problem = seed_problem(seed, rules)
        if problem is not None:
            raise UsageError(f"seed {seed!r} {problem}")


def seed_problem(seed: str, rules: NormalizeRules = DEFAULT_RULES) -> str | None:
    """What is wrong with ``seed`` (to follow ``seed 'X'``), or None if it is crawlable."""
    text = seed.strip()
    if not text:
        return "is empty"
    if any(char.isspace() for char in text):
        return "holds whitespace: pass each seed URL as an argument of its own"
    if "://" not in text and _SCHEME.match(text) is None:
        guess = text.lstrip("/")
        if "/" not in guess:
            guess += "/"
        return f"has no scheme: did you mean https://{guess}?"
    url = normalize(text, None, rules)
    return _REASONS[url] if isinstance(url, Rejection) else None
