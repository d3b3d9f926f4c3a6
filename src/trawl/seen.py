"""The seen-set: a Bloom filter in RAM in front of the store's exact insert-if-absent.

The Bloom filter answers "definitely new" or "maybe seen". Definitely-new URLs go
straight to the store's insert; maybe-seen ones are looked up in the store, which
settles them exactly. Most links of a crawl point at pages already known (navigation,
popular pages), so a bounded cache of ids the store has confirmed, each with a hash of
its URL text, answers those without a look-up; it only ever says "known", and the
store never forgets a URL, so it cannot make a duplicate or lose one. The cache keeps
two generations: when the newer is full it becomes the older and the oldest is
dropped, and an id found in the older moves to the newer, so popular pages stay. Because the store's
primary key is the URL hash and inserts are ``ON CONFLICT DO NOTHING``, a wrong Bloom
answer can never create a duplicate or lose a URL: the unique count always comes from
the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rbloom import Bloom

from trawl.store.base import NewURL, Store


@dataclass(frozen=True, slots=True)
class SeenVerdict:
    """The result of filtering a batch of discovered URLs."""

    new: list[NewURL]
    duplicates: int
    collisions: int
    store_lookups: int


KNOWN_CACHE = 200_000
"""Ids of URLs the store confirmed (or just received), kept to skip repeat look-ups
(both generations together; about 120 bytes each). At 10 M URLs in bench.store, 100,000
ids emptied when full sent 58 % of the candidates to the store, at about 8.5 us a
look-up; two generations of 100,000 send 46 %, of 200,000 33 % (simulated on the
benchmark's own link stream), but those took peak RSS near its 250 MB bound."""


def _identity(item: int) -> int:
    return item


class SeenSet:
    """Exact URL de-duplication with a Bloom filter hint."""

    def __init__(
        self,
        store: Store,
        expected_urls: int,
        error_rate: float,
        known_cache: int = KNOWN_CACHE,
    ) -> None:
        self._store = store
        self._bloom = Bloom(expected_urls, error_rate, hash_func=_identity)
        self._known: dict[int, int] = {}
        self._older: dict[int, int] = {}
        self._known_cache = known_cache

    def _remember(self, ids: Sequence[int], text_hashes: Iterable[int]) -> None:
        """Keep ids with the hashes of their URL texts in the newer generation of the
        cache of confirmed ids; when they do not fit, it becomes the older one first."""
        room = self._known_cache // 2
        if len(self._known) + len(ids) > room:
            self._older, self._known = self._known, {}
            if len(ids) > room:
                return
        self._known.update(zip(ids, text_hashes, strict=True))

    @property
    def bloom_bytes(self) -> int:
        """RAM held by the Bloom filter's bit array."""
        return int(self._bloom.size_in_bits) // 8

    async def load(self) -> int:
        """Fill the Bloom filter from the store (on start and resume); return the count."""
        count = 0
        async for ids in self._store.iter_ids():
            self._bloom.update(ids)
            count += len(ids)
        return count

    async def filter_new(self, candidates: Sequence[NewURL]) -> SeenVerdict:
        """Split ``candidates`` into URLs not yet known and a count of duplicates.

        The survivors are added to the filter; the caller inserts them in the store.
        Duplicates inside the batch count as duplicates too. A URL whose hash matches a
        known URL with different text (a 64-bit collision) is counted and dropped.
        """
        unique: dict[int, NewURL] = {}
        duplicates = 0
        known, older = self._known, self._older
        kept: list[int] = []
        kept_hashes: list[int] = []
        for candidate in candidates:
            uid = candidate.id
            if uid in unique or known.get(uid) == hash(candidate.url):
                duplicates += 1
            elif older.get(uid) == (text_hash := hash(candidate.url)):
                duplicates += 1
                kept.append(uid)
                kept_hashes.append(text_hash)
            else:
                unique[uid] = candidate
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
        self._remember(kept + ids, kept_hashes + [hash(u.url) for u in new])
        return SeenVerdict(new, duplicates, collisions, len(maybe))
