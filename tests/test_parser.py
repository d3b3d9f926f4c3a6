"""Tests for trawl.extract.parser: link extraction, robots directives, encodings and
content sniffing.

The robots meta / X-Robots-Tag conformance cases (tests/data/conformance/robots_meta.json)
all run. trawl acts on ``noindex`` and ``nofollow`` only, so each expectation is compared
after keeping just those two rules. Cases trawl deliberately does not follow are listed in
``DELIBERATE_DIFFERENCES`` with the reason, and every case is checked in both directions:
listed cases must fail and all others must pass, so the table equals the failing set.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trawl.extract.parser import ParsedPage, content_charset, is_html, parse_html, robots_header


def _page(body: str, **kwargs: Any) -> ParsedPage:
    return parse_html(body.encode("utf-8"), **kwargs)


# --- links --------------------------------------------------------------------------------------


def test_a_and_area_hrefs_come_in_document_order() -> None:
    page = _page(
        '<p><a href="/one">1</a></p><map name="m"><area href="/two" shape="rect"></map>'
        '<a href="/three">3</a><area href="/four"><a name="no-href">x</a>'
    )
    assert page.links == ("/one", "/two", "/three", "/four")


def test_anchors_without_area_keep_their_order() -> None:
    page = _page("".join(f'<a href="/p{i}">{i}</a>' for i in range(5)))
    assert page.links == ("/p0", "/p1", "/p2", "/p3", "/p4")


def test_hrefs_are_entity_decoded_and_whitespace_stripped() -> None:
    page = _page(
        '<a href="a?x=1&amp;y=2">e</a><a href=" \n\t/spaced\r\n ">s</a>'
        '<a href="caf&eacute;">c</a><a href="&#x2F;hex">h</a>'
    )
    assert page.links == ("a?x=1&y=2", "/spaced", "café", "/hex")


def test_empty_and_hash_only_hrefs_are_dropped_but_fragments_kept() -> None:
    page = _page('<a href="">e</a><a href="  ">w</a><a href="#">h</a><a href="#top">t</a>')
    assert page.links == ("#top",)


def test_links_in_comments_scripts_styles_templates_and_text_are_ignored() -> None:
    page = _page(
        "<head><style>a[href='/style'] {}</style>"
        "<script>document.write('<a href=\"/script\">s</a>')</script></head><body>"
        '<!-- <a href="/comment">c</a> -->'
        '<template><a href="/template">t</a></template>'
        '<textarea><a href="/textarea">x</a></textarea>'
        '<a href="/real">r</a></body>'
    )
    assert page.links == ("/real",)


def test_nested_and_broken_markup_still_yields_links() -> None:
    page = _page(
        '<table><a href="/fostered">f</a><tr><td><a href="/cell">c</td></table>'
        '<a href="/outer"><div><a href="/inner">i</a></div></a><a href=/unclosed '
    )
    # As in a browser's DOM: the nested <a> closes the outer one, whose formatting is
    # reconstructed inside the <div>; a tag cut off by the end of input is no element.
    assert page.links == ("/fostered", "/cell", "/outer", "/outer", "/inner")


def test_rel_nofollow_links_are_dropped_and_counted() -> None:
    body = (
        '<a href="/keep">k</a><a href="/ad" rel="nofollow">n</a>'
        '<a href="/ext" rel="external NoFollow">e</a><a href="/other" rel="noopener">o</a>'
    )
    page = _page(body)
    assert page.links == ("/keep", "/other")
    assert page.nofollow_links == 2
    kept = _page(body, honour_nofollow=False)
    assert kept.links == ("/keep", "/ad", "/ext", "/other")
    assert kept.nofollow_links == 0


def test_max_links_caps_the_links_read() -> None:
    body = "".join(f'<a href="/p{i}">{i}</a>' for i in range(20))
    assert _page(body, max_links=3).links == ("/p0", "/p1", "/p2")
    assert _page(body, max_links=0).links == ()
    assert len(_page(body).links) == 20


# --- base, canonical, title -------------------------------------------------------------------


def test_base_href_is_the_first_one_and_stays_raw() -> None:
    page = _page(
        '<head><base target="_top"><base href=" ../docs/ "><base href="https://x.test/"></head>'
    )
    assert page.base_href == "../docs/"
    assert _page("<a href=x>x</a>").base_href is None


def test_canonical_is_the_first_link_with_the_canonical_rel_token() -> None:
    page = _page(
        '<head><link rel="alternate" href="/amp"><link rel="Canonical" href=" /c?a=1&amp;b=2 ">'
        '<link rel="canonical" href="/second"></head>'
    )
    assert page.canonical == "/c?a=1&b=2"
    assert _page('<link rel="stylesheet" href="/s.css">').canonical is None


def test_title_is_collapsed_and_svg_titles_are_not_the_page_title() -> None:
    page = _page("<body><svg><g><title>icon</title></g></svg><title>\n  A   page\t</title>")
    assert page.title == "A page"
    assert _page("<svg><title>icon</title></svg>").title is None
    assert _page("<title>   </title>").title is None


# --- meta robots --------------------------------------------------------------------------------


def test_meta_nofollow_drops_every_link() -> None:
    body = '<meta name="robots" content="nofollow"><a href="/a">a</a><a href="/b">b</a>'
    page = _page(body)
    assert (page.nofollow, page.noindex, page.links) == (True, False, ())
    ignored = _page(body, honour_nofollow=False)
    assert ignored.nofollow is True
    assert ignored.links == ("/a", "/b")


@pytest.mark.parametrize(
    ("content", "noindex", "nofollow"),
    [
        ("noindex", True, False),
        ("NoIndex, follow", True, False),
        ("none", True, True),
        ("noindex,nofollow", True, True),
        ("noindex nofollow", True, True),
        ("index, follow", False, False),
        ("all", False, False),
        ("max-snippet:50, nosnippet", False, False),
    ],
)
def test_meta_robots_content(content: str, noindex: bool, nofollow: bool) -> None:
    page = _page(f'<head><meta name="ROBOTS" content="{content}"></head><a href="/x">x</a>')
    assert (page.noindex, page.nofollow) == (noindex, nofollow)


def test_meta_for_our_agent_applies_and_other_agents_are_ignored() -> None:
    body = (
        '<meta name="otherbot" content="noindex"><meta name="Trawl" content="nofollow">'
        '<a href="/x">x</a>'
    )
    assert (_page(body).noindex, _page(body).nofollow) == (False, True)
    other = _page(body, agent_token="OtherBot")
    assert (other.noindex, other.nofollow, other.links) == (True, False, ("/x",))


# --- encodings ----------------------------------------------------------------------------------


def test_latin1_page_with_meta_charset() -> None:
    body = '<meta charset="ISO-8859-1"><title>Café</title><a href="/café">c</a>'.encode("latin-1")
    page = parse_html(body)
    assert (page.title, page.links) == ("Café", ("/café",))


def test_http_equiv_charset_and_windows_1252_reading_of_latin1() -> None:
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=latin1">'
        "<title>\x93quoted\x94 \x80</title>"
    ).encode("latin-1")
    assert parse_html(body).title == "\u201cquoted\u201d \u20ac"


def test_transport_charset_beats_meta_and_bom_beats_both() -> None:
    body = '<meta charset="utf-8"><title>Привет</title>'.encode("koi8-r")
    assert parse_html(body, charset="KOI8-R").title == "Привет"
    utf8 = b"\xef\xbb\xbf" + '<meta charset="koi8-r"><title>Привет</title>'.encode()
    assert parse_html(utf8, charset="koi8-r").title == "Привет"
    utf16 = "\ufeff<title>Grüße</title>".encode("utf-16-le")
    assert parse_html(utf16).title == "Grüße"


@pytest.mark.parametrize(
    "label", ["punycode", "unicode_escape", "utf-7", "utf-32", "rot13", "idna", "bogus", ""]
)
def test_unusable_charset_labels_fall_back_to_utf8(label: str) -> None:
    body = f'<meta charset="{label}"><title>naïve \\u00e9 +AGE-</title>'.encode()
    assert parse_html(body).title == "naïve \\u00e9 +AGE-"
    assert parse_html(body, charset=label).title == "naïve \\u00e9 +AGE-"


def test_invalid_utf8_becomes_replacement_characters() -> None:
    page = parse_html(b"<title>ok \xff\xfe end</title><a href='/\xc3'>x</a>")
    assert page.title == "ok \ufffd\ufffd end"
    assert page.links == ("/\ufffd",)


# --- never raises -------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "<a href='/x'>",
        "</a>",
        "<area href=y>",
        "<base href=",
        "<meta name=robots content='none'>",
        "<meta charset=",
        "shift_jis>",
        "utf-16>",
        "<link rel=canonical href=/c>",
        "<!--",
        "-->",
        "<script>",
        "<template>",
        "<svg><title>",
        "<table><tr>",
        "&amp;",
        "&#0;",
        "\x00",
        "é",
        '"',
    ]
)


@given(body=st.binary(max_size=2048), charset=st.none() | st.text(max_size=20))
def test_parse_html_never_raises_on_bytes(body: bytes, charset: str | None) -> None:
    page = parse_html(body, charset=charset)
    assert all(isinstance(link, str) and link for link in page.links)


@given(
    parts=st.lists(_FRAGMENTS | st.text(max_size=8), max_size=40),
    encoding=st.sampled_from(["utf-8", "latin-1", "utf-16-le", "shift_jis"]),
)
def test_parse_html_never_raises_on_markup(parts: list[str], encoding: str) -> None:
    body = "".join(parts).encode(encoding, "replace")
    page = parse_html(body, max_links=5)
    assert len(page.links) <= 5


@given(values=st.lists(st.text(max_size=40), max_size=5), agent=st.text(max_size=10))
def test_robots_header_never_raises(values: list[str], agent: str) -> None:
    noindex, nofollow = robots_header(values, agent)
    assert isinstance(noindex, bool)
    assert isinstance(nofollow, bool)


# --- X-Robots-Tag -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], (False, False)),
        (["noindex, nofollow"], (True, True)),
        (["NONE"], (True, True)),
        (["noindex", "nofollow"], (True, True)),
        (["all"], (False, False)),
        (["trawl: nofollow"], (False, True)),
        (["TRAWL: noindex"], (True, False)),
        (["otherbot: noindex, nofollow"], (False, False)),
        (["otherbot: noindex, nofollow", "nofollow"], (False, True)),
        (["noindex, otherbot: nofollow"], (True, False)),
        (["otherbot: noindex, trawl: nofollow"], (False, True)),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"], (True, False)),
        (["max-snippet: 20, nofollow"], (False, True)),
        (["unavailable_after: Friday, 25-Jun-10 15:00:00 PST, nofollow"], (False, True)),
    ],
)
def test_robots_header(values: list[str], expected: tuple[bool, bool]) -> None:
    assert robots_header(values) == expected


def test_robots_header_for_another_agent_token() -> None:
    values = ["googlebot: noindex", "trawl: nofollow"]
    assert robots_header(values, "Googlebot") == (True, False)
    assert robots_header(values) == (False, True)


# --- is_html ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html", True),
        ("TEXT/HTML; charset=UTF-8", True),
        (" text/html ;charset=iso-8859-1", True),
        ("application/xhtml+xml", True),
        ("text/plain", False),
        ("application/pdf", False),
        ("application/json; charset=utf-8", False),
        ("image/png", False),
        ("text/htmlx", False),
    ],
)
def test_is_html_decides_by_media_type(content_type: str, expected: bool) -> None:
    # The body looks like HTML in every case: a non-empty media type alone decides.
    assert is_html(content_type, b"<!doctype html><html>") is expected


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"<!DOCTYPE html><html>", True),
        (b"  \n\t<!doctype HTML>", True),
        (b"\xef\xbb\xbf<html lang=en>", True),
        (b"<HEAD><title>x</title>", True),
        (b"<body>", True),
        (b'<a href="/x">', True),
        (b"<!-- generated -->", True),
        (b"<title>x</title>", True),
        (b"<br/>", True),
        ("\ufeff<html>".encode("utf-16-le"), True),
        (b"%PDF-1.7\n", False),
        (b"\x89PNG\r\n\x1a\n", False),
        (b'{"html": "<html>"}', False),
        (b"plain text mentioning <html>", False),
        (b"<abbr>", False),
        (b"<?xml version='1.0'?><feed>", False),
        (b"", False),
    ],
)
def test_is_html_sniffs_when_content_type_is_missing(head: bytes, expected: bool) -> None:
    assert is_html(None, head) is expected
    assert is_html("", head) is expected


# --- conformance: robots meta and X-Robots-Tag ---------------------------------------------------

CONFORMANCE = Path(__file__).parent / "data" / "conformance" / "robots_meta.json"
ROBOTS_META: dict[str, Any] = json.loads(CONFORMANCE.read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = ROBOTS_META["cases"]
ACTED_ON = frozenset({"noindex", "nofollow"})

_REPEXT = (
    "draft-illyes-repext-00 'Robots-Tag: agent=rules; ...' is an individual Internet-Draft, "
    "not a standard; trawl reads the X-Robots-Tag header in Google's 'agent: rules' syntax."
)
DELIBERATE_DIFFERENCES: dict[str, str] = {
    "repext-header-global-and-token": _REPEXT,
    "repext-header-global-omitted": _REPEXT,
}


def _outcome(case: dict[str, Any], token: str) -> set[str]:
    """The restrictive rules trawl applies for ``token`` to the case's meta tags and headers."""
    metas = "".join(
        f'<meta name="{html.escape(m["name"])}" content="{html.escape(m["content"])}">'
        for m in case["meta"]
    )
    body = f"<!doctype html><html><head>{metas}</head><body></body></html>".encode()
    page = parse_html(body, agent_token=token)
    values = [
        value.strip()
        for name, _, value in (line.partition(":") for line in case["headers"])
        if name.strip().lower() == "x-robots-tag"
    ]
    header_noindex, header_nofollow = robots_header(values, token)
    flags = {
        "noindex": page.noindex or header_noindex,
        "nofollow": page.nofollow or header_nofollow,
    }
    return {rule for rule, applied in flags.items() if applied}


