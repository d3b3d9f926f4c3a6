"""Soft-404 detection: pages that say "not found" with status 200.

Many sites answer a path that does not exist with an ordinary page and status 200, so a
crawler that follows its links (each such page often links to more missing pages) can
wander in an endless space of error pages. Once per host, after its robots.txt, trawl
asks for a path that cannot exist (``/trawl-soft404-<random hex>``). A 404 or any other
answer than 200 with an HTML body means the host reports missing pages properly and
nothing more is done. A 200 HTML page is fingerprinted; a later page of that host whose
fingerprint is within :data:`MAX_DISTANCE` bits of it is recorded as a soft 404 and its
links are not followed. A redirect for the probe is not followed: hosts that redirect
missing pages elsewhere are treated as reporting them properly. Error pages are small: an
answer over :data:`MAX_PAGE_BYTES` is not fingerprinted, and a page over it is never
taken for the error page, which bounds the extra parsing.

The fingerprint is a 64-bit SimHash of the page's visible words, taken two at a time,
leaving out pure numbers (dates, counters) and the words of the page's own URL (error
pages often repeat the path that was asked for), so the error page for one missing path
and for another come out the same. A page with no words has no fingerprint and never
matches. Seeds and the root page of a host are never soft 404s: a site that serves its
home page for every unknown path must still be crawled from that home page.

The answer is stored with the host (``hosts.soft404_*``), so a resumed crawl does not
ask again until it is :data:`PROBE_TTL` old. A probe that got no answer at all is not
stored; the next run asks again. robots.txt applies to the probe like any other URL.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser

from trawl.content.simhash import hamming, simhash
from trawl.extract.parser import is_html
from trawl.fetch.fetcher import Fetcher
from trawl.politeness.robots_parser import ROBOTS_TTL
from trawl.store.protocols import HostRecords
from trawl.store.values import Soft404Record

__all__ = [
    "MAX_DISTANCE",
    "PROBE_PREFIX",
    "PROBE_TTL",
    "ProbeAnswer",
    "Soft404Detector",
    "distance",
    "fingerprint",
    "probe_url",
]

PROBE_PREFIX = "/trawl-soft404-"
PROBE_TTL = ROBOTS_TTL
"""How long a host's stored answer is trusted, as long as its robots.txt."""
MAX_DISTANCE = 3
"""Differing fingerprint bits (of 64) up to which a page is the host's error page."""
MAX_PAGE_BYTES = 1024 * 1024
"""Error pages are small: a larger answer to the probe is not fingerprinted, and a larger
page is never taken for the error page, so no page is parsed twice at full size."""

_WORD = re.compile(r"\w+")
_HIDDEN = ["script", "style", "noscript", "template"]


def probe_url(url: str, rng: random.Random) -> str:
    """A URL on the host of the normalised ``url`` that cannot exist."""
    origin = url[: url.find("/", url.find("//") + 2)]
    return f"{origin}{PROBE_PREFIX}{rng.getrandbits(64):016x}"


def _path_of(url: str) -> str:
    """The path and query of a normalised URL."""
    return url[url.find("/", url.find("//") + 2) :]


def _visible_words(body: bytes) -> list[str]:
    """The words a reader sees on an HTML page, lower-cased."""
    tree = LexborHTMLParser(body)
    root = tree.root
    if root is None:
        return []
    tree.strip_tags(_HIDDEN)
    return _WORD.findall(root.text(separator=" ").lower())


def fingerprint(body: bytes, url: str) -> int | None:
    """The signed 64-bit SimHash of the page at ``url``; None for a page without words.

    Features are pairs of consecutive visible words (single words on a one-word page),
    each counted once, after leaving out pure numbers and the words of ``url``'s path.
    """
    own = set(_WORD.findall(_path_of(url).lower()))
    words = [w for w in _visible_words(body) if w not in own and not w.isdigit()]
    if not words:
        return None
    features = {f"{first} {second}" for first, second in itertools.pairwise(words)} or {words[0]}
    return simhash(features)


def distance(a: int, b: int) -> int:
    """How many of the 64 bits two fingerprints differ in."""
    return hamming(a, b)


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """What a probe did: the record to store (None: nothing new), whether it sent a
    request, and how long that took."""

    record: Soft404Record | None
    fetched: bool
    elapsed: float


class Soft404Detector:
    """Probes each host once and recognises its error page afterwards."""

    def __init__(
        self,
        store: HostRecords,
        fetcher: Fetcher,
        *,
        enabled: bool = True,
        rng: random.Random | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._fetcher = fetcher
        self._enabled = enabled
        self._rng = rng or random.Random()
        self._wall_clock = wall_clock
        self._fingerprints: dict[int, int | None] = {}

    def wants_probe(self, host_id: int) -> bool:
        """True until a probe of the host has started (never when detection is off)."""
        return self._enabled and host_id not in self._fingerprints

    async def probe(
        self, host_id: int, some_url: str, allowed: Callable[[str], bool]
    ) -> ProbeAnswer:
        """Learn the host's error page, from the store or by asking for a missing path.

        ``some_url`` is any normalised URL of the host; ``allowed`` is its robots.txt
        verdict for a URL (a probe it disallows is not sent).
        """
        self._fingerprints[host_id] = None
        now = self._wall_clock()
        stored = await self._store.soft404(host_id)
        if stored is not None and now - stored.checked_at < PROBE_TTL:
            self._fingerprints[host_id] = stored.fingerprint
            return ProbeAnswer(None, fetched=False, elapsed=0.0)
        target = probe_url(some_url, self._rng)
        if not allowed(target):
            return ProbeAnswer(None, fetched=False, elapsed=0.0)
        result = await self._fetcher.fetch(target, accept=is_html, max_body=MAX_PAGE_BYTES)
        if result.status is None:
            return ProbeAnswer(None, fetched=True, elapsed=result.elapsed)
        usable = result.status == 200 and not result.truncated
        found = fingerprint(result.body, target) if usable else None
        self._fingerprints[host_id] = found
        return ProbeAnswer(Soft404Record(found, now), fetched=True, elapsed=result.elapsed)

    def matches(self, host_id: int, url: str, depth: int, body: bytes) -> bool:
        """True when the 200 HTML page ``url`` at ``depth`` is the host's error page."""
        known = self._fingerprints.get(host_id)
        if known is None or depth == 0 or len(body) > MAX_PAGE_BYTES or _path_of(url) == "/":
            return False
        page = fingerprint(body, url)
        return page is not None and distance(page, known) <= MAX_DISTANCE
