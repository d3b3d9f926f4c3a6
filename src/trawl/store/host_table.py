"""The console's host table, in SQL both engines run: each host's figures and state.

A host's state is read from the store alone, first match wins (`HOST_STATES`):
*broken* when URLs of it failed because the crawl gave the host up (``host_failing``:
the circuit breaker; ``blocked_address``: an address the crawl may not reach); *backing
off* when URLs of it wait for a retry after a failed answer (queued with attempts);
*robots-blocked* when robots.txt blocked URLs of it and none was answered; *leased*
while a worker's lease on it runs; *resting* while its next turn is ahead; *waiting*
when it has work and no worker; *idle* otherwise. Errors are its failed URLs.

The per-host URL figures are one pass over the queued and failed URLs, so a read costs
about a scan of the ``urls`` table: fine for a console polling every few seconds, not
for a crawl's own loops.
"""

from __future__ import annotations

from typing import Any

from trawl.store.values import HOST_ORDERS, HOST_STATES, HostRow, State

GIVEN_UP = ("host_failing", "blocked_address")
"""The errors of the URLs of a host the crawl gave up."""

_ORDER_BY = dict(
    zip(
        HOST_ORDERS,
        ("name", "state", "queued", "fetched", "errors", "mean_seconds", "blocked"),
        strict=True,
    )
)


def _figures(p: str) -> str:
    """The hosts with their figures and state rank (parameters: now, now; ``p`` is the
    engine's placeholder)."""
    given_up = ", ".join(f"'{error}'" for error in GIVEN_UP)
    queued, failed = int(State.QUEUED), int(State.FAILED)
    return f"""WITH per_host AS (
        SELECT host_id,
            SUM(CASE WHEN state = {failed} THEN 1 ELSE 0 END) AS errors,
            SUM(CASE WHEN state = {queued} AND attempts > 0 THEN 1 ELSE 0 END) AS retrying,
            SUM(CASE WHEN state = {failed} AND error IN ({given_up}) THEN 1 ELSE 0 END)
                AS given_up
        FROM urls WHERE state IN ({queued}, {failed}) GROUP BY host_id
    ), figures AS (
        SELECT h.name AS name, h.queued + h.claimed AS queued, h.fetched AS fetched,
            h.responses AS responses,
            h.response_seconds / (CASE WHEN h.responses > 0 THEN h.responses ELSE 1 END)
                AS mean_seconds,
            COALESCE(p.errors, 0) AS errors, h.blocked AS blocked,
            CASE WHEN COALESCE(p.given_up, 0) > 0 THEN 0
                 WHEN COALESCE(p.retrying, 0) > 0 THEN 1
                 WHEN h.blocked > 0 AND h.responses = 0 THEN 2
                 WHEN h.lease_owner IS NOT NULL AND h.lease_expires_at >= {p} THEN 3
                 WHEN h.next_eligible_at > {p} THEN 4
                 WHEN h.queued + h.claimed > 0 THEN 5
                 ELSE 6 END AS state
        FROM hosts AS h LEFT JOIN per_host AS p ON p.host_id = h.id
    )"""


def host_page_sql(p: str, order: str, descending: bool) -> str:
    """A page of the host table sorted by ``order`` (one of `HOST_ORDERS`), then by
    name, with the number of hosts in every row (parameters: now, now, limit, offset)."""
    direction = "DESC" if descending else "ASC"
    return (
        f"{_figures(p)} SELECT name, state, queued, fetched, responses, mean_seconds, "
        f"errors, blocked, COUNT(*) OVER () FROM figures "
        f"ORDER BY {_ORDER_BY[order]} {direction}, name LIMIT {p} OFFSET {p}"
    )


def host_states_sql(p: str) -> str:
    """How many hosts are in each state (parameters: now, now)."""
    return f"{_figures(p)} SELECT state, COUNT(*) FROM figures GROUP BY state"


def state_name(rank: int) -> str:
    """The state of a host table row's state rank."""
    return HOST_STATES[rank]


def host_rows(rows: list[Any]) -> tuple[int, list[HostRow]]:
    """The number of hosts and the rows of a host page read by `host_page_sql`."""
    total = int(rows[0][8]) if rows else 0
    return total, [
        HostRow(
            name=str(r[0]), state=state_name(int(r[1])), queued=int(r[2]), fetched=int(r[3]),
            responses=int(r[4]), mean_seconds=float(r[5]), errors=int(r[6]), blocked=int(r[7]),
        )
        for r in rows
    ]  # fmt: skip
