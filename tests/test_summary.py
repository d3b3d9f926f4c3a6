"""The summary reads every figure from the store's counters."""

from __future__ import annotations

import json

from trawl.ops.summary import Summary
from trawl.store.values import STALE_COUNTER

COUNTERS = {
    "discovered": 120, "fetched": 150, "queued": 3, "status_2xx": 140, "status_4xx": 10,
    "robots_blocked": 7, "off_scope": 31, "excluded": 2, "invalid": 5, "invalid:scheme": 4,
    "invalid:too_long": 1, "duplicates": 900, "redirects": 12, "redirect_limit": 1,
    "retries": 6, "failed": 2, "error:timeout": 2, "requests": 158,
}  # fmt: skip


def test_figures_come_from_the_counters() -> None:
    summary = Summary.from_counters(COUNTERS, state="done", elapsed=10.0, fetched_before=50)
    assert summary.discovered == 120
    assert summary.status == {"1xx": 0, "2xx": 140, "3xx": 0, "4xx": 10, "5xx": 0}
    assert summary.invalid_by_reason == {"scheme": 4, "too_long": 1}
    assert summary.errors_by_class == {"timeout": 2}
    assert summary.pages_per_second == 10.0  # only this run's 100 pages count


def test_text_and_json_carry_the_same_figures() -> None:
    summary = Summary.from_counters(COUNTERS, state="done", elapsed=4.0)
    text = "\n".join(summary.lines())
    expected = (
        "unique URLs discovered  120",
        "2xx 140, 4xx 10",
        "duplicates skipped      900",
        "scheme 4, too_long 1",
        "timeout 2",
    )
    for figure in expected:
        assert figure in text
    data = json.loads(summary.to_json())
    assert data["discovered"] == 120
    assert data["pages_per_second"] == 37.5


def test_empty_store_gives_zeros() -> None:
    summary = Summary.from_counters({}, state="new", elapsed=0.0)
    assert (summary.discovered, summary.fetched, summary.pages_per_second) == (0, 0, 0.0)


def test_robots_rules_unavailable_robots_txt_and_unreachable_hosts_are_told_apart() -> None:
    counters = {
        "robots_blocked": 7, "blocked:robots_unavailable": 3, "unreachable_hosts": 2,
        "failed": 5, "error:dns": 1, "error:connect": 4,
    }  # fmt: skip
    summary = Summary.from_counters(counters, state="done", elapsed=1.0)
    assert (summary.robots_blocked, summary.robots_unavailable) == (7, 3)
    assert (summary.disallowed, summary.unreachable_hosts) == (4, 2)
    rows = dict(line.split("  ", 1) for line in summary.lines())
    figures = {name.strip(): value.strip() for name, value in rows.items()}
    assert figures["blocked by robots.txt"] == "4"
    assert figures["robots.txt unavailable"] == "3 URLs held back"
    assert figures["hosts unreachable"] == "2"
    assert figures["failed"] == "5 (connect 4, dns 1)"
    data = json.loads(summary.to_json())
    assert (data["robots_blocked"], data["robots_unavailable"], data["unreachable_hosts"]) == (
        7, 3, 2,
    )  # fmt: skip


def test_results_refused_as_stale_are_shown() -> None:
    summary = Summary.from_counters({STALE_COUNTER: 4}, state="done", elapsed=1.0)
    assert json.loads(summary.to_json())["stale_completions"] == 4
    rows = dict(line.split("  ", 1) for line in summary.lines())
    assert rows["stale results refused"].strip() == "4"
