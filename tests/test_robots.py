"""robots.txt parsing and matching beyond the conformance vectors."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malloc_stats import traced
from trawl.politeness.robots_parser import (
    ALLOW_ALL,
    DISALLOW_ALL,
    RULE_SETS_KEPT,
    SCANNED_RULES,
    RobotsRules,
    agent_token,
    parse_robots,
    robots_url,
    rules_for_response,
)

SITE = "https://www.example.com"


def _rules(text: str, token: str = "trawl") -> RobotsRules:
    return parse_robots(text.encode("utf-8"), token)


# --- group choice -------------------------------------------------------------------


def test_own_group_beats_the_global_group() -> None:
    rules = _rules("user-agent: *\ndisallow: /\n\nuser-agent: trawl\ndisallow: /private\n")
    assert rules.allowed(f"{SITE}/public")
    assert not rules.allowed(f"{SITE}/private")


def test_group_match_is_case_insensitive_both_ways() -> None:
    rules = _rules("User-Agent: TRAWL\nDisallow: /x\n", token="Trawl")
    assert not rules.allowed(f"{SITE}/x")


def test_group_line_naming_a_version_still_names_the_product() -> None:
    rules = _rules("user-agent: trawl/2.0\ndisallow: /x\n\nuser-agent: *\ndisallow: /\n")
    assert not rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/y")


def test_other_agents_groups_are_ignored() -> None:
    rules = _rules("user-agent: trawler\ndisallow: /\nuser-agent: otherbot\ndisallow: /\n")
    assert rules.allowed(f"{SITE}/anything")


def test_groups_for_the_same_agent_merge_with_their_crawl_delays() -> None:
    text = (
        "user-agent: trawl\ndisallow: /a\ncrawl-delay: 2\n\n"
        "user-agent: *\ndisallow: /b\ncrawl-delay: 30\n\n"
        "user-agent: trawl\ndisallow: /c\ncrawl-delay: 5\n"
    )
    rules = _rules(text)
    assert not rules.allowed(f"{SITE}/a")
    assert not rules.allowed(f"{SITE}/c")
    assert rules.allowed(f"{SITE}/b")
    assert rules.crawl_delay == 5.0


def test_consecutive_user_agent_lines_share_one_group() -> None:
    text = "user-agent: a\nuser-agent: trawl\n\nuser-agent: b\ndisallow: /x\n"
    assert not _rules(text).allowed(f"{SITE}/x")


def test_a_group_record_ends_the_user_agent_lines() -> None:
    text = (
        "user-agent: trawl\ncrawl-delay: 3\ndisallow: /x\n"
        "user-agent: b\ncrawl-delay: 7\ndisallow: /y\n"
    )
    rules = _rules(text)
    assert not rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/y")
    assert rules.crawl_delay == 3.0


# --- crawl-delay --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("10", 10.0), ("0.5", 0.5), ("0", 0.0), ("-1", None), ("soon", None), ("nan", None)],
)
def test_crawl_delay_values(value: str, expected: float | None) -> None:
    assert _rules(f"user-agent: *\ncrawl-delay: {value}\n").crawl_delay == expected


def test_crawl_delay_comes_from_the_chosen_group_only() -> None:
    text = "user-agent: *\ncrawl-delay: 9\n\nuser-agent: trawl\ndisallow: /x\n"
    assert _rules(text).crawl_delay is None
    assert _rules(text, token="otherbot").crawl_delay == 9.0


# --- sitemaps -----------------------------------------------------------------------


def test_sitemaps_are_collected_from_anywhere_in_order_without_repeats() -> None:
    text = (
        "Sitemap: https://www.example.com/a.xml\n"
        "user-agent: otherbot\ndisallow: /\n"
        "sitemap: https://cdn.example.com/b.xml # second\n"
        "SITEMAP: https://www.example.com/a.xml\n"
        "sitemap:\n"
    )
    assert _rules(text).sitemaps == (
        "https://www.example.com/a.xml",
        "https://cdn.example.com/b.xml",
    )


# --- line syntax --------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"\xef\xbb\xbfuser-agent: *\ndisallow: /x\n",
        b"user-agent: *\r\ndisallow: /x\r\n",
        b"user-agent: *\rdisallow: /x\r",
        b"  User-Agent :  *  \n\tDisallow\t:\t/x\t# why\n",
    ],
    ids=["bom", "crlf", "cr", "spacing"],
)
def test_line_syntax_variants(body: bytes) -> None:
    rules = parse_robots(body, "trawl")
    assert not rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/y")


# --- what Google reads too (docs/ROBOTS.md, "Read as Google reads them") ---------------


@pytest.mark.parametrize("key", ["User-agent", "User Agent", "useragent", "USER AGENT"])
def test_user_agent_key_spellings(key: str) -> None:
    rules = _rules(f"{key}: trawl\ndisallow: /x\n")
    assert not rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/y")


@pytest.mark.parametrize(
    "key", ["Disallow", "Dissallow", "Dissalow", "Disalow", "Diasllow", "Disallaw", "DISALOW"]
)
def test_disallow_key_typos(key: str) -> None:
    rules = _rules(f"user-agent: *\n{key}: /x\n")
    assert not rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/y")


def test_a_key_may_run_on_after_its_spelling() -> None:
    text = (
        "User-agents: *\nDisallowed: /x\nAllowed: /x/open\n"
        "Sitemaps: https://www.example.com/a.xml\nSite-map: https://www.example.com/b.xml\n"
    )
    rules = _rules(text)
    assert not rules.allowed(f"{SITE}/x/shut")
    assert rules.allowed(f"{SITE}/x/open")
    assert rules.sitemaps == ("https://www.example.com/a.xml", "https://www.example.com/b.xml")


@pytest.mark.parametrize(
    "name", ["Crawl-delays", "Crawl delay", "Disallow-ish thing", "\u017fitemap", "Dis-allow"]
)
def test_keys_that_are_not_read(name: str) -> None:
    # Crawl-delay is not Google's and is spelt exactly; a key is one word (two for
    # "user agent"); no Unicode case folding ("\u017f", long s, folds to "s").
    rules = _rules(f"user-agent: *\n{name}: /x\ncrawl-delay: 1\n{name}: 9\n")
    assert rules.allowed(f"{SITE}/x")
    assert rules.sitemaps == ()
    assert rules.crawl_delay == 1.0


def test_missing_colon_between_key_and_value() -> None:
    text = (
        "User-agent *\nDisallow /private\nAllow\t/private/open\nCrawl-delay 4\n"
        "Sitemap https://www.example.com/s.xml\n"
    )
    rules = _rules(text)
    assert not rules.allowed(f"{SITE}/private/x")
    assert rules.allowed(f"{SITE}/private/open")
    assert rules.allowed(f"{SITE}/public")
    assert rules.crawl_delay == 4.0
    assert rules.sitemaps == ("https://www.example.com/s.xml",)


def test_missing_colon_with_a_colon_in_the_value() -> None:
    # The text before the colon, "Disallow /a", is no key: the two words are.
    rules = _rules("User-agent *\nDisallow /a:b\nSitemap https://www.example.com/s.xml\n")
    assert not rules.allowed(f"{SITE}/a:b")
    assert rules.allowed(f"{SITE}/b")
    assert rules.sitemaps == ("https://www.example.com/s.xml",)


@pytest.mark.parametrize("line", ["Disallow /x /y", "Disallow", "Disallow/x", "Disallow\v/x"])
def test_lines_without_colon_need_exactly_two_words(line: str) -> None:
    rules = _rules(f"User-agent: *\n{line}\nDisallow: /z\n")
    assert rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/x /y")
    assert not rules.allowed(f"{SITE}/z")


def test_three_words_open_no_group() -> None:
    rules = _rules("User Agent *\nDisallow: /x\n")
    assert rules.allowed(f"{SITE}/x")


@pytest.mark.parametrize(
    "bom", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"], ids=["whole", "two-bytes", "one-byte"]
)
def test_byte_order_mark_whole_or_cut_short(bom: bytes) -> None:
    rules = parse_robots(bom + b"User-agent: *\nDisallow: /x\n", "trawl")
    assert not rules.allowed(f"{SITE}/x")
    assert rules.allowed(f"{SITE}/y")


def test_only_a_leading_byte_order_mark_is_skipped() -> None:
    rules = parse_robots(b"\xbb\xbfUser-agent: *\nDisallow: /x\n", "trawl")
    assert rules.allowed(f"{SITE}/x")
    rules = parse_robots(b"User-agent: *\n\xef\xbb\xbfDisallow: /x\n", "trawl")
    assert rules.allowed(f"{SITE}/x")


def test_pattern_without_leading_slash_is_anchored_at_the_root() -> None:
    rules = _rules("user-agent: *\ndisallow: private/\n")
    assert not rules.allowed(f"{SITE}/private/a")
    assert rules.allowed(f"{SITE}/public/private/a")


def test_invalid_utf8_octets_match_as_percent_encoded_octets() -> None:
    rules = parse_robots(b"user-agent: *\ndisallow: /caf\xe9\n", "trawl")
    assert not rules.allowed(f"{SITE}/caf%E9")
    assert rules.allowed(f"{SITE}/caf%C3%A9")


# --- matching -----------------------------------------------------------------------


def test_query_is_part_of_the_match_and_fragment_is_not() -> None:
    rules = _rules("user-agent: *\ndisallow: /*?sessionid=\n")
    assert not rules.allowed(f"{SITE}/page?sessionid=1")
    assert rules.allowed(f"{SITE}/page#?sessionid=1")
    assert rules.allowed(f"{SITE}/page?a=1")


def test_empty_path_matches_as_root() -> None:
    rules = _rules("user-agent: *\ndisallow: /$\n")
    assert not rules.allowed(SITE)
    assert rules.allowed(f"{SITE}/?a=1")
    assert rules.allowed(f"{SITE}/a")


def test_robots_txt_is_always_allowed() -> None:
    assert DISALLOW_ALL.allowed(f"{SITE}/robots.txt")
    assert not DISALLOW_ALL.allowed(f"{SITE}/robots.txt.bak")
    assert not DISALLOW_ALL.allowed(f"{SITE}/")


def test_allow_all_and_disallow_all() -> None:
    assert ALLOW_ALL.allowed(f"{SITE}/any/thing?x=1")
    assert not DISALLOW_ALL.allowed(f"{SITE}/any/thing?x=1")
    assert ALLOW_ALL.crawl_delay is None
    assert ALLOW_ALL.sitemaps == ()


def test_rules_are_values() -> None:
    text = "user-agent: *\ndisallow: /x\n"
    assert _rules(text) == _rules(text)
    assert hash(_rules(text)) == hash(_rules(text))
    assert _rules(text) != _rules("user-agent: *\ndisallow: /y\n")


def _reference(pattern: str) -> re.Pattern[str]:
    """Straightforward regex translation of a robots.txt pattern, for comparison."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(piece) for piece in body.split("*"))
    return re.compile(regex + ("\\Z" if anchored else ""), re.DOTALL)


