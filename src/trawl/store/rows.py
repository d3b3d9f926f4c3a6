"""What both engines derive from the store's values: the columns a claim reads, the
fenced parts a commit settles, the rows a batch writes to the host, content and item
tables, and the export rows and items read back a page at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple

from trawl.errors import StoreError
from trawl.store.values import (
    STALE_COUNTER,
    CommitBatch,
    ExportRow,
    ItemRow,
    Outcome,
    State,
)

CLAIM_COLUMNS = (
    "id, url, host_id, depth, redirect_hops, attempts, origin, kind, priority, fetched_at, "
    "status, etag, last_modified, change_hash, revisit_interval, label"
)
"""The ``urls`` columns a claim returns, in the field order of
trawl.store.values.QueuedURL."""


def unsettle(batch: CommitBatch) -> Callable[[], None]:
    """What puts ``batch`` back as it is now, before :func:`settle_fences` changed it: for
    a commit tried again after its transaction was rolled back."""
    outcomes, hosts, items = list(batch.outcomes), list(batch.hosts), list(batch.items)
    counters, fenced = dict(batch.counters), list(batch.fenced)

    def undo() -> None:
        batch.outcomes[:] = outcomes
        batch.hosts[:] = hosts
        batch.items[:] = items
        batch.counters.clear()
        batch.counters.update(counters)
        batch.fenced = list(fenced)

    return undo


def settle_fences(batch: CommitBatch, generations: Mapping[int, int]) -> int:
    """Move the fenced parts whose lease still holds (``generations``: each fenced host's
    current lease generation, read in the committing transaction) into the batch's own
    lists; drop the others (their outcomes, host updates, counters and items) and count
    them. Returns how many outcomes were refused."""
    refused = 0
    for part in batch.fenced:
        assert part.fence is not None
        if generations.get(part.fence.host_id) != part.fence.generation:
            refused += len(part.outcomes)
            continue
        batch.outcomes.extend(part.outcomes)
        batch.hosts.extend(part.hosts)
        batch.items.extend(part.items)
        for name, value in part.counters.items():
            batch.count(name, value)
    batch.fenced = []
    if refused:
        batch.count(STALE_COUNTER, refused)
    return refused


class ContentRows(NamedTuple):
    """The outcomes of a batch that the content tables record (schema migration 3)."""

    fingerprinted: list[Outcome]
    """Outcomes with a content hash: hash owners and the SimHash block index."""
    versions: list[Outcome]
    """Fetches to add to ``versions``: fingerprinted or archived, with a fetch time."""
    exact: set[int]
    """Pages the content stage found to duplicate another exactly: not block-indexed."""
    owners: list[tuple[str, int]]
    """Content hashes handed to a new owner, (content hash, url id), whose fetch with
    that hash the batch commits (an outcome refused with its lease hands nothing)."""


class HostTally(NamedTuple):
    """What a batch's outcomes change in one host's row."""

    requeued: int
    """URLs queued again (retries)."""
    answered: int
    """URLs DONE or FAILED: they count against the page budget."""
    returned: int
    """URLs no longer handed out."""
    blocked: int
    """URLs robots.txt kept from being fetched."""
    responses: int
    """Requests answered, and ``seconds`` they took together."""
    seconds: float


def host_tallies(outcomes: Sequence[Outcome]) -> dict[int, HostTally]:
    """Per host id, what ``outcomes`` change in its row."""
    tallies: dict[int, list[float]] = {}
    for o in outcomes:
        t = tallies.setdefault(o.host_id, [0, 0, 0, 0, 0, 0.0])
        t[0] += o.state == State.QUEUED
        t[1] += o.state in (State.DONE, State.FAILED)
        t[2] += 1
        t[3] += o.state == State.BLOCKED
        if o.elapsed is not None:
            t[4] += 1
            t[5] += o.elapsed
    return {
        host: HostTally(int(t[0]), int(t[1]), int(t[2]), int(t[3]), int(t[4]), t[5])
        for host, t in tallies.items()
    }


def content_rows(batch: CommitBatch) -> ContentRows:
    """Select what a batch adds to the content tables."""
    fingerprinted = [o for o in batch.outcomes if o.content_hash is not None]
    committed = {(o.content_hash, o.url_id) for o in fingerprinted}
    return ContentRows(
        fingerprinted=fingerprinted,
        versions=[
            o
            for o in batch.outcomes
            if o.fetched_at is not None and (o.storage is not None or o.content_hash is not None)
        ],
        exact={d.url_id for d in batch.duplicates if d.duplicate_of is not None},
        owners=[owner for owner in batch.owners if owner in committed],
    )


def version_row(o: Outcome) -> tuple[object, ...]:
    """The ``versions`` row of a fetch: url_id, fetched_at, status, content_hash, simhash,
    warc_file, warc_offset, warc_length."""
    key = o.storage
    return (
        o.url_id, o.fetched_at, o.status, o.content_hash, o.simhash,
        key.file if key else None, key.offset if key else None, key.length if key else None,
    )  # fmt: skip


def shallowest(found: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(id, depth) pairs with each id once, at its smallest depth, in id order."""
    best: dict[int, int] = {}
    for uid, depth in found:
        if best.get(uid, depth + 1) > depth:
            best[uid] = depth
    return sorted(best.items())


