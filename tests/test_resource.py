"""Every resource closes on leaving ``async with`` and tolerates a second close."""

from __future__ import annotations

from pathlib import Path

from trawl.config import ScopeConfig, Timeouts
from trawl.extract.pool import ExtractPool, ExtractSettings
from trawl.extract.urls import DEFAULT_RULES
from trawl.fetch.fetcher import Fetcher
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver
from trawl.store.sqlite.store import SQLiteStore


async def test_resources_close_on_exit_and_close_twice(tmp_path: Path) -> None:
    settings = ExtractSettings(("http://a.test/",), ScopeConfig(), DEFAULT_RULES, "trawl", True, 10)
    async with (
        SQLiteStore(tmp_path) as store,
        Fetcher(user_agent="trawl/0", timeouts=Timeouts(), max_body=10,
                resolver=GuardedResolver(AddressPolicy())) as fetcher,
        ExtractPool(settings, workers=1) as pool,
    ):  # fmt: skip
        found = await pool.extract("http://a.test/", 1, b'<a href="/x">x</a>', None, ())
        assert [link.url for link in found.links] == ["http://a.test/x"]
    for resource in (store, fetcher, pool):
        await resource.close()
