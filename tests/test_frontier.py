"""The frontier on a real store: refills fill host buffers up to a share, and a host
asks for another refill only once its buffer runs low."""

from __future__ import annotations

from pathlib import Path

from trawl.config import Politeness
from trawl.extract.urls import url_hash
from trawl.frontier.queue import Frontier
from trawl.politeness.scheduler import HostScheduler
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, NewURL


def discovered(host: str, count: int) -> CommitBatch:
    urls = [f"http://{host}/{n}" for n in range(count)]
    return CommitBatch(new_urls=[NewURL(url_hash(u), u, host, 1) for u in urls])


async def test_a_host_runs_low_below_half_its_share(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path) as store:
        await store.commit(discovered("a.test", 20))
        scheduler = HostScheduler(Politeness())
        frontier = Frontier(store, scheduler, capacity=8)
        assert frontier.runs_low(None)
        assert await frontier.refill() == 8
        (slot,) = scheduler.slots()
        assert not frontier.runs_low(slot)
        # 8 free places for one host: its share is 8 once the buffer is empty.
        for _ in range(5):
            scheduler.take(slot)
        assert not frontier.runs_low(slot)  # 3 buffered, share of the room left 5
        scheduler.take(slot)
        assert frontier.runs_low(slot)  # 2 buffered, share 6
        assert await frontier.refill() == 4
        assert not frontier.runs_low(slot)
        assert scheduler.find(slot.id) is slot
        assert scheduler.find(slot.id + 1) is None
