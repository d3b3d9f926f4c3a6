"""The seen-set: a Bloom filter in RAM in front of the store's exact insert-if-absent.

The Bloom filter answers "definitely new" or "maybe seen". Definitely-new URLs go
straight to the store's insert; maybe-seen ones are looked up in the store, which
settles them exactly. Because the store's primary key is the URL hash and inserts are
``ON CONFLICT DO NOTHING``, a wrong Bloom answer can never create a duplicate or lose a
URL: the unique count always comes from the store.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def _identity(item: int) -> int:
    return item


class SeenSet:
    """Exact URL de-duplication with a Bloom filter hint."""

    def __init__(self, store: Store, expected_urls: int, error_rate: float) -> None:
        self._store = store
        self._bloom = Bloom(expected_urls, error_rate, hash_func=_identity)

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
        for candidate in candidates:
            if candidate.id in unique:
                duplicates += 1
            else:
                unique[candidate.id] = candidate
        maybe = [uid for uid in unique if uid in self._bloom]
        collisions = 0
        if maybe:
            known = await self._store.existing(maybe)
            for uid, url in known.items():
                if unique.pop(uid).url == url:
                    duplicates += 1
                else:
                    collisions += 1
        new = list(unique.values())
        self._bloom.update(u.id for u in new)
        return SeenVerdict(new, duplicates, collisions, len(maybe))
