"""The clean text of an HTML page, and the two fingerprints that find its duplicates.

:func:`extract_text` decodes a page as a browser would (byte-order mark, then the HTTP
charset, then ``<meta>``, then UTF-8), keeps its main text (trawl.content.article: the
article container, resiliparse's main-content pass in C, a filter of link-heavy blocks and
the lead-in), which leaves out navigation, cookie notices, sidebars, comments, scripts and
the like, and normalises its whitespace: one paragraph a line, runs of spaces and tabs as
one space, no empty lines, Unicode in NFC form. With the ``markdown`` text format the
main text is Markdown instead (headings, lists, tables, code blocks and links, made
absolute against the page's URL), its lines right-stripped and blank lines kept one at a
time between blocks.

Two fingerprints are taken of the normalised plain text, whichever the format, so that
duplicate decisions and change detection do not depend on it:

- ``content_hash``, the SHA-256 of its UTF-8 bytes in hex: equal texts, equal hashes.
  Two pages differing only in their navigation, footer or adverts have the same main text
  and so the same hash.
- ``simhash``, a 64-bit SimHash (Charikar) over word 3-shingles: the text is cut into
  lower-case words (``\\w+``), every run of three consecutive words is a feature (a text
  of one or two words is one feature), each distinct feature is hashed with BLAKE2b to 64
  bits and votes on each bit, and a bit of the result is set when more than half of the
  features have it set. Texts that share most of their shingles get hashes a few bits
  apart; :data:`NEAR_DUPLICATE_BITS` is the distance up to which two pages count as
  near-duplicates (trawl.content.neardup finds them).

Numbers are masked before shingling: a word made only of digits becomes ``0``, so a page
whose date, visit counter or price changes keeps its SimHash (its content hash still
changes). Without this, changing the time in one "Updated ..." line moved the hashes of
the hand-checked texts (95 to 500 words) by 2 to 7 bits on average, past the
near-duplicate margin in 12 to 98% of cases (``python -m bench.text_quality``).

The 64 bits are bit ``i`` = bit ``i mod 8`` of byte ``i // 8`` of the vote, i.e. the
digests read as little-endian integers. The hash is returned as a signed 64-bit integer
(two's complement, -2**63 .. 2**63-1) so it fits an SQLite INTEGER column as it is;
``value & 0xFFFF_FFFF_FFFF_FFFF`` gives the unsigned form. :func:`hamming` accepts
either form.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trawl.config import TextFormat
from trawl.content.simhash import NEAR_DUPLICATE_BITS, hamming, shingle_simhash
from trawl.content.simhash import simhash as simhash_of
from trawl.extract.parser import decode_body

if TYPE_CHECKING:
    from resiliparse.parse.html import HTMLTree

    from trawl.content.article import Block

__all__ = [
    "NEAR_DUPLICATE_BITS",
    "SHINGLE_WORDS",
    "PageText",
    "content_hash",
    "decode_html",
    "extract_text",
    "hamming",
    "main_text",
    "normalise",
    "simhash",
]

SHINGLE_WORDS = 3
"""Words per SimHash feature."""

_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"[^\S\n]+")
_LANGUAGE = re.compile(r"[a-z]{2,3}")
_SUBTAG_END = re.compile(r"[-_,;\s]")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(frozen=True, slots=True)
class PageText:
    """The main text of a page and what identifies it.

    ``title`` is the page's ``<title>``; ``language`` the primary subtag of its declared
    language (``<html lang>``, else ``<meta http-equiv="content-language">``), lower
    case, such as ``en``; both None when the page does not say. ``text`` is in the
    format asked for; ``content_hash`` and ``simhash`` are of the plain text.
    """

    title: str | None
    language: str | None
    text: str
    content_hash: str
    simhash: int


def decode_html(body: bytes, charset: str | None) -> str:
    """The text of an HTML body; ``charset`` is the Content-Type charset, if any.

    Authority as in the HTML standard: byte-order mark, then ``charset``, then a
    ``<meta>`` declaration, then UTF-8. Undecodable bytes become U+FFFD.
    """
    decoded = decode_body(body, charset)
    return decoded if isinstance(decoded, str) else decoded.decode("utf-8", "replace")


def normalise(text: str) -> str:
    """``text`` in NFC, one non-empty line per paragraph, single spaces within a line."""
    lines = (
        _SPACES.sub(" ", line).strip() for line in unicodedata.normalize("NFC", text).split("\n")
    )
    return "\n".join(line for line in lines if line)


def _normalise_markdown(text: str) -> str:
    """Markdown ``text`` in NFC, lines right-stripped, at most one blank line in a row."""
    lines = (line.rstrip() for line in unicodedata.normalize("NFC", text).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


def content_hash(text: str) -> str:
    """The SHA-256 of the normalised ``text``, in hex."""
    return hashlib.sha256(normalise(text).encode("utf-8", "surrogatepass")).hexdigest()


def _features(text: str) -> set[str]:
    """The distinct word 3-shingles of ``text``, numbers masked."""
    words = ["0" if word.isdigit() else word for word in _WORD.findall(text.lower())]
    if len(words) <= SHINGLE_WORDS:
        return {" ".join(words)} if words else set()
    runs = zip(*(words[i:] for i in range(SHINGLE_WORDS)), strict=False)
    return set(map(" ".join, runs))


def simhash(text: str) -> int:
    """The signed 64-bit SimHash of ``text``'s word 3-shingles; 0 for a text without words.

    In C where built (trawl.content.simhash), words and shingles too: ``re.findall``
    alone takes longer than the whole C function. ``_features`` is the reference.
    """
    if shingle_simhash is not None:
        return shingle_simhash(text.lower(), SHINGLE_WORDS)
    return simhash_of(_features(text))


def _title(tree: HTMLTree) -> str | None:
    return " ".join((tree.title or "").split()) or None


def _language(tree: HTMLTree) -> str | None:
    root = None if tree.document is None else tree.document.query_selector("html")
    declared = (root.getattr("lang") if root is not None else None) or ""
    if not declared and tree.head is not None:
        for meta in tree.head.query_selector_all("meta[http-equiv]"):
            if (meta.getattr("http-equiv") or "").lower() == "content-language":
                declared = meta.getattr("content") or ""
                break
    primary = _SUBTAG_END.split(declared.strip(), maxsplit=1)[0].lower()
    return primary if _LANGUAGE.fullmatch(primary) else None


def _written(blocks: list[Block], url: str, text_format: TextFormat) -> str:
    """``blocks`` in ``text_format``, normalised; may be empty."""
    from trawl.content.article import to_markdown, to_text

    if text_format == "text":
        text = to_text(blocks)
        if any(block.kind == "pre" for block in blocks):
            return normalise(text)
        # The other blocks' text is one line each, non-empty, its whitespace collapsed.
        return unicodedata.normalize("NFC", text)
    return _normalise_markdown(to_markdown(blocks, url))


def main_text(html: str, url: str, text_format: TextFormat = "text") -> str | None:
    """The normalised main text of the decoded HTML page ``html`` fetched from ``url``,
    in ``text_format``; None when it has none. Never raises, whatever the text."""
    from trawl.content.article import article_blocks, parse

    return _written(article_blocks(parse(html)), url, text_format) or None


def extract_text(
    body: bytes, url: str, charset: str | None, text_format: TextFormat = "text"
) -> PageText | None:
    """The main text of the HTML page ``body`` fetched from ``url``; None when it has none.

    ``charset`` is the Content-Type charset parameter, if the response had one. The text
    is in ``text_format``, its fingerprints of the plain text. Never raises, whatever the
    bytes. Only the first :data:`~trawl.content.article.MAX_MARKUP` bytes are read.
    """
    # Imported on first use, like the extractor's resiliparse: a crawl without --text or
    # --events need not load them (6 MB in each of its processes).
    from trawl.content.article import MAX_MARKUP, article_blocks, parse

    tree = parse(decode_html(body[:MAX_MARKUP], charset))
    blocks = article_blocks(tree)
    text = _written(blocks, url, "text")
    if not text:
        return None
    written = text if text_format == "text" else _written(blocks, url, text_format) or text
    title, language = _title(tree), _language(tree)
    return PageText(
        title=title,
        language=language,
        text=written,
        content_hash=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        simhash=simhash(text),
    )
