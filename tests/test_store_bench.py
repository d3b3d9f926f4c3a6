"""The store benchmark counts exactly what its generator made, and prints its figures.

The expected figures come from the generator's own ground truth (the canonical URL each
href denotes), which never touches trawl's normalisation, scope, seen-set or store.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from bench.store import Mix, SyntheticWeb, hosts_for, run

from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import State

URLS = 40_000


@pytest.mark.parametrize("workers", [0, 1])
async def test_store_bench_counts_every_distinct_url_once(tmp_path: Path, workers: int) -> None:
    web = SyntheticWeb(hosts_for(URLS), Mix.for_page(50), seed=7)
    truth: set[str] = set()
    in_scope_links = off_scope_links = 0
    for page in web.pages(URLS):
        for expected in page.truth:
            if expected is None:
                off_scope_links += 1
            else:
                in_scope_links += 1
                truth.add(expected)
    assert len(truth) == URLS

    out = io.StringIO()
    figures = await run(URLS, 50, tmp_path, seed=7, report_every=10_000, workers=workers, out=out)

    assert figures.known == figures.discovered == len(truth)
    async with SQLiteStore(tmp_path, readonly=True) as store:
        counters = await store.counters()
        stored = [row async for row in store.export()]
    assert {row.url for row in stored} == truth
    assert counters.get("hash_collisions", 0) == 0
    # Every link is accounted for exactly once: new, duplicate, invalid or off scope.
    assert counters["links"] == in_scope_links + off_scope_links
    dropped = counters.get("invalid", 0) + counters.get("off_scope", 0)
    assert counters["discovered"] + counters["duplicates"] + dropped == counters["links"]
    assert dropped <= off_scope_links
    # Pages carried outcomes of URLs the frontier claimed.
    assert any(row.state is State.DONE for row in stored)

    text = out.getvalue()
    assert text.count("links/s moving") >= 4
    for label in (
        "ingest overall",
        "ingest last 1M known",
        "peak RSS",
        "CPU seconds",
        "cores busy",
        "CPU by thread",
        "RSS at 1M known",
        "RSS at end",
        "bytes/known URL",
        "database on disk",
    ):
        assert label in text
    assert f"known URLs            {URLS:,}" in text
    # The child's memory is reported beside the store process's, not left out.
    # So is its CPU time: with a child, each process's own; without, all in this one.
    assert sum(figures.cpu["store"]) > 0
    # The store process's CPU by thread: the main thread, the store's SQLite thread and
    # its checkpoint thread, together no more than the process (ticks of 10 ms apiece).
    assert {"MainThread", "trawl-sqlite_0", "trawl-checkpoint"} <= set(figures.threads)
    assert sum(figures.threads["trawl-sqlite_0"]) > 0
    threads_total = sum(user + system for user, system in figures.threads.values())
    assert 0 < threads_total <= sum(figures.cpu["store"]) + 0.01 * len(figures.threads)
    if workers:
        assert figures.filter_peak_rss > 0
        assert "peak RSS, URL filter" in text
        assert sum(figures.cpu["child"]) > 0
    else:
        assert figures.filter_peak_rss == 0
        assert "child" not in figures.cpu