@settings(max_examples=300, deadline=None)
@given(
    pattern=st.text(alphabet="ab/*", max_size=8).map(lambda p: "/" + p)
    | st.text(alphabet="ab/*", max_size=8).map(lambda p: "/" + p + "$"),
    path=st.text(alphabet="ab/", max_size=10).map(lambda p: "/" + p),
)
def test_wildcard_matching_agrees_with_a_regex(pattern: str, path: str) -> None:
    rules = _rules(f"user-agent: *\ndisallow: {pattern}\n")
    expected = _reference(pattern).match(path) is None
    assert rules.allowed(f"{SITE}{path}") is expected


def test_pathological_wildcards_match_in_linear_time() -> None:
    rules = _rules("user-agent: *\ndisallow: /" + "*a" * 40 + "b\n")
    url = f"{SITE}/" + "a" * 20_000
    start = time.perf_counter()
    assert rules.allowed(url)
    assert time.perf_counter() - start < 0.1


def test_matching_stays_fast_with_many_rules() -> None:
    text = "user-agent: *\n" + "".join(
        f"disallow: /wiki/Special:Page{i}\nallow: /wiki/Special:Page{i}/*.css$\n"
        for i in range(2000)
    )
    rules = _rules(text)
    urls = [f"{SITE}/wiki/Article_{i}?action=view" for i in range(2000)]
    start = time.perf_counter()
    assert all(rules.allowed(url) for url in urls)
    assert time.perf_counter() - start < 0.5
    assert not rules.allowed(f"{SITE}/wiki/Special:Page1999/x")
    assert rules.allowed(f"{SITE}/wiki/Special:Page1999/x/y.css")


