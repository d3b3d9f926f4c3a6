"""The content stage: duplicate decisions and the text and event outputs, before a commit.

It runs in the committer, the single writer, on each batch just before the batch goes to
the store, for the pages whose content was fingerprinted (``--text`` or ``--events``; the
extract stage took their main text, content hash and SimHash). For each page, in the
order the batch holds them:

- **exact duplicate**: the first page committed with the same content hash owns it;
  a later page with that hash is recorded as ``duplicate_of`` the owner and is not
  written to the text output again (its links were still followed). Unless the owner
  names that later page as its canonical (``<link rel=canonical>``): then the later
  page takes the hash over, and the owner is recorded as ``duplicate_of`` it (its text
  record, written when it was fetched, stays in the output; pages recorded as
  duplicates of it before keep naming it);
- **near duplicate**: otherwise, the earliest page whose SimHash is within
  :data:`~trawl.content.simhash.NEAR_DUPLICATE_BITS` bits (found through the store's four-block
  index, trawl.content.neardup) is recorded as ``near_duplicate_of``; near duplicates go to the
  text output unless ``near_duplicates_in_text`` is off;
- **changed**: the page's content hash differs from the one stored for its URL (a page
  fetched for the first time has none, so it counts as changed). Only changed pages are
  written to the outputs.

Outputs are written and flushed *before* the store commits the batch (the events
published together and every acknowledgement awaited, trawl.events.sink), so a kill -9 in
between loses nothing: the page is still unanswered in the store, is fetched again on
resume and written again with the same (url hash, content hash). Delivery is at least
once, and that pair is the idempotency key consumers deduplicate on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trawl.content.events import PageFetched
from trawl.content.neardup import MemoryBlockIndex, NearDuplicates
from trawl.content.text import PageText
from trawl.content.text_files import TextRecord, TextWriter
from trawl.events.sink import EventSink
from trawl.extract.urls import url_hash
from trawl.store.protocols import ContentIndex
from trawl.store.values import Blocks, CommitBatch, Duplicates, StorageKey


@dataclass(frozen=True, slots=True)
class FetchedContent:
    """A fingerprinted page, as the extract stage and the fetch left it.

    ``url`` is the first URL of the redirect chain that led to the page (the page's own
    URL when it was linked directly), ``final_url`` the URL it was fetched from.
    ``content_hash`` is the main text's hash, or the body's when there is no main text
    (``text`` None). The engine hands these to the committer beside the page's batch
    (trawl.crawl.commit.Committer.submit): the store never writes them.
    """

    url_id: int
    url: str
    final_url: str
    fetched_at: float
    status: int
    text: PageText | None
    content_hash: str
    out_links: int
    storage: StorageKey | None
    canonical: int | None = None
    """The id of the URL the page's canonical link names, unless it names the page."""


class _BatchIndex:
    """The store's block index plus the pages of the batch being decided (not stored yet)."""

    def __init__(self, store: ContentIndex) -> None:
        self._store = store
        self._pending = MemoryBlockIndex()
        self._dropped: set[int] = set()

    async def candidates(self, wanted: Blocks) -> list[tuple[int, int]]:
        pending = await self._pending.candidates(wanted)
        hidden = self._dropped | {url_id for url_id, _ in pending}
        stored = await self._store.simhash_candidates(wanted)
        return [found for found in stored if found[0] not in hidden] + [
            found for found in pending if found[0] not in self._dropped
        ]

    def drop(self, url_id: int) -> None:
        """Leave ``url_id`` out of the candidates: it became an exact duplicate."""
        self._dropped.add(url_id)

    async def add(self, url_id: int, simhash: int) -> None:
        await self._pending.add(url_id, simhash)


@dataclass(frozen=True, slots=True)
class _Decision:
    page: FetchedContent
    duplicate_of: int | None
    near_duplicate_of: int | None
    changed: bool


