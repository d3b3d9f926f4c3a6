"""How the embedded store writes one commit batch, inside the commit's transaction on
the store thread: outcomes and host tallies, fenced parts settled against their
leases, new URLs inserted if absent and within their hosts' discovery budget, host
records, sitemap hints, in-link raises, shallower depths, content rows, items and
releases.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence

from trawl.frontier.priority import priority
from trawl.store.rows import host_tallies, settle_fences, shallowest
from trawl.store.sqlite import sql
from trawl.store.sqlite.content import apply_content, select_in
from trawl.store.sqlite.frontier import lift, restore, stage_since
from trawl.store.sqlite.hosts import add_counters, batch_host_ids, release
from trawl.store.sqlite.ids import file_since, last_seq
from trawl.store.sqlite.items import write_items
from trawl.store.values import (
    DISCOVERY_BUDGET_COUNTER,
    CommitBatch,
    CommitResult,
    Kind,
    Listed,
    NewURL,
)

InsertRow = tuple[int, str, int, int, int, str | None, int, float, float, str | None]
"""The parameters of :data:`~trawl.store.sqlite.sql.INSERT_URL`."""
LinkRow = tuple[int, str, int, int, float, float]
"""The parameters of :data:`~trawl.store.sqlite.sql.INSERT_LINK`."""
_PLAIN_LINK = Listed(Kind.PAGE, None)


def insert_urls(
    db: sqlite3.Connection,
    urls: Sequence[tuple[int, NewURL]],
    queued_at: float,
    horizon: float,
    listed: Mapping[int, Listed],
) -> None:
    """Insert new URLs, each with its host's id, queued at ``queued_at`` (their rank,
    trawl.frontier.priority). ``urls`` are URLs the store does not hold, each once
    (:func:`unstored`).

    One statement for the whole commit, not one a host: a commit's new URLs belong to
    hundreds of hosts, a few each, and each ``executemany`` costs its own setup. In hash
    order, so that a host's URLs of one commit are claimed in that order at equal rank.
    """
    links: list[LinkRow] = []
    rows: list[InsertRow] = []
    for hid, u in urls:
        kind, hint = listed.get(u.id, _PLAIN_LINK) if listed else _PLAIN_LINK
        value = priority(u.depth, hint)
        rank = queued_at - value * horizon
        if kind is Kind.PAGE and not u.redirect_hops and u.origin is None and u.label is None:
            links.append((u.id, u.url, hid, u.depth, value, rank))
        else:
            rows.append(
                (
                    u.id, u.url, hid, u.depth, u.redirect_hops, u.origin, int(kind), value,
                    rank, u.label,
                )
            )  # fmt: skip
    links.sort()
    rows.sort()
    db.executemany(sql.INSERT_LINK, links)
    if rows:
        db.executemany(sql.INSERT_URL, rows)


def within_budget(
    db: sqlite3.Connection, urls: Sequence[tuple[int, NewURL]], budget: int
) -> list[tuple[int, NewURL]]:
    """The URLs of ``urls`` (host id, URL) that their hosts' discovery budget leaves room
    for: where a host's do not all fit, the shallowest, in the order they were found."""
    by_host: dict[int, list[NewURL]] = {}
    for hid, u in urls:
        by_host.setdefault(hid, []).append(u)
    kept: list[tuple[int, NewURL]] = []
    for hid, found in by_host.items():
        (known,) = db.execute(sql.DISCOVERED_BY, (hid,)).fetchone()
        room = max(budget - known, 0)
        if len(found) > room:
            found = sorted(found, key=_depth_of)[:room]
        kept.extend((hid, u) for u in found)
    return kept


def unstored(
    db: sqlite3.Connection, urls: Sequence[NewURL]
) -> tuple[list[NewURL], list[tuple[int, int]]]:
    """The URLs of ``urls`` whose id the store does not hold, each id once (the first
    found at the smallest depth): the store's own insert-if-absent check, a read of the
    id index and no write. With them, (id, depth) of the others, which may be stored
    deeper (:attr:`CommitBatch.shallower`)."""
    wanted = sorted({u.id for u in urls})
    held = {row[0] for row in select_in(db, sql.HELD_IDS, wanted)}
    fresh: dict[int, NewURL] = {}
    known: list[tuple[int, int]] = []
    for u in urls:
        if u.id in held:
            known.append((u.id, u.depth))
            continue
        first = fresh.setdefault(u.id, u)
        if u.depth < first.depth:
            fresh[u.id] = u
    return list(fresh.values()), known


def _depth_of(url: NewURL) -> int:
    """Sort key: the depth of a URL."""
    return url.depth


