"""The page a handler reads: its fields, selectors, links, follows and main text.

Pages are inline HTML or the hand-checked pages of tests/data/text.
"""

from __future__ import annotations

import pytest

from test_text import PAGES
from trawl.content.text import extract_text
from trawl.handlers.follow import Follow
from trawl.handlers.page import Page

URL = "http://shop.test/books/index.html"
CATALOGUE = b"""<!doctype html><html><head><title>Books</title></head><body>
<nav><a href="/">Home</a> <a href="about.html" rel="nofollow">About</a></nav>
<article class="book"><h3><a href="one.html" title="One">Book one</a></h3>
  <p class="price">\xc2\xa39.99</p></article>
<article class="book"><h3><a href="../two.html">Book two</a></h3>
  <p class="price">\xc2\xa312.50</p></article>
<area href="http://other.test/map" alt="map">
<a href="#top">Top</a>
<ul class="pager"><li class="next"><a href="?page=2">next</a></li></ul>
</body></html>"""


def page(body: bytes = CATALOGUE, **fields: object) -> Page:
    return Page(url=URL, body=body, **fields)  # type: ignore[arg-type]


def test_a_page_holds_what_the_fetch_gave() -> None:
    p = Page(
        url=URL, status=203, headers={"Content-Type": "text/html; charset=utf-8"},
        body=CATALOGUE, depth=2, fetched_at=1_700_000_000.5, label="listing",
    )  # fmt: skip
    assert (p.url, p.final_url, p.status, p.depth) == (URL, URL, 203, 2)
    assert (p.fetched_at, p.label, p.body) == (1_700_000_000.5, "listing", CATALOGUE)
    assert p.headers == {"content-type": "text/html; charset=utf-8"}
    assert "£9.99" in p.text
    with pytest.raises(AttributeError, match="read-only"):
        p.url = "http://elsewhere.test/"


def test_the_text_is_decoded_by_the_http_charset_then_meta() -> None:
    latin = "<p>café</p>".encode("latin-1")
    assert page(latin, headers={"content-type": "text/html; charset=iso-8859-1"}).text == (
        "<p>café</p>"
    )
    meta = b'<meta charset="iso-8859-1"><p>caf\xe9</p>'
    assert "café" in page(meta).text
    assert "caf\ufffd" in page(latin).text


def test_css_and_xpath_select_text_and_attributes() -> None:
    p = page()
    assert p.css("article h3 a::text").getall() == ["Book one", "Book two"]
    assert p.css("article h3 a::attr(href)").getall() == ["one.html", "../two.html"]
    assert p.css("h3 a::attr(title)").get() == "One"
    assert p.css("p.price::text").getall() == ["£9.99", "£12.50"]
    assert p.css("li.next a::attr(href)").get() == "?page=2"
    assert p.css("table td::text").get() is None
    assert p.xpath("//article[2]//a/text()").get() == "Book two"
    assert p.xpath("//a[@title=$t]/@href", t="One").get() == "one.html"
    assert p.xpath("//title/text()").get() == "Books"


def test_links_are_absolute_in_document_order() -> None:
    # rel=nofollow left out, as the crawl leaves it out; fragments kept, as resolved.
    assert page().links == [
        "http://shop.test/",
        "http://shop.test/books/one.html",
        "http://shop.test/two.html",
        "http://other.test/map",
        "http://shop.test/books/index.html#top",
        "http://shop.test/books/index.html?page=2",
    ]


def test_links_resolve_against_the_base_element() -> None:
    body = b'<base href="http://cdn.test/x/"><a href="y.html">y</a><a href="/z">z</a>'
    p = page(body)
    assert p.base == "http://cdn.test/x/"
    assert p.links == ["http://cdn.test/x/y.html", "http://cdn.test/z"]
    assert page(b'<a href="a">a</a>').base == URL


def test_links_and_base_given_by_the_extractor_are_kept() -> None:
    p = page(base="http://given.test/", links=["http://given.test/a"])
    assert p.links == ["http://given.test/a"]
    assert list(p.follow("b")) == [Follow("http://given.test/b")]


def test_hrefs_parsed_by_the_extractor_resolve_against_the_base() -> None:
    """The extract stage passes the link targets it parsed: the body is not read again
    (here it holds other links, which must not appear)."""
    page = Page(
        url="http://a.test/x/y", body=b'<a href="/not-these">', base="http://a.test/dir/",
        hrefs=["p1", "/p2", "http://b.test/p3", "http://[bad"],
    )  # fmt: skip
    assert page.links == ["http://a.test/dir/p1", "http://a.test/p2", "http://b.test/p3"]


def test_follow_resolves_against_the_base_and_skips_nothing_urls() -> None:
    p = page()
    hrefs = p.css("article h3 a::attr(href)").getall()
    assert list(p.follow(hrefs, label="book", priority=0.5)) == [
        Follow("http://shop.test/books/one.html", "book", 0.5),
        Follow("http://shop.test/two.html", "book", 0.5),
    ]
    assert list(p.follow(p.css("li.next a::attr(href)").get())) == [
        Follow("http://shop.test/books/index.html?page=2", None, None)
    ]
    assert list(p.follow(p.css("li.prev a::attr(href)").get())) == []
    skipped = [None, "", "   ", "#", "http://[broken/", " https://abs.test/x "]
    assert list(p.follow(skipped, label="x")) == [Follow("https://abs.test/x", "x")]
    with pytest.raises(TypeError, match="not SelectorList"):
        list(p.follow([p.css("a")]))  # type: ignore[list-item]


def test_main_text_as_plain_text_is_the_text_output_s() -> None:
    news = PAGES["news_article"]
    p = Page(url=news.url, body=news.body)
    found = extract_text(news.body, news.url, None)
    assert found is not None
    assert p.main_text() == found.text
    assert p.main_text("text") == found.text
    assert not (p.main_text() or "#").startswith("#")
    assert page(b"<html><body></body></html>").main_text() is None


def test_main_text_as_markdown_keeps_headings_lists_tables_and_links() -> None:
    news, docs, listing = PAGES["news_article"], PAGES["docs_page"], PAGES["listing"]
    text = Page(url=news.url, body=news.body).main_text("markdown")
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == "# Harbour wall repairs to start in spring after winter storms"
    assert "## What the work involves" in lines
    assert any(line.startswith("- Phase one:") for line in lines)
    assert "" in lines
    table = Page(url=docs.url, body=docs.body).main_text("markdown")
    assert table is not None
    assert "|---|---|" in table
    teasers = Page(url=listing.url, body=listing.body).main_text("markdown")
    assert teasers is not None
    assert "## [Roman pottery kilns found under a supermarket car park](" in teasers
    assert f"]({listing.url}science/2024/mar/11/roman-kiln-discovery)" in teasers
    with pytest.raises(ValueError, match="format must be one of text, markdown"):
        page().main_text("html")  # type: ignore[arg-type]
