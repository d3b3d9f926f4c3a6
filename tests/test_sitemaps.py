"""Sitemap parsing: kinds, namespaces, fields, limits, gzip and hostile XML."""

from __future__ import annotations

import gzip
import math
import time
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trawl.freshness.sitemap_parser import (
    MAX_BYTES,
    MAX_FIELD_CHARS,
    MAX_URLS,
    Sitemap,
    SitemapEntry,
    SitemapError,
    SitemapKind,
    parse_sitemap,
)

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
SITE = "https://www.example.com"
_ONE_URL = f'<urlset xmlns="{NS}"><url><loc>{SITE}/\u00e9</loc></url></urlset>'


def _urlset(*urls: str, namespace: str = NS, extra: str = "") -> bytes:
    xmlns = f' xmlns="{namespace}"' if namespace else ""
    body = "".join(f"<url>{url}</url>" for url in urls)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset{xmlns}{extra}>{body}</urlset>'.encode()


def _locs(*paths: str) -> bytes:
    return _urlset(*(f"<loc>{SITE}{path}</loc>" for path in paths))


def _parsed(body: bytes, **limits: int) -> Sitemap:
    result = parse_sitemap(body, **limits)
    assert isinstance(result, Sitemap), result
    return result


def _one(url_body: str) -> SitemapEntry:
    (entry,) = _parsed(_urlset(url_body)).entries
    return entry


