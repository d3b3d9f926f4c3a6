"""The URL filter's shortcuts give exactly the answers of the general path.

Four shortcuts are checked against the way they avoid: a plain absolute href is taken
as its own WHATWG serialization (against ada's parse), a plain URL is normalised without
the step-by-step rules (against those rules), a plain path-absolute href on a page of a
plain origin is joined to it (against resolving and normalising), and a relative
href's verdict is cached under the part of the page URL it depends on (against an
uncached normalisation on every page). The generated URLs sit on both sides of the
plain shape's borders: upper case, ports, escapes, dot segments, punycode, IPv4-like
hosts, characters the standard escapes.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, note, settings
from hypothesis import strategies as st

from trawl.extract.links import LinkFilter
from trawl.extract.resolution import plain_parts, resolve, resolve_against_serialized
from trawl.extract.scope import Scope
from trawl.extract.urls import (
    DEFAULT_RULES,
    NormalizeRules,
    _normalize_serialized,
    is_plain_origin,
    normalize,
    normalize_on_plain_origin,
    normalize_own_serialization,
    normalize_resolved,
)
from trawl.store.values import CommitBatch

LABEL = st.sampled_from(
    ["a", "h12", "example", "com", "x-y", "-a", "b-", "a--b", "A", "0x7f", "1", "255",
     "xn--zca", "xn--a", "a_b", "é", "", "a" * 63, "b" * 64, "co"]
)  # fmt: skip
HOST = st.lists(LABEL, min_size=1, max_size=5).map(".".join)
PLAIN_PIECE = st.sampled_from(
    ["a", "B", "1", "-", ".", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", "=",
     ":", "@", "/", "?", "..", "/.", "/..", "./", "utm_x=1", "gclid=2", "b=2", "a=1", "&"]
)  # fmt: skip
ODD_PIECE = st.sampled_from(
    [";", "%", "%41", "%2e", "%2E", "\\", " ", "\t", '"', "<", ">", "^", "`", "{", "|",
     "}", "[", "]", "é", "\x00", "#"]
)  # fmt: skip
TEXT = st.lists(st.one_of(PLAIN_PIECE, PLAIN_PIECE, PLAIN_PIECE, ODD_PIECE), max_size=10).map(
    "".join
)
"""Path, query or fragment text, mostly of characters the plain shape allows."""
SCHEME = st.sampled_from(["http://", "https://", "http://", "https://", "HTTP://", "https:"])
PORT = st.sampled_from(
    ["", "", "", "", ":80", ":443", ":8080", ":0", ":1", ":080", ":65535", ":65536", ":99999",
     ":", ":8a"]
)  # fmt: skip


@st.composite
def urls(draw: st.DrawFn) -> str:
    """Absolute URLs, most of them plain or one step from it."""
    url = draw(SCHEME) + draw(HOST) + draw(PORT) + "/" + draw(TEXT)
    if draw(st.booleans()):
        url += "?" + draw(TEXT)
    if draw(st.booleans()):
        url += "#" + draw(TEXT)
    return url


BASES = st.sampled_from(
    ["http://h.test/a/b.html", "https://h.test/", "https://u:p@h.test/d/?q=1#f",
     "http://[::1]:81/a/b"]
)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(url=urls(), base=BASES)
def test_a_plain_absolute_href_is_its_own_serialization(url: str, base: str) -> None:
    assert resolve_against_serialized(url, base) == resolve(url, base)


@settings(max_examples=3000, deadline=None)
@given(url=urls(), short=st.booleans())
def test_plain_urls_normalise_as_the_general_rules_do(url: str, short: bool) -> None:
    rules = NormalizeRules(max_length=40, max_path_depth=3) if short else DEFAULT_RULES
    serialized = resolve(url, None)
    if serialized is None:
        return
    note(f"serialized={serialized!r} plain={plain_parts(serialized) is not None}")
    assert normalize_resolved(serialized, rules) == _normalize_serialized(serialized, rules)


@settings(max_examples=3000, deadline=None)
@given(url=urls(), short=st.booleans())
def test_a_plain_absolute_href_normalises_in_one_step_as_in_two(url: str, short: bool) -> None:
    rules = NormalizeRules(max_length=40, max_path_depth=3) if short else DEFAULT_RULES
    own = normalize_own_serialization(url, rules)
    note(f"own={own!r}")
    if own is not None:
        assert own == normalize(url, None, rules)


def test_the_benchmark_shapes_take_the_plain_path() -> None:
    for url in (
        "https://h12.example.com/search?page=3&q=term15",
        "https://h12.example.com/products/5?color=c2&size=4&utm_source=feed#x",
        "https://h12.example.com/blog/2003/05/post-123/",
        "http://h3.bench.test:18470/articles/2004/post-17.html",
        "https://h3.bench.test:8443/docs/p3/",
    ):
        assert plain_parts(url) is not None
        assert normalize_own_serialization(url, DEFAULT_RULES) == normalize(url)
        assert resolve_against_serialized(url, None) == resolve(url, None)
    # The standard drops a scheme's default port, so such a URL is not its own serialization.
    assert plain_parts("https://h3.bench.test:443/docs/p3/") is None
    assert plain_parts("http://h3.bench.test:80/docs/p3/") is None


PLAIN_HOST = st.lists(st.sampled_from(["a", "h12", "www", "x-y", "a--b", "co"]), min_size=1).map(
    ".".join
)
ORIGINS = st.builds("{}{}{}".format, SCHEME, st.one_of(PLAIN_HOST, HOST), PORT)
"""Origins, half of them on hosts of the plain shape."""
PATH_ABSOLUTE = st.builds("/{}".format, TEXT)


@settings(max_examples=1500, deadline=None)
@given(origin=ORIGINS, href=PATH_ABSOLUTE, page=st.sampled_from(["/", "/a/b.html?q=1#f"]))
def test_a_plain_path_absolute_href_joins_a_plain_origin(origin: str, href: str, page: str) -> None:
    base = resolve(origin + page, None)
    if base is None or not is_plain_origin(origin):
        return
    for rules in (DEFAULT_RULES, NormalizeRules(max_length=40, max_path_depth=3)):
        joined = normalize_on_plain_origin(origin, href, rules)
        note(f"base={base!r} joined={joined!r}")
        if joined is not None:
            assert joined == normalize(href, base, rules)


def test_the_benchmark_shapes_join_their_origin() -> None:
    for origin in ("https://h12.example.com", "http://h3.bench.test:18470"):
        assert is_plain_origin(origin)
        for href in ("/search?page=3&q=term15&utm_source=x", "/blog/2003/05/post-123/", "/a#b"):
            assert normalize_on_plain_origin(origin, href, DEFAULT_RULES) == normalize(
                href, origin + "/x/y.html"
            )
    # Not plain: the standard would change them (a default port, upper case, credentials).
    for origin in ("https://h.test:443", "http://H.test", "http://u:p@h.test", "http://[::1]"):
        assert not is_plain_origin(origin)
    # Hrefs the join cannot take: scheme-relative, dot segments, escapes.
    for href in ("//h.test/a", "/a/../b", "/a/./b", "/a%2e/b", "/a;b=1"):
        assert normalize_on_plain_origin("http://h.test", href, DEFAULT_RULES) is None


SCHEMED = st.builds(
    "{}:{}".format,
    st.sampled_from(["mailto", "javascript", "tel", "c", "data", "x-y.z+1", "HTTP", "http",
                     "Https", "ftp", "wss", "file", "1a"]),
    TEXT,
)  # fmt: skip
"""Hrefs with a scheme: special ones mean something relative to a page of that scheme,
others the same on every page."""
RELATIVE = st.one_of(
    TEXT,
    SCHEMED,
    st.tuples(st.sampled_from(["/", "./", "../", "//", "/\\", "\\", "?", "#", " /", "\t/"]),
              TEXT).map("".join),
    urls(),
)  # fmt: skip
PAGES = st.sampled_from(
    ["http://www.site.test/a/b.html", "http://www.site.test/a/c.html?x=1",
     "http://www.site.test/a/", "http://www.site.test/z/b.html", "https://www.site.test/a/b.html",
     "http://www.site.test:8080/a/b.html", "http://other.test/a/b.html",
     "http://u:p@www.site.test/a/b.html", "http://www.site.test/a/b.html#frag"]
)  # fmt: skip


def _uncached(href: str, page: str) -> str | None:
    url = normalize(href, page)
    if isinstance(url, str) and Scope(["http://www.site.test/"]).check(url).value == "in":
        return url
    return None


@settings(max_examples=1000, deadline=None)
@given(visits=st.lists(st.tuples(RELATIVE, PAGES), min_size=1, max_size=12))
def test_cached_verdicts_match_an_uncached_normalisation_on_every_page(
    visits: list[tuple[str, str]],
) -> None:
    link_filter = LinkFilter(Scope(["http://www.site.test/"]), DEFAULT_RULES)
    # Each href on every page, so that every later page meets it cached.
    for href, _ in visits:
        for page in {page for _, page in visits}:
            batch = CommitBatch()
            found = link_filter.page_links([href], page, 1, batch)
            note(f"href={href!r} page={page!r}")
            assert [c.url for c in found] == [u for u in [_uncached(href, page)] if u]


def test_cached_verdicts_match_on_every_whatwg_case() -> None:
    data = Path(__file__).parent / "data" / "conformance" / "link_resolution_whatwg.json"
    cases = json.loads(data.read_text(encoding="utf-8"))["cases"]
    pages = ["http://www.site.test/a/b.html", "http://www.site.test/a/c?d#e"]
    link_filter = LinkFilter(Scope(["http://www.site.test/"]), DEFAULT_RULES)
    checked = 0
    for _ in range(2):  # the second round answers from the cache
        for case in cases:
            for page in pages:
                found = link_filter.page_links([case["input"]], page, 1, CommitBatch())
                assert [c.url for c in found] == [
                    u for u in [_uncached(case["input"], page)] if u
                ], (case["input"], page)
                checked += 1
    assert checked == 4 * len(cases)
