"""A site's page budget in both store engines: a claim hands out no more than the host's
own budget where it is tighter than the store's, parks the rest once it is used, and a
recovery (each run's start and end) leaves them parked, while a host the site's budget
does not bind is unparked as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pg import DSN as PG_DSN
from pg import pg_schema
from test_store import answer, insert, rows, url
from trawl.store.postgres.store import PostgresStore
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import HostBudget, State

__all__ = ["pg_schema"]

Opener = Callable[[int | None, HostBudget | None], SQLiteStore | PostgresStore]
"""Opens a store of one engine at one place, with a page budget and ``host_budget``."""
OWN = {"a.test": 2}
"""Site a.test's page budget; the store's is 4."""


def own_budget(name: str) -> int | None:
    return OWN.get(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest) -> Opener:
    if request.param == "sqlite":
        path: Path = request.getfixturevalue("tmp_path")
        return lambda budget, own: SQLiteStore(path, page_budget=budget, host_budget=own)
    schema: str = request.getfixturevalue("pg_schema")
    return lambda budget, own: PostgresStore(
        PG_DSN, schema=schema, page_budget=budget, host_budget=own
    )


async def test_a_sites_budget_is_claimed_parked_and_kept_parked(open_store: Opener) -> None:
    async with open_store(4, own_budget) as store:
        await insert(
            store, *(url("a.test", n) for n in range(6)), *(url("b.test", n) for n in range(6))
        )
        ids = await store.host_ids(["a.test", "b.test"])
        a, b = ids["a.test"], ids["b.test"]
        budgets = {a: 2}
        first = await store.claim({a: 10, b: 10}, now=1000.0, budgets=budgets)
        assert len([u for u in first if u.host_id == a]) == 2  # its own budget
        assert len([u for u in first if u.host_id == b]) == 4  # the store's
        await answer(store, first)
        assert await store.claim({a: 10, b: 10}, now=1000.0, budgets=budgets) == []
        assert (await store.counters())["over_host_page_budget"] == 6  # 4 of a, 2 of b
        # A run's end recovers: a.test's own budget is spent, so its URLs stay parked.
        await store.recover()
        assert (await store.counters())["over_host_page_budget"] == 6
        assert await store.work_left() == 0
    # A later run whose store budget is larger unparks b.test, and a.test only once its
    # site's budget is larger too.
    async with open_store(6, own_budget) as store:
        await store.recover()
        assert (await store.counters())["over_host_page_budget"] == 4
        parked = {r.url for r in (await rows(store)).values() if r.state == State.PARKED}
        assert {u.split("/")[2] for u in parked} == {"a.test"}
    async with open_store(6, None) as store:
        await store.recover()
        assert (await store.counters())["over_host_page_budget"] == 0
        assert await store.work_left() == 6