def _gzip_stream(head: bytes, filler: bytes, size: int) -> bytes:
    """``head`` then ``size`` bytes of ``filler``, gzipped without building it whole."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(head)]
    block = filler * (1 << 20)
    parts.extend(compressor.compress(block) for _ in range(size >> 20))
    parts.append(compressor.flush())
    return b"".join(parts)


# --- kinds ----------------------------------------------------------------------------


def test_urlset_gives_every_field_in_document_order() -> None:
    body = _urlset(
        "<loc>https://www.example.com/a</loc><lastmod>2024-03-04</lastmod>"
        "<changefreq>daily</changefreq><priority>0.8</priority>",
        "<loc>https://www.example.com/b</loc>",
    )
    assert _parsed(body) == Sitemap(
        SitemapKind.URLSET,
        (
            SitemapEntry(f"{SITE}/a", 1709510400.0, 0.8),
            SitemapEntry(f"{SITE}/b"),
        ),
    )


def test_sitemap_index_lists_child_sitemaps() -> None:
    body = (
        f'<?xml version="1.0"?><sitemapindex xmlns="{NS}">'
        f"<sitemap><loc>{SITE}/s1.xml.gz</loc><lastmod>2024-03-04T05:06Z</lastmod></sitemap>"
        f"<sitemap><loc>{SITE}/s2.xml</loc></sitemap>"
        "</sitemapindex>"
    ).encode()
    assert _parsed(body) == Sitemap(
        SitemapKind.INDEX,
        (SitemapEntry(f"{SITE}/s1.xml.gz", 1709528760.0), SitemapEntry(f"{SITE}/s2.xml")),
    )


def test_entries_of_the_other_kind_are_ignored() -> None:
    index = f'<sitemapindex xmlns="{NS}"><url><loc>{SITE}/page</loc></url></sitemapindex>'
    assert _parsed(index.encode()).entries == ()
    urlset = _urlset().replace(
        b"</urlset>", f"<sitemap><loc>{SITE}/s</loc></sitemap></urlset>".encode()
    )
    assert _parsed(urlset).entries == ()


def test_duplicates_are_kept() -> None:
    assert [e.loc for e in _parsed(_locs("/a", "/b", "/a")).entries] == [
        f"{SITE}/a",
        f"{SITE}/b",
        f"{SITE}/a",
    ]


def test_text_sitemap_keeps_absolute_http_urls_only() -> None:
    body = (
        "\ufeff  https://www.example.com/a  \r\n"
        "\n"
        "HTTP://www.example.com/B\r"
        "# a comment\n"
        "/relative/path\n"
        "ftp://www.example.com/file\n"
        "see https://www.example.com/inside-a-sentence\n"
        "https://www.example.com/two https://www.example.com/urls\n"
        "https://\n"
        "\thttps://www.example.com/c?q=1#top"
    ).encode()
    assert _parsed(body) == Sitemap(
        SitemapKind.TEXT,
        (
            SitemapEntry(f"{SITE}/a"),
            SitemapEntry("HTTP://www.example.com/B"),
            SitemapEntry(f"{SITE}/c?q=1#top"),
        ),
    )


def test_text_sitemap_with_invalid_utf8_is_decoded_with_replacement() -> None:
    body = b"https://www.example.com/caf\xc3\xa9\nhttps://www.example.com/bad\xff\n"
    assert [e.loc for e in _parsed(body).entries] == [
        f"{SITE}/caf\u00e9",
        f"{SITE}/bad\ufffd",
    ]


@pytest.mark.parametrize("body", [b"", b" \r\n\t ", b"\xef\xbb\xbf", b"not a url\n"])
def test_empty_text_sitemap_has_no_entries(body: bytes) -> None:
    assert _parsed(body) == Sitemap(SitemapKind.TEXT, ())


def test_xml_after_bom_and_blank_lines_is_still_xml() -> None:
    result = _parsed(b"\xef\xbb\xbf\r\n  \n" + _locs("/a"))
    assert result.kind is SitemapKind.URLSET
    assert [e.loc for e in result.entries] == [f"{SITE}/a"]


def test_utf16_xml_with_byte_order_mark() -> None:
    body = f'<?xml version="1.0" encoding="UTF-16"?>{_ONE_URL}'
    assert [e.loc for e in _parsed(body.encode("utf-16")).entries] == [f"{SITE}/\u00e9"]


def test_declared_latin1_encoding_is_decoded() -> None:
    body = f'<?xml version="1.0" encoding="ISO-8859-1"?>{_ONE_URL}'
    assert [e.loc for e in _parsed(body.encode("latin-1")).entries] == [f"{SITE}/\u00e9"]


# --- gzip -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        _locs("/a", "/b"),
        f"<sitemapindex><sitemap><loc>{SITE}/a</loc></sitemap></sitemapindex>".encode(),
        f"{SITE}/a\n{SITE}/b\n".encode(),
    ],
)
def test_gzip_is_detected_by_its_magic_bytes_for_every_kind(body: bytes) -> None:
    assert parse_sitemap(gzip.compress(body)) == parse_sitemap(body)
    assert _parsed(gzip.compress(body)).entries


def test_concatenated_gzip_members_and_zero_padding() -> None:
    whole = f"{SITE}/a\n{SITE}/b\n{SITE}/c\n".encode()
    body = gzip.compress(whole[:10]) + gzip.compress(whole[10:]) + b"\x00" * 700_000
    assert [e.loc for e in _parsed(body).entries] == [f"{SITE}/a", f"{SITE}/b", f"{SITE}/c"]


def test_large_gzip_in_many_slices() -> None:
    paths = [f"/page/{i}" for i in range(20_000)]
    body = gzip.compress(_locs(*paths), compresslevel=0)
    assert len(body) > 300 * 1024
    assert [e.loc for e in _parsed(body).entries] == [SITE + path for path in paths]


def _corrupt_crc(body: bytes) -> bytes:
    return body[:-8] + bytes([body[-8] ^ 0xFF]) + body[-7:]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:-4], id="truncated-trailer"),
        pytest.param(lambda b: b[: len(b) // 2], id="truncated-middle"),
        pytest.param(lambda b: b[:2], id="magic-only"),
        pytest.param(lambda b: b[:12] + b"\xff" * 40 + b[52:], id="corrupt-deflate"),
        pytest.param(_corrupt_crc, id="bad-crc"),
        pytest.param(lambda b: b + b"trailing garbage", id="trailing-garbage"),
        pytest.param(lambda b: b"\x1f\x8bnot gzip at all", id="fake-magic"),
    ],
)
def test_bad_gzip(damage: Callable[[bytes], bytes]) -> None:
    body = gzip.compress(_locs(*(f"/p{i}" for i in range(200))))
    assert parse_sitemap(damage(body)) is SitemapError.BAD_GZIP


# --- namespaces and extensions ----------------------------------------------------------


@pytest.mark.parametrize(
    "namespace",
    [
        NS,
        "https://www.sitemaps.org/schemas/sitemap/0.9",
        "http://www.google.com/schemas/sitemap/0.84",
        "http://www.google.com/schemas/sitemap/0.9",
        "",
    ],
)
def test_accepted_namespaces(namespace: str) -> None:
    body = _urlset(f"<loc>{SITE}/a</loc><priority>0.5</priority>", namespace=namespace)
    assert _parsed(body).entries == (SitemapEntry(f"{SITE}/a", priority=0.5),)


def test_sitemap_namespace_through_a_prefix() -> None:
    body = f'<sm:urlset xmlns:sm="{NS}"><sm:url><sm:loc>{SITE}/a</sm:loc></sm:url></sm:urlset>'
    assert [e.loc for e in _parsed(body.encode()).entries] == [f"{SITE}/a"]


def test_root_in_a_foreign_namespace_is_not_a_sitemap() -> None:
    body = _urlset(f"<loc>{SITE}/a</loc>", namespace="http://example.com/not-sitemaps")
    assert parse_sitemap(body) is SitemapError.NOT_A_SITEMAP


def test_extension_elements_and_their_locs_are_ignored() -> None:
    extra = (
        ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
        ' xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"'
        ' xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"'
        ' xmlns:xhtml="http://www.w3.org/1999/xhtml"'
    )
    page = (
        f"<image:image><image:loc>{SITE}/img.png</image:loc></image:image>"
        f"<loc>{SITE}/page</loc>"
        f"<video:video><video:content_loc>{SITE}/v.mp4</video:content_loc>"
        f"<video:player_loc>{SITE}/player</video:player_loc></video:video>"
        "<news:news><news:publication_date>2020-01-01</news:publication_date></news:news>"
        f'<xhtml:link rel="alternate" hreflang="de" href="{SITE}/de/page"/>'
    )
    only_images = f"<image:image><image:loc>{SITE}/other.png</image:loc></image:image>"
    stray = f"<image:loc>{SITE}/stray.png</image:loc>"
    body = _urlset(page, only_images, extra=extra).replace(
        b"</urlset>", stray.encode() + b"</urlset>"
    )
    assert _parsed(body).entries == (SitemapEntry(f"{SITE}/page"),)


def test_undeclared_prefix_is_malformed() -> None:
    body = _urlset(f"<loc>{SITE}/a</loc><image:image/>")
    assert parse_sitemap(body) is SitemapError.MALFORMED


# --- loc ------------------------------------------------------------------------------


def test_loc_is_stripped_but_otherwise_verbatim() -> None:
    entry = _one(f"<loc>\n   {SITE}/A%2f/../b?x=1&amp;y=2#frag \t\n</loc>")
    assert entry.loc == f"{SITE}/A%2f/../b?x=1&y=2#frag"


def test_loc_in_cdata_and_character_references() -> None:
    assert _one(f"<loc><![CDATA[{SITE}/a?b=1&c=2]]></loc>").loc == f"{SITE}/a?b=1&c=2"
    assert _one(f"<loc>{SITE}/&#x41;&#66;</loc>").loc == f"{SITE}/AB"


def test_empty_or_missing_loc_skips_the_entry() -> None:
    body = _urlset(
        "<loc></loc>",
        "<loc>   </loc>",
        "<lastmod>2024-01-01</lastmod>",
        f"<loc>{SITE}/kept</loc>",
    )
    assert _parsed(body).entries == (SitemapEntry(f"{SITE}/kept"),)


def test_first_loc_wins() -> None:
    assert _one(f"<loc>{SITE}/first</loc><loc>{SITE}/second</loc>").loc == f"{SITE}/first"


def test_overlong_loc_and_text_line_are_dropped() -> None:
    long_url = f"{SITE}/" + "x" * MAX_FIELD_CHARS
    assert _parsed(_urlset(f"<loc>{long_url}</loc>", f"<loc>{SITE}/ok</loc>")).entries == (
        SitemapEntry(f"{SITE}/ok"),
    )
    assert _parsed(f"{long_url}\n{SITE}/ok\n".encode()).entries == (SitemapEntry(f"{SITE}/ok"),)


def test_longest_kept_loc() -> None:
    url = f"{SITE}/" + "x" * (MAX_FIELD_CHARS - len(SITE) - 1)
    assert len(url) == MAX_FIELD_CHARS
    assert _one(f"<loc>{url}</loc>").loc == url
    assert _parsed(url.encode()).entries == (SitemapEntry(url),)


# --- lastmod and priority ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", 1704067200.0),
        ("2024-03", 1709251200.0),
        ("2024-03-04", 1709510400.0),
        ("2024-03-04T05:06Z", 1709528760.0),
        ("2024-03-04T05:06+00:00", 1709528760.0),
        ("2024-03-04T05:06:07+02:00", 1709521567.0),
        ("2024-03-04T05:06:07.5-01:30", 1709534167.5),
        ("2024-03-04T05:06:07.25Z", 1709528767.25),
        ("2024-03-04T05:06:07+0200", 1709521567.0),
        ("2024-03-04T05:06", 1709528760.0),
        ("  2024-03-04\n", 1709510400.0),
        ("1970-01-01T00:00:00Z", 0.0),
        ("2024-02-29", 1709164800.0),
    ],
)
def test_lastmod_formats(text: str, expected: float) -> None:
    assert _one(f"<loc>{SITE}/</loc><lastmod>{text}</lastmod>").lastmod == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "24-03-04",
        "2024-3-4",
        "2024-13-01",
        "2023-02-29",
        "2024-03-32",
        "2024-03-04T25:00Z",
        "2024-03-04T05:60Z",
        "2024-03-04T05:06:60Z",
        "2024-03-04T05Z",
        "2024-03-04 05:06Z",
        "2024-03-04T05:06:07+02:99",
        "2024-03-04T05:06:07+24:00",
        "2024-03-04T05:06:07 +02:00",
        "2024-03-04T05:06:07.Z",
        "0000-01-01",
        "2024-W10",
        "20240304",
        "\u0662\u0660\u0662\u0664",
        "Mon, 04 Mar 2024 05:06:07 GMT",
    ],
)
def test_bad_lastmod_is_none(text: str) -> None:
    entry = _one(f"<loc>{SITE}/</loc><lastmod>{text}</lastmod>")
    assert entry == SitemapEntry(f"{SITE}/")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.0", 0.0),
        ("0", 0.0),
        ("1.0", 1.0),
        ("1", 1.0),
        ("1.", 1.0),
        ("0.5", 0.5),
        (" .8 ", 0.8),
        ("0.25", 0.25),
        ("1.1", None),
        ("2", None),
        ("-0.1", None),
        ("-0", None),
        ("+0.5", None),
        ("NaN", None),
        ("inf", None),
        ("1e-1", None),
        ("0_5", None),
        ("high", None),
        ("", None),
    ],
)
def test_priority_bounds(text: str, expected: float | None) -> None:
    assert _one(f"<loc>{SITE}/</loc><priority>{text}</priority>").priority == expected


# --- feeds ------------------------------------------------------------------------------

ATOM = "http://www.w3.org/2005/Atom"


def _rss(*items: str, channel: str = "") -> bytes:
    body = "".join(f"<item>{item}</item>" for item in items)
    return f'<rss version="2.0"><channel><title>t</title>{channel}{body}</channel></rss>'.encode()


def _atom(*entries: str, feed: str = "") -> bytes:
    body = "".join(f"<entry>{entry}</entry>" for entry in entries)
    return f'<feed xmlns="{ATOM}"><title>t</title>{feed}{body}</feed>'.encode()


def test_rss_items_give_their_link_and_pub_date() -> None:
    body = _rss(
        f"<title>a</title><link> {SITE}/a </link><pubDate>Mon, 04 Mar 2024 00:00:00 GMT</pubDate>",
        f"<link>{SITE}/b</link><guid>{SITE}/not-this</guid>",
        f"<guid isPermaLink='true'>{SITE}/guid-only</guid>",
        channel=f"<link>{SITE}/channel</link><pubDate>Mon, 04 Mar 2024 00:00:00 GMT</pubDate>",
    )
    assert _parsed(body) == Sitemap(
        SitemapKind.RSS, (SitemapEntry(f"{SITE}/a", 1709510400.0), SitemapEntry(f"{SITE}/b"))
    )


def test_an_atom_link_in_an_rss_item_is_not_its_link() -> None:
    body = (
        f'<rss version="2.0" xmlns:atom="{ATOM}"><channel><item>'
        f'<atom:link href="{SITE}/atom" rel="alternate"/><link>{SITE}/rss</link>'
        "</item></channel></rss>"
    ).encode()
    assert [e.loc for e in _parsed(body).entries] == [f"{SITE}/rss"]


def test_items_outside_the_channel_are_not_entries() -> None:
    body = f'<rss version="2.0"><item><link>{SITE}/a</link></item><channel/></rss>'.encode()
    assert _parsed(body).entries == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mon, 04 Mar 2024 00:00:00 GMT", 1709510400.0),
        ("Mon, 04 Mar 2024 00:00:00 +0000", 1709510400.0),
        ("04 Mar 2024 01:30:00 +0130", 1709510400.0),
        ("Sun, 03 Mar 2024 19:00:00 EST", 1709510400.0),
        ("Sun, 03 Mar 2024 16:00 PST", 1709510400.0),
        ("4 mar 24 00:00:00 UT", 1709510400.0),
        ("Thu, 04 Mar 99 00:00:00 GMT", 920505600.0),
    ],
)
def test_rss_pub_date_formats(text: str, expected: float) -> None:
    (entry,) = _parsed(_rss(f"<link>{SITE}/</link><pubDate>{text}</pubDate>")).entries
    assert entry.lastmod == expected


@pytest.mark.parametrize(
    "text",
    [
        "Mon, 04 Mar 2024 00:00:00",  # no zone: which moment is unknown
        "Mon, 04 Mar 2024 00:00:00 A",  # a military zone, of no agreed meaning
        "Mon, 31 Feb 2024 00:00:00 GMT",
        "Mon, 04 Foo 2024 00:00:00 GMT",
        "2024-03-04",
        "",
        "Mon, 04 Mar 2024 25:00:00 GMT",
    ],
)
def test_bad_rss_pub_date_is_none(text: str) -> None:
    (entry,) = _parsed(_rss(f"<link>{SITE}/</link><pubDate>{text}</pubDate>")).entries
    assert entry.lastmod is None


def test_atom_entries_give_their_alternate_link_and_updated() -> None:
    body = _atom(
        f'<link rel="edit" href="{SITE}/edit"/><link rel="alternate" href="{SITE}/a"/>'
        f'<link href="{SITE}/second"/><updated>2024-03-04T00:00:00Z</updated>'
        "<published>2020-01-01T00:00:00Z</published>",
        f'<link rel="enclosure" href="{SITE}/b.mp3"/><link href="{SITE}/b"/>',
        f'<link rel="self" href="{SITE}/self-only"/>',
        "<link/>",
        feed=f'<link rel="self" href="{SITE}/feed"/><link href="{SITE}/"/>'
        "<updated>2024-03-04T00:00:00Z</updated>",
    )
    assert _parsed(body) == Sitemap(
        SitemapKind.ATOM, (SitemapEntry(f"{SITE}/a", 1709510400.0), SitemapEntry(f"{SITE}/b"))
    )


def test_feeds_have_the_limits_of_sitemaps() -> None:
    rss = _rss(*(f"<link>{SITE}/{i}</link>" for i in range(3)))
    atom = _atom(*(f'<link href="{SITE}/{i}"/>' for i in range(3)))
    for body in (rss, atom, gzip.compress(rss), gzip.compress(atom)):
        assert len(_parsed(body, max_urls=3).entries) == 3
        assert parse_sitemap(body, max_urls=2) is SitemapError.TOO_MANY_URLS
    long = "x" * MAX_FIELD_CHARS
    assert _parsed(_atom(f'<link href="{SITE}/{long}"/>')).entries == ()
    assert _parsed(_rss(f"<link>{SITE}/{long}</link>")).entries == ()
    doctype = b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY e "x">]>' + _rss()
    assert parse_sitemap(doctype) is SitemapError.DTD_FORBIDDEN


# --- limits -------------------------------------------------------------------------------


def test_max_urls_is_allowed_and_one_more_refuses_the_file() -> None:
    assert len(_parsed(_locs("/1", "/2", "/3"), max_urls=3).entries) == 3
    assert parse_sitemap(_locs("/1", "/2", "/3", "/4"), max_urls=3) is SitemapError.TOO_MANY_URLS


def test_skipped_entries_do_not_count_towards_max_urls() -> None:
    body = _urlset(f"<loc>{SITE}/1</loc>", "<loc/>", "<loc> </loc>", f"<loc>{SITE}/2</loc>")
    assert len(_parsed(body, max_urls=2).entries) == 2


def test_max_urls_in_index_and_text_sitemaps() -> None:
    entries = "".join(f"<sitemap><loc>{SITE}/{i}.xml</loc></sitemap>" for i in range(3))
    index = f'<sitemapindex xmlns="{NS}">{entries}</sitemapindex>'.encode()
    assert len(_parsed(index, max_urls=3).entries) == 3
    assert parse_sitemap(index, max_urls=2) is SitemapError.TOO_MANY_URLS
    text = "".join(f"{SITE}/{i}\nnot a url\n" for i in range(3)).encode()
    assert len(_parsed(text, max_urls=3).entries) == 3
    assert parse_sitemap(text, max_urls=2) is SitemapError.TOO_MANY_URLS


def test_the_protocol_limit_of_50000_urls() -> None:
    assert MAX_URLS == 50_000
    urls = [f"<url><loc>{SITE}/page/{i}</loc></url>" for i in range(MAX_URLS + 1)]
    head = f'<urlset xmlns="{NS}">'
    exactly = f"{head}{''.join(urls[:-1])}</urlset>".encode()
    started = time.perf_counter()
    result = _parsed(exactly)
    print(f"50,000 <url> entries parsed in {time.perf_counter() - started:.3f} s")
    assert len(result.entries) == MAX_URLS
    assert result.entries[-1].loc == f"{SITE}/page/49999"
    assert parse_sitemap(f"{head}{''.join(urls)}</urlset>".encode()) is SitemapError.TOO_MANY_URLS
    text = "".join(f"{SITE}/page/{i}\n" for i in range(MAX_URLS + 1)).encode()
    assert parse_sitemap(text) is SitemapError.TOO_MANY_URLS


def test_max_bytes_on_a_plain_body() -> None:
    body = _locs("/a")
    assert _parsed(body, max_bytes=len(body)).entries
    assert parse_sitemap(body, max_bytes=len(body) - 1) is SitemapError.TOO_LARGE
    assert MAX_BYTES == 50 * 1024 * 1024


def test_max_bytes_applies_after_decompression() -> None:
    plain = _locs(*(f"/{i}" for i in range(1000)))
    body = gzip.compress(plain)
    assert len(body) < len(plain) // 4
    assert _parsed(body, max_bytes=len(plain)).entries
    assert parse_sitemap(body, max_bytes=len(plain) - 1) is SitemapError.TOO_LARGE


def test_max_bytes_applies_to_the_compressed_body_too() -> None:
    body = gzip.compress(_locs("/a"), compresslevel=0)
    assert parse_sitemap(body, max_bytes=len(body) - 1) is SitemapError.TOO_LARGE


def parsed_with_peak(body: bytes) -> tuple[Sitemap | SitemapError, int]:
    """``parse_sitemap(body)`` and the peak of memory Python allocated meanwhile."""
    tracemalloc.start()
    try:
        result = parse_sitemap(body)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("head", "filler"),
    [
        pytest.param(b"", b"\x00", id="zeros"),
        pytest.param(b"<urlset><!--", b"x", id="xml-comment"),
        pytest.param(b'<urlset a="', b"x", id="xml-attribute"),
        pytest.param(b"https://www.example.com/", b"x", id="text-line"),
    ],
)
def test_gzip_bomb_is_refused_within_bounded_memory(head: bytes, filler: bytes) -> None:
    bomb = _gzip_stream(head, filler, 200 << 20)
    assert len(bomb) < 1 << 20
    result, peak = parsed_with_peak(bomb)
    print(f"200 MB bomb: {result}, peak {peak / 2**20:.1f} MiB traced")
    assert result is SitemapError.TOO_LARGE
    assert peak < 100 << 20


def test_highly_compressed_body_just_within_the_limit_is_parsed() -> None:
    text = (
        b"<urlset><!--"
        + b" " * (4 << 20)
        + b"--><url><loc>https://www.example.com/</loc></url></urlset>"
    )
    body = gzip.compress(text)
    assert _parsed(body, max_bytes=len(text)).entries == (SitemapEntry(f"{SITE}/"),)
    assert parse_sitemap(body, max_bytes=len(text) - 1) is SitemapError.TOO_LARGE


# --- hostile and broken XML -----------------------------------------------------------------


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset><url><loc>https://www.example.com/&lol9;</loc></url></urlset>
"""

