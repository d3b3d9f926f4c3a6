"""Scope: is a normalised URL part of this crawl?

A `Scope` is built once from the seeds and the user's include/exclude patterns, and then
answers `Scope.check` for every discovered link, so everything it can is precomputed.

Modes (`ScopeMode`):

- ``domain``: the URL's host equals, or is a subdomain of, the registrable domain of any
  seed (``www.example.co.uk`` -> ``example.co.uk``); scheme and port are ignored.
- ``host``: the URL's host and port (`trawl.extract.urls.host_key`) equal a seed's; the scheme
  is ignored, so ``http://a.test/`` admits ``https://a.test/`` (default ports are not
  part of the key).
- ``prefix``: the URL string starts with a seed URL string (``https://a.test/docs`` also
  admits ``https://a.test/docs-old``; end a seed with ``/`` to mean a directory).

Then the patterns (Python regular expressions, `re.search` on the normalised URL): when
any include pattern is given the URL must match at least one, and a URL that matches any
exclude pattern is out. The scope verdict comes first: an off-scope URL is ``off_scope``
whatever the patterns say.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Sequence

from publicsuffixlist import PublicSuffixList

from trawl.extract.urls import host_key, hostname, key_hostname

__all__ = ["Scope", "ScopeMode", "Verdict", "registrable_domain"]


class ScopeMode(enum.StrEnum):
    """How far from the seeds a crawl may go."""

    DOMAIN = "domain"
    HOST = "host"
    PREFIX = "prefix"


class Verdict(enum.StrEnum):
    """The answer of `Scope.check`; the values double as metric label names."""

    IN = "in"
    OFF_SCOPE = "off_scope"
    EXCLUDED = "excluded"


_IPV4_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
HOST_CACHE = 65_536
"""Host verdicts a `Scope` remembers (emptied when full): a crawl checks many links
per host, and the domain walk costs more than the look-up."""


@functools.cache
def _public_suffix_list() -> PublicSuffixList:
    """The list bundled with publicsuffixlist (ICANN and private sections; no download)."""
    return PublicSuffixList()


@functools.lru_cache(maxsize=65536)
def registrable_domain(host: str) -> str:
    """The registrable domain ("eTLD+1") of `host`, e.g. ``a.b.example.co.uk`` -> ``example.co.uk``.

    Private suffixes count (``foo.github.io`` is its own registrable domain). A name
    under a top-level domain the list does not know counts as one label of suffix
    (``a.trawl.test`` -> ``trawl.test``). IP literals and hosts with no registrable part
    (``localhost``, a bare public suffix) are returned unchanged.
    """
    if host.startswith("[") or _IPV4_RE.fullmatch(host):
        return host
    domain = _public_suffix_list().privatesuffix(host)
    return host if domain is None else str(domain)


def _compile(kind: str, patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """Compile user patterns, naming the one that is not a valid regular expression."""
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as err:
            raise ValueError(f"invalid {kind} pattern {pattern!r}: {err}") from err
    return tuple(compiled)


def _checked_seed(seed: str) -> str:
    """`seed` itself when it is an http(s) URL; ValueError otherwise."""
    if not seed.startswith(("http://", "https://")):
        raise ValueError(f"invalid seed URL {seed!r}: not a normalised http(s) URL")
    return seed


class Scope:
    """Decides whether a normalised URL belongs to the crawl (see the module docstring)."""

    __slots__ = (
        "_domains",
        "_exclude",
        "_host_keys",
        "_hosts",
        "_include",
        "_prefixes",
        "mode",
        "seeds",
    )

    def __init__(
        self,
        seeds: Sequence[str],
        mode: ScopeMode = ScopeMode.DOMAIN,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> None:
        """Precompute the scope from `seeds`; ValueError for no seeds or a bad pattern.

        Seeds must already be normalised (`trawl.extract.urls.normalize`, with the crawl's own
        rules): they are compared as given.
        """
        if not seeds:
            raise ValueError("a scope needs at least one seed URL")
        self.mode = ScopeMode(mode)
        self.seeds: tuple[str, ...] = tuple(_checked_seed(seed) for seed in seeds)
        self._domains = frozenset(registrable_domain(hostname(seed)) for seed in self.seeds)
        self._host_keys = frozenset(host_key(seed) for seed in self.seeds)
        self._prefixes = self.seeds
        self._include = _compile("include", include)
        self._exclude = _compile("exclude", exclude)
        self._hosts: dict[str, bool] = {}

    def __repr__(self) -> str:
        return (
            f"Scope(seeds={list(self.seeds)!r}, mode={self.mode.value!r}, "
            f"include={[p.pattern for p in self._include]!r}, "
            f"exclude={[p.pattern for p in self._exclude]!r})"
        )

    def _in_scope(self, url: str, key: str | None) -> bool:
        if self.mode is ScopeMode.PREFIX:
            return url.startswith(self._prefixes)
        if key is None:
            key = host_key(url)
        known = self._hosts.get(key)
        if known is None:
            known = self._host_in_scope(key)
            if len(self._hosts) >= HOST_CACHE:
                self._hosts.clear()
            self._hosts[key] = known
        return known

    def _host_in_scope(self, key: str) -> bool:
        """The verdict of the host modes on a host key (``host[:port]``)."""
        if self.mode is ScopeMode.HOST:
            return key in self._host_keys
        host = key_hostname(key)
        domains = self._domains
        if host in domains:
            return True
        dot = host.find(".")
        while dot >= 0:
            if host[dot + 1 :] in domains:
                return True
            dot = host.find(".", dot + 1)
        return False

    def check(self, url: str, key: str | None = None) -> Verdict:
        """The verdict for normalised `url` (whose `host_key` is `key`, when the caller has
        it already): off-scope first, then include and exclude."""
        if not self._in_scope(url, key):
            return Verdict.OFF_SCOPE
        if self._include and not any(p.search(url) for p in self._include):
            return Verdict.EXCLUDED
        if self._exclude and any(p.search(url) for p in self._exclude):
            return Verdict.EXCLUDED
        return Verdict.IN
