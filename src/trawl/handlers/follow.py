"""A handler's request to crawl a URL."""

from __future__ import annotations

from typing import NamedTuple


class Follow(NamedTuple):
    """A URL a handler asks the crawl to fetch: absolute, with the label of the handler
    that will read it (None: the default handler) and, if given, its priority.

    The crawl treats it as a link of the page: it is normalised, checked against the
    scope and the depth limit, and robots.txt, budgets and politeness apply to it.
    """

    url: str
    label: str | None = None
    priority: float | None = None
