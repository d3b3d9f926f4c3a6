"""The URL filter stage: raw hrefs in, normalised in-scope candidates out.

Every href a page yields goes through normalisation and validation (trawl.extract.urls), then
scope and include/exclude (trawl.extract.scope), then the hop-depth limit. Nothing here raises:
each rejection is counted in the batch under its reason (``invalid:<reason>``,
``off_scope``, ``excluded``, ``too_deep``), and the survivors become :class:`NewURL`
candidates for the seen-set.

This is the hottest code of a crawl (tens of links per page), so verdicts are cached,
keyed by exactly what an href's meaning depends on, so that a hit needs no resolution:

- an absolute href by itself, a scheme-relative ``//host/...`` with the page's scheme
  prefixed;
- a path-absolute href ``/x`` by the pair (page origin, href): the WHATWG parser copies
  the base's scheme, host and port and parses the rest alone;
- a path-relative href ``x/y`` (no colon, so no scheme) by the pair (page directory,
  href): the parser drops the base's last path segment and its query first;
- anything else (``?q``, ``#f``, hrefs with a colon or leading controls) by the
  WHATWG-resolved URL.

The cache is bounded; it is emptied when full.
"""

from __future__ import annotations

from collections.abc import Iterable

from trawl.extract.resolution import resolve_against_serialized
from trawl.extract.scope import Scope, Verdict
from trawl.extract.urls import (
    NormalizeRules,
    Rejection,
    host_key,
    is_plain_origin,
    normalize,
    normalize_on_plain_origin,
    normalize_own_serialization,
    normalize_resolved,
    url_hash,
)
from trawl.sites.match import HostPatterns
from trawl.store.values import CommitBatch, NewURL

CACHE_SIZE = 50_000
DEFAULT_MAX_DEPTH = 15
"""Hops from a seed beyond which links are counted, not queued (``--max-depth``)."""
_ABSOLUTE = ("http://", "https://")

CacheKey = str | tuple[str, str]
"""An absolute or resolved URL, or a relative href with the part of the base it needs."""


Contexts = tuple[str, str, str | None]
"""What a page's relative hrefs depend on (see `_contexts`)."""


def _contexts(base: str | None) -> Contexts | None:
    """(origin, directory, host) of a serialized http(s) `base`: everything up to the end
    of its authority, everything up to the last ``/`` of its path, and the origin's host
    key when the origin has the plain shape (`is_plain_origin`), else None. None for any
    other base: its relative hrefs are then keyed by their resolved URL."""
    if base is None or not base.startswith(_ABSOLUTE):
        return None
    authority = base.find("//") + 2
    path = base.find("/", authority)
    if path < 0:
        return None
    end = len(base)
    for mark in "?#":
        found = base.find(mark, path)
        if 0 <= found < end:
            end = found
    origin = base[:path]
    host = base[authority:path] if is_plain_origin(origin) else None
    return origin, base[: base.rfind("/", path, end) + 1], host


_NOT_PATH_ABSOLUTE = frozenset("/\\\t\n\r")
"""After a leading ``/``: characters that make an href scheme-relative (tab and newline
are removed before parsing, and a backslash is a slash in http(s) URLs)."""
_NOT_PATH_RELATIVE = frozenset(chr(c) for c in range(0x21)) | frozenset("/\\?#")
"""First characters of an href that is not path-relative: trimmed controls and spaces,
slashes, and the starts of a query or fragment (whose meaning takes more of the base)."""


def _cache_key(href: str, base: str | None, contexts: Contexts | None) -> CacheKey | None:
    """The key under which `href`'s verdict on a page at `base` is cached (see the module
    docstring; `contexts` is ``_contexts(base)``), or None when only its resolved URL
    can be one."""
    first = href[:1]
    if first == "/":
        second = href[1:2]
        if contexts is None:
            return None
        if second not in _NOT_PATH_ABSOLUTE:
            return (contexts[0], href)
        if second == "/":
            return ("https:" if contexts[0][4] == "s" else "http:") + href
        return None
    if href.startswith(_ABSOLUTE):
        return href
    if first in ("H", "h") and href[:8].lower().startswith(_ABSOLUTE):
        return href
    if contexts is not None and first and first not in _NOT_PATH_RELATIVE and ":" not in href:
        return (contexts[1], href)
    return None


Accepted = tuple[int, str, str]
"""An in-scope URL: (id, normalised URL, host key)."""
Dropped = tuple[str, ...]
"""A rejected URL: the counters to bump."""