def apply(
    db: sqlite3.Connection,
    batch: CommitBatch,
    discovery_budget: int | None,
    horizon: float,
    known_hosts: Mapping[str, int],
    found_hosts: dict[str, int],
) -> CommitResult:
    """Write one batch; runs inside a transaction on the store thread. Host ids come
    from ``known_hosts`` where it has them; those read or made here go to
    ``found_hosts``."""
    if batch.fenced:
        generations = select_in(db, sql.FENCE_GENERATIONS, batch.fence_hosts())
        settle_fences(batch, dict(generations))
    if batch.outcomes:
        # The last outcome of a URL wins (a batch merged from several may hold two).
        latest = {o.url_id: o for o in batch.outcomes}.values()
        db.executemany(
            sql.ANSWER,
            [
                (
                    int(o.state), o.attempts, o.status, o.content_type, o.length, o.fetched_at,
                    o.redirect_to, o.error, int(o.truncated), o.next_fetch_at, o.canonical,
                    o.alias_of(), o.content_hash, o.simhash, o.etag, o.last_modified,
                    o.revisit_interval, o.due_at, o.change_hash, *o.revalidated, o.url_id,
                )
                for o in latest
                if not o.not_modified
            ],
        )  # fmt: skip
        db.executemany(
            sql.REVALIDATE,
            [
                (
                    int(o.state), o.attempts, o.next_fetch_at, o.etag, o.last_modified,
                    o.revisit_interval, o.due_at, *o.revalidated, o.url_id,
                )
                for o in latest
                if o.not_modified
            ],
        )  # fmt: skip
        db.executemany(
            sql.HOST_TALLY,
            [(*tally, host) for host, tally in host_tallies(batch.outcomes).items()],
        )
    inserted = left_out = 0
    hosts_with_new_work: set[int] = set()
    fresh, known = unstored(db, batch.new_urls) if batch.new_urls else ([], [])
    if fresh:
        filed_after = last_seq(db)
        host_id = batch_host_ids(db, {u.host for u in fresh}, known_hosts, found_hosts)
        placed = [(host_id[u.host], u) for u in fresh]
        if discovery_budget is not None:
            placed = within_budget(db, placed, discovery_budget)
            left_out = len(fresh) - len(placed)
        insert_urls(db, placed, batch.at, horizon, batch.listed)
        gained = Counter(hid for hid, _ in placed)
        hosts_with_new_work = set(gained)
        inserted = len(placed)
        file_since(db, filed_after)
        stage_since(db, filed_after)
        db.executemany(
            sql.HOST_DISCOVERED,
            [(gained[hid], gained[hid], hid) for hid in sorted(hosts_with_new_work)],
        )
    counters = dict(batch.counters)
    if batch.new_urls:
        counters["discovered"] = counters.get("discovered", 0) + inserted
        duplicates = len(batch.new_urls) - inserted - left_out
        counters["duplicates"] = counters.get("duplicates", 0) + duplicates
    if left_out:
        counters[DISCOVERY_BUDGET_COUNTER] = counters.get(DISCOVERY_BUDGET_COUNTER, 0) + left_out
    robots = [
        (u.robots.status, u.robots.body, u.robots.fetched_at, u.host_id)
        for u in batch.hosts
        if u.robots is not None
    ]
    if robots:
        db.executemany(sql.SET_ROBOTS, robots)
    probes = [
        (u.soft404.fingerprint, u.soft404.checked_at, u.host_id)
        for u in batch.hosts
        if u.soft404 is not None
    ]
    if probes:
        db.executemany(sql.SET_SOFT404, probes)
    if batch.lastmods:
        # A page last answered (fetched, or confirmed by a 304) before a sitemap's
        # lastmod is due now.
        db.executemany(
            sql.SET_LASTMOD,
            [(lastmod, lastmod, batch.at, batch.at, uid) for uid, lastmod in batch.lastmods],
        )
    if batch.inlinks:
        lifted = lift(db, [uid for uid, _ in batch.inlinks])
        db.executemany(sql.RAISE_INLINKS, [(level, horizon, uid) for uid, level in batch.inlinks])
        restore(db, lifted)
    handed_out: tuple[tuple[int, int, int], ...] = ()
    if batch.shallower or known:
        found = shallowest([*batch.shallower, *known])
        wanted = dict(found)
        handed_out = tuple(
            (host_id, uid, wanted[uid])
            for host_id, uid, depth in select_in(db, sql.HANDED_OUT, list(wanted))
            if depth > wanted[uid]
        )
        lifted = lift(db, list(wanted))
        db.executemany(sql.SHALLOWER, [(depth, horizon, uid) for uid, depth in found])
        restore(db, lifted)
    apply_content(db, batch)
    write_items(db, batch)
    release(db, batch.releases)
    add_counters(db, counters)
    return CommitResult(
        inserted=inserted,
        hosts_with_new_work=frozenset(hosts_with_new_work),
        counters=counters,
        handed_out=handed_out,
        released=frozenset(r.host_id for r in batch.releases),
    )
