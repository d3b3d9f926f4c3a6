"""The page a handler reads: what the fetch gave, and selectors over it.

A :class:`Page` is built in the extract worker for each HTML page a handler is set for.
Its fields are what the fetch gave; what costs something is computed on first use and
kept: the decoded text, the links, and the parsel selector behind :meth:`Page.css` and
:meth:`Page.xpath`. A handler that reads only ``url`` and ``body`` pays for no parse.

The text is decoded as trawl.content.text decodes a page (byte-order mark, then the
Content-Type charset, then ``<meta>``, then UTF-8), the links are the ones
trawl.extract.parser reads (``<a>`` and ``<area>`` hrefs, ``rel=nofollow`` left out),
resolved per the WHATWG URL Standard against the page's base (its ``<base href>``, else
its URL).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trawl.config import TEXT_FORMATS, TextFormat
from trawl.content.text import decode_html
from trawl.content.text import main_text as main_text_of
from trawl.extract.parser import content_charset, parse_html
from trawl.extract.resolution import resolve
from trawl.handlers.follow import Follow

if TYPE_CHECKING:
    from parsel import Selector, SelectorList

__all__ = ["Page"]

_HTML_WS = " \t\n\f\r"


class Page:
    """One fetched HTML page, read-only.

    ``url`` is the normalised URL fetched. ``final_url`` is the same URL: trawl does not
    follow a redirect within a fetch but queues its target as a URL of its own, which
    reaches a handler as a page of its own. ``headers`` are the response headers trawl
    keeps (at least ``content-type``), names in lower case. ``depth`` is the page's hop
    count from a seed (0 for a seed), ``fetched_at`` the Unix time of the fetch and
    ``label`` the label the page was queued with (None: the default handler's pages).

    ``base`` and ``links`` may be given by whoever already parsed the page (``links``:
    absolute URLs in document order; or ``hrefs``, the link targets as the parser read
    them, resolved against the base on first use); else they are read from the body on
    first use.
    """

    __slots__ = (
        "_base",
        "_hrefs",
        "_links",
        "_main",
        "_selector",
        "_text",
        "body",
        "depth",
        "fetched_at",
        "final_url",
        "headers",
        "label",
        "status",
        "url",
    )

    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    depth: int
    fetched_at: float
    label: str | None
    _text: str | None
    _base: str | None
    _hrefs: Sequence[str] | None
    _links: list[str] | None
    _selector: Selector | None
    _main: dict[str, str | None]

    def __init__(
        self,
        *,
        url: str,
        body: bytes,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        depth: int = 0,
        fetched_at: float | None = None,
        label: str | None = None,
        base: str | None = None,
        links: Sequence[str] | None = None,
        hrefs: Sequence[str] | None = None,
    ) -> None:
        values: dict[str, object] = {
            "url": url, "final_url": url, "status": status, "body": body, "depth": depth,
            "headers": {name.lower(): value for name, value in (headers or {}).items()},
            "fetched_at": time.time() if fetched_at is None else fetched_at, "label": label,
            "_text": None, "_base": base, "_hrefs": hrefs,
            "_links": None if links is None else list(links),
            "_selector": None, "_main": {},
        }  # fmt: skip
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Page is read-only: cannot set {name}")

    def __repr__(self) -> str:
        return f"<Page {self.status} {self.url}>"

    @property
    def text(self) -> str:
        """The body decoded (see the module doc); undecodable bytes become U+FFFD."""
        if self._text is None:
            charset = content_charset(self.headers.get("content-type"))
            object.__setattr__(self, "_text", decode_html(self.body, charset))
        assert self._text is not None
        return self._text

    @property
    def base(self) -> str:
        """The URL the page's relative links resolve against."""
        if self._base is None:
            self._parse()
        assert self._base is not None
        return self._base

    @property
    def links(self) -> list[str]:
        """The absolute URLs of the page's links, in document order."""
        if self._links is None and self._hrefs is not None:
            self._resolve(self._hrefs)
        elif self._links is None:
            self._parse()
        assert self._links is not None
        return self._links

    def _parse(self) -> None:
        """Read the base and links that were not given from the body."""
        parsed = parse_html(self.body, charset=content_charset(self.headers.get("content-type")))
        if self._base is None:
            found = resolve(parsed.base_href, self.url) if parsed.base_href else None
            object.__setattr__(self, "_base", found or self.url)
        if self._links is None:
            self._resolve(parsed.links)

    def _resolve(self, hrefs: Iterable[str]) -> None:
        """Keep ``hrefs`` resolved against the base as the page's links."""
        resolved = (resolve(href, self.base) for href in hrefs)
        object.__setattr__(self, "_links", [url for url in resolved if url])

    def _root(self) -> Selector:
        if self._selector is None:
            # Imported on first use: a handler without selectors does not load lxml's
            # selector stack into the worker.
            from parsel import Selector

            object.__setattr__(self, "_selector", Selector(text=self.text, base_url=self.url))
        assert self._selector is not None
        return self._selector

    def css(self, query: str) -> SelectorList[Selector]:
        """The elements ``query`` selects (parsel: ``::text``, ``::attr(name)``, then
        ``.get()`` or ``.getall()``)."""
        return self._root().css(query)

    def xpath(self, query: str, **variables: Any) -> SelectorList[Selector]:
        """The nodes the XPath ``query`` selects, ``$name`` bound to ``variables``."""
        return self._root().xpath(query, **variables)

    def main_text(self, format: TextFormat = "text") -> str | None:
        """The page's main text without navigation, sidebars and the like: plain text
        as the ``--text`` output holds it, or Markdown (headings, lists, tables, code
        blocks and absolute links kept). None when the page has none."""
        if format not in TEXT_FORMATS:
            raise ValueError(f"format must be one of {', '.join(TEXT_FORMATS)}, not {format!r}")
        if format not in self._main:
            self._main[format] = main_text_of(self.text, self.url, format)
        return self._main[format]

    def follow(
        self,
        urls: str | Iterable[str | None] | None,
        *,
        label: str | None = None,
        priority: float | None = None,
    ) -> Iterator[Follow]:
        """A :class:`Follow` for each of ``urls``, resolved against the page's base, with
        ``label`` and ``priority``; a None, empty or fragment-only URL is skipped, and so
        is one that does not resolve."""
        if urls is None:
            return
        for href in [urls] if isinstance(urls, str) else urls:
            if href is None:
                continue
            if not isinstance(href, str):
                raise TypeError(f"follow takes URLs as strings, not {type(href).__name__}")
            href = href.strip(_HTML_WS)
            if not href.strip("#"):
                continue
            url = resolve(href, self.base)
            if url:
                yield Follow(url, label, priority)
