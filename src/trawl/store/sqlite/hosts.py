"""The embedded store's writes to host rows shared by its operations: host ids by name,
ends of leases, parking and unparking for the page budget, and counters.

Plain functions over a connection, called on the store thread inside a transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence

from trawl.store.sqlite import sql
from trawl.store.sqlite.content import select_in
from trawl.store.sqlite.frontier import unstage_host
from trawl.store.values import (
    PAGE_BUDGET_COUNTER,
    PAGE_BUDGET_ERROR,
    HostBudget,
    Release,
    State,
    least_budget,
    within_budget,
)

HOST_ID_CACHE = 100_000
"""Host ids a store keeps by name (emptied when full): a commit's new URLs name hundreds
of hosts, and asking the database for each id took about a tenth of a commit."""


def ensure_hosts(db: sqlite3.Connection, names: Sequence[str]) -> dict[str, int]:
    """Ids of the named hosts, inserting those not yet known."""
    db.executemany(sql.ENSURE_HOST, [(name,) for name in names])
    return dict(select_in(db, sql.HOST_IDS, names))


def batch_host_ids(
    db: sqlite3.Connection, names: set[str], known: Mapping[str, int], found: dict[str, int]
) -> dict[str, int]:
    """Ids of the named hosts: from ``known`` (committed ids), else from the database,
    inserting those not yet there; the ones read here are added to ``found``."""
    ids = {name: known[name] for name in names if name in known}
    if len(ids) < len(names):
        fresh = ensure_hosts(db, sorted(names - ids.keys()))
        found.update(fresh)
        ids.update(fresh)
    return ids


def leased_to(db: sqlite3.Connection, worker: str, host_ids: Sequence[int]) -> set[int]:
    """Which of ``host_ids`` are leased to ``worker`` now (by the wall clock)."""
    rows = select_in(db, sql.LEASES_OF, sorted(host_ids))
    now = time.time()
    return {host_id for host_id, owner, expires in rows if owner == worker and expires >= now}


def requeue_claimed(db: sqlite3.Connection, host_id: int) -> None:
    """Return a host's CLAIMED URLs to the queue (its lease ended with them unanswered)."""
    moved = db.execute(sql.REQUEUE_CLAIMED, (host_id,)).rowcount
    db.execute(sql.HOST_REQUEUED, (moved, host_id))


def release(db: sqlite3.Connection, releases: Sequence[Release]) -> None:
    """Give leased hosts back, each only if its lease is still at the release's generation."""
    for r in releases:
        if db.execute(sql.RELEASE, (r.next_eligible_at, r.host_id, r.generation)).rowcount:
            requeue_claimed(db, r.host_id)


def add_counters(db: sqlite3.Connection, counters: Mapping[str, int]) -> None:
    """Add ``counters`` to the stored ones (zeros are skipped)."""
    changed = [(name, value) for name, value in counters.items() if value]
    if changed:
        db.executemany(sql.ADD_COUNTER, changed)


def park(db: sqlite3.Connection, host_id: int) -> int:
    """Hold back every QUEUED URL of a host that used up its page budget; return how many."""
    parked: int = db.execute(sql.PARK, (State.PARKED, PAGE_BUDGET_ERROR, host_id)).rowcount
    unstage_host(db, host_id)
    if parked:
        db.execute(sql.HOST_PARKED, (parked, host_id))
    return parked


def unpark(
    db: sqlite3.Connection, page_budget: int | None, host_budget: HostBudget | None = None
) -> None:
    """Queue again the PARKED URLs of hosts that the page budget now leaves room for
    (a run with a larger ``--max-pages-per-host``), or their own ``host_budget`` where it
    is tighter; they leave the counter too."""
    if host_budget is not None:
        free = [
            (State.QUEUED, State.PARKED, host_id)
            for host_id, name, fetched in db.execute(sql.PARKED_HOSTS, (State.PARKED,))
            if within_budget(fetched, least_budget(page_budget, host_budget(name)))
        ]
        moved = sum(db.execute(sql.UNPARK_HOST, row).rowcount for row in free)
        add_counters(db, {PAGE_BUDGET_COUNTER: -moved})
        return
    if page_budget is None:
        cursor = db.execute(sql.UNPARK, (State.QUEUED, State.PARKED))
    else:
        cursor = db.execute(sql.UNPARK_WITHIN, (State.QUEUED, State.PARKED, page_budget))
    add_counters(db, {PAGE_BUDGET_COUNTER: -cursor.rowcount})