QUADRATIC = (
    b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY big "'
    + b"x" * 100_000
    + b'">]><urlset><url><loc>https://www.example.com/'
    + b"&big;" * 10_000
    + b"</loc></url></urlset>"
)

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>https://www.example.com/&secret;</loc></url></urlset>
"""

PARAMETER_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [
  <!ENTITY % remote SYSTEM "http://127.0.0.1:9/evil.dtd">
  %remote;
]>
<urlset><url><loc>https://www.example.com/a</loc></url></urlset>
"""

EXTERNAL_DTD = b"""<?xml version="1.0"?>
<!DOCTYPE urlset SYSTEM "file:///etc/passwd">
<urlset><url><loc>https://www.example.com/a</loc></url></urlset>
"""

HARMLESS_DOCTYPE = b"""<!DOCTYPE urlset>
<urlset><url><loc>https://www.example.com/a</loc></url></urlset>
"""


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(BILLION_LAUGHS, id="billion-laughs"),
        pytest.param(QUADRATIC, id="quadratic-blowup"),
        pytest.param(EXTERNAL_ENTITY, id="external-entity"),
        pytest.param(PARAMETER_ENTITY, id="parameter-entity"),
        pytest.param(EXTERNAL_DTD, id="external-dtd"),
        pytest.param(HARMLESS_DOCTYPE, id="any-doctype"),
    ],
)
def test_any_dtd_is_forbidden(body: bytes) -> None:
    assert parse_sitemap(body) is SitemapError.DTD_FORBIDDEN
    assert parse_sitemap(gzip.compress(body)) is SitemapError.DTD_FORBIDDEN


