"""A page longer than trawl.extract.parser.PARSE_PIECE is parsed a piece at a time, so that its
tree never holds more than a piece: it yields what the whole page parsed at once would."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from trawl.extract.parser import PARSE_PIECE, parse_html

HEAD = (
    '<!doctype html><html><head><title>Big page</title><base href="/base/">'
    '<link rel="canonical" href="/the-one"></head><body>'
)


def filler(size: int) -> str:
    """``size`` characters of dense markup without links."""
    return "<p>x</p>" * (size // 8)


def test_links_across_many_pieces_come_in_document_order() -> None:
    parts = [HEAD]
    for n in range(12):
        parts += [f'<a href="/p{n}">{n}</a>', filler(PARSE_PIECE // 3)]
    page = parse_html("".join(parts).encode())
    assert page.links == tuple(f"/p{n}" for n in range(12))
    assert (page.title, page.base_href, page.canonical) == ("Big page", "/base/", "/the-one")


def test_a_piece_never_ends_inside_a_comment_script_or_text_element() -> None:
    # Each hides a link near where a piece would end; read as markup it would be one.
    for opening, closing in [
        ("<!--", "-->"), ("<script>", "</script>"), ("<SCRIPT>", "</SCRIPT>"),
        ("<style>", "</style>"), ("<textarea>", "</textarea>"), ("<title>", "</title>"),
    ]:  # fmt: skip
        hidden = f'{opening}{"x" * 100} <a href="/hidden">h</a> {"y" * 100}{closing}'
        body = HEAD + filler(PARSE_PIECE - 150) + hidden + '<a href="/after">a</a>'
        assert parse_html(body.encode()).links == ("/after",), opening


def test_a_page_in_a_legacy_encoding_is_cut_between_characters() -> None:
    body = (
        '<meta charset="windows-1251">'
        + "".join(f'<a href="/статья-{n}">{"Привет " * 5000}</a>' for n in range(40))
    ).encode("windows-1251")
    assert len(body) > 2 * PARSE_PIECE
    page = parse_html(body)
    assert page.links == tuple(f"/статья-{n}" for n in range(40))


def test_a_nofollow_in_the_head_drops_the_links_of_every_piece() -> None:
    body = '<meta name="robots" content="noindex, nofollow">' + "".join(
        f'<a href="/p{n}">{n}</a>{filler(PARSE_PIECE // 2)}' for n in range(4)
    )
    page = parse_html(body.encode())
    assert (page.links, page.noindex, page.nofollow) == ((), True, True)


def test_max_links_counts_over_every_piece() -> None:
    body = "".join(f'<a href="/p{n}">{n}</a>{filler(PARSE_PIECE // 4)}' for n in range(10))
    assert parse_html(body.encode(), max_links=6).links == tuple(f"/p{n}" for n in range(6))


@settings(max_examples=20, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<a href='/l'>l</a>", "<p>", "</p>", "<!--", "-->", "<script>",
                         "</script>", "x" * 1000, "<", "&amp;", "é"]),
        min_size=1, max_size=60,
    )
)  # fmt: skip
def test_any_markup_cut_into_pieces_parses_without_error(parts: list[str]) -> None:
    unit = "".join(parts)
    body = (unit * (2 * PARSE_PIECE // len(unit) + 1)).encode()
    page = parse_html(body, max_links=100_000)
    assert all(link == "/l" for link in page.links)


def test_a_parse_of_10_mb_of_dense_markup_stays_near_one_pieces_tree() -> None:
    # In a process of its own, whose high-water mark is this parse's.
    code = (
        "import resource; from trawl.extract.parser import parse_html; "
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
        "parse_html(b'<p>x</p>' * (10 * 2**20 // 8)); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    grown = int(done.stdout) * 1024
    # About 42 bytes of tree a byte of this markup: 500 MB at once, 22 MB a piece (plus
    # the page's 10 MB and its copy without NUL characters).
    assert grown < 100 * 2**20, grown
