"""Page handlers in the extract stage: a page of a label with a handler yields items and
the links to follow instead of all its links.

The extract stage (trawl.extract.pool) runs here, for a page whose label has a handler
(None: the default handler), the handler on a :class:`~trawl.handlers.page.Page` made of
what the fetch gave (:class:`Fetched`). Its items cross back as JSON texts; its follows
become link candidates as any link does (:meth:`LinkFilter.candidate`: normalisation,
scope, depth), each with the follow's label; a follow's priority goes with it
(:class:`Handled`) to be stored as a sitemap's priority is. Robots.txt, budgets, the
seen-set and politeness apply to them downstream as to every link, and a page that says
nofollow (robots meta tag or X-Robots-Tag) gives none, as it gives no links. A handler
that fails gives its error line and neither items nor follows.

The handlers are loaded once per process, when the extractor is made: a worker process
imports each handler's module (or loads its script by path, trawl.handlers.refs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from trawl.extract.links import LinkFilter
from trawl.handlers.page import Page
from trawl.handlers.refs import load
from trawl.handlers.run import Handler, run_handler
from trawl.store.values import CommitBatch, NewURL


class Fetched(NamedTuple):
    """What a page handler sees of the fetch besides the body: the status, the response
    headers trawl keeps (names in lower case), the fetch's Unix time and the label the
    URL was queued with."""

    status: int
    headers: dict[str, str]
    fetched_at: float
    label: str | None


class Handled(NamedTuple):
    """What a page's handler gave besides its follows: its items (JSON object texts, in
    yield order), its error line (None: it ran to its end), and the priorities its
    follows asked for, (URL id, priority)."""

    items: tuple[str, ...]
    error: str | None
    priorities: tuple[tuple[int, float], ...] = ()


class Handlers:
    """The handlers of one process, by label, loaded when it is made."""

    def __init__(self, refs: tuple[tuple[str | None, str], ...]) -> None:
        self._by_label: dict[str | None, Handler] = {label: load(ref) for label, ref in refs}

    def get(self, label: str | None) -> Handler | None:
        """The handler of pages of ``label``; None when there is none."""
        return self._by_label.get(label)

    @staticmethod
    def run(
        handler: Handler,
        url: str,
        depth: int,
        body: bytes,
        fetched: Fetched,
        base: str,
        hrefs: Sequence[str],
        links: LinkFilter | None,
        batch: CommitBatch,
    ) -> tuple[list[NewURL], Handled]:
        """Run ``handler`` on the page at ``url`` (its links are at ``depth``, its
        relative URLs resolve against ``base``): its follows as candidates (each
        rejection counted in ``batch``), and what else it gave; ``hrefs`` are the page's
        link targets as the extract stage parsed them, the page's links once resolved.
        Without ``links`` (the page says nofollow, in a robots meta tag or header) its
        follows are dropped and the page counted as ``nofollow_pages``."""
        page = Page(
            url=url, body=body, status=fetched.status, headers=fetched.headers,
            depth=depth - 1, fetched_at=fetched.fetched_at, label=fetched.label, base=base,
            hrefs=hrefs,
        )  # fmt: skip
        result = run_handler(handler, page)
        if result.error is not None:
            return [], Handled((), result.error)
        if links is None:
            batch.count("nofollow_pages")
            return [], Handled(tuple(result.items), None)
        found: list[NewURL] = []
        priorities: list[tuple[int, float]] = []
        seen: set[int] = set()
        for follow in result.follows:
            link = links.candidate(follow.url, base, depth, batch)
            if link is None:
                continue
            if link.id in seen:
                batch.count("duplicates")
                continue
            seen.add(link.id)
            found.append(link._replace(label=follow.label))
            if follow.priority is not None:
                priorities.append((link.id, min(1.0, max(0.0, float(follow.priority)))))
        batch.count("links", len(result.follows))
        return found, Handled(tuple(result.items), None, tuple(priorities))