def test_external_entity_content_never_appears() -> None:
    for body in (EXTERNAL_ENTITY, EXTERNAL_DTD):
        result = parse_sitemap(body)
        assert "root:" not in repr(result)
        assert not isinstance(result, Sitemap)


def test_undefined_entity_is_malformed() -> None:
    assert parse_sitemap(_urlset(f"<loc>{SITE}/&secret;</loc>")) is SitemapError.MALFORMED


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"<html><body><p>Not found</p></body></html>", id="html"),
        pytest.param(
            b'<feed xmlns="http://purl.org/atom/ns#"><entry><link href="/a"/></entry></feed>',
            id="atom-0.3",
        ),
        pytest.param(b'<feed><entry><link href="/a"/></entry></feed>', id="feed-without-atom"),
        pytest.param(b"<url><loc>https://www.example.com/a</loc></url>", id="url-as-root"),
        pytest.param(b"<html><body><br></body>", id="broken-html"),
    ],
)
def test_other_roots_are_not_sitemaps(body: bytes) -> None:
    assert parse_sitemap(body) is SitemapError.NOT_A_SITEMAP


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_locs("/a", "/b")[:-5], id="truncated-after-entries"),
        pytest.param(_locs("/a").replace(b"</loc>", b"</lok>"), id="mismatched-tag"),
        pytest.param(_locs("/a") + b"<urlset/>", id="second-root"),
        pytest.param(_locs("/a") + b"junk", id="junk-after-root"),
        pytest.param(b'<?xml version="1.0"?>', id="no-root"),
        pytest.param(b"<", id="lone-bracket"),
        pytest.param(_locs("/a").replace(b"/a", b"/\x00a"), id="nul-byte"),
        pytest.param(_locs("/a").replace(b"/a", b"/\xff"), id="invalid-utf8"),
    ],
)
def test_broken_xml_refuses_the_whole_file(body: bytes) -> None:
    assert parse_sitemap(body) is SitemapError.MALFORMED


