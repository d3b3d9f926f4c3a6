"""The content stage over a real store: who owns a content hash when one page names
another as its canonical, within one batch and across batches."""

from __future__ import annotations

from pathlib import Path

from test_content_crawl import read_text_output
from test_store import ENGINES, Engine, insert, open_store, pg_schema, rows, store
from trawl.content.stage import ContentStage, FetchedContent
from trawl.content.text import PageText
from trawl.content.text_files import TextWriter
from trawl.crawl.runner import TEXT_DIR
from trawl.extract.urls import url_hash
from trawl.store.values import CommitBatch, NewURL, Outcome, State, blocks

__all__ = ["ENGINES", "open_store", "pg_schema", "store"]

HASH, OTHER = "a" * 64, "b" * 64
SIMHASH = 0x1234_5678_9ABC_DEF0


def page(name: str) -> NewURL:
    text = f"http://a.test/{name}"
    return NewURL(id=url_hash(text), url=text, host="a.test", depth=0)


def fetched(
    p: NewURL, at: float, content_hash: str, canonical: NewURL | None = None
) -> tuple[Outcome, FetchedContent]:
    """The outcome and content of one fetch of ``p`` with main text of hash ``content_hash``."""
    text = PageText("Recipe", "en", f"text {content_hash[0]}", content_hash, SIMHASH)
    outcome = Outcome(
        p.id, 1, State.DONE, 1, status=200, fetched_at=at, content_hash=content_hash,
        simhash=SIMHASH, canonical=None if canonical is None else canonical.url,
    )  # fmt: skip
    content = FetchedContent(
        p.id, p.url, p.url, at, 200, text, content_hash, 0, None,
        canonical=None if canonical is None else canonical.id,
    )  # fmt: skip
    return outcome, content


async def run(
    store: Engine, directory: Path, *fetches: tuple[Outcome, FetchedContent]
) -> CommitBatch:
    """Claim every queued URL, then decide and commit ``fetches`` as one batch."""
    batch = CommitBatch(outcomes=[outcome for outcome, _ in fetches])
    host = (await store.host_ids(["a.test"]))["a.test"]
    await store.claim({host: 100}, now=1e12)
    with TextWriter(directory / TEXT_DIR) as writer:
        await ContentStage(store, text=writer).process(batch, [page for _, page in fetches])
    await store.commit(batch)
    await store.recover()
    return batch


async def test_in_one_batch_the_page_naming_its_canonical_is_not_written(
    store: Engine, tmp_path: Path
) -> None:
    """Both pages are decided together: the first is turned into a duplicate before
    anything is written, so only the canonical page reaches the text output."""
    first, canonical = page("print"), page("recipe")
    await insert(store, first, canonical)
    batch = await run(
        store, tmp_path, fetched(first, 10.0, HASH, canonical), fetched(canonical, 11.0, HASH)
    )
    assert batch.counters["exact_duplicates"] == 1
    assert [r["final_url"] for r in read_text_output(tmp_path)] == [canonical.url]
    exported = await rows(store)
    assert exported[first.url].duplicate_of == canonical.url
    assert exported[canonical.url].duplicate_of is None
    assert exported[canonical.url].near_duplicate_of is None
    assert await store.content_owners([HASH]) == {HASH: canonical.id}


async def test_a_former_owner_leaves_the_simhash_index(store: Engine, tmp_path: Path) -> None:
    first, canonical, copy = page("print"), page("recipe"), page("copy")
    await insert(store, first, canonical, copy)
    await run(store, tmp_path, fetched(first, 10.0, HASH, canonical))
    await run(store, tmp_path, fetched(canonical, 20.0, HASH))
    await run(store, tmp_path, fetched(copy, 30.0, HASH))
    exported = await rows(store)
    assert exported[first.url].duplicate_of == canonical.url
    assert exported[canonical.url].duplicate_of is None
    assert exported[canonical.url].near_duplicate_of is None
    assert exported[copy.url].duplicate_of == canonical.url
    assert await store.content_owners([HASH]) == {HASH: canonical.id}
    assert [found[0] for found in await store.simhash_candidates(blocks(SIMHASH))] == [canonical.id]


async def test_a_former_owner_with_other_text_now_is_no_duplicate(
    store: Engine, tmp_path: Path
) -> None:
    """The hash still passes to the canonical page, but the page that owned it and has
    changed since duplicates nothing."""
    first, canonical = page("print"), page("recipe")
    await insert(store, first, canonical)
    await run(store, tmp_path, fetched(first, 10.0, HASH, canonical))
    await run(store, tmp_path, fetched(first, 20.0, OTHER, canonical))
    batch = await run(store, tmp_path, fetched(canonical, 30.0, HASH))
    assert batch.counters["exact_duplicates"] == 0
    exported = await rows(store)
    assert exported[first.url].duplicate_of is None
    assert exported[canonical.url].duplicate_of is None
    assert await store.content_owners([HASH, OTHER]) == {HASH: canonical.id, OTHER: first.id}
