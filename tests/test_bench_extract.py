"""bench.extract: the parser and the URL filter timed on the crawl benchmark's pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.crawl import DEFAULT_PORT
from bench.extract import main, measure, site_pages
from bench.site import SiteParams, ensure_site


def test_every_page_file_the_crawl_fetches_is_measured(tmp_path: Path) -> None:
    site, truth = ensure_site(SiteParams(2, 30, DEFAULT_PORT), tmp_path)
    pages = site_pages(site, truth)
    urls = [url for url, _ in pages]
    assert set(urls) <= truth.fetched
    assert len(urls) > 40  # the two hosts' pages, less their redirects and 404s
    assert all(body.lstrip().lower().startswith(b"<!doctype html") for _, body in pages)


def test_runs_yield_the_same_in_scope_candidates(tmp_path: Path) -> None:
    count, runs = measure(2, 30, runs=2, work_dir=tmp_path)
    first, second = runs
    assert first.candidates == second.candidates
    assert count > 40
    assert first.links > 10 * count  # tens of links a page
    assert 0 < len(first.candidates) < first.links  # off-scope, invalid and repeats dropped
    assert min(first.extract, first.parse, first.filter) > 0


def test_the_figures_are_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--hosts", "2", "--pages", "20", "--runs", "2", "--work-dir", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split()[:2] == ["run", "stage"]
    assert [line.split()[0] for line in lines[1:4]] == ["1", "2", "median"]
    assert all(float(x) > 0 for x in lines[3].split()[1:])
    assert "candidates" in lines[4]


def test_bad_counts_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--runs", "0"])
    assert exit_.value.code == 2
    assert "must be positive" in capsys.readouterr().err
