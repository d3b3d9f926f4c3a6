"""The young GC generation is collected less often while a crawl's work runs, and the
collector's settings come back afterwards, even when the work fails."""

from __future__ import annotations

import gc

import pytest

from trawl.crawl.gc_tuning import GC_YOUNG_THRESHOLD, young_gc_threshold


def test_the_young_threshold_is_raised_meanwhile_and_restored_after() -> None:
    before = gc.get_threshold()
    with young_gc_threshold():
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before


def _fail_under(threshold: int) -> None:
    with young_gc_threshold(threshold):
        assert gc.get_threshold()[0] == threshold
        raise RuntimeError("work failed")


def test_the_threshold_is_restored_when_the_work_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="work failed"):
        _fail_under(5_000)
    assert gc.get_threshold() == before
