"""Whole crawls kept in PostgreSQL (``--store DSN --crawl NAME``): the same exact counts
and politeness as on the embedded store, the CLI's status and export, a crawl shown
running while a worker holds a lease, and ``--fresh``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CrawlRunner, expected_hits, page_requests
from pg import URL as PG_URL
from pg import crawl_name
from trawl.crawl.runner import read_summary
from trawl.demo import SiteServer, generate_site
from trawl.extract.urls import url_hash
from trawl.store.location import StoreLocation
from trawl.store.postgres.store import PostgresStore
from trawl.store.values import CommitBatch, NewURL

__all__ = ["crawl_name"]


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(lambda port: generate_site(port, hosts=5, pages_per_host=25, seed=11)) as s:
        yield s


async def test_a_crawl_on_postgresql_matches_the_ground_truth(
    crawl: CrawlRunner, server: SiteServer, crawl_name: str, tmp_path: Path
) -> None:
    store = StoreLocation(tmp_path, PG_URL, crawl_name)
    before = page_requests(server)
    result = await crawl(server, store=store, concurrency=8)
    site = server.site
    assert set(result.rows) == site.ground_truth
    assert result.summary.discovered == len(site.ground_truth)
    requested = page_requests(server) - before
    assert set(requested) == set(site.expected_fetches)
    assert all(requested[url] == expected_hits(site, url) for url in site.expected_fetches)
    assert max(server.max_inflight_per_host().values()) == 1
    # Nothing is left on the local disk but the lock: the state is in PostgreSQL.
    assert not (tmp_path / "crawl.db").exists()


async def test_a_crawl_shows_running_while_a_worker_holds_a_lease(
    crawl_name: str, tmp_path: Path
) -> None:
    location = StoreLocation(tmp_path, PG_URL, crawl_name)
    worker = PostgresStore(PG_URL, schema=location.schema)
    async with location.open() as store, worker:
        await store.set_meta("state", "running")
        seed = "http://a.test/"
        await store.commit(CommitBatch(new_urls=[NewURL(url_hash(seed), seed, "a.test", 0)]))
        assert (await worker.counters())["discovered"] == 1
        assert (await read_summary(location)).state == "stopped (resumable)"
        now = time.time()
        (lease,) = await worker.lease_hosts("worker-1", limit=10, ttl=60, now=now)
        assert (await read_summary(location)).state == "running"
        assert await worker.leased(now=now + 59)
        assert not await worker.leased(now=now + 61)
        # The worker never recorded its end (a kill -9) and its lease ran out: its last
        # renewal, two minutes ago, held for one. The crawl is resumable.
        held = {lease.host_id: lease.generation}
        assert await worker.renew_leases("worker-1", held, ttl=60, now=now - 120) == {lease.host_id}
        assert (await read_summary(location)).state == "stopped (resumable)"


def trawl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trawl", *args], capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_status_export_and_fresh_through_the_cli(
    server: SiteServer, crawl_name: str, tmp_path: Path
) -> None:
    where = ["--store", PG_URL, "--crawl", crawl_name]
    crawl_args = [
        "crawl", *server.site.seeds, *server.resolve_args(), "--delay", "0", "--no-progress",
        "--response-factor", "0", "--retry-base", "0.05", "--retry-cap", "1", "--json",
        "--data-dir", str(tmp_path), *where,
    ]  # fmt: skip
    first = trawl(*crawl_args)
    assert first.returncode == 0, first.stderr
    truth = len(server.site.ground_truth)
    assert json.loads(first.stdout)["discovered"] == truth

    status = trawl("status", "--json", *where)
    assert status.returncode == 0, status.stderr
    summary = json.loads(status.stdout)
    assert summary["discovered"] == truth
    assert summary["state"] == "done"

    export = trawl("export", "--format", "jsonl", *where)
    assert export.returncode == 0, export.stderr
    urls = {json.loads(line)["url"] for line in export.stdout.splitlines()}
    assert urls == server.site.ground_truth

    # Run again: the crawl is done, nothing is fetched. With --fresh it starts over.
    before = page_requests(server)
    again = trawl(*crawl_args)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["fetched"] == len(server.site.expected_fetches)
    assert page_requests(server) == before
    fresh = trawl(*crawl_args, "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["discovered"] == truth
    assert set(page_requests(server) - before) == set(server.site.expected_fetches)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "mysql://x/y"], "--store wants a postgresql:// connection string"),
        (["--store", PG_URL, "--crawl", "Bad Name"], "--crawl 'Bad Name'"),
    ],
)
def test_a_bad_store_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = trawl("status", "--data-dir", str(tmp_path), *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