def _case_passes(case: dict[str, Any]) -> bool:
    for token, rules in case["expected"].items():
        expected = {rule.lower() for rule in rules} & ACTED_ON
        if _outcome(case, token) != expected:
            return False
    return True


def test_deliberate_differences_name_real_cases() -> None:
    assert set(DELIBERATE_DIFFERENCES) <= {case["id"] for case in CASES}
    assert len(CASES) == 16


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_robots_meta_conformance(case: dict[str, Any]) -> None:
    assert _case_passes(case) is (case["id"] not in DELIBERATE_DIFFERENCES), case["basis"]


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html; charset=ISO-8859-1", "ISO-8859-1"),
        ('text/html;charset="utf-8"', "utf-8"),
        ("text/html; foo=bar; Charset=windows-1252", "windows-1252"),
        ("text/html", None),
        ("text/html; charset=", None),
        (None, None),
    ],
)
def test_content_charset(content_type: str | None, expected: str | None) -> None:
    assert content_charset(content_type) == expected


def test_header_charset_decodes_a_page_without_meta_charset() -> None:
    body = '<!doctype html><a href="/café">x</a>'.encode("iso-8859-1")
    page = parse_html(body, charset=content_charset("text/html; charset=ISO-8859-1"))
    assert page.links == ("/café",)