class LinkFilter:
    """Turns hrefs into seen-set candidates, counting every rejection.

    A candidate deeper than ``max_depth`` hops from a seed, or than the ``max_depth`` of
    its host's site (``site_depths``, by host pattern), is counted as ``too_deep`` and
    dropped, whether the URL is new or not; redirect targets keep the depth of the
    URL that redirected, so they are never too deep.
    """

    def __init__(
        self,
        scope: Scope,
        rules: NormalizeRules,
        max_depth: int = DEFAULT_MAX_DEPTH,
        site_depths: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self._scope = scope
        self._rules = rules
        self._max_depth = max_depth
        self._site_depths: HostPatterns[int] | None = (
            HostPatterns(site_depths) if site_depths else None
        )
        self._cache: dict[CacheKey, Accepted | Dropped] = {}

    def _site_too_deep(self, host: str, depth: int) -> bool:
        """Whether ``depth`` is past the ``max_depth`` of ``host``'s site (trawl.sites)."""
        patterns = self._site_depths
        if patterns is None:
            return False
        limit = patterns.find(host)
        return limit is not None and depth > limit

    @property
    def cached(self) -> int:
        """How many verdicts the cache holds."""
        return len(self._cache)

    def _judge(self, url: str | Rejection, host: str | None = None) -> Accepted | Dropped:
        """The verdict on a normalised URL (whose `host_key` is `host`, when the caller
        knows it), or on the reason it has none."""
        if isinstance(url, Rejection):
            return ("invalid", f"invalid:{url.value}")
        if host is None:
            host = host_key(url)
        verdict = self._scope.check(url, host)
        if verdict is not Verdict.IN:
            return (verdict.value,)
        return (url_hash(url), url, host)

    def _remember(self, key: CacheKey, entry: Accepted | Dropped) -> None:
        cache = self._cache
        if len(cache) >= CACHE_SIZE:
            cache.clear()
        cache[key] = entry

    def _verdict(
        self, href: str, base: str | None, key: CacheKey | None, contexts: Contexts | None
    ) -> Accepted | Dropped:
        """The verdict on `href`, resolved against `base` (`contexts` is
        ``_contexts(base)``), when its cache `key` (None: it has none but its resolved
        URL) is not cached yet; remembered under that key.

        A plain path-absolute href on a page of a plain origin is normalised in one step
        (`normalize_on_plain_origin`): most links of most sites have that shape.

        A keyed verdict is kept under the resolved URL too: a site's relative links name
        the same pages from pages in many directories, under as many keys, and in the
        20 x 500 crawl benchmark judging them again cost 0.07 ms of CPU a page (the
        store benchmark's links, mostly absolute, gain almost nothing from it).
        """
        if isinstance(key, str):  # an absolute URL: href, or a scheme-relative one completed
            own = normalize_own_serialization(key, self._rules)
            if own is not None:  # key is the resolved URL
                entry = self._judge(own)
                self._remember(key, entry)
                return entry
        elif key is not None and contexts is not None and contexts[2] and href[:1] == "/":
            url = normalize_on_plain_origin(contexts[0], href, self._rules)
            if url is not None:
                entry = self._judge(url, contexts[2])
                self._remember(key, entry)
                return entry
        resolved = resolve_against_serialized(href, base)
        if resolved is None:
            reason = normalize(href, base, self._rules)
            assert isinstance(reason, Rejection)
            return ("invalid", f"invalid:{reason.value}")
        cached = self._cache.get(resolved)
        if cached is None:
            entry = self._judge(normalize_resolved(resolved, self._rules))
            self._remember(resolved, entry)
        else:
            entry = cached
        if key is not None:
            self._remember(key, entry)
        return entry

    def _lookup(self, href: str, base: str | None, contexts: Contexts | None) -> Accepted | Dropped:
        """The verdict on `href` on a page at `base` (`contexts` is ``_contexts(base)``)."""
        key = _cache_key(href, base, contexts)
        if key is not None:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        return self._verdict(href, base, key, contexts)

    def _drop(self, entry: Accepted | Dropped, batch: CommitBatch) -> None:
        """Count why a verdict makes no candidate: its rejection, or too many hops."""
        if isinstance(entry[0], str):
            names: tuple[object, ...] = entry  # a plain tuple for mypyc (its bug on the union)
            for name in names:
                batch.count(str(name))
        else:
            batch.count("too_deep")

    def candidate(
        self, href: str, base: str | None, depth: int, batch: CommitBatch, redirect_hops: int = 0
    ) -> NewURL | None:
        """Normalise and scope-check one href; ``None`` (and a counter) if it is dropped."""
        entry = self._lookup(href, base, _contexts(base))
        if (
            isinstance(entry[0], str)
            or depth > self._max_depth
            or self._site_too_deep(str(entry[2]), depth)
        ):
            self._drop(entry, batch)
            return None
        uid, url, host = entry
        return NewURL(int(uid), str(url), str(host), depth, redirect_hops)

    def page_links(
        self, hrefs: Iterable[str], base: str, depth: int, batch: CommitBatch
    ) -> list[NewURL]:
        """Candidates for every href of a page at ``depth`` - 1, resolved against ``base``,
        which must be a WHATWG serialization (the page's normalised URL, or its
        ``<base href>`` resolved against it), as for ``resolve_against_serialized``.

        A page that repeats an href (navigation, "top" links) yields it once; the repeats
        count as duplicates, as the seen-set would count them. This is
        :meth:`candidate` for each href with the per-page work done once.
        """
        found: list[NewURL] = []
        seen: set[str] = set()
        total = 0
        contexts = _contexts(base)
        too_deep = depth > self._max_depth
        by_site = self._site_depths is not None
        lookup = self._lookup
        for href in hrefs:
            total += 1
            if href in seen:
                continue
            seen.add(href)
            entry = lookup(href, base, contexts)
            uid = entry[0]
            if (
                isinstance(uid, str)
                or too_deep
                or (by_site and self._site_too_deep(str(entry[2]), depth))
            ):
                self._drop(entry, batch)
            else:
                # The named tuple's own constructor is a Python function; tuple's is not.
                found.append(tuple.__new__(NewURL, (uid, entry[1], entry[2], depth, 0, None, None)))
        batch.count("links", total)
        batch.count("duplicates", total - len(seen))
        return found