@settings(max_examples=300, deadline=None)
@given(
    rules=st.lists(
        st.tuples(st.booleans(), st.text(alphabet="ab/*", max_size=6), st.booleans()),
        min_size=1,
        max_size=SCANNED_RULES,
    ),
    path=st.text(alphabet="ab/", max_size=8).map(lambda p: "/" + p),
)
def test_a_few_rules_matched_one_by_one_agree_with_their_index(
    rules: list[tuple[bool, str, bool]], path: str
) -> None:
    lines = "".join(
        f"{'allow' if allow else 'disallow'}: /{pattern}{'$' if anchored else ''}\n"
        for allow, pattern, anchored in rules
    )
    padding = "".join(f"disallow: /zz{n}\n" for n in range(SCANNED_RULES))
    scanned = _rules(f"user-agent: *\n{lines}")
    indexed = _rules(f"user-agent: *\n{lines}{padding}")
    assert scanned.allowed(f"{SITE}{path}") is indexed.allowed(f"{SITE}{path}")


def _held(bodies: list[str]) -> tuple[list[RobotsRules], int]:
    """The rules of ``bodies``, and the bytes they hold."""
    with traced() as held:
        rules = [_rules(body) for body in bodies]
        return rules, held()


def test_hosts_whose_files_give_the_same_rules_share_them() -> None:
    rules = "user-agent: *\ndisallow: /wp-admin/\nallow: /wp-admin/admin-ajax.php\n"
    alike = [f"{rules}sitemap: https://h{n}.example/sitemap.xml\n" for n in range(2_000)]
    apart = [
        f"{rules}disallow: /h{n}/\nsitemap: https://h{n}.example/sitemap.xml\n"
        for n in range(2_000)
    ]
    shared, shared_bytes = _held(alike)
    own, own_bytes = _held(apart)
    assert all(r.allowed(f"{SITE}/wp-admin/admin-ajax.php") for r in shared + own)
    assert not any(r.allowed(f"{SITE}/wp-admin/x") for r in shared + own)
    assert shared_bytes / len(alike) < 250  # the rules object and its sitemap
    assert own_bytes / len(apart) > 2 * shared_bytes / len(alike)
    # Files of rules their own hold the two rules they write alike once (about 850 bytes
    # a file when each compiled its own).
    assert own_bytes / len(apart) < 760
    assert own[0]._rules[0] is own[1]._rules[0]


