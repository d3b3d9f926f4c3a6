"""The URL filter stage: raw hrefs in, normalised in-scope candidates out.

Every href a page yields goes through normalisation and validation (trawl.urls), then
scope and include/exclude (trawl.scope). Nothing here raises: each rejection is counted
in the batch under its reason (``invalid:<reason>``, ``off_scope``, ``excluded``), and
the survivors become :class:`NewURL` candidates for the seen-set.
"""

from __future__ import annotations

from collections.abc import Iterable

from trawl.scope import Scope, Verdict
from trawl.store.base import CommitBatch, NewURL
from trawl.urls import NormalizeRules, Rejection, host_key, normalize, url_hash


class LinkFilter:
    """Turns hrefs into seen-set candidates, counting every rejection."""

    def __init__(self, scope: Scope, rules: NormalizeRules) -> None:
        self._scope = scope
        self._rules = rules

    def candidate(
        self, href: str, base: str | None, depth: int, batch: CommitBatch, redirect_hops: int = 0
    ) -> NewURL | None:
        """Normalise and scope-check one href; ``None`` (and a counter) if it is dropped."""
        url = normalize(href, base, self._rules)
        if isinstance(url, Rejection):
            batch.count("invalid")
            batch.count(f"invalid:{url.value}")
            return None
        verdict = self._scope.check(url)
        if verdict is not Verdict.IN:
            batch.count(verdict.value)
            return None
        return NewURL(url_hash(url), url, host_key(url), depth, redirect_hops)

    def page_links(
        self, hrefs: Iterable[str], base: str, depth: int, batch: CommitBatch
    ) -> list[NewURL]:
        """Candidates for every href of a page at ``depth`` - 1, resolved against ``base``."""
        found: list[NewURL] = []
        total = 0
        for href in hrefs:
            total += 1
            candidate = self.candidate(href, base, depth, batch)
            if candidate is not None:
                found.append(candidate)
        batch.count("links", total)
        return found
