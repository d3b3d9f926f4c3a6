"""A host's lease lost between the making of one of its jobs and the job's first step
(the renewal drops the host and its buffered URLs meanwhile): the job still runs to its
end on what it was given, and what it writes under the lost lease is refused."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from conftest import loopback_fetcher
from test_crawl import page
from trawl.config import CrawlConfig, LeasePolicy, Timeouts
from trawl.crawl.engine import Crawler
from trawl.crawl.seeds import seeds_of
from trawl.demo import Site, SiteServer
from trawl.extract.pool import ExtractPool, ExtractSettings
from trawl.extract.urls import host_key, url_hash
from trawl.politeness.robots_parser import agent_token
from trawl.politeness.slots import HostSlot
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, NewURL

ROOT = "http://www.lease.test"
TTL = 1.5
"""Seconds of this worker's leases: longer than a fetch may take (``Timeouts.total``),
or no job would be made at all."""


def small_site(port: int) -> Site:
    return Site.build(port, {f"{ROOT}/": page("/a"), f"{ROOT}/a": page()}, [f"{ROOT}/"])


def config_for(server: SiteServer, data_dir: Path) -> CrawlConfig:
    return CrawlConfig(
        seeds=server.site.seeds,
        data_dir=data_dir,
        resolve=server.resolve_map(),
        allow_networks=server.allow_networks(),
        timeouts=Timeouts(connect=0.5, total=1.0),
        leases=LeasePolicy(worker="worker-a", ttl=TTL),
        soft_404=False,
        rng_seed=1,
    )


def next_turn(crawler: Crawler) -> HostSlot:
    turn = crawler._scheduler.pop_ready()
    assert isinstance(turn, HostSlot), turn
    return turn


@pytest.mark.parametrize("job", ["resolve", "robots"])
async def test_a_job_made_before_its_lease_is_lost_runs_to_its_end(
    tmp_path: Path, job: str
) -> None:
    with SiteServer(small_site) as server:
        config = config_for(server, tmp_path)
        settings = ExtractSettings(
            seeds_of(config), config.scope, config.url_rules, agent_token(config.user_agent),
            True, 100,
        )  # fmt: skip
        fetcher = loopback_fetcher(server, timeouts=config.timeouts, max_body=1 << 20)
        async with (
            SQLiteStore(tmp_path) as store,
            fetcher,
            ExtractPool(settings, workers=0) as extract,
        ):
            seed = server.site.seeds[0]
            await store.commit(
                CommitBatch(new_urls=[NewURL(url_hash(seed), seed, host_key(seed), 0)])
            )
            crawler = Crawler(config, store, fetcher, extract)
            committer = asyncio.create_task(crawler._committer.run())
            assert await crawler._frontier.refill() == 1
            slot = next_turn(crawler)
            if job == "robots":
                resolve = crawler._turn(slot)
                assert resolve is not None
                await resolve
                slot = next_turn(crawler)
            made = crawler._turn(slot)
            assert made is not None
            assert (slot.resolving, slot.robots_pending) == (job == "resolve", job == "robots")
            # Another worker takes the host over once the lease has run out; this
            # worker's renewal finds the lease lost and drops the host and its URLs.
            await asyncio.sleep(TTL + 0.1)
            (taken,) = await store.lease_hosts("worker-b", limit=10, ttl=60)
            await crawler._frontier.renew()
            assert crawler._frontier.lost == 1
            assert not slot.queue
            await made
            await crawler._committer.close()
            await committer
            # The host and its URL are the other worker's, untouched by this one.
            (claimed,) = await store.claim({taken.host_id: 10}, now=time.time(), worker="worker-b")
            assert claimed.url == seed
            assert claimed.attempts == 0
            # The robots job asked for robots.txt; what it wrote under the lost lease (the
            # host's robots record and its counter) was refused.
            fetched = [r.path for r in server.requests if r.path == "/robots.txt"]
            assert len(fetched) == (job == "robots")
            assert await store.counters() == {"discovered": 1, "queued": 0}
