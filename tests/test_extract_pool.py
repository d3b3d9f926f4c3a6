"""Extract workers load their code while the crawl starts; one that cannot start fails
the first extraction sent to it instead of passing silently."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from trawl.config import ScopeConfig
from trawl.extract import ExtractPool, ExtractSettings
from trawl.urls import DEFAULT_RULES

SETTINGS = ExtractSettings(("http://a.test/",), ScopeConfig(), DEFAULT_RULES, "trawl", True, 10)


async def test_the_pool_starts_without_waiting_for_its_workers_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A "Python" that takes a second to load and then dies without reading a frame.
    loaded = tmp_path / "loaded"
    slow = tmp_path / "slow-python"
    slow.write_text(f"#!/bin/sh\nsleep 1\ntouch {loaded}\nexit 1\n")
    slow.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(slow))
    async with ExtractPool(SETTINGS, workers=1) as pool:
        assert not loaded.exists()
        with pytest.raises(RuntimeError, match="link-extraction worker stopped"):
            await pool.extract("http://a.test/", 1, b'<a href="/x">x</a>', None, ())
        assert loaded.exists()


async def test_pages_sent_while_a_worker_loads_are_answered_in_order() -> None:
    async with ExtractPool(SETTINGS, workers=1) as pool:
        first, second = await asyncio.gather(
            pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ()),
            pool.extract("http://a.test/", 1, b'<a href="/two">2</a>', None, ()),
        )
    assert [link.url for link in first.links] == ["http://a.test/one"]
    assert [link.url for link in second.links] == ["http://a.test/two"]
