"""Sitemap conformance: the sitemaps.org examples and crawler-commons' parser cases.

Every document is parsed and must give exactly the URLs (or child sitemaps) expected, in
order, with their ``lastmod`` and ``priority`` (``changefreq`` is not kept: trawl learns
how often a page changes from its own fetches, and neither is a feed's own date). Where
trawl deliberately differs from the lenient reference parser, the case (or the one URL)
is listed with the reason and its own assertion, and the test checks that the lists name
only real cases.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.freshness.sitemap_parser import (
    MAX_BYTES,
    MAX_URLS,
    Sitemap,
    SitemapError,
    SitemapKind,
    parse_sitemap,
)
from trawl.freshness.sitemaps import may_list

DATA = Path(__file__).parent / "data" / "conformance"
SPEC: dict[str, Any] = json.loads((DATA / "sitemaps.json").read_text(encoding="utf-8"))
DOCUMENTS: list[dict[str, Any]] = [*SPEC["sitemaps_org_examples"], *SPEC["crawler_commons_cases"]]
KINDS = {
    "urlset": SitemapKind.URLSET,
    "sitemapindex": SitemapKind.INDEX,
    "text": SitemapKind.TEXT,
    "rss": SitemapKind.RSS,
    "atom": SitemapKind.ATOM,
}

DELIBERATE_DIFFERENCES: dict[str, str] = {
    "cc-truncated": (
        "XML that breaks anywhere refuses the whole file: what trawl takes from a site "
        "must not depend on where a transfer or a generator stopped."
    ),
}
URLS_NOT_TAKEN: dict[str, str] = {
    "https://www.example.com/guid.html": (
        'An RSS item without a <link> is skipped: its <guid> (here isPermaLink="false") '
        "identifies the item and is not an address to crawl."
    ),
}


def _when(written: str) -> float:
    """A date as written in the vectors (W3C Datetime, no zone read as UTC, or an RSS
    date), as a POSIX timestamp."""
    try:
        moment = datetime.fromisoformat(written.replace("Z", "+00:00"))
    except ValueError:
        moment = parsedate_to_datetime(written)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _lastmod(item: dict[str, Any]) -> float | None:
    if "lastmod_epoch_ms" in item:
        epoch_ms: int | None = item["lastmod_epoch_ms"]
        return None if epoch_ms is None else epoch_ms / 1000
    return _when(item["lastmod"]) if "lastmod" in item else None


def _listed(case: dict[str, Any]) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] | None = case.get("expected_urls", case.get("expected_sitemaps"))
    assert listed is not None, case["id"]
    return listed


def _expected(case: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    return [
        (item["loc"], _lastmod(item), float(item["priority"]) if "priority" in item else None)
        for item in _listed(case)
        if item["loc"] not in URLS_NOT_TAKEN
    ]


PARSED = [c for c in DOCUMENTS if c["kind"] in KINDS and c["id"] not in DELIBERATE_DIFFERENCES]


@pytest.mark.parametrize("case", PARSED, ids=[c["id"] for c in PARSED])
def test_document_gives_the_expected_entries(case: dict[str, Any]) -> None:
    parsed = parse_sitemap(case["content"].encode("utf-8"))
    assert isinstance(parsed, Sitemap), parsed
    assert parsed.kind is KINDS[case["kind"]]
    got = [(e.loc, e.lastmod, e.priority) for e in parsed.entries]
    assert got == _expected(case), case["basis"]


def test_deliberate_differences_name_real_cases() -> None:
    assert set(DELIBERATE_DIFFERENCES) <= {c["id"] for c in DOCUMENTS}
    library_specific = {i["loc"] for c in DOCUMENTS for i in _listed(c) if "library_specific" in i}
    assert set(URLS_NOT_TAKEN) == library_specific


def test_truncated_xml_is_refused_whole() -> None:
    (case,) = [c for c in DOCUMENTS if c["id"] == "cc-truncated"]
    assert parse_sitemap(case["content"].encode("utf-8")) is SitemapError.MALFORMED
    # Its one URL would be refused anyway: it is outside the sitemap's directory.
    (listed,) = case["expected_urls"]
    assert may_list(case["sitemap_url"], listed["loc"]) is listed["valid_for_sitemap_location"]


RULE = SPEC["sitemaps_org_location_rule"]
LOCATION_CASES: list[tuple[str, str, bool]] = [
    *((RULE["sitemap_url"], url, True) for url in RULE["valid"]),
    *((RULE["sitemap_url"], url, False) for url in RULE["invalid"]),
    # The rule's own note: no URL of another host, a subdomain included.
    ("http://www.example.com/sitemap.xml", "http://subdomain.example.com/", False),
    *((c["sitemap_url"], c["url"], c["valid"]) for c in SPEC["crawler_commons_location_cases"]),
]


@pytest.mark.parametrize(
    ("sitemap", "url", "valid"), LOCATION_CASES, ids=[f"{u}-from-{s}" for s, u, _ in LOCATION_CASES]
)
def test_location_rule(sitemap: str, url: str, valid: bool) -> None:
    assert may_list(sitemap, url) is valid


def test_a_sitemap_robots_txt_names_may_list_that_hosts_urls() -> None:
    # Cross-submission: www.example.com's robots.txt names a sitemap kept elsewhere.
    sitemap, root = "http://maps.example.net/www/sitemap.xml", "http://www.example.com/"
    assert may_list(sitemap, "http://www.example.com/any/page", root)
    assert may_list(sitemap, "http://maps.example.net/www/own", root)
    assert not may_list(sitemap, "https://www.example.com/any/page", root)
    assert not may_list(sitemap, "http://maps.example.net/other", root)
    assert not may_list(sitemap, "http://www.example.com.evil.test/", root)
    assert not may_list("http://www.example.com:8080/sitemap.xml", "http://www.example.com/")


def test_the_protocol_limits_are_trawls() -> None:
    facts = SPEC["sitemaps_org_facts"]
    assert "at most 50,000 URLs" in facts["limits"]
    assert f"({MAX_BYTES:,} bytes)" in facts["limits"]
    assert MAX_URLS == 50_000
