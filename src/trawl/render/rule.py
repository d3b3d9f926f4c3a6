"""Which pages are rendered: the one decision, for a URL and for a page's markup.

:meth:`RenderPlan.mode_for` says how a URL is treated (``--render``, or ``always`` for
one ``--render-include`` matches). Under ``auto`` a fetched HTML page is rendered when
its markup looks built by its scripts (:func:`script_built`), read from the
:class:`~trawl.extract.parser.ScriptSignals` the extract worker takes beside its links:

- it has a script payload (inline script bytes, plus :data:`EXTERNAL_SCRIPT_BYTES` for
  each ``<script src>``), and
- an application root is empty (``<div id="root"></div>``, ``id`` app, __next, __nuxt,
  ___gatsby, ``<app-root>``), or the body shows fewer than :data:`MIN_TEXT` characters
  of text, or it has fewer than :data:`MIN_LINKS` links and a payload more than
  :data:`PAYLOAD_RATIO` times its text.

On the 181 static article pages of the extraction benchmark the rule renders none
(docs/PERFORMANCE.md): their least text is 1,546 characters and their fewest links 4.
"""

from __future__ import annotations

import re
from typing import cast
from urllib.parse import urlsplit

from trawl.config import RenderConfig, RenderMode
from trawl.extract.parser import ScriptSignals
from trawl.sites.rules import Sites

MIN_TEXT = 500
"""Characters of visible text below which a page with scripts is rendered."""
MIN_LINKS = 3
"""Links below which a page whose script payload dwarfs its text is rendered."""
PAYLOAD_RATIO = 10
EXTERNAL_SCRIPT_BYTES = 4096
"""What a ``<script src>`` weighs in the payload (its size is not known unfetched)."""


def script_built(signals: ScriptSignals, links: int) -> bool:
    """Whether a page with these signals and ``links`` links looks built by its scripts."""
    payload = signals.script_bytes + EXTERNAL_SCRIPT_BYTES * signals.external_scripts
    if payload == 0:
        return False
    if signals.empty_root or signals.text_chars < MIN_TEXT:
        return True
    return links < MIN_LINKS and payload > PAYLOAD_RATIO * signals.text_chars


class RenderPlan:
    """How each URL is rendered, from ``--render`` and ``--render-include``."""

    def __init__(self, config: RenderConfig, sites: Sites | None = None) -> None:
        self._mode = config.mode
        self._include = tuple(re.compile(pattern) for pattern in config.include)
        self._sites = sites if sites else None

    def mode_for(self, url: str) -> RenderMode:
        """``always`` for a URL an include pattern matches, else its site's ``render``
        (trawl.sites), else the crawl's mode."""
        if any(pattern.search(url) for pattern in self._include):
            return "always"
        if self._sites is not None:
            mode = self._sites.render_mode_for(urlsplit(url).hostname or "")
            if mode is not None:
                return cast(RenderMode, mode)
        return self._mode
