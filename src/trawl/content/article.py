"""The main text of an HTML page: an article container, a main-content pass, a block filter.

1. **The article container.** Most article pages mark the element that holds the story:
   ``itemprop="articleBody"``, a class such as ``entry-content``, ``article-body`` or
   ``post-content``, else an ``<article>`` element, a class such as ``story-body``,
   ``<main>`` (:data:`MARKS`), tried in that order, the most specific first (after
   trafilatura's own order). The first element so marked with at least
   :data:`MIN_CONTAINER_CHARS` characters of text wins (a teaser card marked
   ``<article>`` does not), together with the later elements of its tag and class (a
   story cut into parts by advertisements). Without one, the whole page is used.
2. **The main-content pass** of resiliparse, in C on lexbor's DOM: it drops navigation,
   headers, footers, forms, sidebars, comments, hidden and script elements (and, on a
   whole page, cookie and consent banners), and renders the rest as minimal HTML:
   headings, paragraphs, list items, preformatted text and links, one block a line,
   tables as tab-separated rows.
3. **The block filter**, in Python on those lines: a block whose words are mostly link
   text (share buttons, "read more", lists of related stories) is dropped, and so is the
   lead-in, everything before the first block of at least :data:`LEAD_WORDS` words
   (bylines, dates, kickers), except a headline right before it. A page with no such
   block (an index of linked teasers) keeps all its blocks; when the main-content pass
   left it nothing but such blocks, all the text of the container or page is taken
   instead, if that has one.

On the 150 KB pages of the public extraction benchmark the extraction costs about 1.35 ms
of CPU against 9 to 17 ms for trafilatura, for the same F1 (docs/PERFORMANCE.md, "The
clean-text extractor", has the figures and what else was tried).
"""

from __future__ import annotations

import html as html_entities
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import ElementNode, HTMLTree

from trawl.extract.resolution import resolve

__all__ = [
    "LEAD_WORDS", "MARKS", "MAX_MARKUP", "MIN_CONTAINER_CHARS", "Block",
    "article_blocks", "parse", "to_markdown", "to_text",
]  # fmt: skip

MAX_MARKUP = 2 * 1024 * 1024
"""Characters of a page read for its main text. Lexbor's tree takes up to 42 bytes a
character of dense markup: a 10 MB page of ``<p>x</p>`` took 935 MB and 11.5 s of CPU
whole, and takes 223 MB and 2.1 s read this far. The longest page of the extraction
benchmark is 1.1 MB."""
MIN_CONTAINER_CHARS = 300
"""The least text a container must hold to be taken for the article."""
LEAD_WORDS = 20
"""Words of the first block kept: the blocks before it are the page's lead-in, not its text."""
MAX_LINK_SHARE = 0.5
"""A block whose share of words inside links is above this is navigation."""

_LINKED_CONTENT = ("pre", "h1", "h2", "h3")
"""Blocks that are content even when their words are links: the headlines of a listing's
teasers, code."""
_HEADLINES = ("h1", "h2")
"""A heading right before the lead is the headline, and is kept."""
_CONTAINER_TAGS = ("article", "div", "main", "section")

MARKS: tuple[tuple[str, str], ...] = (
    ("itemprop", "articleBody"),
    *(("class", name) for name in (
        "entry-content", "article-content", "article-body", "article__body", "articlebody",
        "articleBody", "post-content", "post-body", "post-entry", "article__content", "post",
        "entry",
    )),
    *(("id", name) for name in ("article-body", "article-content", "articleContent")),
    ("tag", "article"),
    ("css", '[class*="story-body"], [class^="article "], [class*="single-content"], '
            '[class*="story-content"], [id="story"], [id="article"]'),
    ("css", '[class*="page-content"]'),
    ("tag", "main"),
)  # fmt: skip
"""What marks the story's container, the most specific first: an attribute's value, a
class name, a tag, or else a CSS selector. All but the selectors are looked up in
lexbor's own indexes, about 0.01 ms each on a 150 KB page, where a selector walks the
whole tree (0.1 ms; fifteen of them 0.27 ms)."""

_BANNERS = [
    '[id*="cookie"]',
    '[class*="cookie"]',
    '[id*="consent"]',
    '[class*="consent"]',
    '[id="cmp"]',
    '[class*="cmp-"]',
    '[id*="gdpr"]',
    '[class*="gdpr"]',
]
"""Cookie and consent banners, which a page without an article container may lead with."""

