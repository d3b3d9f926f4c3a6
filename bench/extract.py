"""Extract-stage benchmark: the parser and the URL filter on the crawl benchmark's pages.

Every page of a generated site (bench.site) that the crawl fetches and that is a file
goes, with the URL the crawl fetches it at, through one `Extractor` in this process, the
work an extract worker does for each page. Each run takes a fresh `Extractor` (so its
caches start empty, as a crawl's do), then times the parse alone and the URL filter alone
on the parsed links, and prints this process's CPU time per page for the three, and per
link for the filter. Nothing is served or fetched.

    python -m bench.extract [--hosts 20] [--pages 500] [--runs 3]

Every run must yield the same candidates as the first, or the exit status is 1. To
measure another build (say, the plain-Python one of another checkout), run it with
``PYTHONPATH=<checkout>/src``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.crawl import DEFAULT_PORT, default_work_dir
from bench.site import GroundTruth, SiteParams, ensure_site
from trawl.config import Limits, ScopeConfig
from trawl.extract.links import LinkFilter
from trawl.extract.parser import ParsedPage, parse_html
from trawl.extract.pool import Extractor, ExtractSettings
from trawl.extract.scope import Scope
from trawl.extract.urls import DEFAULT_RULES
from trawl.store.values import CommitBatch

AGENT = "trawl"


@dataclass(frozen=True, slots=True)
class Run:
    """One pass over the pages: CPU seconds of each part, and what it yielded."""

    extract: float
    parse: float
    filter: float
    links: int
    candidates: tuple[int, ...]
    """Candidate ids of every page, in order, for comparing runs."""


def site_pages(site: Path, truth: GroundTruth) -> list[tuple[str, bytes]]:
    """(URL, body) of every fetched URL that is a page file (not a redirect or a 404)."""
    pages: list[tuple[str, bytes]] = []
    for url in sorted(truth.fetched):
        parts = urlsplit(url)
        path = parts.path + ("index.html" if parts.path.endswith("/") else "")
        file = site / "hosts" / (parts.hostname or "") / path.lstrip("/")
        if file.is_file():
            pages.append((url, file.read_bytes()))
    return pages


def _parse(body: bytes, settings: ExtractSettings) -> ParsedPage:
    """The page parsed as `Extractor.extract` parses it."""
    return parse_html(
        body, agent_token=settings.agent, honour_nofollow=settings.honour_nofollow,
        max_links=settings.max_links,
    )  # fmt: skip


def measure_run(settings: ExtractSettings, pages: Sequence[tuple[str, bytes]]) -> Run:
    """The whole stage, then the parse alone, then the filter alone (fresh caches)."""
    clock = time.process_time
    extractor = Extractor(settings)
    started = clock()
    found = [extractor.extract(url, 1, body, "text/html", ()) for url, body in pages]
    extract = clock() - started
    started = clock()
    parsed = [_parse(body, settings) for _, body in pages]
    parse = clock() - started
    links = LinkFilter(Scope(settings.seeds), settings.rules, settings.max_depth)
    started = clock()
    for (url, _), page in zip(pages, parsed, strict=True):
        links.page_links(page.links, url, 1, CommitBatch())
    filtered = clock() - started
    ids = tuple(link.id for page in found for link in page.links)
    return Run(extract, parse, filtered, sum(len(p.links) for p in parsed), ids)


def measure(
    hosts: int, pages: int, runs: int, work_dir: Path | None = None
) -> tuple[int, list[Run]]:
    """The number of page files of the ``hosts`` x ``pages`` site, and ``runs`` passes
    over them."""
    site, truth = ensure_site(
        SiteParams(hosts, pages, DEFAULT_PORT), work_dir or default_work_dir()
    )
    settings = ExtractSettings(
        seeds=truth.seeds, scope=ScopeConfig(), rules=DEFAULT_RULES, agent=AGENT,
        honour_nofollow=True, max_links=Limits().max_links,
    )  # fmt: skip
    bodies = site_pages(site, truth)
    return len(bodies), [measure_run(settings, bodies) for _ in range(runs)]


def _row(name: str, pages: int, extract: float, parse: float, filtered: float, links: int) -> str:
    per_page = " ".join(f"{1e3 * seconds / pages:>10.3f}" for seconds in (extract, parse, filtered))
    return f"{name:<8} {per_page} {1e6 * filtered / max(links, 1):>12.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.extract", description=__doc__)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=500, help="pages per host")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=None, help="where sites are cached")
    args = parser.parse_args(argv)
    for name in ("hosts", "pages", "runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be positive")
    pages, runs = measure(args.hosts, args.pages, args.runs, args.work_dir)
    if not pages:
        print("the site has no page files", file=sys.stderr)
        return 1
    first = runs[0]
    print(f"{'run':<8} {'stage ms':>10} {'parse ms':>10} {'filter ms':>10} {'filter us':>12}")
    for number, run in enumerate(runs, 1):
        print(_row(str(number), pages, run.extract, run.parse, run.filter, run.links))
    extract = statistics.median(run.extract for run in runs)
    parse = statistics.median(run.parse for run in runs)
    filtered = statistics.median(run.filter for run in runs)
    print(_row("median", pages, extract, parse, filtered, first.links))
    print(
        f"{pages} pages, {first.links} links, {len(first.candidates)} candidates "
        "(CPU ms a page; the filter's us a link)"
    )
    if any(run.candidates != first.candidates for run in runs[1:]):
        print("runs disagree on the candidates", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