@pytest.mark.parametrize(
    "encoding", ["no-such-codec", "shift_jis", "utf-32", "hex", "idna", "punycode"]
)
def test_encoding_expat_cannot_use_is_malformed(encoding: str) -> None:
    body = f'<?xml version="1.0" encoding="{encoding}"?>{_ONE_URL}'
    assert parse_sitemap(body.encode("latin-1")) is SitemapError.MALFORMED


def test_nesting_deeper_than_any_sitemap_is_refused_at_once() -> None:
    body = b"<urlset>" + b"<a>" * 1_000_000 + b"</a>" * 1_000_000 + b"</urlset>"
    result, peak = parsed_with_peak(body)
    assert result is SitemapError.MALFORMED
    assert peak < 10 << 20
    nested = b"<urlset><url><loc>https://www.example.com/a</loc>" + b"<x>" * 20 + b"</x>" * 20
    assert _parsed(nested + b"</url></urlset>").entries == (SitemapEntry(f"{SITE}/a"),)


# --- never raises ---------------------------------------------------------------------------


def _check(result: Sitemap | SitemapError) -> None:
    if isinstance(result, Sitemap):
        assert isinstance(result.kind, SitemapKind)
        for entry in result.entries:
            assert entry.loc
            assert entry.loc == entry.loc.strip()
            assert entry.priority is None or 0.0 <= entry.priority <= 1.0
            assert entry.lastmod is None or math.isfinite(entry.lastmod)
    else:
        assert isinstance(result, SitemapError)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    _check(parse_sitemap(body, max_urls=5, max_bytes=1500))
    _check(parse_sitemap(gzip.compress(body), max_urls=5, max_bytes=1500))
    _check(parse_sitemap(b"\x1f\x8b" + body))