_LINK = re.compile(r"<a\s[^>]*?href=\"([^\"]*)\"[^>]*>(.*?)</a>|<a\b[^>]*>(.*?)</a>", re.S)
_TAG = re.compile(r"<[^>]*>")
_LINK_TAG = re.compile(r"</?a\b[^>]*>")
_WORD = re.compile(r"\w+")
_KIND = re.compile(r"\s*<(h[1-6]|li|p|pre)\b")

Kind = Literal["p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "pre", "row"]


@dataclass(frozen=True, slots=True)
class Block:
    """One block of the main text: its kind, its minimal HTML and its plain text."""

    kind: Kind
    markup: str
    text: str


def _inside(node: ElementNode, ancestor: ElementNode) -> bool:
    """Whether ``node`` is a descendant of ``ancestor``."""
    parent = node.parent
    while parent is not None:
        if parent == ancestor:
            return True
        parent = parent.parent
    return False


def _container(tree: HTMLTree) -> HTMLTree | None:
    """The article container of the page, as a tree of its own; None when there is none.

    A story split into several elements of one tag and class (a part between each pair of
    advertisements) is taken whole: the first and the later ones outside it.
    """
    body = tree.body
    if body is None:
        return None
    for kind, value in MARKS:
        if kind == "class":
            found = body.get_elements_by_class_name(value)
        elif kind == "tag":
            found = body.get_elements_by_tag_name(value)
        elif kind == "css":
            found = body.query_selector_all(value)
        else:
            found = body.get_elements_by_attr(kind, value)
        first = _first_container(found)
        if first is not None:
            return _own_tree(body, first)
    return None


def _first_container(found: Iterable[ElementNode]) -> ElementNode | None:
    """The first of ``found`` that can hold an article and holds enough text."""
    for node in found:
        if node.tag in _CONTAINER_TAGS and len(node.text or "") >= MIN_CONTAINER_CHARS:
            return node
    return None


def _own_tree(body: ElementNode, first: ElementNode) -> HTMLTree:
    """The container ``first`` with its later parts, parsed on their own, bullet lists
    made numbered ones (the main-content pass drops every ``<ul>`` as navigation)."""
    markup = "".join(part.html for part in _parts(body, first))
    return HTMLTree.parse(markup.replace("<ul", "<ol").replace("</ul>", "</ol>"))


def _parts(body: ElementNode, first: ElementNode) -> list[ElementNode]:
    """``first`` and the later elements of its tag and class outside it."""
    kind = first.getattr("class")
    if not kind or '"' in kind or "\\" in kind:
        return [first]
    same = list(body.query_selector_all(f'{first.tag}[class="{kind}"]'))
    later = same[same.index(first) + 1 :] if first in same else []
    return [first, *(node for node in later if not _inside(node, first))]


def _plain(markup: str) -> str:
    """The text of minimal HTML, whitespace left as it is; a link's tags are inline, so they
    part no words, and every other tag parts them."""
    return html_entities.unescape(_TAG.sub(" ", _LINK_TAG.sub("", markup)))


def _collapsed(markup: str) -> str:
    """The text of minimal HTML, its whitespace collapsed."""
    return " ".join(_plain(markup).split())


def _blocks(minimal: str) -> list[Block]:
    """The blocks of resiliparse's minimal HTML, one a line; ``<pre>`` spans its lines.

    The tags of the whole text are removed at once, which costs a fifth of doing it line
    by line (no tag spans a line; if one did, each line is read on its own).
    """
    lines = minimal.split("\n")
    texts = _plain(minimal).split("\n")
    if len(texts) != len(lines):
        texts = [_plain(line) for line in lines]
    blocks: list[Block] = []
    at = 0
    while at < len(lines):
        line, text = lines[at], texts[at]
        at += 1
        if not text or text.isspace():
            continue
        kind_match = _KIND.match(line)
        kind: Kind = "row" if "\t" in line and kind_match is None else "p"
        if kind_match is not None:
            kind = kind_match.group(1)  # type: ignore[assignment]
        if kind == "pre":
            end = at - 1
            while "</pre>" not in lines[end] and end + 1 < len(lines):
                end += 1
            markup = "\n".join(lines[at - 1 : end + 1])
            blocks.append(Block("pre", markup, html_entities.unescape(_TAG.sub("", markup))))
            at = end + 1
            continue
        text = text.strip()
        if not (text.isascii() and text.isprintable() and "  " not in text):
            # Printable ASCII has no whitespace but the space: nothing else to collapse.
            text = " ".join(text.split())
        blocks.append(Block(kind, line, text))
    return blocks


def _link_share(block: Block) -> float:
    """The share of the words of ``block`` that are inside its links."""
    linked = sum(len(_plain(m.group(2) or m.group(3) or "").split())
                 for m in _LINK.finditer(block.markup))  # fmt: skip
    return linked / len(block.text.split())


def _kept(blocks: list[Block]) -> tuple[list[Block], bool]:
    """``blocks`` without navigation blocks and the lead-in (see the module doc), and
    whether they have a lead.

    Blocks with no lead (no block of :data:`LEAD_WORDS` words that is not navigation: a
    list of links, an index) are all kept: their links are their content.
    """
    worded = [block for block in blocks if _WORD.search(block.text)]
    kept: list[Block] = []
    lead = -1
    for block in worded:
        if (block.kind not in _LINKED_CONTENT and "<a" in block.markup
                and _link_share(block) > MAX_LINK_SHARE):  # fmt: skip
            continue
        if lead < 0 and len(block.text.split()) >= LEAD_WORDS:
            lead = len(kept)
        kept.append(block)
    if lead < 0:
        return worded, False
    if lead > 0 and kept[lead - 1].kind in _HEADLINES:
        lead -= 1
    return kept[lead:], True


def parse(markup: str) -> HTMLTree:
    """The DOM of the decoded HTML page ``markup`` up to :data:`MAX_MARKUP` characters
    (lone surrogates become U+FFFD)."""
    markup = markup[:MAX_MARKUP]
    try:
        return HTMLTree.parse(markup)
    except UnicodeEncodeError:
        return HTMLTree.parse(markup.encode("utf-8", "replace").decode("utf-8"))


def _minimal(tree: HTMLTree, skip: list[str] | None, main_content: bool) -> str:
    return extract_plain_text(
        tree, preserve_formatting="minimal_html", main_content=main_content, comments=False,
        alt_texts=False, links=True, list_bullets=True, skip_elements=skip,
    )  # fmt: skip


def _extracted(tree: HTMLTree, skip: list[str] | None) -> list[Block]:
    """The kept blocks of ``tree``. When the main-content pass leaves some blocks but no
    lead (it drops lists of teasers, so a listing page would keep only its heading),
    those of all the text of ``tree``, if they have one."""
    blocks, lead = _kept(_blocks(_minimal(tree, skip, main_content=True)))
    if lead or not blocks:
        return blocks
    everything, lead = _kept(_blocks(_minimal(tree, skip, main_content=False)))
    return everything if lead else blocks


def article_blocks(tree: HTMLTree) -> list[Block]:
    """The blocks of the main text of the page ``tree`` (left as it is); may be empty.

    When the container leaves no block (a page wrapper taken for the article, whose every
    part is navigation), the whole page's are used.
    """
    container = _container(tree)
    if container is not None:
        blocks = _extracted(container, None)
        if blocks:
            return blocks
    return _extracted(tree, _BANNERS)


def to_text(blocks: list[Block]) -> str:
    """The plain text of ``blocks``: one a line (a preformatted block keeps its lines)."""
    return "\n".join(block.text for block in blocks)


def _markdown_links(markup: str, base: str) -> str:
    """The text of ``markup`` with its links as Markdown links, absolute against ``base``."""

    def link(match: re.Match[str]) -> str:
        label = _collapsed(match.group(2) or match.group(3) or "")
        target = resolve(html_entities.unescape(match.group(1) or ""), base)
        written = f"[{label}]({target})" if label and target else label
        return html_entities.escape(written, quote=False)

    return _collapsed(_LINK.sub(link, markup))


def to_markdown(blocks: list[Block], base: str) -> str:
    """``blocks`` as Markdown: headings, list items, code blocks, tables, links made
    absolute against ``base``; a blank line between blocks, none inside a list or table."""
    out: list[str] = []
    previous: Kind | None = None
    for block in blocks:
        if block.kind == "pre":
            lines = ["```", block.text, "```"]
        elif block.kind == "row":
            cells = [_collapsed(cell) for cell in block.markup.split("\t")]
            cells = [cell for cell in cells if cell]
            lines = [f"| {' | '.join(cells)} |"]
            if previous != "row":
                lines.append("|" + "---|" * len(cells))
        else:
            text = _markdown_links(block.markup, base)
            if block.kind == "li":
                text = f"- {text}"
            elif block.kind.startswith("h"):
                text = f"{'#' * int(block.kind[1])} {text}"
            lines = [text]
        if out and not (block.kind == previous and block.kind in ("li", "row")):
            out.append("")
        out.extend(lines)
        previous = block.kind
    return "\n".join(out)
