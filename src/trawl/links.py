"""The URL filter stage: raw hrefs in, normalised in-scope candidates out.

Every href a page yields goes through normalisation and validation (trawl.urls), then
scope and include/exclude (trawl.scope), then the hop-depth limit. Nothing here raises:
each rejection is counted in the batch under its reason (``invalid:<reason>``,
``off_scope``, ``excluded``, ``too_deep``), and the survivors become :class:`NewURL`
candidates for the seen-set.

This is the hottest code of a crawl (tens of links per page), so verdicts are cached:
by the raw href when its meaning does not depend on the page's path (absolute, or
scheme-relative with the page's scheme prefixed), and by the WHATWG-resolved URL
otherwise. The cache is bounded; it is emptied when full.
"""

from __future__ import annotations

from collections.abc import Iterable

from trawl.scope import Scope, Verdict
from trawl.store.base import CommitBatch, NewURL
from trawl.urls import (
    NormalizeRules,
    Rejection,
    host_key,
    normalize,
    normalize_resolved,
    resolve_against_serialized,
    url_hash,
)

CACHE_SIZE = 50_000
DEFAULT_MAX_DEPTH = 15
"""Hops from a seed beyond which links are counted, not queued (``--max-depth``)."""
_ABSOLUTE = ("http://", "https://")


def _absolute_key(href: str, base: str | None) -> str | None:
    """A cache key for an href whose meaning does not depend on the page's path: an
    absolute http(s) URL in any letter case, or a scheme-relative ``//host/...`` (which
    depends only on the page's scheme); None for any other href."""
    if href.startswith(_ABSOLUTE):
        return href
    if href.startswith("//") and base is not None and base.startswith(_ABSOLUTE):
        return ("https:" if base[4] == "s" else "http:") + href
    if href[:1] in ("H", "h") and href[:8].lower().startswith(_ABSOLUTE):
        return href
    return None


Accepted = tuple[int, str, str]
"""An in-scope URL: (id, normalised URL, host key)."""
Dropped = tuple[str, ...]
"""A rejected URL: the counters to bump."""


class LinkFilter:
    """Turns hrefs into seen-set candidates, counting every rejection.

    A candidate deeper than ``max_depth`` hops from a seed is counted as ``too_deep``
    and dropped, whether the URL is new or not; redirect targets keep the depth of the
    URL that redirected, so they are never too deep.
    """

    def __init__(
        self, scope: Scope, rules: NormalizeRules, max_depth: int = DEFAULT_MAX_DEPTH
    ) -> None:
        self._scope = scope
        self._rules = rules
        self._max_depth = max_depth
        self._cache: dict[str, Accepted | Dropped] = {}

    @property
    def cached(self) -> int:
        """How many verdicts the cache holds."""
        return len(self._cache)

    def _judge(self, resolved: str) -> Accepted | Dropped:
        url = normalize_resolved(resolved, self._rules)
        if isinstance(url, Rejection):
            return ("invalid", f"invalid:{url.value}")
        verdict = self._scope.check(url)
        if verdict is not Verdict.IN:
            return (verdict.value,)
        return (url_hash(url), url, host_key(url))

    def _remember(self, key: str, entry: Accepted | Dropped) -> None:
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = entry

    def _verdict(self, href: str, base: str | None) -> Accepted | Dropped:
        key = _absolute_key(href, base)
        if key is not None:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        resolved = resolve_against_serialized(href, base)
        if resolved is None:
            reason = normalize(href, base, self._rules)
            assert isinstance(reason, Rejection)
            return ("invalid", f"invalid:{reason.value}")
        entry = self._cache.get(resolved)
        if entry is None:
            entry = self._judge(resolved)
            self._remember(resolved, entry)
        if key is not None:
            self._remember(key, entry)
        return entry

    def candidate(
        self, href: str, base: str | None, depth: int, batch: CommitBatch, redirect_hops: int = 0
    ) -> NewURL | None:
        """Normalise and scope-check one href; ``None`` (and a counter) if it is dropped."""
        entry = self._verdict(href, base)
        if isinstance(entry[0], str):
            for name in entry:
                batch.count(str(name))
            return None
        if depth > self._max_depth:
            batch.count("too_deep")
            return None
        uid, url, host = entry
        return NewURL(int(uid), str(url), str(host), depth, redirect_hops)

    def page_links(
        self, hrefs: Iterable[str], base: str, depth: int, batch: CommitBatch
    ) -> list[NewURL]:
        """Candidates for every href of a page at ``depth`` - 1, resolved against ``base``.

        A page that repeats an href (navigation, "top" links) yields it once; the repeats
        count as duplicates, as the seen-set would count them.
        """
        found: list[NewURL] = []
        seen: set[str] = set()
        total = 0
        for href in hrefs:
            total += 1
            if href in seen:
                continue
            seen.add(href)
            candidate = self.candidate(href, base, depth, batch)
            if candidate is not None:
                found.append(candidate)
        batch.count("links", total)
        batch.count("duplicates", total - len(seen))
        return found
