"""A compact, bounded cache of URL ids the store has confirmed, each with its text's hash.

The seen-set asks it before the store: a hit means "this id is stored, with this URL
text", so the candidate is a duplicate without a look-up. It only ever says "known" for
a pair it was given, so it cannot make a duplicate or lose a URL; a miss costs a store
look-up, nothing more.

A Python dict of int to int costs about 100 bytes an entry (two int objects and the
table slot). Here each generation is one flat array of signed 64-bit numbers, an id and
its text hash side by side, with linear probing: 16 bytes a slot at most 70 % full, so
about 23 bytes an entry, and a miss is a few array reads.

The ids in use sit in a dict in front (see :class:`KnownIds`). Behind it, two
generations keep popular ids: entries go into the newer table; when it is full it
becomes the older and the oldest is dropped; an id found in a table is copied forward.

The tables are ``trawl.frontier._idtable.IdTable``, the same table in C, where it is built: from
compiled Python each read of an ``array`` slot makes a new int object, and the ids,
signed 64-bit hashes, are past mypyc's fast integers, so a probe cost about 1.5 us.
:class:`_Generation` is the reference, used by a build without compiled modules.

The seen-set hands it a whole batch of link candidates (:meth:`KnownIds.screen`), and
with the C tables the loop over the batch runs in C too (``trawl.frontier._idtable.screen``;
:func:`_screen` is its reference): each candidate's id, its URL's hash and the probes
of the dict and both tables without a Python-level call per link: 0.76 against 1.60 us
a candidate from compiled Python, with a full cache and three candidates in four known.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Protocol

from trawl.store.values import NewURL

MAX_LOAD = 0.7
"""Entries a generation holds, as a share of its slots."""


class _Generation:
    """One open-addressing table of (id, text hash) pairs, side by side in one array (a
    probe reads one cache line); a text hash of 0 marks a free slot, so stored hashes
    have their lowest bit set (see :func:`_mark`). Two texts of one id whose hashes
    differ in that bit alone look alike: that needs a 64-bit id collision and then a
    one in 2**63 chance."""

    def __init__(self, slots: int) -> None:
        self.pairs = array("q", [0]) * (2 * slots)
        self.mask = 2 * slots - 2
        """Turns an id into the array index of a pair (always even)."""
        self.size = 0
        self.limit = int(slots * MAX_LOAD)
        """Entries it holds before it must grow."""

    @property
    def nbytes(self) -> int:
        """Bytes of its array."""
        return self.pairs.itemsize * len(self.pairs)

    def _locate(self, uid: int, marked: int) -> int:
        """The index of the pair (uid, marked), or of the free slot that ends its probe."""
        pairs, mask = self.pairs, self.mask
        at = (uid << 1) & mask
        while True:
            stored = pairs[at + 1]
            if stored == 0 or (stored == marked and pairs[at] == uid):
                return at
            at = (at + 2) & mask

    def find(self, uid: int, text_hash: int) -> bool:
        """Whether the pair is in the table."""
        return self.pairs[self._locate(uid, _mark(text_hash)) + 1] != 0

    def grown(self) -> _Generation:
        """The same entries in a table of twice the slots."""
        bigger = _Generation(self.mask + 2)
        pairs = self.pairs
        for at in range(0, len(pairs), 2):
            if pairs[at + 1]:
                bigger.add(pairs[at], pairs[at + 1])  # marking twice changes nothing
        return bigger

    def add(self, uid: int, text_hash: int) -> None:
        """Put the pair in the table (once)."""
        marked = _mark(text_hash)
        at = self._locate(uid, marked)
        if self.pairs[at + 1] == 0:
            self.pairs[at] = uid
            self.pairs[at + 1] = marked
            self.size += 1


def _mark(text_hash: int) -> int:
    """``text_hash`` (a signed 64-bit ``hash()``) with its lowest bit set, never 0."""
    return text_hash | 1


class Table(Protocol):
    """What :class:`KnownIds` needs of a generation (:class:`_Generation`, ``IdTable``)."""

    @property
    def size(self) -> int: ...

    @property
    def limit(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def find(self, uid: int, text_hash: int) -> bool: ...

    def add(self, uid: int, text_hash: int) -> None: ...

    def grown(self) -> Table: ...


def _table_maker() -> Callable[[int], Table]:
    """The C table where it is built, else the reference."""
    try:
        from trawl.frontier._idtable import IdTable
    except ImportError:
        return _Generation
    return IdTable


def _slots_for(entries: int) -> int:
    """The smallest power of two that holds ``entries`` at most ``MAX_LOAD`` full."""
    slots = 1
    while slots * MAX_LOAD < entries:
        slots *= 2
    return slots


Screened = tuple[dict[int, NewURL], int, list[int], list[int]]
"""What screening a batch gives: the unknown candidates by id (the first of each), how
many others there were, and the ids the tables held with their text hashes."""
Screen = Callable[[Sequence[NewURL], dict[int, int], Table, Table], Screened]
"""The screening loop (:func:`_screen`, ``trawl.frontier._idtable.screen``): candidates, the dict
in front, the newer and the older table."""


def _screen(
    candidates: Sequence[NewURL], recent: dict[int, int], newer: Table, older: Table
) -> Screened:
    """The reference of the screening loop: each candidate is a duplicate if its id came
    earlier in the batch, or if the dict or a table holds its (id, text hash) pair."""
    unique: dict[int, NewURL] = {}
    duplicates = 0
    found_ids: list[int] = []
    found_hashes: list[int] = []
    for candidate in candidates:
        uid = candidate.id
        if uid in unique:
            duplicates += 1
            continue
        text_hash = hash(candidate.url)
        if recent.get(uid) == text_hash:
            duplicates += 1
        elif newer.find(uid, text_hash) or older.find(uid, text_hash):
            duplicates += 1
            found_ids.append(uid)
            found_hashes.append(text_hash)
        else:
            unique[uid] = candidate
    return unique, duplicates, found_ids, found_hashes


def _screen_for(table: Callable[[int], Table]) -> Screen:
    """The loop in C for the C table where it is built, else the reference."""
    try:
        from trawl.frontier._idtable import IdTable, screen
    except ImportError:
        return _screen
    return screen if table is IdTable else _screen


FIRST_SLOTS = 1024
"""Slots of the first generation; it doubles as it fills, so a small crawl stays small."""


RECENT = 100_000
"""Entries of the dict in front of the tables (about 100 bytes each)."""


class KnownIds:
    """Up to ``recent`` confirmed (id, text hash) pairs in a dict, in front of up to
    ``capacity`` more in two generations of compact tables.

    A dict look-up is several times cheaper than probing a table from compiled code
    (Python ints of 64 bits are objects either way, and an ``array`` hands each one out
    as a new object), so the ids in use are answered by the dict: a hit in a table is
    copied into it, and when it is full its entries move into the newer table.
    """

    def __init__(
        self,
        capacity: int,
        recent: int = RECENT,
        table: Callable[[int], Table] | None = None,
    ) -> None:
        """``table`` makes a generation of the given slots (default: the C table where
        it is built)."""
        self._table = table or _table_maker()
        self._screen = _screen_for(self._table)
        self._recent: dict[int, int] = {}
        self._recent_room = min(recent, capacity)
        self._room = capacity // 2
        self._slots = _slots_for(self._room)
        self._newer = self._table(min(FIRST_SLOTS, self._slots))
        self._older = self._table(1)

    @property
    def nbytes(self) -> int:
        """RAM held by the tables' arrays (the dict in front is not counted)."""
        return self._newer.nbytes + self._older.nbytes

    def __len__(self) -> int:
        return len(self._recent) + self._newer.size + self._older.size

    def screen(self, candidates: Sequence[NewURL]) -> tuple[dict[int, NewURL], int]:
        """Split a batch: the candidates whose (id, hash of the URL text) pair this cache
        does not hold, by id, the first of each id; and how many others there were (an
        id's repeats in the batch and the pairs held). A pair found in a table is copied
        into the dict, so an id in use stays and is answered there next."""
        unique, duplicates, found_ids, found_hashes = self._screen(
            candidates, self._recent, self._newer, self._older
        )
        for uid, text_hash in zip(found_ids, found_hashes, strict=True):
            self._add(uid, text_hash)
        return unique, duplicates

    def add_all(self, ids: Sequence[int], text_hashes: Sequence[int]) -> None:
        """Remember each confirmed id with the hash of its URL text."""
        if not self._recent_room:
            return
        if len(self._recent) + len(ids) <= self._recent_room:
            self._recent.update(zip(ids, text_hashes, strict=True))
            return
        for uid, text_hash in zip(ids, text_hashes, strict=True):
            self._add(uid, text_hash)

    def _add(self, uid: int, text_hash: int) -> None:
        recent = self._recent
        if len(recent) >= self._recent_room:
            if self._room:
                for old_id, old_hash in recent.items():
                    self._keep(old_id, old_hash)
            recent.clear()
        recent[uid] = text_hash

    def _keep(self, uid: int, text_hash: int) -> None:
        newer = self._newer
        if newer.size >= self._room:
            self._older = newer
            newer = self._newer = self._table(self._slots)
        elif newer.size >= newer.limit:
            newer = self._newer = newer.grown()
        newer.add(uid, text_hash)