MIN_ID, MAX_ID = -(2**63), 2**63 - 1
"""The range of URL ids (signed 64-bit hashes)."""

_LINKED = ("duplicate_of", "near_duplicate_of", "alias_of")
"""The ``urls`` columns that hold another URL's id, exported as that URL."""


def export_columns(first: str, url_of: str) -> str:
    """The columns an export row is read from, in :func:`export_row`'s order, of
    ``urls`` as ``u``: ``first`` is the URL id's column, and ``url_of`` the engine's
    expression for the URL whose id is in a column (``{}``: that column)."""
    linked = ", ".join(url_of.format(f"u.{column}") for column in _LINKED)
    return (
        f"{first}, u.url, u.status, u.content_type, u.length, u.fetched_at, u.depth, "
        f"u.redirect_to, u.error, u.state, u.revalidated_at, u.revalidation, {linked}, "
        "u.canonical, u.content_hash"
    )


Row = tuple[Any, ...]


async def pages_by_id(
    fetch: Callable[[int], Awaitable[Sequence[Row]]],
) -> AsyncIterator[Sequence[Row]]:
    """Every row of a table keyed by URL id, a page at a time, in id order.

    ``fetch(start)`` returns the next page: rows whose first column is an id of at least
    ``start``, in id order; an empty page ends the walk.
    """
    start = MIN_ID
    while True:
        rows = await fetch(start)
        if not rows:
            return
        yield rows
        if rows[-1][0] == MAX_ID:
            return
        start = rows[-1][0] + 1


def export_row(row: Row) -> ExportRow:
    """An :class:`ExportRow` from the columns of :func:`export_columns`; `StoreError`
    for a row no crawl writes (a damaged store)."""
    try:
        state = State(row[9])
    except ValueError as exc:
        raise StoreError(f"a URL row has the state {row[9]!r}: the store is damaged") from exc
    return ExportRow(
        url=row[1], status=row[2], content_type=row[3], length=row[4], fetched_at=row[5],
        depth=row[6], redirect_to=row[7], error=row[8], state=state,
        revalidated_at=row[10], revalidation=row[11], duplicate_of=row[12],
        near_duplicate_of=row[13], alias_of=row[14], canonical=row[15], content_hash=row[16],
    )  # fmt: skip


ItemParameters = tuple[int, int, float, str]
"""An ``items`` row as a commit writes it: url_id, seq, fetched_at, data."""


def item_rows(batch: CommitBatch) -> tuple[list[int], list[ItemParameters]]:
    """What a batch writes to ``items``: the URL ids whose stored items it replaces, in
    id order, and their new rows, numbered 0.. in yield order (the last
    :class:`~trawl.store.values.PageItems` of a URL in the batch wins)."""
    latest = {page.url_id: page for page in batch.items}
    replaced = sorted(latest)
    rows = [
        (url_id, seq, latest[url_id].fetched_at, data)
        for url_id in replaced
        for seq, data in enumerate(latest[url_id].items)
    ]
    return replaced, rows


ITEM_COLUMNS = "i.url_id, i.seq, i.fetched_at, i.data, u.url"
"""The columns an item is read from, of ``items`` as ``i`` and its URL's row as ``u``."""

ITEM_PAGE_SIZE = 5000
"""Items read per query."""


async def item_pages(
    fetch: Callable[[int, int], Awaitable[Sequence[Row]]],
) -> AsyncIterator[ItemRow]:
    """Every stored item, in (url_id, seq) order, read a page at a time.

    ``fetch(url_id, seq)`` returns the next page: up to :data:`ITEM_PAGE_SIZE` rows of
    :data:`ITEM_COLUMNS` whose key comes after (url_id, seq), in key order; a short
    page ends the walk.
    """
    after = (MIN_ID, -1)
    while True:
        rows = await fetch(*after)
        for row in rows:
            yield ItemRow(url=row[4], url_id=row[0], seq=row[1], fetched_at=row[2], data=row[3])
        if len(rows) < ITEM_PAGE_SIZE:
            return
        after = (rows[-1][0], rows[-1][1])
