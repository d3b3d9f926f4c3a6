"""URL resolution and normalisation rules, case by case, plus property tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from conftest import CrawlRunner
from trawl.demo import Response, Site, SiteServer
from trawl.extract.resolution import resolve, resolve_against_serialized
from trawl.extract.urls import (
    DEFAULT_RULES,
    DEFAULT_STRIP_PARAMS,
    NormalizeRules,
    Rejection,
    host_key,
    hostname,
    normalize,
    session_token,
    url_hash,
)
from trawl.store.values import State

BASE = "https://base.test/dir/page.html?q=1#f"


def test_the_documented_example() -> None:
    got = normalize("https://Example.COM:443/a/../b/?utm_source=x&z=2&a=1#top")
    assert got == "https://example.com/b/?a=1&z=2"


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        # resolution against the base
        ("other.html", "https://base.test/dir/other.html"),
        ("../up", "https://base.test/up"),
        ("//cdn.test/x", "https://cdn.test/x"),
        ("?p=2", "https://base.test/dir/page.html?p=2"),
        ("#frag", "https://base.test/dir/page.html?q=1"),
        ("", "https://base.test/dir/page.html?q=1"),
        ("  /trimmed \n", "https://base.test/trimmed"),
        ("/a\tb\nc", "https://base.test/abc"),
        ("\\back\\slash", "https://base.test/back/slash"),
        ("http:///x", "http://x/"),
        ("https:////a.test/p", "https://a.test/p"),
        # scheme and host case, IDNA, IPv4 forms, trailing dot
        ("HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),
        ("http://münchen.de/", "http://xn--mnchen-3ya.de/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://[0:0::1]:8080/", "http://[::1]:8080/"),
        ("http://example.com./x", "http://example.com/x"),
        # default ports go, others stay
        ("http://a.test:80/", "http://a.test/"),
        ("https://a.test:443/", "https://a.test/"),
        ("http://a.test:443/", "http://a.test:443/"),
        ("https://a.test:80/", "https://a.test:80/"),
        ("http://a.test:08080/", "http://a.test:8080/"),
        # fragment dropped, dot segments removed
        ("http://a.test/x#y", "http://a.test/x"),
        ("http://a.test/a/./b/../c", "http://a.test/a/c"),
        ("http://a.test/a/%2e%2E/c", "http://a.test/c"),
        # percent-encoding: upper-case hex, unreserved decoded, reserved kept
        ("http://a.test/%7euser/%2fx%3a", "http://a.test/~user/%2Fx%3A"),
        ("http://a.test/%41%5a%61%30%2D%2E%5F%7E", "http://a.test/AZa0-._~"),
        ("http://a.test/?k=%7e%26%3d", "http://a.test/?k=~%26%3D"),
        ("http://a.test/%zz%4", "http://a.test/%zz%4"),
        ("http://a.test/ä b", "http://a.test/%C3%A4%20b"),
        # empty path and trailing slash
        ("http://a.test", "http://a.test/"),
        ("http://a.test/a", "http://a.test/a"),
        ("http://a.test/a/", "http://a.test/a/"),
        ("http://a.test/A/b", "http://a.test/A/b"),
        # query: tracking params, sorting, verbatim values, empty query
        ("http://a.test/?", "http://a.test/"),
        ("http://a.test/?utm_source=x&UTM_Medium=y", "http://a.test/"),
        ("http://a.test/?b=2&a=1&b=1&a=0", "http://a.test/?a=1&a=0&b=2&b=1"),
        ("http://a.test/?gclid=1&FBCLID=2&x=3&JSessionID=4", "http://a.test/?x=3"),
        ("http://a.test/?flag&a=1", "http://a.test/?a=1&flag"),
        ("http://a.test/?x=&y", "http://a.test/?x=&y"),
        ("http://a.test/?a=1&&b=2&", "http://a.test/?a=1&b=2"),
        ("http://a.test/?q=A+B%20C&q=c", "http://a.test/?q=A+B%20C&q=c"),
        ("http://a.test/?utm%5Fsource=x&k=v", "http://a.test/?k=v"),
        ("http://a.test/?b=1&B=2&a=3", "http://a.test/?B=2&a=3&b=1"),
        ("http://a.test/?x=a=b", "http://a.test/?x=a=b"),
        # session ids in path parameters
        ("http://a.test/cart;jsessionid=AB12?x=1", "http://a.test/cart?x=1"),
        ("http://a.test/a;v=2;JSESSIONID=1/b", "http://a.test/a;v=2/b"),
        ("http://a.test/a;v=2", "http://a.test/a;v=2"),
    ],
)
def test_normalize(href: str, expected: str) -> None:
    assert normalize(href, BASE) == expected


@pytest.mark.parametrize(
    ("href", "reason"),
    [
        ("mailto:someone@example.com", Rejection.SCHEME),
        ("javascript:void(0)", Rejection.SCHEME),
        ("tel:+441234", Rejection.SCHEME),
        ("data:text/plain,hi", Rejection.SCHEME),
        ("ftp://files.test/x", Rejection.SCHEME),
        ("file:///etc/passwd", Rejection.SCHEME),
        ("ws://a.test/", Rejection.SCHEME),
        ("ftp://bad host/", Rejection.SCHEME),
        ("http://user@a.test/", Rejection.CREDENTIALS),
        ("http://user:pw@a.test/", Rejection.CREDENTIALS),
        ("http://:pw@a.test/", Rejection.CREDENTIALS),
        ("http://a.test:65536/", Rejection.BAD_PORT),
        ("http://a.test:99999999999/", Rejection.BAD_PORT),
        ("http://a.test:8o/", Rejection.BAD_PORT),
        ("//a.test:70000/", Rejection.BAD_PORT),
        ("http://[::1]:70000/", Rejection.BAD_PORT),
        ("http://a.test:0/", Rejection.BAD_PORT),
        ("http://", Rejection.NO_HOST),
        ("http://:80/", Rejection.NO_HOST),
        ("https:///", Rejection.NO_HOST),
        ("http://user@/", Rejection.NO_HOST),
        ("http://a b/", Rejection.BAD_HOST),
        ("http://a<b/", Rejection.BAD_HOST),
        ("http://[::1/", Rejection.BAD_HOST),
        ("http://1.2.3.4.5/", Rejection.BAD_HOST),
        ("http://a..b/", Rejection.BAD_HOST),
        ("http://a{b}/", Rejection.BAD_HOST),
        ("http://./", Rejection.BAD_HOST),
        ("http://" + "a" * 64 + ".test/", Rejection.BAD_HOST),
        ("http://" + "a." * 127 + "test/", Rejection.BAD_HOST),
        ("http://a.b.xn--pokxncvks/", Rejection.BAD_HOST),
        ("https://xn--/", Rejection.BAD_HOST),
        ("http://a.test/" + "x" * 2100, Rejection.TOO_LONG),
    ],
)
def test_rejections(href: str, reason: Rejection) -> None:
    assert normalize(href, BASE) is reason


@pytest.mark.parametrize(
    ("href", "base"),
    [
        ("x", None),
        ("/x", "not a url"),
        ("\ud800", None),
        ("//a.test/", "::"),
        ("x", "mailto:a@b.test"),
    ],
)
def test_unparsable(href: str, base: str | None) -> None:
    assert normalize(href, base) is Rejection.UNPARSABLE


def test_relative_against_non_http_base_is_scheme() -> None:
    assert normalize("//bad host/", "ftp://a.test/") is Rejection.SCHEME


def test_max_length_counts_the_final_string() -> None:
    rules = NormalizeRules(max_length=30)
    exact = "http://a.test/" + "x" * 16
    assert normalize(exact, rules=rules) == exact
    assert normalize(exact + "y", rules=rules) is Rejection.TOO_LONG
    # Tracking parameters and the fragment are gone before the length is checked.
    assert normalize(exact + "?utm_source=" + "z" * 50 + "#" + "f" * 50, rules=rules) == exact


def test_custom_rules_are_case_insensitive() -> None:
    rules = NormalizeRules(strip_params=frozenset({"Ref"}), strip_prefixes=("PK_",))
    assert rules.strip_params == frozenset({"ref"})
    got = normalize("http://a.test/?REF=1&pk_campaign=2&utm_source=3&gclid=4", rules=rules)
    assert got == "http://a.test/?gclid=4&utm_source=3"


def test_rules_validate_max_length() -> None:
    with pytest.raises(ValueError, match="max_length"):
        NormalizeRules(max_length=0)


def test_default_strip_params_cover_the_documented_names() -> None:
    expected = {"gclid", "fbclid", "sessionid", "jsessionid", "sid", "phpsessid", "msclkid"}
    assert expected <= DEFAULT_STRIP_PARAMS
    assert DEFAULT_RULES.strip_prefixes == ("utm_", "aspsessionid")


@pytest.mark.parametrize(
    "param",
    [
        "jsessionid=0A1B", "JSESSIONID=0A1B", "PHPSESSID=abc", "sessionid=9",
        "session_id=9", "sessid=9", "ASPSESSIONIDQQGGGNCG=KJHGF", "ASP.NET_SessionId=x1",
        "CFID=1", "CFTOKEN=2", "CGISESSID=c3", "osCsid=o4", "zenid=z5", "XTCsid=x6",
        "BV_SessionID=b7", "sid=0123456789abcdef0123456789abcdef", "SID=Zm9vYmFyMTIzNDU2Nzg5MA==",
        "sid=k3ZyQ9_xT-2mB7wLp4Hs",
    ],
)  # fmt: skip
def test_session_parameters_are_stripped(param: str) -> None:
    assert normalize(f"http://a.test/shop?item=3&{param}") == "http://a.test/shop?item=3"
    name = param.partition("=")[0]
    assert normalize(f"http://a.test/shop;{param}?item=3") == "http://a.test/shop?item=3", name


@pytest.mark.parametrize(
    "value",
    [
        "05/10/14/1234", "06/01/01/0001", "42", "", "1234567890123456789", "introductiontothe",
        "0123456789abcdef0123456789abcde.", "0123456789abcdef%2F0123456789ab",
        "0123456789abcdef+0123456789abc", "0123456789abcdef0123456789abcdef===",
    ],
)  # fmt: skip
def test_sid_is_kept_unless_its_value_is_a_session_token(value: str) -> None:
    # Slashcode's story.pl?sid=05/10/14/1234 names a story: two stories are two URLs.
    url = f"http://a.test/story.pl?sid={value}"
    assert normalize(url) == url
    assert (
        normalize(f"http://a.test/story.pl;sid={value}?a=1")
        == f"http://a.test/story.pl;sid={value}?a=1"
    )
    assert not DEFAULT_RULES.strips("SID", value)
    assert DEFAULT_RULES.strips("phpsessid", value)


def test_distinct_stories_stay_distinct() -> None:
    first = normalize("http://a.test/story.pl?sid=05/10/14/1234")
    second = normalize("http://a.test/story.pl?sid=06/01/01/0001")
    assert first != second


_TOKEN = "0123456789abcdef0123456789abcdef"


def stories_site(port: int) -> Site:
    """Two stories told apart only by ``sid``, and a forum page whose links carry a
    session token in ``sid``."""

    def page(*hrefs: str) -> Response:
        anchors = "".join(f'<a href="{href}">x</a>' for href in hrefs)
        return Response(body=f"<!doctype html><title>p</title><body>{anchors}".encode())

    stories = ("/story.pl?sid=05/10/14/1234", "/story.pl?sid=06/01/01/0001")
    routes = {
        "http://news.test/": page(*stories, f"/topic?t=1&sid={_TOKEN}"),
        "http://news.test/topic?t=1": page(f"/topic?t=1&sid={_TOKEN[::-1]}"),
    }
    routes |= {f"http://news.test{story}": page() for story in stories}
    return Site.build(port, routes, ["http://news.test/"])


async def test_a_crawl_fetches_each_story_and_each_session_page_once(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(stories_site) as server:
        result = await crawl(server, soft_404=False)
        paths = [r.path for r in server.requests if r.path != "/robots.txt"]
        site = server.site
    expected = ["/", "/story.pl?sid=05/10/14/1234", "/story.pl?sid=06/01/01/0001", "/topic?t=1"]
    assert sorted(paths) == expected
    assert result.in_state(State.DONE) == {site.url("news.test", path) for path in expected}


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("0123456789abcdef", True),
        ("0123456789abcde", False),
        ("abcdefghijklmnop", False),
        ("0000000000000000", False),
        ("a000000000000000", True),
        ("-_-_-_-_-_-_-_a1", True),
        ("Zm9vYmFyMTIzNDU2Nzg5MA==", True),
        ("Zm9vYmFyMTIzNDU2Nzg5MA=x", False),
        ("0123456789abcdef/", False),
    ],
)
def test_session_token_shape(value: str, token: bool) -> None:
    assert session_token(value) is token


def test_sid_named_in_custom_rules_keeps_the_token_rule() -> None:
    rules = NormalizeRules(strip_params=frozenset({"SID"}))
    assert normalize("http://a.test/?sid=42", rules=rules) == "http://a.test/?sid=42"
    token = "0123456789abcdef0123456789abcdef"
    assert normalize(f"http://a.test/?a=1&sid={token}", rules=rules) == "http://a.test/?a=1"
    assert normalize(f"http://a.test/?sid={token}") == "http://a.test/"
    plain = NormalizeRules(strip_params=frozenset({"ref"}))
    assert normalize(f"http://a.test/?sid={token}", rules=plain) == f"http://a.test/?sid={token}"


@pytest.mark.parametrize(
    ("path", "verdict"),
    [
        ("/a/b/a/b/a/b", Rejection.REPEATED_PATH),
        ("/x/x/x/", Rejection.REPEATED_PATH),
        ("/x/x/x", Rejection.REPEATED_PATH),
        ("/cal/a/b/c/a/b/c/a/b/c/next", Rejection.REPEATED_PATH),
        ("/shop/a/a/a/a/item", Rejection.REPEATED_PATH),
        ("/a////", Rejection.REPEATED_PATH),
        ("/%61/a/%61/", Rejection.REPEATED_PATH),
        ("/a/b/a/b", None),
        ("/x/x/", None),
        ("/x/x/y/x/x", None),
        ("/a/b/c/a/b/c/a/b/d", None),
        ("/2024/01/01/01.html", None),
        ("/x/x/?p=x/x/x", None),
        ("/" + "/".join(str(n) for n in range(32)), None),
        ("/" + "/".join(str(n) for n in range(32)) + "/", None),
        ("/" + "/".join(str(n) for n in range(33)), Rejection.DEEP_PATH),
        ("/" + "a/" * 1000, Rejection.DEEP_PATH),
    ],
)
def test_path_traps(path: str, verdict: Rejection | None) -> None:
    got = normalize("http://a.test" + path)
    if verdict is None:
        assert isinstance(got, str)
    else:
        assert got is verdict


def test_max_path_depth_counts_segments_not_a_trailing_slash() -> None:
    rules = NormalizeRules(max_path_depth=3)
    assert normalize("http://a.test/1/2/3/", rules=rules) == "http://a.test/1/2/3/"
    assert normalize("http://a.test/1/2/3/4", rules=rules) is Rejection.DEEP_PATH
    assert normalize("http://a.test/1/2/3/4", base=None) == "http://a.test/1/2/3/4"
    with pytest.raises(ValueError, match="max_path_depth"):
        NormalizeRules(max_path_depth=0)


def _repeats_thrice(segments: list[str]) -> bool:
    """The definition, checked by brute force: some run of segments comes three times."""
    n = len(segments)
    return any(
        segments[i : i + k] == segments[i + k : i + 2 * k] == segments[i + 2 * k : i + 3 * k]
        for k in range(1, n // 3 + 1)
        for i in range(n - 3 * k + 1)
    )


@settings(max_examples=500, deadline=None)
@given(
    segments=st.lists(st.sampled_from(["a", "b", "c", "", "%61", "a;x=1", "A"]), max_size=40),
    slash=st.booleans(),
    query=st.sampled_from(["", "?q=a/a/a", "?sid=1"]),
)
def test_path_rules_match_their_definition(segments: list[str], slash: bool, query: str) -> None:
    url = "http://a.test/" + "/".join(segments) + ("/" if slash and segments else "") + query
    got = normalize(url)
    resolved = resolve(url, None)
    assert resolved is not None
    path = resolved[len("http://a.test") :].partition("?")[0].replace("%61", "a")
    parts = path[1:].split("/")
    if parts[-1] == "":
        parts.pop()
    if len(parts) > DEFAULT_RULES.max_path_depth:
        assert got is Rejection.DEEP_PATH
    elif _repeats_thrice(parts):
        assert got is Rejection.REPEATED_PATH
    else:
        assert isinstance(got, str)
        assert normalize(got) == got


def test_resolve_keeps_what_normalize_drops() -> None:
    assert resolve("//u:p@h.test:80/x#f", "http://a.test/") == "http://u:p@h.test/x#f"
    assert resolve("mailto:x@y.test", "http://a.test/") == "mailto:x@y.test"
    assert resolve("http://a b/", "http://a.test/") is None
    assert resolve("x", "not a base") is None


def test_url_hash_is_stable_signed_64_bit() -> None:
    # Stored in the database: a change of this value would orphan every stored URL.
    assert url_hash("https://example.com/") == 1493557592560457051
    assert url_hash("https://example.com/") != url_hash("https://example.com/a")
    values = [url_hash(f"https://example.com/{i}") for i in range(2000)]
    assert all(-(2**63) <= v < 2**63 for v in values)
    assert any(v < 0 for v in values)
    assert len(set(values)) == len(values)


@pytest.mark.parametrize(
    ("url", "key", "host"),
    [
        ("http://a.test/", "a.test", "a.test"),
        ("https://a.test:8443/x:y?z=1:2", "a.test:8443", "a.test"),
        ("http://127.0.0.1:8080/", "127.0.0.1:8080", "127.0.0.1"),
        ("http://[::1]/", "[::1]", "[::1]"),
        ("http://[::1]:8080/p", "[::1]:8080", "[::1]"),
    ],
)
def test_host_key_and_hostname(url: str, key: str, host: str) -> None:
    assert host_key(url) == key
    assert hostname(url) == host


def test_host_key_drops_default_port_via_normalize() -> None:
    url = normalize("https://A.test:443/x")
    assert isinstance(url, str)
    assert host_key(url) == "a.test"


_URL_PARTS = st.sampled_from(
    [
        "http://",
        "https://",
        "HTTP://",
        "//",
        "/",
        "\\",
        "../",
        "./",
        ".",
        "?",
        "#",
        "&",
        "=",
        ";",
        ":",
        "@",
        "%",
        "%2e",
        "%7E",
        "%2f",
        "%41",
        "%zz",
        "utm_x=1",
        "b=2",
        "a",
        "A",
        "jsessionid=1",
        "xn--zca",
        "ß",
        "ä",
        " ",
        "\t",
        "[::1]",
        "127.0.0.1",
        "0x7f",
        "a.test",
        ":8080",
        ":443",
        ":0",
    ]
)
_URLISH = st.lists(_URL_PARTS, max_size=14).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    href=st.one_of(_URLISH, st.text()), base=st.sampled_from([None, BASE, "http://[::1]:81/a/b"])
)
def test_normalize_is_idempotent_and_never_raises(href: str, base: str | None) -> None:
    once = normalize(href, base)
    if isinstance(once, Rejection):
        return
    assert once.startswith(("http://", "https://"))
    assert "#" not in once
    assert normalize(once) == once
    assert normalize(once, base) == once


@settings(max_examples=300, deadline=None)
@given(href=st.text(), base=st.one_of(st.none(), st.text(), _URLISH))
def test_never_raises_on_arbitrary_text(href: str, base: str | None) -> None:
    result = normalize(href, base)
    assert isinstance(result, Rejection) or result.startswith(("http://", "https://"))
    got = resolve(href, BASE if base is None else base)
    assert got is None or isinstance(got, str)


def test_a_path_parameter_that_hides_a_dot_segment_normalises_in_one_go() -> None:
    url = normalize(".;utm_x=1", "https://base.test/dir/page.html?q=1#f")
    assert url == "https://base.test/dir/"
    assert normalize("http://x.test/a/b/..;jsessionid=9/c") == "http://x.test/a/c"


PLAIN = st.text(alphabet="abcXYZ0129eE_~%-./", min_size=1, max_size=20)


@given(
    path=PLAIN,
    query=st.none() | st.text(alphabet="ab1=&+%-.", max_size=10),
    fragment=st.none() | st.text(alphabet="ab1_-.", max_size=6),
    rooted=st.booleans(),
    base=st.sampled_from([
        "http://h.test/a/b/c/d.html", "http://h.test/a/", "http://h.test/a/b/..x/",
        "http://h.test/", "http://h.test/a/b.html", "https://h.test:8443/a/b/?q=1#f",
        "http://u:p@h.test/d/e", "http://h.test/a/b?x=/y/z", "http://[::1]:8080/p/q",
    ]),
)  # fmt: skip
def test_string_join_matches_the_standard(
    path: str, query: str | None, fragment: str | None, rooted: bool, base: str
) -> None:
    href = ("/" if rooted else "") + path
    note(f"href={href!r}")
    href += "" if query is None else f"?{query}"
    href += "" if fragment is None else f"#{fragment}"
    assert resolve_against_serialized(href, base) == resolve(href, base)


SEGMENT = st.sampled_from(["..", ".", "", "a", "b.html", ".x", "x.", "%2e", "%2E%2e", "..."])


@settings(max_examples=500)
@given(
    segments=st.lists(SEGMENT, min_size=1, max_size=8),
    rooted=st.booleans(),
    tail=st.sampled_from(["", "?q=1", "#f", "?a=1#b"]),
    base=st.sampled_from([
        "http://h.test/", "http://h.test/a/b/c/d.html", "http://h.test/a/b/", "http://h.test/a",
        "https://h.test:8443/a/b/?q=1#f", "http://h.test/a/b?x=/y/../z",
    ]),
)  # fmt: skip
def test_string_join_resolves_dot_segments_as_the_standard(
    segments: list[str], rooted: bool, tail: str, base: str
) -> None:
    href = ("/" if rooted else "") + "/".join(segments) + tail
    note(f"href={href!r}")
    assert resolve_against_serialized(href, base) == resolve(href, base)


def test_string_join_agrees_on_every_whatwg_case() -> None:
    data = Path(__file__).parent / "data" / "conformance" / "link_resolution_whatwg.json"
    checked = 0
    for case in json.loads(data.read_text(encoding="utf-8"))["cases"]:
        base = resolve(case["base"] or "http://example.org/", None)
        if base is not None:
            assert resolve_against_serialized(case["input"], base) == resolve(case["input"], base)
            checked += 1
    assert checked > 350


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("%%41b=2", "https://base.test/dir/%%41b=2"),
        ("%4%41", "https://base.test/dir/%4%41"),
        ("%%34%31", "https://base.test/dir/%%341"),
        ("a%41b", "https://base.test/dir/aAb"),
        ("?x=%%41b&y=%7e", "https://base.test/dir/page.html?x=%%41b&y=~"),
    ],
)
def test_decoding_an_escape_never_makes_a_new_one(href: str, expected: str) -> None:
    url = normalize(href, BASE)
    assert url == expected
    assert normalize(url) == url