class ContentStage:
    """Decides duplicates and writes the outputs for each batch (see the module doc)."""

    def __init__(
        self,
        store: ContentIndex,
        *,
        text: TextWriter | None = None,
        events: EventSink | None = None,
        near_duplicates_in_text: bool = True,
    ) -> None:
        self._store = store
        self._text = text
        self._events = events
        self._near_in_text = near_duplicates_in_text

    async def process(self, batch: CommitBatch, pages: Sequence[FetchedContent]) -> None:
        """Decide ``pages`` (the fingerprinted pages of ``batch``), add the decisions to
        the batch, write and flush the text, and return once the event sink holds every
        event (a broker's acknowledgement awaited; it waits while the broker is down)."""
        if not pages:
            return
        decisions = await self._decide(batch, pages)
        for d in decisions:
            batch.duplicates.append(Duplicates(d.page.url_id, d.duplicate_of, d.near_duplicate_of))
            batch.count("exact_duplicates", d.duplicate_of is not None)
            batch.count("near_duplicates", d.near_duplicate_of is not None)
            batch.count("unchanged", not d.changed)
        near_ids = [d.near_duplicate_of for d in decisions if d.near_duplicate_of is not None]
        near_urls = await self._store.existing(near_ids) if near_ids else {}
        events: list[PageFetched] = []
        for d in decisions:
            if not d.changed:
                continue
            if self._text is not None and self._wants_text(d):
                assert d.page.text is not None
                near = None if d.near_duplicate_of is None else near_urls.get(d.near_duplicate_of)
                self._text.write(_text_record(d.page, d.page.text, near))
                batch.count("text_records")
            if self._events is not None:
                events.append(_event(d.page))
                batch.count("events")
        if self._text is not None:
            self._text.flush()
        if events:
            assert self._events is not None
            await self._events.publish(events)

    def _wants_text(self, d: _Decision) -> bool:
        if d.page.text is None or d.duplicate_of is not None:
            return False
        return d.near_duplicate_of is None or self._near_in_text

    async def _decide(self, batch: CommitBatch, pages: Sequence[FetchedContent]) -> list[_Decision]:
        owners = dict(await self._store.content_owners(sorted({p.content_hash for p in pages})))
        fresh = {p.url_id for p in pages}
        earlier = sorted(set(owners.values()) - fresh)
        previous = await self._store.content_hashes([*fresh, *earlier])
        named = await self._store.canonicals(earlier) if earlier else {}
        canonical_of = {url_id: url_hash(url) for url_id, url in named.items()}
        canonical_of.update((p.url_id, p.canonical) for p in pages if p.canonical is not None)
        index = _BatchIndex(self._store)
        near = NearDuplicates(index)
        decided: dict[int, int] = {}
        decisions: list[_Decision] = []
        for page in pages:
            owner = owners.setdefault(page.content_hash, page.url_id)
            if owner != page.url_id and canonical_of.get(owner) == page.url_id:
                # The owner names this page as its canonical: the hash passes to it.
                batch.owners.append((page.content_hash, page.url_id))
                index.drop(owner)
                if owner in decided:
                    was = decisions[decided[owner]]
                    decisions[decided[owner]] = _Decision(was.page, page.url_id, None, was.changed)
                elif owner not in fresh and previous.get(owner) == page.content_hash:
                    batch.duplicates.append(Duplicates(owner, page.url_id, None))
                    batch.count("exact_duplicates")
                owner = owners[page.content_hash] = page.url_id
            duplicate_of = None if owner == page.url_id else owner
            near_of = None
            if duplicate_of is None and page.text is not None:
                near_of = await near.check(page.url_id, page.text.simhash)
            changed = previous.get(page.url_id) != page.content_hash
            decided[page.url_id] = len(decisions)
            decisions.append(_Decision(page, duplicate_of, near_of, changed))
        return decisions


def _text_record(page: FetchedContent, text: PageText, near: str | None) -> TextRecord:
    return TextRecord(
        url=page.url, final_url=page.final_url, fetched_at=page.fetched_at, title=text.title,
        language=text.language, text=text.text, content_hash=page.content_hash,
        simhash=text.simhash, near_duplicate_of=near,
    )  # fmt: skip


def _event(page: FetchedContent) -> PageFetched:
    return PageFetched(
        url=page.final_url, url_id=page.url_id, fetched_at=page.fetched_at,
        http_status=page.status, content_hash=page.content_hash,
        simhash=None if page.text is None else page.text.simhash, storage_key=page.storage,
        out_links=page.out_links, changed=True,
    )  # fmt: skip
