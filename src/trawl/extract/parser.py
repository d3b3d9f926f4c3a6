"""Extract what the crawl loop needs from one HTML page.

This is the hot path of every fetch, so parsing is left to Lexbor (through selectolax), a C
HTML5 parser that builds the same tree a browser would: links inside comments, ``<script>``,
``<style>``, ``<textarea>`` and ``<template>`` never become elements, and broken markup is
repaired rather than rejected. Python only walks the handful of elements trawl reads.

Values come back raw (hrefs, ``<base href>``, canonical); resolving them against the page URL
is the caller's job, because only the caller knows that URL.

Robots directives come from two places: ``<meta name="robots">`` (or the crawler's own token)
inside the page, read by :func:`parse_html`, and the ``X-Robots-Tag`` response header, read by
:func:`robots_header`. Both follow Google's published syntax; only ``noindex`` and
``nofollow`` (and ``none``, which means both) change what trawl does.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = [
    "HTML_TYPES", "ParsedPage", "ScriptSignals", "decode_body", "is_html", "parse_html",
    "robots_header",
]  # fmt: skip

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# ASCII whitespace as the HTML and URL standards define it (no vertical tab, no Unicode).
_HTML_WS = " \t\n\f\r"

# --- content sniffing -------------------------------------------------------------------------

# The WHATWG MIME sniffing standard reads at most this many bytes (the "resource header").
_SNIFF_BYTES = 1445
# WHATWG's HTML signatures, each followed by whitespace, ">" or "/"; "<!--" needs nothing more.
_HTML_SIGNATURE = re.compile(
    rb"<(?:!doctype\s+html|html|head|body|script|iframe|h1|div|font|table|a|style|title|b|br|p)"
    rb"(?=[\s>/])|<!--",
    re.IGNORECASE,
)
_UTF16_BOMS = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def is_html(content_type: str | None, head: bytes) -> bool:
    """Say whether a response is an HTML page worth parsing for links.

    A non-empty Content-Type media type decides on its own (parameters ignored, any case):
    servers that label a page ``text/plain`` mean it. Only when the header is missing or
    empty are the first bytes of the body sniffed for an HTML signature, after skipping a
    byte-order mark and leading whitespace.
    """
    if content_type:
        media_type = content_type.split(";", 1)[0].strip(_HTML_WS).lower()
        if media_type:
            return media_type in HTML_TYPES
    return _sniff_html(head[:_SNIFF_BYTES])


def _sniff_html(head: bytes) -> bool:
    """Match the WHATWG HTML signatures against the start of ``head``."""
    for bom, codec in _UTF16_BOMS:
        if head.startswith(bom):
            head = head[len(bom) :].decode(codec, "replace").encode("utf-8")
            break
    head = head.removeprefix(codecs.BOM_UTF8).lstrip(_HTML_WS.encode())
    return _HTML_SIGNATURE.match(head) is not None


# --- character encoding -----------------------------------------------------------------------

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Python's canonical codec names for the encodings of the WHATWG Encoding Standard, mapped to
# the codec a browser really decodes with (it reads "iso-8859-1" as windows-1252, "euc-kr" as
# windows-949, ...). Anything not listed, such as Python's rot13, idna or unicode_escape
# pseudo-encodings, is refused so that a page cannot choose a codec that fails or misleads.
_WHATWG_CODECS = {
    "utf-8": "utf-8",
    "utf-16": "utf-16-le",
    "utf-16-le": "utf-16-le",
    "utf-16-be": "utf-16-be",
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gbk",
    "gbk": "gbk",
    "gb18030": "gb18030",
    "big5": "big5hkscs",
    "big5hkscs": "big5hkscs",
    "cp950": "big5hkscs",
    "shift_jis": "cp932",
    "cp932": "cp932",
    "euc_jp": "euc_jp",
    "iso2022_jp": "iso2022_jp",
    "euc_kr": "cp949",
    "cp949": "cp949",
    "cp866": "cp866",
    "cp874": "cp874",
    "koi8-r": "koi8-r",
    "koi8-u": "koi8-u",
    "mac-roman": "mac-roman",
    "mac-cyrillic": "mac-cyrillic",
    **{f"iso8859-{n}": f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    **{f"cp{n}": f"cp{n}" for n in range(1250, 1259)},
}
# WHATWG labels that Python's codec registry does not know by these names.
_EXTRA_LABELS = {
    "dos-874": "cp874",
    "windows-874": "cp874",
    "windows-31j": "cp932",
    "x-sjis": "cp932",
    "x-gbk": "gbk",
    "x-euc-jp": "euc_jp",
    "iso-8859-8-i": "iso8859-8",
    "x-mac-cyrillic": "mac-cyrillic",
    "x-mac-ukrainian": "mac-cyrillic",
    "x-mac-roman": "mac-roman",
    "x-user-defined": "cp1252",
    "unicode-1-1-utf-8": "utf-8",
    "unicode11utf8": "utf-8",
    "unicode20utf8": "utf-8",
    "x-unicode20utf8": "utf-8",
}
# The HTML standard's prescan looks for <meta charset> only this far into the body.
_PRESCAN_BYTES = 1024
_PRESCAN_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)", re.DOTALL)
_PRESCAN_META = re.compile(rb"<meta[\s/]([^>]*)", re.IGNORECASE)
_PRESCAN_ATTR = re.compile(rb"""([^\s/>=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")
_CONTENT_CHARSET = re.compile(rb"""charset\s*=\s*["']?([^\s"';]+)""", re.IGNORECASE)


def _codec_for(label: str) -> str | None:
    """Map an encoding label to a Python codec a browser would agree with, or None."""
    label = label.strip(_HTML_WS).lower()
    if label in _EXTRA_LABELS:
        return _EXTRA_LABELS[label]
    try:
        name = codecs.lookup(label).name
    except (LookupError, ValueError):
        return None
    return _WHATWG_CODECS.get(name)


def _prescan_meta_charset(body: bytes) -> str | None:
    """Find the codec named by the first usable ``<meta>`` charset near the start of ``body``."""
    window = _PRESCAN_COMMENT.sub(b"", body[:_PRESCAN_BYTES])
    for tag in _PRESCAN_META.finditer(window):
        attrs: dict[bytes, bytes] = {}
        for match in _PRESCAN_ATTR.finditer(tag.group(1)):
            value = match.group(2) or match.group(3) or match.group(4) or b""
            attrs.setdefault(match.group(1).lower(), value)
        label = attrs.get(b"charset")
        if label is None and attrs.get(b"http-equiv", b"").lower() == b"content-type":
            found = _CONTENT_CHARSET.search(attrs.get(b"content", b""))
            label = found.group(1) if found else None
        codec = _codec_for(label.decode("latin-1")) if label is not None else None
        if codec is not None:
            # A document that can declare itself in ASCII is not UTF-16, whatever it says.
            return "utf-8" if codec.startswith("utf-16") else codec
    return None


def decode_body(body: bytes, charset: str | None) -> bytes | str:
    """Turn the body into what Lexbor reads: UTF-8 bytes as they are, anything else as text.

    Order of authority as in the HTML standard: byte-order mark, then the transport charset,
    then a ``<meta>`` declaration, then UTF-8. Undecodable bytes become U+FFFD.

    NUL characters become U+FFFD here, as the HTML tokenizer would turn them in every
    place trawl reads (attribute values, titles, comments, scripts), so Lexbor never sees
    one: it logs a parse error for each, about 16 bytes apiece, and a body of zeros (a
    gzip bomb) would cost 16 times its size in memory.
    """
    for bom, bom_codec in _BOMS:
        if body.startswith(bom):
            body, codec = body[len(bom) :], bom_codec
            break
    else:
        declared = _codec_for(charset) if charset else None
        codec = declared or _prescan_meta_charset(body) or "utf-8"
    # Lexbor reads UTF-8 natively and replaces invalid sequences itself; skip a round trip.
    if codec == "utf-8":
        return body.replace(b"\x00", "\ufffd".encode())
    return body.decode(codec, "replace").replace("\x00", "\ufffd")


# --- robots directives ------------------------------------------------------------------------

# Google documents rules separated by commas; whitespace is accepted too because
# "noindex nofollow" is a common way of writing the same request.
_RULE_SPLIT = re.compile(r"[\s,]+")
# X-Robots-Tag rules that carry a ":"-separated value and so must not be read as an agent.
_VALUED_RULES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
_AGENT_TOKEN = re.compile(r"[a-z0-9_.-]+")


def _restrictions(rules: Iterable[str]) -> tuple[bool, bool]:
    """Reduce lower-case rule tokens to (noindex, nofollow); "none" means both."""
    noindex = nofollow = False
    for rule in rules:
        if rule == "none":
            noindex = nofollow = True
        elif rule == "noindex":
            noindex = True
        elif rule == "nofollow":
            nofollow = True
    return noindex, nofollow


def robots_header(values: Sequence[str], agent_token: str = "trawl") -> tuple[bool, bool]:
    """Read X-Robots-Tag header values into (noindex, nofollow) for ``agent_token``.

    Each value is a comma-separated list of rules, optionally led by ``<agent>:``; once an
    agent is named, the rules that follow in that value apply to that agent only. Rules with
    no agent apply to every crawler; rules for other agents are ignored. Several values
    combine, and the most restrictive reading wins.
    """
    agent = agent_token.strip().lower()
    noindex = nofollow = False
    for value in values:
        applies = True
        for piece in value.lower().split(","):
            name, colon, rest = piece.partition(":")
            name = name.strip(_HTML_WS)
            if colon and name not in _VALUED_RULES and _AGENT_TOKEN.fullmatch(name):
                applies, piece = name == agent, rest
            if applies:
                piece_noindex, piece_nofollow = _restrictions(_RULE_SPLIT.split(piece))
                noindex |= piece_noindex
                nofollow |= piece_nofollow
    return noindex, nofollow


def _meta_robots(tree: LexborHTMLParser, agent_token: str) -> tuple[bool, bool]:
    """Combine every ``<meta name="robots">`` and ``<meta name="<agent>">`` in the page."""
    names = {"robots", agent_token.strip().lower()}
    rules: list[str] = []
    for meta in tree.tags("meta"):
        attrs = meta.attributes
        if (attrs.get("name") or "").strip(_HTML_WS).lower() in names:
            rules.extend(_RULE_SPLIT.split((attrs.get("content") or "").lower()))
    return _restrictions(rules)


# --- page extraction --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScriptSignals:
    """What says a page is built by its scripts (read by trawl.render.rule): the visible
    text of its body (characters, scripts, styles and templates left out), the bytes of
    its inline scripts, its ``<script>`` elements with a ``src``, and whether it has an
    application root (``id`` root, app, __next, __nuxt, ___gatsby, or ``<app-root>``)
    with nothing in it."""

    text_chars: int = 0
    script_bytes: int = 0
    external_scripts: int = 0
    empty_root: bool = False


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """What one HTML page tells the crawler.

    ``links`` are raw href values (whitespace stripped, entities decoded) of ``<a>`` and
    ``<area>`` elements in document order. ``nofollow_links`` counts links left out for
    their own ``rel=nofollow``; it stays 0 when a page-wide nofollow leaves out every link.
    """

    links: tuple[str, ...]
    base_href: str | None
    canonical: str | None
    nofollow: bool
    noindex: bool
    nofollow_links: int
    title: str | None
    signals: ScriptSignals | None = None
    """Read only when asked for (``script_signals``)."""


def content_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header value, if any."""
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


PARSE_PIECE = 1 << 19
"""Bytes of a page (as UTF-8) parsed into one tree at most. Lexbor's tree takes about 42
bytes a byte of dense markup (10 MB of ``<p>x</p>`` took 500 MB at once): a longer page
is parsed a piece at a time, each tree freed before the next is built, so a parse peaks
near 22 MB whatever the markup. Almost every page is one piece."""

# Elements whose content is text, not markup, and comments: a piece never ends inside
# one, or the next piece would read its text as markup (links in a script, say).
_TEXT_SPANS = (
    (b"<!--", b"-->"),
    *((b"<" + name, b"</" + name) for name in (
        b"script", b"style", b"textarea", b"template", b"title", b"xmp", b"iframe",
        b"noembed", b"noframes",
    )),
)  # fmt: skip
_SETTLE_PASSES = 4
"""Passes over the spans that move a piece's end back at most: a comment inside a script
inside a comment and so on moves it once a level (nothing on a real page nests deeper)."""
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def _piece_end(html: bytes, start: int) -> int:
    """Where the piece of ``html`` from ``start`` ends: before the last tag that begins in
    the next :data:`PARSE_PIECE` bytes, moved back out of any comment or text element it
    falls in (to where that one begins), and anywhere when that leaves nothing. A ``<``
    byte is never part of another character in UTF-8, so a piece ends between characters."""
    end = start + PARSE_PIECE
    if end >= len(html):
        return len(html)
    window = html[start:end].translate(_ASCII_LOWER)
    cut = window.rfind(b"<", 1)
    for _ in range(_SETTLE_PASSES):
        settled = True
        for opening, closing in _TEXT_SPANS:
            if cut <= 0:
                return end
            # The first opening after the last closing before the cut, if any, is an
            # element the cut falls in.
            opened = window.find(opening, window.rfind(closing, 0, cut) + 1, cut)
            if opened >= 0:
                cut = opened
                settled = False
        if settled:
            break
    return start + cut if cut > 0 else end


def _pieces(html: bytes) -> Iterator[bytes]:
    """``html`` in pieces of at most :data:`PARSE_PIECE` bytes (see :func:`_piece_end`)."""
    start = 0
    while start < len(html):
        end = _piece_end(html, start)
        yield html[start:end]
        start = end


def parse_html(
    body: bytes,
    *,
    agent_token: str = "trawl",
    honour_nofollow: bool = True,
    max_links: int = 5000,
    charset: str | None = None,
    script_signals: bool = False,
) -> ParsedPage:
    """Parse one HTML page; never raises, whatever the bytes.

    ``charset`` is the Content-Type charset parameter, if the response had one. Links past
    ``max_links`` are not read. With ``honour_nofollow``, links marked ``rel=nofollow`` are
    dropped, and a page-wide robots nofollow drops them all. A page longer than
    :data:`PARSE_PIECE` bytes is parsed a piece at a time (its memory stays bounded);
    what the page says once (base, canonical, title) is the first piece's that says it.
    With ``script_signals`` the page's :class:`ScriptSignals` are read too.
    """
    links: list[str] = []
    dropped = 0
    base_href: str | None = None
    canonical: str | None = None
    title: str | None = None
    noindex = nofollow = False
    signals = ScriptSignals() if script_signals else None
    html = decode_body(body, charset)
    # Lexbor reads UTF-8: it encodes text so itself.
    for piece in _pieces(html if isinstance(html, bytes) else html.encode()):
        tree = LexborHTMLParser(piece)
        piece_noindex, piece_nofollow = _meta_robots(tree, agent_token)
        noindex = noindex or piece_noindex
        nofollow = nofollow or piece_nofollow
        found, piece_dropped = _links(
            tree, honour_nofollow=honour_nofollow, max_links=max_links - len(links)
        )
        links.extend(found)
        dropped += piece_dropped
        base_href = base_href or _base_href(tree)
        canonical = canonical or _canonical(tree)
        title = title or _title(tree)
        if signals is not None:
            signals = _add_signals(signals, tree)
    if nofollow and honour_nofollow:
        links, dropped = [], 0
    return ParsedPage(
        links=tuple(links),
        base_href=base_href,
        canonical=canonical,
        nofollow=nofollow,
        noindex=noindex,
        nofollow_links=dropped,
        title=title,
        signals=signals,
    )


_APP_ROOT_IDS = frozenset({"root", "app", "__next", "__nuxt", "___gatsby"})
_NOT_SHOWN = ["script", "style", "noscript", "template"]


def _add_signals(signals: ScriptSignals, tree: LexborHTMLParser) -> ScriptSignals:
    """``signals`` with those of one piece of a page added (the piece's tree is spent:
    its scripts and styles are taken out to measure the text shown)."""
    script_bytes = signals.script_bytes
    external = signals.external_scripts
    for node in tree.tags("script"):
        if node.attributes.get("src"):
            external += 1
        else:
            script_bytes += len(node.text(deep=True))
    empty_root = signals.empty_root
    for node in tree.css("[id], app-root"):
        if node.tag != "app-root" and node.attributes.get("id") not in _APP_ROOT_IDS:
            continue
        if not (_has_element(node) or node.text(deep=True).strip()):
            empty_root = True
    tree.strip_tags(_NOT_SHOWN)
    shown = tree.body.text(deep=True, separator=" ") if tree.body is not None else ""
    return ScriptSignals(
        signals.text_chars + len(" ".join(shown.split())), script_bytes, external, empty_root
    )


def _has_element(node: LexborNode) -> bool:
    """Whether ``node`` has an element among its children (not text, not a comment)."""
    child = node.child
    while child is not None:
        if not (child.tag or "-").startswith("-"):
            return True
        child = child.next
    return False


def _base_href(tree: LexborHTMLParser) -> str | None:
    """The href of the first ``<base>`` that has one, whitespace stripped.

    An empty one gives None: it resolves to the document's own URL, as no ``<base>`` does.
    """
    for node in tree.tags("base"):
        attrs = node.attributes
        if "href" in attrs:
            return (attrs["href"] or "").strip(_HTML_WS) or None
    return None


def _links(
    tree: LexborHTMLParser, *, honour_nofollow: bool, max_links: int
) -> tuple[tuple[str, ...], int]:
    """Collect followable hrefs in document order; return them and the nofollow count."""
    # Most pages have no <area>: a tag-name lookup is several times cheaper than a selector
    # list, which is needed only to interleave <a> and <area> in document order.
    anchors = tree.css("a[href], area[href]") if tree.tags("area") else tree.tags("a")
    links: list[str] = []
    dropped = 0
    for node in anchors:
        if len(links) >= max_links:
            break
        attrs = node.attributes
        href = (attrs.get("href") or "").strip(_HTML_WS)
        if not href.strip("#"):
            continue
        if honour_nofollow and "nofollow" in (attrs.get("rel") or "").lower().split():
            dropped += 1
            continue
        links.append(href)
    return tuple(links), dropped


def _canonical(tree: LexborHTMLParser) -> str | None:
    """The href of the first ``<link rel=canonical>`` with a non-empty href."""
    for node in tree.tags("link"):
        attrs = node.attributes
        if "canonical" in (attrs.get("rel") or "").lower().split():
            href = (attrs.get("href") or "").strip(_HTML_WS)
            if href:
                return href
    return None


# SVG and MathML roots: a <title> below one of them is not the document's title.
_FOREIGN_ROOTS = frozenset({"svg", "math"})


def _title(tree: LexborHTMLParser) -> str | None:
    """The first HTML ``<title>`` with whitespace collapsed, None when missing or blank."""
    for node in tree.tags("title"):
        parent = node.parent
        while parent is not None and parent.tag not in _FOREIGN_ROOTS:
            parent = parent.parent
        if parent is None:
            return " ".join(node.text().split()) or None
    return None
