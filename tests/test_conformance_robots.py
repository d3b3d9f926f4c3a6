"""robots.txt conformance: RFC 9309 examples and Google's reference parser tests.

Every RFC 9309 case and every Google case not marked ``google_specific`` must pass. The
Google-specific cases all run too; those where trawl deliberately follows RFC 9309 instead
of Google are listed in ``DELIBERATE_DIFFERENCES`` with the reason, and the test asserts
that this list is exactly the failing set, so it cannot go stale in either direction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trawl.politeness.robots_parser import (
    ALLOW_ALL,
    MAX_ROBOTS_BYTES,
    RobotsRules,
    parse_robots,
    rules_for_response,
)

DATA = Path(__file__).parent / "data" / "conformance"


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return loaded


GOOGLE: list[dict[str, Any]] = _load("robots_google.json")["cases"]
RFC = _load("robots_rfc9309.json")
RFC_CASES: list[dict[str, Any]] = RFC["cases"]

_RAW_URL = (
    "trawl percent-encodes the URL before matching (RFC 9309 2.2.2), so the raw non-ASCII "
    "URL matches the allow rule."
)
DELIBERATE_DIFFERENCES: dict[str, str] = {
    "ID_Encoding#3": _RAW_URL,
    "ID_Encoding#5": _RAW_URL,
    "ID_Encoding#6": (
        "RFC 9309 2.2.2 figure 4: %62%61%7A encodes unreserved octets and normalises to "
        "'baz', so the allow rule matches /foo/bar/baz."
    ),
    "GoogleOnly_IndexHTMLisDirectory#1": (
        "Not in RFC 9309: 'Allow: /d/index.html' does not allow '/d/', which may serve "
        "different content."
    ),
    "GoogleOnly_LineTooLong#2": (
        "trawl does not cut lines at 16664 bytes; only the 500 KiB file limit applies, so "
        "the full pattern is longer than this URL and does not match it."
    ),
    "GoogleOnly_LineTooLong#5": (
        "trawl does not cut lines at 16664 bytes; the full allow pattern is longer than "
        "this URL and does not match it."
    ),
}


def _verdict(case: dict[str, Any]) -> bool:
    rules = parse_robots(case["robots_txt"].encode("utf-8"), case["user_agent"])
    return rules.allowed(case["url"])


@pytest.mark.parametrize(
    "case", RFC_CASES, ids=[f"{c['name']}#{i}" for i, c in enumerate(RFC_CASES)]
)
def test_rfc9309_case(case: dict[str, Any]) -> None:
    assert _verdict(case) is case["allowed"], case["basis"]


GOOGLE_GENERAL = [c for c in GOOGLE if not c["google_specific"]]


@pytest.mark.parametrize("case", GOOGLE_GENERAL, ids=[c["id"] for c in GOOGLE_GENERAL])
def test_google_case(case: dict[str, Any]) -> None:
    assert _verdict(case) is case["allowed"]


def test_google_specific_cases_differ_only_where_documented() -> None:
    specific = [c for c in GOOGLE if c["google_specific"]]
    failing = {c["id"] for c in specific if _verdict(c) is not c["allowed"]}
    passed = len(specific) - len(failing)
    print(f"Google-specific robots.txt cases: {passed}/{len(specific)} agree with Google")
    assert failing == set(DELIBERATE_DIFFERENCES)


def _fig4_path(notation: str) -> str:
    """Figure 4 writes raw UTF-8 as "U+E38384" (the octets); turn it into the character."""
    head, mark, octets = notation.partition("U+")
    return head + bytes.fromhex(octets).decode("utf-8") if mark else notation


@pytest.mark.parametrize(
    "row", RFC["percent_encoding_table_fig4"], ids=lambda row: str(row["path"])
)
def test_fig4_percent_encoding_equivalence(row: dict[str, str]) -> None:
    # A rule written in any of the three forms matches a URL in any of them, and its
    # length for longest match is that of the normalised form.
    forms = {_fig4_path(row["path"]), row["encoded_path"], row["path_to_match"]}
    for pattern in forms:
        body = f"user-agent: *\ndisallow: /\nallow: {pattern}$\n".encode()
        rules = parse_robots(body, "trawl")
        for url_path in forms:
            assert rules.allowed(f"https://www.example.com{url_path}"), (pattern, url_path)


@pytest.mark.parametrize(
    "row", RFC["percent_encoding_table_fig4"], ids=lambda row: str(row["path"])
)
def test_fig4_rule_length_is_counted_after_normalisation(row: dict[str, str]) -> None:
    # "/" followed by stars matches every path and is as long as written: a tie with the
    # allow rule lets it through, one octet more makes the disallow rule win.
    size = len(row["path_to_match"])
    url = f"https://www.example.com{row['encoded_path']}"
    for disallow_size, expected in ((size, True), (size + 1, False)):
        disallow = "/" + "*" * (disallow_size - 1)
        body = f"user-agent: *\nallow: {_fig4_path(row['path'])}\ndisallow: {disallow}\n"
        assert parse_robots(body.encode(), "trawl").allowed(url) is expected, disallow_size


def test_behaviour_4xx_means_no_restrictions() -> None:
    body = b"user-agent: *\ndisallow: /\n"
    for status in (400, 401, 403, 404, 410, 451, 499):
        assert rules_for_response(status, body, "trawl") is ALLOW_ALL


def test_behaviour_5xx_means_unreachable() -> None:
    for status in (500, 502, 503, 504, 599):
        assert rules_for_response(status, b"", "trawl") is None


def test_behaviour_2xx_parses_the_body() -> None:
    rules = rules_for_response(200, b"user-agent: *\ndisallow: /private\n", "trawl")
    assert isinstance(rules, RobotsRules)
    assert not rules.allowed("https://www.example.com/private/x")
    assert rules.allowed("https://www.example.com/public")


def test_behaviour_rule_after_500_kib_is_ignored() -> None:
    head = b"user-agent: *\ndisallow: /early\n"
    filler = b"# padding\n" * ((MAX_ROBOTS_BYTES - len(head)) // 10)
    body = head + filler + b"disallow: /late\n"
    assert len(head + filler) <= MAX_ROBOTS_BYTES < len(body)
    rules = rules_for_response(200, body, "trawl")
    assert rules is not None
    assert not rules.allowed("https://www.example.com/early")
    assert rules.allowed("https://www.example.com/late")
    # The same rule just inside the limit is used.
    inside = parse_robots(head + b"disallow: /late\n" + filler, "trawl")
    assert not inside.allowed("https://www.example.com/late")


def test_behaviour_line_cut_by_the_limit_is_dropped() -> None:
    # "allow: /public-page" cut to "allow: /" would tie with "disallow: /" and allow all.
    prefix = b"user-agent: *\ndisallow: /\n"
    padding = b"#" * (MAX_ROBOTS_BYTES - len(prefix) - len(b"\nallow: /")) + b"\n"
    body = prefix + padding + b"allow: /public-page\n"
    assert len(prefix + padding) + len(b"allow: /") == MAX_ROBOTS_BYTES
    rules = parse_robots(body, "trawl")
    assert not rules.allowed("https://www.example.com/other")
