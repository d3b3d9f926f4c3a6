"""The seen-set: a Bloom filter in RAM in front of the store's exact insert-if-absent.

The Bloom filter answers "definitely new" or "maybe seen". Definitely-new URLs go
straight to the store's insert; maybe-seen ones are looked up in the store, which
settles them exactly. Most links of a crawl point at pages already known (navigation,
popular pages), so a bounded cache of ids the store has confirmed, each with a hash of
its URL text (trawl.frontier.known_ids), answers those without a look-up; it only ever says
"known", and the store never forgets a URL, so it cannot make a duplicate or lose one.
Because the store inserts a URL only if its hash is absent (PostgreSQL's primary key
with ``ON CONFLICT DO NOTHING``; SQLite's own check against its id index), a wrong
Bloom answer can never create a duplicate or lose a URL: the unique count always comes
from the store.

A known URL found again at a smaller depth than it was stored with takes that depth if
it is not fetched yet (trawl.store.values.CommitBatch.shallower), so a URL's depth is its
shortest path found before its fetch, whatever the fetch order. Asking the store about
every duplicate would undo the caches above, so a depth sketch answers first: one byte
per slot, a slot per id modulo its size, holding one more than the largest depth a URL
of that slot was stored with (0: none stored in this process). A duplicate whose depth
is not below its slot's cannot be shallower than its stored depth and goes no further;
the others are handed to the store, whose update is exact. A resumed crawl fills the
sketch with the depths of the URLs still waiting (the only ones that can change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rbloom import Bloom

from trawl.frontier.known_ids import KnownIds
from trawl.store.protocols import Known
from trawl.store.values import NewURL


@dataclass(frozen=True, slots=True)
class SeenVerdict:
    """The result of filtering a batch of discovered URLs."""

    new: list[NewURL]
    duplicates: int
    collisions: int
    store_lookups: int
    shallower: list[tuple[int, int]]
    """(id, depth) of candidates that may be known at a greater depth: for the store."""


KNOWN_CACHE = 1_400_000
"""Ids of URLs the store confirmed (or just received), kept to skip repeat look-ups:
100,000 in a dict in front (about 10 MB) and this many in compact tables behind it
(about 23 bytes each, 32 MB at most; trawl.frontier.known_ids). At 10 M URLs in bench.store the
store look-ups fell from 15.1 M to 5.9 M of 36.1 M candidates against 200,000 ids in
dicts alone, and peak RSS rose from 201 to 220 MB."""


SKETCH_MAX = 255
"""The largest value a sketch slot holds: depths from 254 on share it."""


def _identity(item: int) -> int:
    return item


class SeenSet:
    """Exact URL de-duplication with a Bloom filter hint."""

    def __init__(
        self,
        store: Known,
        expected_urls: int,
        error_rate: float,
        known_cache: int = KNOWN_CACHE,
    ) -> None:
        self._store = store
        self._bloom = Bloom(expected_urls, error_rate, hash_func=_identity)
        self._known = KnownIds(known_cache)
        self._sketch = bytearray(expected_urls)
        self._slots = expected_urls

    @property
    def bloom_bytes(self) -> int:
        """RAM held by the Bloom filter's bit array."""
        return int(self._bloom.size_in_bits) // 8

    @property
    def sketch_bytes(self) -> int:
        """RAM held by the depth sketch."""
        return self._slots

    async def load(self) -> int:
        """Fill the Bloom filter from the store, and the depth sketch from its queued
        URLs (on start and resume); return the count of URLs."""
        count = 0
        async for ids in self._store.iter_ids():
            self._bloom.update(ids)
            count += len(ids)
        async for queued in self._store.queued_depths():
            self._mark(queued)
        return count

    def _mark(self, urls: Sequence[tuple[int, int]]) -> None:
        """Record in the sketch that each (id, depth) is stored at that depth."""
        sketch, slots = self._sketch, self._slots
        for uid, depth in urls:
            slot = uid % slots
            value = min(depth + 1, SKETCH_MAX)
            if sketch[slot] < value:
                sketch[slot] = value

    def _shallower(self, candidates: Sequence[NewURL]) -> list[tuple[int, int]]:
        """(id, depth) of the candidates whose slot says a URL there may be stored
        deeper than the candidate's depth."""
        sketch, slots = self._sketch, self._slots
        found: list[tuple[int, int]] = []
        for u in candidates:
            depth = u.depth
            if sketch[u.id % slots] > depth + 1:
                found.append((u.id, depth))
        return found

    async def filter_new(self, candidates: Sequence[NewURL]) -> SeenVerdict:
        """Split ``candidates`` into URLs not yet known and a count of duplicates.

        The survivors are added to the filter; the caller inserts them in the store.
        Duplicates inside the batch count as duplicates too. A URL whose hash matches a
        known URL with different text (a 64-bit collision) is counted and dropped.
        """
        known = self._known
        unique, duplicates = known.screen(candidates)
        kept: list[int] = []
        kept_hashes: list[int] = []
        maybe = [uid for uid in unique if uid in self._bloom]
        collisions = 0
        if maybe:
            stored = await self._store.existing(maybe)
            for uid, url in stored.items():
                if unique.pop(uid).url == url:
                    duplicates += 1
                    kept.append(uid)
                    kept_hashes.append(hash(url))
                else:
                    collisions += 1
        new = list(unique.values())
        ids = list(unique)
        self._bloom.update(ids)
        known.add_all(kept + ids, kept_hashes + [hash(u.url) for u in new])
        self._mark([(u.id, u.depth) for u in new])
        # After the new URLs are marked: a new URL repeated in the batch at a smaller
        # depth than its first (stored) candidate is found too.
        shallower = self._shallower(candidates) if duplicates else []
        return SeenVerdict(new, duplicates, collisions, len(maybe), shallower)
