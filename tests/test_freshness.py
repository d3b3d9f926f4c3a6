"""Recrawls in whole crawls: conditional requests, 304s, change detection, events, and a
continuous crawl that revisits a page that changes more often than one that does not.

The site's pages change on a schedule of the server's clock (changing_site)
and answer If-None-Match and If-Modified-Since as a real server does.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from changing_site import Changing
from conftest import CrawlRunner
from pg import URL as PG_URL
from pg import crawl_name
from test_cli import Run, assert_one_error_line, trawl
from test_content_crawl import read_text_output
from test_store import sqlite_query
from trawl.config import Freshness, Limits, RecrawlPass
from trawl.demo import Response, Site, SiteServer, generate_site
from trawl.freshness.recrawl import RecrawlPolicy
from trawl.frontier.priority import LEVEL_STEP, priority
from trawl.store.values import State

__all__ = ["crawl_name"]

HOST = "www.fresh.test"
INDEX = (
    b'<a href="/static">s</a> <a href="/often">o</a> <a href="/plain">p</a> <a href="/dated">d</a>'
)


def fresh_site(port: int) -> Site:
    """An index without validators, a page that never changes, one that changes every
    0.3 s (both with validators), a static page that sends no validators, and one that
    sends Last-Modified alone."""
    return Site.build(
        port,
        {
            f"http://{HOST}/": Response(body=INDEX),
            f"http://{HOST}/static": Changing(period=0),
            f"http://{HOST}/often": Changing(period=0.3),
            f"http://{HOST}/plain": Changing(period=0, conditional=False),
            f"http://{HOST}/dated": Changing(period=0, etag=False),
        },
        seeds=[f"http://{HOST}/"],
    )


Answers = dict[str, list[tuple[int, str | None]]]


def requests_of(server: SiteServer, since: int = 0, header: str = "If-None-Match") -> Answers:
    """Per path, (status, ``header`` sent) of each request after the first ``since``."""
    seen: Answers = {}
    for record in server.requests[since:]:
        if record.path != "/robots.txt":
            seen.setdefault(record.path, []).append((record.status, record.headers.get(header)))
    return seen


def events_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_recrawl_sends_validators_counts_304s_and_reports_only_changes(
    crawl: CrawlRunner, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    with SiteServer(fresh_site) as server:
        first = await crawl(server, soft_404=False, events=events, text=True)
        assert first.summary.fetched == 5
        texts = len(read_text_output(first.data_dir))
        assert [e["url"] for e in events_of(events)].count(server.site.url(HOST, "/often")) == 1
        before = len(server.requests)
        await asyncio.sleep(0.4)  # /often moves to its next version
        again = await crawl(
            server, soft_404=False, events=events, data_dir=first.data_dir, text=True,
            freshness=Freshness(recrawl_pass=RecrawlPass.ALL),
        )  # fmt: skip
        second = requests_of(server, before)
        dated = requests_of(server, before, "If-Modified-Since")["/dated"]
    assert second["/static"] == [(304, '"v0"')]
    assert second["/often"][0][0] == 200
    assert second["/often"][0][1] is not None  # it asked with the old ETag
    assert second["/plain"] == [(200, None)]  # no validators were given, none are sent
    assert second["/"] == [(200, None)]
    assert dated == [(304, "Tue, 14 Nov 2023 22:13:20 GMT")]  # Last-Modified sent back
    fresh = again.summary.freshness
    assert fresh["recrawls_queued"] == 5
    assert fresh["recrawled"] == 5
    assert fresh["not_modified"] == 2
    assert fresh["recrawl_changed"] == 1
    assert fresh["recrawl_unchanged"] == 4
    # Unique counts do not move: the same five pages, fetched once each as new pages.
    assert (again.summary.discovered, again.summary.fetched) == (5, 5)
    # Only the changed page went to the text output again.
    assert len(read_text_output(again.data_dir)) == texts + 1
    # A 304 confirms the stored answer, which stands.
    static = server.site.url(HOST, "/static")
    assert again.rows[static] == first.rows[static]
    assert again.rows[static].status == 200
    # Only the changed page produced a second event, marked changed.
    second_events = events_of(events)[5:]
    assert [e["url"] for e in second_events] == [server.site.url(HOST, "/often")]
    assert second_events[0]["changed"] is True


async def test_a_recrawl_pass_takes_only_what_is_due(crawl: CrawlRunner) -> None:
    with SiteServer(fresh_site) as server:
        first = await crawl(server, soft_404=False)
        before = len(server.requests)
        due_pass = Freshness(recrawl_pass=RecrawlPass.DUE)
        again = await crawl(server, soft_404=False, data_dir=first.data_dir, freshness=due_pass)
        assert requests_of(server, before) == {}
    assert again.summary.freshness.get("recrawled", 0) == 0


async def test_a_continuous_crawl_revisits_a_changing_page_more_often(
    crawl: CrawlRunner,
) -> None:
    policy = RecrawlPolicy(minimum=0.2, maximum=3.0, initial=0.6)
    with SiteServer(fresh_site) as server:
        outcome = await crawl(
            server, soft_404=False, limits=Limits(max_time=8.0),
            freshness=Freshness(recrawl=policy, continuous=True),
            expect_state="time budget reached",
        )  # fmt: skip
        seen = requests_of(server)
    hits = Counter({path: len(answers) for path, answers in seen.items()})
    assert hits["/often"] >= 2 * hits["/static"] >= 4
    # The page that never changes is answered 304 after its first fetch.
    assert {status for status, _ in seen["/static"][1:]} == {304}
    assert outcome.summary.freshness["not_modified"] >= hits["/static"] - 1
    assert outcome.summary.fetched == 5


def summary_of(run: Run) -> dict[str, Any]:
    assert run.code == 0, run.err
    parsed: dict[str, Any] = json.loads(run.out)
    return parsed


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_trawl_recrawl_runs_one_pass_over_what_is_due_or_all(
    engine: str, crawl_name: str, tmp_path: Path
) -> None:
    where = ["--data-dir", str(tmp_path / "data")]
    if engine == "postgresql":
        where += ["--store", PG_URL, "--crawl", crawl_name]
    with SiteServer(fresh_site) as server:
        local = [*where, *server.resolve_args(), "--no-progress", "--json"]
        first = summary_of(
            trawl("crawl", *server.site.seeds, "--delay", "0", "--no-soft-404", *local)
        )
        assert first["fetched"] == 5
        before = len(server.requests)
        due = summary_of(trawl("recrawl", *local))
        assert len(server.requests) == before  # nothing is due for a day
        every = summary_of(trawl("recrawl", "--all", *local))
    assert due["freshness"].get("recrawled", 0) == 0
    assert every["freshness"]["recrawled"] == 5
    assert every["freshness"]["not_modified"] == 2
    assert (every["discovered"], every["fetched"]) == (5, 5)


def test_bad_recrawl_bounds_are_one_error_line(tmp_path: Path) -> None:
    run = trawl(
        "crawl", "http://www.fresh.test/", "--data-dir", str(tmp_path / "d"),
        "--recrawl-min", "100", "--recrawl-max", "10",
    )  # fmt: skip
    assert "--recrawl-max" in assert_one_error_line(run)
    assert not (tmp_path / "d").exists()


async def test_pages_linked_from_many_pages_gain_priority(crawl: CrawlRunner) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=30)) as server:
        outcome = await crawl(server)
    rows = sqlite_query(outcome.data_dir, "SELECT depth, priority, inlink_level FROM urls")
    raised = [(depth, p, level) for depth, p, level in rows if level > 0]
    assert max(level for _, _, level in raised) >= 1
    for depth, value, level in raised:
        assert value == pytest.approx(min(1.0, priority(depth) + level * LEVEL_STEP))


async def test_a_crawl_that_spent_its_page_budget_can_still_be_recrawled(
    crawl: CrawlRunner,
) -> None:
    with SiteServer(fresh_site) as server:
        budget = Limits(max_pages=3)
        first = await crawl(
            server, soft_404=False, limits=budget, concurrency=1,
            expect_state="page budget reached",
        )  # fmt: skip
        assert first.summary.fetched == 3
        again = await crawl(
            server, soft_404=False, limits=budget, concurrency=1, data_dir=first.data_dir,
            freshness=Freshness(recrawl_pass=RecrawlPass.ALL),
        )  # fmt: skip
    assert again.summary.freshness["recrawled"] == 3
    assert again.summary.fetched == 5  # the two URLs left queued are fetched in the pass


def flaky_site(port: int) -> Site:
    """A page that fails three times before it answers, and one that answers, then fails
    three times, then answers again."""
    error = Response(status=500, body=b"down")
    page = Response(body=b"<!doctype html><title>up</title>")
    return Site.build(
        port,
        {
            f"http://{HOST}/": Response(body=b'<a href="/flaky">f</a> <a href="/sick">s</a>'),
            f"http://{HOST}/flaky": [error, error, error, page],
            f"http://{HOST}/sick": [page, error, error, error, page],
        },
        seeds=[f"http://{HOST}/"],
    )


async def test_failed_urls_come_back_and_count_as_fetched_once(crawl: CrawlRunner) -> None:
    every = Freshness(recrawl_pass=RecrawlPass.ALL)
    with SiteServer(flaky_site) as server:
        first = await crawl(server, soft_404=False)
        assert first.summary.fetched == 2  # /flaky failed for good
        second = await crawl(server, soft_404=False, data_dir=first.data_dir, freshness=every)
        third = await crawl(server, soft_404=False, data_dir=first.data_dir, freshness=every)
    flaky, sick = server.site.url(HOST, "/flaky"), server.site.url(HOST, "/sick")
    # Its first answer makes /flaky a fetched page; /sick failing on its recrawl keeps its
    # interval and comes back as a recrawl, not as a new page.
    assert (second.summary.fetched, second.summary.freshness["recrawled"]) == (3, 1)
    assert second.rows[sick].state == State.FAILED
    assert (third.summary.fetched, third.summary.freshness["recrawled"]) == (3, 4)
    assert third.rows[sick].state == third.rows[flaky].state == State.DONE
    undue = sqlite_query(third.data_dir, "SELECT url FROM urls WHERE due_at IS NULL")
    assert undue == []
