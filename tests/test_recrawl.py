"""Recrawl scheduling and queue priority: the interval maths on an injected clock, and
the store's side (due pages queued again, validators kept, ranks served in order, no
starvation) on both engines."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from test_store import Engine, OpenStore, insert, open_store, pg_schema, store, url
from trawl.errors import UsageError
from trawl.freshness.recrawl import RecrawlPolicy, revisit
from trawl.frontier.inlinks import Counts, InlinkCounter, _Counts, _counts_maker
from trawl.frontier.priority import DEFAULT_HORIZON, LEVEL_STEP, MAX_LEVEL, priority, rank
from trawl.store.values import CommitBatch, Kind, Listed, Outcome, QueuedURL, Revalidation, State

__all__ = ["open_store", "pg_schema", "store"]

POLICY = RecrawlPolicy(minimum=10.0, maximum=1000.0, initial=100.0)


def fetched(**previous: Any) -> QueuedURL:
    """A claimed URL with what its last fetch left (nothing: never fetched)."""
    return QueuedURL(1, "http://a.test/", 1, 0, 0, 0, **previous)


# -- interval maths --------------------------------------------------------------------------


def test_a_first_fetch_starts_at_the_initial_interval() -> None:
    assert POLICY.interval(None, changed=True) == 100.0
    assert POLICY.interval(None, changed=False) == 100.0


def test_a_change_halves_the_interval_down_to_the_minimum() -> None:
    intervals = [100.0]
    for _ in range(6):
        intervals.append(POLICY.interval(intervals[-1], changed=True))
    assert intervals == [100.0, 50.0, 25.0, 12.5, 10.0, 10.0, 10.0]


def test_no_change_grows_the_interval_by_half_up_to_the_maximum() -> None:
    intervals = [100.0]
    for _ in range(8):
        intervals.append(POLICY.interval(intervals[-1], changed=False))
    assert intervals[:5] == [100.0, 150.0, 225.0, 337.5, 506.25]
    assert intervals[5:] == [759.375, 1000.0, 1000.0, 1000.0]


def test_important_pages_come_back_sooner_within_the_bounds() -> None:
    assert POLICY.due(5000.0, 100.0, priority=1.0) == 5050.0
    assert POLICY.due(5000.0, 100.0, priority=0.5) == 5100.0
    assert POLICY.due(5000.0, 100.0, priority=0.0) == 5150.0
    assert POLICY.due(5000.0, 12.0, priority=1.0) == 5010.0  # 6 s, kept at the minimum
    assert POLICY.due(5000.0, 1000.0, priority=0.0) == 6000.0  # 1500 s, kept at the maximum


@pytest.mark.parametrize(
    ("minimum", "maximum", "initial"), [(0.0, 10.0, 5.0), (10.0, 5.0, 5.0), (1.0, 10.0, 20.0)]
)
def test_inconsistent_bounds_are_a_usage_error(
    minimum: float, maximum: float, initial: float
) -> None:
    with pytest.raises(UsageError):
        RecrawlPolicy(minimum=minimum, maximum=maximum, initial=initial)


def test_revisit_tells_a_change_by_304_change_hash_or_status() -> None:
    before: dict[str, Any] = {
        "fetched_at": 1.0,
        "status": 200,
        "change_hash": 7,
        "revisit_interval": 100.0,
    }
    assert revisit(POLICY, fetched(), 10.0, 200, 7).changed  # first fetch
    assert not revisit(POLICY, fetched(**before), 10.0, 304, None).changed
    assert not revisit(POLICY, fetched(**before), 10.0, 200, 7).changed
    assert revisit(POLICY, fetched(**before), 10.0, 200, 8).changed
    assert revisit(POLICY, fetched(**before), 10.0, 404, None).changed
    gone = {**before, "status": 404}
    assert not revisit(POLICY, fetched(**gone), 10.0, 404, None).changed


def simulate(change_every: float, horizon: float) -> list[float]:
    """Fetch times of a page changing every ``change_every`` seconds (0: never), fetched
    whenever it is due, on a simulated clock from 0 to ``horizon``."""
    now, times = 0.0, []
    url = fetched()
    while now < horizon:
        version = 0 if change_every == 0 else math.floor(now / change_every)
        seen = revisit(POLICY, url, now, 200, version)
        times.append(now)
        url = fetched(
            fetched_at=now, status=200, change_hash=version,
            revisit_interval=seen.interval, priority=0.5,
        )  # fmt: skip
        now = seen.due_at
    return times


def test_a_page_that_changes_often_is_revisited_more_often_on_an_injected_clock() -> None:
    often = simulate(change_every=10.0, horizon=20_000.0)
    never = simulate(change_every=0.0, horizon=20_000.0)
    assert len(often) > 5 * len(never)
    # The often-changing page settles on the minimum interval, the other on the maximum.
    assert often[-1] - often[-2] == POLICY.minimum
    assert never[-1] - never[-2] == POLICY.maximum


# -- priority ----------------------------------------------------------------------------------


def test_priority_falls_with_depth_and_follows_the_sitemap() -> None:
    assert priority(0) > priority(1) > priority(2) > priority(5)
    assert priority(1, sitemap=1.0) > priority(1) > priority(1, sitemap=0.0)
    assert priority(0, sitemap=7.0) == priority(0, sitemap=1.0) == 1.0


def test_rank_orders_by_priority_but_ages_within_the_horizon() -> None:
    low, high = priority(5, sitemap=0.0), priority(0, sitemap=1.0)
    assert rank(0.0, high, DEFAULT_HORIZON) < rank(0.0, low, DEFAULT_HORIZON)
    # A low-priority URL is passed only by URLs queued less than the horizon after it.
    assert rank(DEFAULT_HORIZON, high, DEFAULT_HORIZON) > rank(0.0, low, DEFAULT_HORIZON)


# -- the store ---------------------------------------------------------------------------------


async def claim_all(store: Engine, host_id: int, now: float) -> list[QueuedURL]:
    return list(await store.claim({host_id: 1000}, now=now))


async def answer(
    store: Engine, claimed: Sequence[QueuedURL], *, fetched_at: float, due_at: float
) -> None:
    """Commit a 200 for each claimed URL, fetched at ``fetched_at`` and due at ``due_at``."""
    outcomes = [
        Outcome(u.id, u.host_id, State.DONE, 1, status=200, fetched_at=fetched_at, due_at=due_at)
        for u in claimed
    ]
    await store.commit(CommitBatch(outcomes=outcomes))


async def host_of(store: Engine, name: str) -> int:
    return (await store.host_ids([name]))[name]


async def test_claims_serve_sitemap_priority_first_then_depth(store: Engine) -> None:
    plain = [url("a.test", n, depth=2) for n in range(3)]
    shallow = url("a.test", 10, depth=1)
    favoured = url("a.test", 20, depth=3)
    batch = CommitBatch(new_urls=[*plain, shallow, favoured], at=1000.0)
    batch.listed[favoured.id] = Listed(Kind.PAGE, 1.0)
    await store.commit(batch)
    claimed = await claim_all(store, await host_of(store, "a.test"), now=1000.0)
    assert [u.id for u in claimed][:2] == [favoured.id, shallow.id]
    assert {u.id for u in claimed[2:]} == {u.id for u in plain}
    assert claimed[0].priority == priority(3, 1.0)


async def test_a_low_priority_url_is_not_starved_by_later_arrivals(open_store: OpenStore) -> None:
    """High-priority URLs keep arriving; the low-priority one still gets its turn once
    it has waited the horizon, while high-priority URLs queued before then go first."""
    async with open_store() as store:
        low = url("a.test", 0, depth=9)
        await store.commit(CommitBatch(new_urls=[low], at=0.0))
        # One high-priority URL (a sitemap's 1.0 at depth 0) every 100 s for 2.5 horizons.
        arrivals = {}
        for step in range(1, 91):
            high = url("a.test", step)
            arrivals[high.id] = step * 100.0
            batch = CommitBatch(new_urls=[high], at=step * 100.0)
            batch.listed[high.id] = Listed(Kind.PAGE, 1.0)
            await store.commit(batch)
        order = [u.id for u in await claim_all(store, await host_of(store, "a.test"), 9e9)]
    position = order.index(low.id)
    waited = (1 - priority(9)) * DEFAULT_HORIZON
    assert all(arrivals[uid] < waited for uid in order[:position])
    assert all(arrivals[uid] >= waited for uid in order[position + 1 :])
    assert 0 < position < len(order) - 1


async def test_due_pages_are_queued_again_with_their_validators(
    store: Engine, open_store: OpenStore
) -> None:
    await insert(store, url("a.test", 1), url("a.test", 2), url("b.test", 1))
    ids = {name: await host_of(store, name) for name in ("a.test", "b.test")}
    claimed = [u for host in ids.values() for u in await claim_all(store, host, 0.0)]
    due = {claimed[0].id: 50.0, claimed[1].id: 500.0, claimed[2].id: 150.0}
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(
                    u.id, u.host_id, State.DONE, 1, status=200, fetched_at=10.0,
                    change_hash=u.id % 1000, etag=f'"e{u.id}"', last_modified="Mon, 01 Jan 2024",
                    revisit_interval=100.0, due_at=due[u.id],
                )
                for u in claimed
            ]
        )
    )  # fmt: skip
    assert await store.next_due() == 50.0
    assert await store.requeue_due(now=200.0, limit=100) == 2
    assert await store.work_left() == 2
    assert await store.next_due() == 500.0
    again = [u for host in ids.values() for u in await claim_all(store, host, 200.0)]
    assert sorted(u.id for u in again) == sorted(uid for uid, at in due.items() if at <= 200.0)
    for u in again:
        assert (u.refetch, u.fetched_at, u.status) == (True, 10.0, 200)
        assert (u.etag, u.last_modified) == (f'"e{u.id}"', "Mon, 01 Jan 2024")
        assert (u.change_hash, u.revisit_interval) == (u.id % 1000, 100.0)
    # A 304 keeps the validators and the content hash; the page leaves the due index.
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(u.id, u.host_id, State.DONE, 1, status=304, fetched_at=200.0,
                        revisit_interval=150.0, due_at=400.0,
                        revalidation=Revalidation.NOT_MODIFIED)
                for u in again
            ]
        )
    )  # fmt: skip
    stored = open_store.query("SELECT etag, change_hash, due_at, status FROM urls ORDER BY due_at")
    assert [row[2] for row in stored] == [400.0, 400.0, 500.0]
    assert all(row[0] and row[1] is not None and row[3] == 200 for row in stored)
    assert (await store.counters())["recrawls_queued"] == 2


async def test_a_304_keeps_the_stored_answer_and_records_the_revalidation(
    store: Engine, open_store: OpenStore
) -> None:
    page, target = url("a.test", 1), url("a.test", 2)
    await insert(store, page, target)
    host = await host_of(store, "a.test")
    await claim_all(store, host, 0.0)
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(
                    page.id, host, State.DONE, 1, status=200, content_type="application/pdf",
                    length=3009, fetched_at=100.0, canonical=target.url, etag='"a"',
                    last_modified="Mon, 01 Jan 2024 00:00:00 GMT", revisit_interval=100.0,
                    due_at=200.0, change_hash=7,
                ),
                Outcome(target.id, host, State.DONE, 1, status=200, fetched_at=100.0),
            ]
        )
    )  # fmt: skip
    columns = (
        "SELECT status, content_type, length, fetched_at, canonical, alias_of, etag, "
        "last_modified, change_hash, revisit_interval, due_at, revalidated_at, revalidation "
        f"FROM urls WHERE url = '{page.url}'"
    )
    full = open_store.query(columns)[0]
    assert full[:6] == (200, "application/pdf", 3009, 100.0, target.url, target.id)
    assert full[11:] == (None, None)
    assert await store.requeue_due(now=200.0, limit=10) == 1
    [again] = await claim_all(store, host, 200.0)
    assert again.conditional
    # The 304 sends a new ETag; everything else of the stored answer stands.
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(
                    page.id, host, State.DONE, 1, status=304, fetched_at=250.0, elapsed=0.1,
                    etag='"b"', revisit_interval=150.0, due_at=400.0,
                    revalidation=Revalidation.NOT_MODIFIED,
                )
            ]
        )
    )  # fmt: skip
    assert open_store.query(columns)[0] == (
        *full[:6], '"b"', *full[7:9], 150.0, 400.0, 250.0, "not_modified",
    )  # fmt: skip
    exported = {row.url: row async for row in store.export()}[page.url]
    assert (exported.status, exported.content_type, exported.length) == (
        200,
        "application/pdf",
        3009,
    )
    assert (exported.fetched_at, exported.state) == (100.0, State.DONE)
    assert (exported.revalidated_at, exported.revalidation) == (250.0, "not_modified")
    assert (await store.counters())["queued"] == 0
    # A lastmod older than the revalidation is no change; a newer one makes it due.
    await store.commit(CommitBatch(lastmods=[(page.id, 220.0)], at=300.0))
    assert await store.next_due() == 400.0
    await store.commit(CommitBatch(lastmods=[(page.id, 260.0)], at=300.0))
    assert await store.next_due() == 300.0
    # The next fetch is conditional again, with the new ETag; a changed 200 replaces all.
    assert await store.requeue_due(now=300.0, limit=10) == 1
    [third] = await claim_all(store, host, 300.0)
    assert (third.status, third.etag, third.fetched_at, third.conditional) == (
        200, '"b"', 100.0, True,
    )  # fmt: skip
    await store.commit(
        CommitBatch(
            outcomes=[
                Outcome(
                    page.id, host, State.DONE, 1, status=200, content_type="text/html",
                    length=99, fetched_at=300.0, etag='"c"', revisit_interval=75.0,
                    due_at=375.0, change_hash=8, revalidation=Revalidation.CHANGED,
                )
            ]
        )
    )  # fmt: skip
    assert open_store.query(columns)[0] == (
        200, "text/html", 99, 300.0, None, None, '"c"', full[7], 8, 75.0, 375.0, 300.0,
        "changed",
    )  # fmt: skip


async def test_requeue_keeps_the_host_counts_exact(open_store: OpenStore) -> None:
    async with open_store(pages=3) as store:
        await insert(store, *(url("a.test", n) for n in range(3)))
        host = await host_of(store, "a.test")
        claimed = await claim_all(store, host, 0.0)
        await answer(store, claimed, fetched_at=1.0, due_at=5.0)
        # The page budget is used up; the due pages come back under it, not past it.
        assert await store.requeue_due(now=10.0, limit=2) == 2
        assert open_store.query("SELECT queued, fetched FROM hosts") == [(2, 1)]
        assert len(await claim_all(store, host, 10.0)) == 2
        assert await store.requeue_due(now=10.0, limit=10, every=True) == 1
        assert open_store.query("SELECT queued, fetched, claimed FROM hosts") == [(1, 0, 2)]


async def test_a_sitemap_lastmod_makes_a_fetched_page_due_at_once(
    store: Engine, open_store: OpenStore
) -> None:
    page, other = url("a.test", 1), url("a.test", 2)
    await insert(store, page, other)
    host = await host_of(store, "a.test")
    claimed = await claim_all(store, host, 0.0)
    await answer(store, claimed, fetched_at=100.0, due_at=9000.0)
    # Changed after the fetch, so due now; the other's lastmod is older than its fetch.
    await store.commit(CommitBatch(lastmods=[(page.id, 150.0), (other.id, 50.0)], at=200.0))
    assert await store.requeue_due(now=200.0, limit=10) == 1
    assert [u.id for u in await claim_all(store, host, 200.0)] == [page.id]
    lastmods: dict[str, float] = dict(open_store.query("SELECT url, lastmod FROM urls"))
    assert lastmods == {page.url: 150.0, other.url: 50.0}


# -- in-links ------------------------------------------------------------------------------


COUNTS: dict[str, Callable[[int, int], Counts]] = {"reference": _Counts}
"""The in-link count tables to test: the reference, and the C one where it is built."""
if not os.environ.get("TRAWL_PURE"):
    from trawl.frontier._inlink_counts import InlinkCounts

    COUNTS["c"] = InlinkCounts


@pytest.fixture(params=sorted(COUNTS))
def counts(request: pytest.FixtureRequest) -> Callable[[int, int], Counts]:
    return COUNTS[request.param]


def test_inlink_levels_are_reported_at_powers_of_eight_once_per_batch(
    counts: Callable[[int, int], Counts],
) -> None:
    counter = InlinkCounter(capacity=1000, counts=counts)
    popular, rare = url("a.test", 1), url("a.test", 2)
    assert counter.observe([popular, rare] * 3) == []  # 3 in-links: no level
    assert counter.observe([popular] * 4 + [rare]) == []  # 7
    assert counter.observe([popular, popular, rare]) == [(popular.id, 1)]  # 8 and 9
    reports = [counter.observe([popular]) for _ in range(200)]
    reached = [(n + 10, level) for n, report in enumerate(reports) for _, level in report]
    assert reached == [(64, 2)]
    assert MAX_LEVEL == 2


def test_inlink_counts_are_forgotten_when_the_counter_is_full(
    counts: Callable[[int, int], Counts],
) -> None:
    counter = InlinkCounter(capacity=3, counts=counts)
    links = [url("a.test", n) for n in range(3)]
    counter.observe([*links, *[links[0]] * 6])
    assert counter.observe([links[0]]) == []  # emptied first: this is its first link again
    assert counter.observe([links[0]] * 7) == [(links[0].id, 1)]


def test_the_c_inlink_counts_report_what_the_reference_does() -> None:
    if "c" not in COUNTS:
        assert _counts_maker() is _Counts
        return
    assert _counts_maker() is COUNTS["c"]
    rng = random.Random(3)
    pool = [url(f"h{n % 7}.test", n) for n in range(400)]
    extremes = [url("a.test", 0)._replace(id=uid) for uid in (-(1 << 63), -1, 0, (1 << 63) - 1)]
    c, reference = COUNTS["c"](150, MAX_LEVEL), _Counts(150, MAX_LEVEL)
    for _ in range(300):
        # Skewed, with batches past the capacity: the C table grows, then shrinks again.
        batch = [pool[int(len(pool) * rng.random() ** 3)] for _ in range(rng.randrange(400))]
        batch += rng.sample(extremes, rng.randrange(len(extremes)))
        assert c.observe(batch) == reference.observe(batch)
    with pytest.raises(TypeError):
        c.observe([7])  # type: ignore[list-item]
    with pytest.raises(OverflowError):
        c.observe([url("a.test", 0)._replace(id=1 << 63)])


async def test_inlink_levels_raise_priority_once_and_rank_only_when_queued(
    store: Engine, open_store: OpenStore
) -> None:
    first, popular, done = url("a.test", 1), url("a.test", 2), url("b.test", 1)
    await store.commit(CommitBatch(new_urls=[first, popular, done], at=0.0))
    b = await host_of(store, "b.test")
    [claimed] = await claim_all(store, b, 0.0)
    await store.commit(
        CommitBatch(outcomes=[Outcome(claimed.id, b, State.DONE, 1, status=200, fetched_at=1.0)])
    )
    ranks_before: dict[int, float] = dict(open_store.query("SELECT id, rank FROM urls"))
    levels = [(popular.id, 2), (done.id, 1)]
    await store.commit(CommitBatch(inlinks=levels))
    await store.commit(CommitBatch(inlinks=[(popular.id, 1), (popular.id, 2)]))  # no change
    stored = {uid: (p, r, lvl) for uid, p, r, lvl in open_store.query(
        "SELECT id, priority, rank, inlink_level FROM urls")}  # fmt: skip
    base = priority(0)
    assert stored[popular.id][0] == pytest.approx(min(1.0, base + 2 * LEVEL_STEP))
    assert stored[popular.id][1] == pytest.approx(
        ranks_before[popular.id] - 2 * LEVEL_STEP * DEFAULT_HORIZON
    )
    assert stored[popular.id][2] == 2
    assert stored[done.id][0] == pytest.approx(min(1.0, base + LEVEL_STEP))
    assert stored[done.id][1] == ranks_before[done.id]
    a = await host_of(store, "a.test")
    assert [u.id for u in await claim_all(store, a, 0.0)] == [popular.id, first.id]


async def test_a_recrawl_pass_can_queue_every_sitemap_whatever_its_due_time(
    store: Engine, open_store: OpenStore
) -> None:
    page, sitemap, other = url("a.test", 1), url("a.test", 2), url("b.test", 3)
    batch = CommitBatch(new_urls=[page, sitemap, other])
    batch.listed[sitemap.id] = batch.listed[other.id] = Listed(Kind.SITEMAP, None)
    await store.commit(batch)
    hosts = [await host_of(store, name) for name in ("a.test", "b.test")]
    claimed = [u for host in hosts for u in await claim_all(store, host, 0.0)]
    await answer(store, claimed, fetched_at=100.0, due_at=9000.0)
    assert await store.requeue_due(now=200.0, limit=10) == 0
    assert await store.requeue_due(now=200.0, limit=10, sitemaps=True) == 2
    again = [u for host in hosts for u in await claim_all(store, host, 200.0)]
    assert sorted(u.id for u in again) == sorted((sitemap.id, other.id))
    assert all(u.kind == Kind.SITEMAP for u in again)
    assert open_store.query("SELECT sum(queued), sum(fetched) FROM hosts") == [(0, 1)]
    assert (await store.counters())["recrawls_queued"] == 2
