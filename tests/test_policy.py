"""The crawl policy kept in the store: a worker obeys the crawl's policy, keeps its own
machine-local options, and refuses a policy it cannot read with one clear error."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pg import URL as PG_URL
from test_cli import Run, assert_one_error_line, trawl
from trawl.config import (
    Breaker,
    CrawlConfig,
    LeasePolicy,
    Limits,
    Politeness,
    ScopeConfig,
    Timeouts,
)
from trawl.errors import StoreError
from trawl.extract.scope import ScopeMode
from trawl.extract.urls import NormalizeRules
from trawl.fetch.retry import RetryPolicy
from trawl.policy import policy_json, with_policy
from trawl.store.location import StoreLocation, newest_unfinished

CRAWL = CrawlConfig(
    seeds=("https://example.com/",),
    scope=ScopeConfig(ScopeMode.HOST, include=(r"/docs/",), exclude=(r"\.pdf$",)),
    politeness=Politeness(per_host=2, delay=0.5, response_factor=3.0, max_delay=9.0, per_ip=3),
    limits=Limits(
        max_pages=500,
        max_time=60.0,
        max_depth=4,
        max_pages_per_host=50,
        max_discovered_per_host=70,
        memory_queue=99,
        expected_urls=1234,
    ),
    timeouts=Timeouts(connect=3.0, total=7.0),
    retry=RetryPolicy(base=0.2, cap=4.0, attempts=2, statuses=frozenset({503})),
    breaker=Breaker(threshold=2, pause=5.0, trips=1),
    url_rules=NormalizeRules(strip_params=frozenset({"ref"}), max_length=500),
    user_agent="trawl-test (+https://example.com/bot)",
    honour_nofollow=False,
    soft_404=False,
    concurrency=7,
)


def test_a_worker_takes_the_crawls_policy_and_keeps_its_local_options() -> None:
    local = CrawlConfig(
        seeds=(),
        concurrency=3,
        limits=Limits(max_time=5.0, memory_queue=11, expected_urls=77),
        leases=LeasePolicy(worker="w9", ttl=30.0, max_hosts=5),
        join=True,
    )
    joined = with_policy(local, policy_json(CRAWL))
    for name in (
        "seeds", "scope", "politeness", "timeouts", "retry", "breaker", "url_rules",
        "user_agent", "honour_nofollow", "soft_404",
    ):  # fmt: skip
        assert getattr(joined, name) == getattr(CRAWL, name), name
    limits = joined.limits
    assert (limits.max_pages, limits.max_depth) == (500, 4)
    assert limits.discovery_budget == 70
    assert (limits.max_time, limits.memory_queue, limits.expected_urls) == (5.0, 11, 77)
    assert joined.concurrency == 3
    assert joined.leases == LeasePolicy(worker="w9", ttl=30.0, max_hosts=5)


@pytest.mark.parametrize("stored", ["not json", "{}", '{"seeds": 3}'])
def test_an_unreadable_policy_is_one_store_error(stored: str) -> None:
    with pytest.raises(StoreError, match="stored policy is unreadable"):
        with_policy(CrawlConfig(seeds=()), stored)


def test_a_worker_needs_a_crawl_to_join(tmp_path: Path) -> None:
    missing = f"nothing{uuid.uuid4().hex[:8]}"
    run: Run = trawl(
        "worker", "--store", PG_URL, "--crawl", missing, "--data-dir", str(tmp_path / "w")
    )
    assert "no crawl found" in assert_one_error_line(run, code=1)


def test_a_lease_shorter_than_two_fetches_is_refused(tmp_path: Path) -> None:
    run = trawl(
        "crawl", "http://a.test/", "--data-dir", str(tmp_path), "--lease-ttl", "10",
        "--timeout", "30",
    )  # fmt: skip
    assert "--lease-ttl must be at least twice --timeout" in assert_one_error_line(run)


async def test_the_newest_unfinished_crawl_is_joined_by_default(tmp_path: Path) -> None:
    names = [f"n{uuid.uuid4().hex[:10]}" for _ in range(3)]
    try:
        for n, (name, state) in enumerate(
            zip(names, ["running", "done", "interrupted"], strict=True)
        ):
            async with StoreLocation(tmp_path, PG_URL, name).open() as store:
                await store.set_meta("state", state)
                await store.set_meta("created_at", f"{4e9 + n:.3f}")
        assert await newest_unfinished(PG_URL) == names[2]
        async with StoreLocation(tmp_path, PG_URL, names[2]).open() as store:
            await store.set_meta("state", "done")
        assert await newest_unfinished(PG_URL) == names[0]
    finally:
        for name in names:
            await StoreLocation(tmp_path, PG_URL, name).remove()
