"""The commit stage on a real store: group commit and the linger that forms batches."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from trawl.crawl.commit import Committer
from trawl.frontier.seen import SeenSet
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, CommitResult, Fence


def page() -> CommitBatch:
    batch = CommitBatch()
    batch.count("pages")
    return batch


async def transactions(
    tmp_path: Path, linger: float, gap: float, pages: int, hurry: int | None = None
) -> list[int]:
    """Pages per transaction when ``pages`` arrive ``gap`` seconds apart."""
    results: list[CommitResult] = []
    async with SQLiteStore(tmp_path) as store:
        seen = SeenSet(store, 1000, 0.01)
        committer = Committer(store, seen, results.append, linger=linger, hurry=hurry)
        runner = asyncio.create_task(committer.run())
        for _ in range(pages):
            await committer.submit(page())
            await asyncio.sleep(gap)
        await committer.wait_drained()
        await committer.close()
        await runner
        assert (await store.counters())["pages"] == pages
    return [result.counters["pages"] for result in results]


async def test_without_linger_pages_arriving_apart_commit_apart(tmp_path: Path) -> None:
    assert await transactions(tmp_path, 0.0, 0.05, 3) == [1, 1, 1]


async def test_linger_gathers_pages_arriving_within_it(tmp_path: Path) -> None:
    assert await transactions(tmp_path, 0.5, 0.01, 3) == [3]


async def test_enough_waiting_pages_end_the_linger(tmp_path: Path) -> None:
    started = time.perf_counter()
    assert await transactions(tmp_path, 30.0, 0.01, 6, hurry=3) == [3, 3]
    assert time.perf_counter() - started < 10


async def test_pages_already_waiting_share_one_transaction(tmp_path: Path) -> None:
    results: list[CommitResult] = []
    async with SQLiteStore(tmp_path) as store:
        committer = Committer(store, SeenSet(store, 1000, 0.01), results.append)
        for _ in range(5):
            await committer.submit(page())
        await committer.close()
        await committer.run()
    assert [result.counters["pages"] for result in results] == [5]


async def test_a_host_is_committing_from_its_pages_hand_in_to_their_transaction(
    tmp_path: Path,
) -> None:
    """The frontier gives back no host whose results are on their way: the URLs they
    found may be the host's own (trawl.frontier.queue)."""
    results: list[CommitResult] = []
    async with SQLiteStore(tmp_path) as store:
        committer = Committer(store, SeenSet(store, 1000, 0.01), results.append)
        for _ in range(2):
            part = page()
            part.fence = Fence(7, 1)
            await committer.submit(part)
        assert committer.committing(7)
        assert not committer.committing(8)
        await committer.close()
        await committer.run()
    # Committed (here refused by the store, as no such lease is held): none on its way.
    assert len(results) == 1
    assert not committer.committing(7)