_FRAGMENTS = st.sampled_from(
    [
        "<urlset>",
        f'<urlset xmlns="{NS}">',
        "<sitemapindex>",
        "</urlset>",
        "<url>",
        "</url>",
        "<sitemap>",
        "</sitemap>",
        "<loc>",
        "</loc>",
        "<lastmod>",
        "</lastmod>",
        "<priority>",
        "</priority>",
        "<![CDATA[",
        "]]>",
        "<!DOCTYPE x>",
        "<!ENTITY a 'b'>",
        "&amp;",
        "&lt;",
        "&x;",
        "&#0;",
        "&#x41;",
        "<!--",
        "-->",
        "<?pi x?>",
        "\ufeff",
        "\n",
        " ",
        "https://www.example.com/a",
        "2024-03-04T05:06:07+02:00",
        "0.5",
        "9999-12-31T23:59:59-23:59",
        "0001-01-01T00:00+23:59",
        "1e400",
        '<?xml version="1.0" encoding="UTF-16"?>',
        '<?xml version="1.0" encoding="bogus"?>',
        '<?xml version="1.0" encoding="ISO-8859-1"?>',
        '<rss version="2.0">',
        "<channel>",
        "<item>",
        "</item>",
        "<link>",
        "</link>",
        "<pubDate>",
        "</pubDate>",
        "Mon, 04 Mar 99 25:61:61 -9999",
        f'<feed xmlns="{ATOM}">',
        "<entry>",
        "</entry>",
        '<link href="https://www.example.com/a"/>',
        '<link rel="alternate" href="',
        "<updated>",
        "</updated>",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=20)), max_size=40))
def test_sitemap_shaped_input_never_raises(fragments: list[str]) -> None:
    body = "".join(fragments).encode()
    _check(parse_sitemap(body, max_urls=3))
    _check(parse_sitemap(gzip.compress(body), max_urls=3))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_lastmod_or_priority_text_never_raises(text: str) -> None:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;")
    body = _urlset(f"<loc>{SITE}/</loc><lastmod>{escaped}</lastmod><priority>{escaped}</priority>")
    _check(parse_sitemap(body))