def _left_behind(files: int) -> int:
    """The bytes still held once the rules of ``files`` files, each its own, are dropped."""
    bodies = [f"user-agent: *\ndisallow: /own{n}/\nallow: /own{n}/open\n" for n in range(files)]
    with traced() as held:
        rules = [_rules(body) for body in bodies]
        assert not rules[-1].allowed(f"{SITE}/own{files - 1}/x")
        del rules
        return held()


def test_the_rules_kept_for_sharing_are_bounded() -> None:
    """A crawl meets millions of files: what is kept for the next file alike is the most
    recently met only, so dropping the hosts' rules gives back all but a bounded part."""
    files = 16 * RULE_SETS_KEPT
    left = _left_behind(files)
    # Kept for every file, the rules would leave about 640 bytes a file behind.
    assert left < 250 * files, f"{left / files:.0f} bytes a file left"


# --- responses, URLs, tokens ----------------------------------------------------------


def test_rate_limited_robots_txt_is_treated_as_unreachable() -> None:
    assert rules_for_response(429, b"", "trawl") is None


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_too_many_redirects_mean_unavailable(status: int) -> None:
    assert rules_for_response(status, b"", "trawl") is ALLOW_ALL


@pytest.mark.parametrize("status", [100, 199, 300, 304, 600, 0])
def test_unknown_statuses_are_treated_as_unreachable(status: int) -> None:
    assert rules_for_response(status, b"", "trawl") is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.example.com/a/b?c=d#e", "https://www.example.com/robots.txt"),
        ("http://example.com:8080/x", "http://example.com:8080/robots.txt"),
        ("https://user:pw@example.com/x", "https://example.com/robots.txt"),
        ("http://[::1]:8000/", "http://[::1]:8000/robots.txt"),
        ("HTTP://example.com", "http://example.com/robots.txt"),
    ],
)
def test_robots_url(url: str, expected: str) -> None:
    assert robots_url(url) == expected


@pytest.mark.parametrize("url", ["ftp://example.com/x", "/relative/path", "https:///x"])
def test_robots_url_rejects_non_http_urls(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        robots_url(url)


@pytest.mark.parametrize(
    ("user_agent", "expected"),
    [
        ("trawl/0.1 (+https://x)", "trawl"),
        ("trawl", "trawl"),
        ("My_Crawler-X/2", "My_Crawler-X"),
        ("  trawl/1", "trawl"),
    ],
)
def test_agent_token(user_agent: str, expected: str) -> None:
    assert agent_token(user_agent) == expected


@pytest.mark.parametrize("user_agent", ["", "/1.0", "42bot", "  "])
def test_agent_token_rejects_strings_without_a_product_token(user_agent: str) -> None:
    with pytest.raises(ValueError, match="product token"):
        agent_token(user_agent)
