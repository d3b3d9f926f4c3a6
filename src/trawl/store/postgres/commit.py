"""The PostgreSQL engine's commit: a batch's writes, queued in the commit's pipelined
transaction, and the result read back once it has committed.

Each statement works on whole arrays (``unnest``), so its cost does not grow with round
trips as the batch grows. Host rows the batch will change are locked first, in id
order, so concurrent commits wait for each other instead of deadlocking, and a discovery
budget holds across them: the insert of new URLs stops at each host's discovery budget
inside the insert statement itself. Counters are rows too, written by two statements
(the URLs discovered in the insert, the batch's own at the end), so two workers' commits
can still lock two of them in opposite orders: the server then rolls one back, and
:func:`committed` tries it again (``DEADLOCK_TRIES`` in all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection

from trawl.errors import StoreError
from trawl.frontier.priority import priority
from trawl.store.postgres import sql
from trawl.store.postgres.content import apply_content, columns
from trawl.store.postgres.items import write_items
from trawl.store.rows import host_tallies, settle_fences, shallowest, unsettle
from trawl.store.values import DISCOVERY_BUDGET_COUNTER, CommitBatch, CommitResult, Outcome, State

DEADLOCK_TRIES = 3
"""Times a commit is tried when the server rolls it back to break a deadlock."""

log = logging.getLogger("trawl.store.postgres")

Transaction = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]


@dataclass(frozen=True, slots=True)
class Written:
    """What a batch's writes leave to read after the commit: the cursor of the insert of
    new URLs (None: the batch had none), and the handed-out URLs the batch found at a
    smaller depth, as ``(host_id, url_id, depth)``."""

    inserted: psycopg.AsyncCursor[Any] | None
    handed_out: tuple[tuple[int, int, int], ...]


async def write(
    conn: AsyncConnection[Any],
    batch: CommitBatch,
    *,
    horizon: float,
    discovery_budget: int | None,
) -> Written:
    """Queue the writes of ``batch`` in the transaction of ``conn``; a fenced batch, or
    one with depth hints, waits for the server once mid-way to read what it needs."""
    names = sorted({u.host for u in batch.new_urls})
    touched = sorted(
        {o.host_id for o in batch.outcomes}
        | {h.host_id for h in batch.hosts}
        | {r.host_id for r in batch.releases}
        | set(batch.fence_hosts())
    )
    if names:
        await conn.execute(sql.ADD_HOSTS, (names,))
    if names or touched:
        locked = await conn.execute(sql.LOCK_HOSTS, (touched, names))
        if batch.fenced:
            # The one extra round trip of a fenced batch: the generations are
            # read under the lock, so no lease changes before the commit.
            settle_fences(batch, dict(await locked.fetchall()))
    if batch.outcomes:
        await _answer(conn, batch.outcomes)
    inserted = None
    handed_out: tuple[tuple[int, int, int], ...] = ()
    if batch.new_urls:
        inserted = await _insert_urls(conn, batch, horizon, discovery_budget)
    await _update_hosts(conn, batch)
    if batch.inlinks:
        ids, levels = columns(batch.inlinks, 2)
        await conn.execute(sql.RAISE_INLINKS, (ids, levels, horizon))
    # Another worker may have stored a new URL of the batch first, deeper: the
    # insert leaves its row alone, so the new URLs are checked too.
    hints = [*batch.shallower, *((u.id, u.depth) for u in batch.new_urls)]
    if hints:
        ids, depths = columns(shallowest(hints), 2)
        lowered = await conn.execute(sql.SHALLOWER, (ids, depths, horizon))
        handed_out = tuple(
            (host_id, url_id, depth)
            for host_id, url_id, depth, state in await lowered.fetchall()
            if state == State.CLAIMED
        )
    if batch.lastmods:
        ids, lastmods = columns(batch.lastmods, 2)
        await conn.execute(sql.LASTMODS, (ids, lastmods, batch.at, batch.at))
    await apply_content(conn, batch)
    await write_items(conn, batch)
    if batch.releases:
        rows = [(r.host_id, r.generation, r.next_eligible_at) for r in batch.releases]
        await conn.execute(sql.RELEASE, columns(rows, 3))
    changed = {name: value for name, value in batch.counters.items() if value}
    if changed:
        await conn.execute(sql.ADD_COUNTERS, (list(changed), list(changed.values())))
    return Written(inserted, handed_out)


async def committed(
    transaction: Transaction,
    batch: CommitBatch,
    *,
    horizon: float,
    discovery_budget: int | None,
) -> CommitResult:
    """Write ``batch`` in a ``transaction`` and read its result; a commit the server
    rolled back for a deadlock is tried again from the batch as it was given."""
    undo = unsettle(batch)
    tries = 0
    while True:
        tries += 1
        try:
            async with transaction() as conn:
                written = await write(
                    conn, batch, horizon=horizon, discovery_budget=discovery_budget
                )
        except StoreError as exc:
            deadlock = isinstance(exc.__cause__, psycopg.errors.DeadlockDetected)
            if not deadlock or tries >= DEADLOCK_TRIES:
                raise
            log.info("a commit deadlocked with another's and was rolled back: trying again")
            undo()
            continue
        return await result(batch, written)


async def result(batch: CommitBatch, written: Written) -> CommitResult:
    """The result of the committed ``batch``: its counters with the URLs discovered,
    duplicated and left out by the discovery budget added."""
    counters = dict(batch.counters)
    added = left_out = 0
    hosts_with_new_work: set[int] = set()
    if written.inserted is not None:
        for host_id, host_added, host_left_out in await written.inserted.fetchall():
            added += host_added
            left_out += host_left_out
            if host_added:
                hosts_with_new_work.add(host_id)
        counters["discovered"] = counters.get("discovered", 0) + added
        duplicates = len(batch.new_urls) - added - left_out
        counters["duplicates"] = counters.get("duplicates", 0) + duplicates
    if left_out:
        counters[DISCOVERY_BUDGET_COUNTER] = counters.get(DISCOVERY_BUDGET_COUNTER, 0) + left_out
    return CommitResult(
        inserted=added,
        hosts_with_new_work=frozenset(hosts_with_new_work),
        counters=counters,
        released=frozenset(r.host_id for r in batch.releases),
        handed_out=written.handed_out,
    )


async def _answer(conn: AsyncConnection[Any], outcomes: Sequence[Outcome]) -> None:
    """Queue the outcomes' writes: each URL's columns (the last outcome of a URL
    wins) and per host the URLs queued again, answered, and no longer handed out."""
    latest = {o.url_id: o for o in outcomes}.values()
    rows = [
        (
            o.url_id, o.state, o.attempts, o.status, o.content_type, o.length, o.fetched_at,
            o.redirect_to, o.error, int(o.truncated), o.next_fetch_at, o.canonical,
            o.alias_of(), o.content_hash, o.simhash, o.etag, o.last_modified,
            o.revisit_interval, o.due_at, o.change_hash, *o.revalidated,
        )
        for o in latest
        if not o.not_modified
    ]  # fmt: skip
    if rows:
        await conn.execute(sql.ANSWER, columns(rows, 22))
    kept = [
        (
            o.url_id, o.state, o.attempts, o.next_fetch_at, o.etag, o.last_modified,
            o.revisit_interval, o.due_at, *o.revalidated,
        )
        for o in latest
        if o.not_modified
    ]  # fmt: skip
    if kept:
        await conn.execute(sql.REVALIDATE, columns(kept, 10))
    tallies = [(host, *tally) for host, tally in host_tallies(outcomes).items()]
    await conn.execute(sql.ANSWER_HOSTS, columns(tallies, 7))


async def _insert_urls(
    conn: AsyncConnection[Any], batch: CommitBatch, horizon: float, budget: int | None
) -> psycopg.AsyncCursor[Any]:
    """Queue the insert of the batch's new URLs; its cursor gives, per host, the rows
    inserted and the candidates left out by the discovery ``budget``."""
    urls = batch.new_urls
    return await conn.execute(
        sql.INSERT_URLS,
        {
            "ids": [u.id for u in urls],
            "urls": [u.url for u in urls],
            "hosts": [u.host for u in urls],
            "depths": [u.depth for u in urls],
            "hops": [u.redirect_hops for u in urls],
            "origins": [u.origin for u in urls],
            "kinds": [batch.listed[u.id].kind if u.id in batch.listed else 0 for u in urls],
            "priorities": [
                priority(u.depth, batch.listed[u.id].priority if u.id in batch.listed else None)
                for u in urls
            ],
            "labels": [u.label for u in urls],
            "at": batch.at,
            "horizon": horizon,
            "budget": budget,
            "candidates": len(urls),
            "over": DISCOVERY_BUDGET_COUNTER,
        },
    )


async def _update_hosts(conn: AsyncConnection[Any], batch: CommitBatch) -> None:
    """Queue the batch's host state: robots.txt records and soft-404 answers (the
    last one of a host wins)."""
    robots = {u.host_id: u.robots for u in batch.hosts if u.robots is not None}
    if robots:
        await conn.execute(
            sql.SET_ROBOTS,
            columns([(h, r.status, r.body, r.fetched_at) for h, r in robots.items()], 4),
        )
    probes = {u.host_id: u.soft404 for u in batch.hosts if u.soft404 is not None}
    if probes:
        await conn.execute(
            sql.SET_SOFT404,
            columns([(h, p.fingerprint, p.checked_at) for h, p in probes.items()], 3),
        )
