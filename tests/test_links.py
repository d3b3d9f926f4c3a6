"""The URL filter: verdicts, counters, and a cache that never changes an answer."""

from __future__ import annotations

from trawl.extract import links
from trawl.extract.links import LinkFilter
from trawl.extract.scope import Scope
from trawl.extract.urls import DEFAULT_RULES, url_hash
from trawl.store.values import CommitBatch, NewURL


def make_filter() -> LinkFilter:
    return LinkFilter(Scope(["http://www.site.test/"]), DEFAULT_RULES)


def test_relative_links_resolve_against_each_page() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    first = link_filter.candidate("next.html", "http://www.site.test/a/", 1, batch)
    second = link_filter.candidate("next.html", "http://www.site.test/b/", 1, batch)
    assert first is not None
    assert second is not None
    assert (first.url, second.url) == ("http://www.site.test/a/next.html",
                                       "http://www.site.test/b/next.html")  # fmt: skip
    assert first.id == url_hash(first.url)
    assert first.host == "www.site.test"


def test_every_rejection_is_counted_each_time() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    for base in ("http://www.site.test/1", "http://www.site.test/2"):
        assert link_filter.candidate("mailto:x@y.test", base, 1, batch) is None
        assert link_filter.candidate("http://other.test/", base, 1, batch) is None
    assert batch.counters == {"invalid": 2, "invalid:scheme": 2, "off_scope": 2}


def test_repeated_hrefs_on_a_page_count_as_duplicates() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    found = link_filter.page_links(
        ["/a", "/b", "/a", "/a", "#top"], "http://www.site.test/", 1, batch
    )
    assert [c.url for c in found] == ["http://www.site.test/a", "http://www.site.test/b",
                                      "http://www.site.test/"]  # fmt: skip
    assert (batch.counters["links"], batch.counters["duplicates"]) == (5, 2)


def test_a_pages_links_are_whole_new_urls_without_a_label() -> None:
    found = make_filter().page_links(["/a"], "http://www.site.test/", 1, CommitBatch())
    assert found == [NewURL(url_hash("http://www.site.test/a"), "http://www.site.test/a",
                            "www.site.test", 1)]  # fmt: skip
    assert found[0].label is None


def test_cache_stays_bounded_and_answers_stay_right() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    size = links.CACHE_SIZE
    for i in range(size + 10):
        candidate = link_filter.candidate(f"http://www.site.test/p{i}", None, 0, batch)
        assert candidate is not None
        assert candidate.url == f"http://www.site.test/p{i}"
    assert link_filter.cached <= size
    again = link_filter.candidate("http://www.site.test/p0", None, 0, batch)
    assert again is not None
    assert again.url == "http://www.site.test/p0"


def test_query_and_fragment_hrefs_are_resolved_against_the_whole_page() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    urls = []
    for page in ("http://www.site.test/d/a.html", "http://www.site.test/d/b.html"):
        for href in ("?page=2", "\x01?page=3", "x.html", ""):
            candidate = link_filter.candidate(href, page, 1, batch)
            assert candidate is not None
            urls.append(candidate.url)
    assert urls == [
        "http://www.site.test/d/a.html?page=2", "http://www.site.test/d/a.html?page=3",
        "http://www.site.test/d/x.html", "http://www.site.test/d/a.html",
        "http://www.site.test/d/b.html?page=2", "http://www.site.test/d/b.html?page=3",
        "http://www.site.test/d/x.html", "http://www.site.test/d/b.html",
    ]  # fmt: skip


def test_scheme_relative_and_upper_case_hrefs_keep_their_page_meaning_when_cached() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    urls: list[str | None] = []
    for page in ("http://www.site.test/a/", "https://www.site.test/b/", "http://www.site.test/c/"):
        for href in ("//www.site.test/x", "HTTP://WWW.SITE.TEST/y", "http:z", "../up"):
            candidate = link_filter.candidate(href, page, 1, batch)
            urls.append(None if candidate is None else candidate.url)
    # "http:z" is relative on an http page but names host z from an https one.
    assert urls == [
        "http://www.site.test/x", "http://www.site.test/y",
        "http://www.site.test/a/z", "http://www.site.test/up",
        "https://www.site.test/x", "http://www.site.test/y",
        None, "https://www.site.test/up",
        "http://www.site.test/x", "http://www.site.test/y",
        "http://www.site.test/c/z", "http://www.site.test/up",
    ]  # fmt: skip


def test_links_deeper_than_max_depth_are_counted_not_returned() -> None:
    link_filter = LinkFilter(Scope(["http://www.site.test/"]), DEFAULT_RULES, max_depth=2)
    batch = CommitBatch()
    hrefs = ["/a", "/b", "mailto:x@y.test", "http://other.test/"]
    at_limit = link_filter.page_links(hrefs, "http://www.site.test/", 2, batch)
    assert [c.url for c in at_limit] == ["http://www.site.test/a", "http://www.site.test/b"]
    assert "too_deep" not in batch.counters
    # The same links one hop further: the in-scope ones are too deep, the rest keep
    # their own reasons.
    assert link_filter.page_links(hrefs, "http://www.site.test/", 3, batch) == []
    assert batch.counters["too_deep"] == 2
    assert batch.counters["invalid:scheme"] == 2
    assert batch.counters["off_scope"] == 2


def test_the_default_depth_limit_is_fifteen_hops() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    assert link_filter.candidate("/x", "http://www.site.test/", 15, batch) is not None
    assert link_filter.candidate("/x", "http://www.site.test/", 16, batch) is None
    assert batch.counters == {"too_deep": 1}


def test_trap_paths_are_counted_by_reason() -> None:
    link_filter, batch = make_filter(), CommitBatch()
    page = "http://www.site.test/loop/a/a/"
    assert link_filter.candidate("a/", page, 3, batch) is None
    assert link_filter.candidate("/" + "d/" * 40, page, 3, batch) is None
    assert batch.counters == {
        "invalid": 2, "invalid:repeated_path": 1, "invalid:deep_path": 1,
    }  # fmt: skip
