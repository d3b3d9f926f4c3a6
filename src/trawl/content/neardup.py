"""Near-duplicate look-up: which earlier page has a SimHash within 3 bits of this one?

Comparing a new page's 64-bit SimHash (trawl.content.text) with every stored one does not scale,
so the hashes are indexed in four tables, one per 16-bit block (Manku, Jain and Das
Sarma, "Detecting near-duplicates for web crawling", WWW 2007): block ``k`` is bits
``16k`` to ``16k + 15`` of the hash's unsigned form. Two hashes that differ in at most 3
bits leave at least one of the four blocks untouched (pigeonhole), so every near-duplicate
shares a block with the page. The candidates are the pages that share at least one block;
each is confirmed by its Hamming distance. Between random hashes a block matches once in
65,536 tries, so a look-up reads about ``4 n / 65536`` rows for ``n`` stored pages.

:class:`NearDuplicates` does the look-up; the persistent part is a :class:`BlockIndex`.
:class:`MemoryBlockIndex` keeps it in RAM. The store keeps it in the ``simhash_blocks``
table (schema migration 3), which makes it survive restarts: one row per page and block,
``(url_id, block_no)`` the primary key, ``block_value`` its 16 bits, ``added`` the fetch
time, and an index on ``(block_no, block_value)``. A look-up is a UNION ALL of four
indexed equality look-ups joined to ``urls`` for the hash, earliest added first; writing
a page's four rows replaces the ones it had. Hashes are stored signed (as trawl.content.text
returns them), which fits SQLite's INTEGER. The crawl's content stage (trawl.content.stage)
looks up the store and keeps the pages of the batch being decided in a
:class:`MemoryBlockIndex` until the batch commits.

Checks must not overlap: :meth:`NearDuplicates.check` looks up, then adds, so two
concurrent checks of near-identical pages could miss each other. The committer, the one
writer, runs them one at a time.
"""

from __future__ import annotations

from typing import Protocol

from trawl.content.simhash import NEAR_DUPLICATE_BITS, hamming
from trawl.store.values import BLOCKS, Blocks, blocks

__all__ = ["BlockIndex", "MemoryBlockIndex", "NearDuplicates"]

_MASK64 = (1 << 64) - 1
_SIGN = 1 << 63


def _signed(simhash: int) -> int:
    value = simhash & _MASK64
    return value - ((value & _SIGN) << 1)


class BlockIndex(Protocol):
    """Where the hashes of pages already seen are kept, by block."""

    async def candidates(self, blocks: Blocks) -> list[tuple[int, int]]:
        """``(url_id, simhash)`` of every page sharing at least one block with ``blocks``
        (block ``k`` compared with block ``k`` only), each once, oldest first."""
        ...

    async def add(self, url_id: int, simhash: int) -> None:
        """Record the page's signed hash, replacing the one it had, if any."""
        ...


class MemoryBlockIndex:
    """A :class:`BlockIndex` in RAM: four dictionaries from block value to pages."""

    def __init__(self) -> None:
        # Per block: block value -> url_ids (a dict keeps them unique and in order).
        self._tables: list[dict[int, dict[int, None]]] = [{} for _ in range(BLOCKS)]
        self._pages: dict[int, tuple[int, int]] = {}  # url_id -> (when added, hash)
        self._added = 0

    def __len__(self) -> int:
        return len(self._pages)

    async def candidates(self, blocks: Blocks) -> list[tuple[int, int]]:
        found: set[int] = set()
        for table, value in zip(self._tables, blocks, strict=True):
            found.update(table.get(value, ()))
        ordered = sorted(found, key=lambda url_id: self._pages[url_id][0])
        return [(url_id, self._pages[url_id][1]) for url_id in ordered]

    async def add(self, url_id: int, simhash: int) -> None:
        old = self._pages.get(url_id)
        if old is not None:
            for table, value in zip(self._tables, blocks(old[1]), strict=True):
                pages = table[value]
                del pages[url_id]
                if not pages:
                    del table[value]
        for table, value in zip(self._tables, blocks(simhash), strict=True):
            table.setdefault(value, {})[url_id] = None
        self._pages[url_id] = (self._added, simhash)
        self._added += 1


class NearDuplicates:
    """Finds, for each new page, the first earlier page within 3 bits of it."""

    def __init__(self, index: BlockIndex) -> None:
        self._index = index

    async def check(self, url_id: int, simhash: int) -> int | None:
        """The url_id of the oldest other page within
        :data:`~trawl.content.simhash.NEAR_DUPLICATE_BITS` bits of ``simhash``, else None;
        the page is added to the index either way."""
        simhash = _signed(simhash)
        found = None
        for other, other_hash in await self._index.candidates(blocks(simhash)):
            if other != url_id and hamming(simhash, other_hash) <= NEAR_DUPLICATE_BITS:
                found = other
                break
        await self._index.add(url_id, simhash)
        return found
