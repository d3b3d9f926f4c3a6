"""Shared fixtures for the end-to-end tests: run a whole crawl against a live test site.

The `crawl` fixture runs trawl in-process against a `SiteServer` on loopback, with fast
politeness and retry settings unless a test asks for others, and returns the summary
together with every row of the store's ``urls`` table. `page_requests` reads the
server's log in ground-truth spelling, so a duplicate GET shows up however it was spelt.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

import trawl
from trawl.config import (
    Breaker,
    CrawlConfig,
    Freshness,
    IPNetwork,
    LeasePolicy,
    Limits,
    Politeness,
    RenderConfig,
    ScopeConfig,
    TextFormat,
    Timeouts,
)
from trawl.crawl.runner import build_engine
from trawl.demo import Site, SiteServer, canonical_url, route_key
from trawl.demo.server import LoopbackServer
from trawl.events.target import EventsTarget
from trawl.extract.soft404 import PROBE_PREFIX
from trawl.fetch.fetcher import Fetcher, Recorder
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.proxy import Proxy
from trawl.fetch.resolver import GuardedResolver
from trawl.fetch.retry import RetryPolicy
from trawl.ops.summary import Summary
from trawl.sites.rules import Sites
from trawl.store.location import StoreLocation
from trawl.store.sqlite.store import DB_NAME
from trawl.store.values import State


def _source(so: Path) -> Path:
    """The source a compiled module of trawl was built from: its Python module, or the
    C file of a module written in C (setup.py's ``WRITTEN_IN_C``)."""
    python = so.with_name(f"{so.name.partition('.')[0]}.py")
    return python if python.exists() else python.with_suffix(".c")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test a build that is not the source: trawl's mypyc-compiled modules
    (setup.py) must exist, unless ``TRAWL_PURE`` asks for the plain-Python build, and be
    newer than every source they were compiled with (an editable install imports a
    compiled module in place of its source, so an edit without ``make setup`` would
    otherwise go untested)."""
    package = Path(trawl.__file__).parent
    compiled = sorted(package.rglob("*.so"))
    if os.environ.get("TRAWL_PURE"):
        if compiled:
            raise pytest.UsageError("TRAWL_PURE is set but compiled modules exist: make clean")
        return
    if not compiled:
        raise pytest.UsageError("trawl is not compiled: run make setup (or set TRAWL_PURE=1)")
    # The modules are shims: the code of all of them is one library beside the package,
    # rebuilt whenever any of them changes.
    library = sorted(package.parent.glob("trawl__mypyc.*.so"))
    if not library:
        raise pytest.UsageError("trawl's compiled library is missing: run make setup")
    sources = [_source(so) for so in compiled]
    built = min(library[0].stat().st_mtime, *(so.stat().st_mtime for so in compiled))
    stale = [source.name for source in sources if source.stat().st_mtime > built]
    if stale:
        raise pytest.UsageError(f"{', '.join(stale)} changed since compiled: run make setup")


FAST = Politeness(delay=0.0, response_factor=0.0)
"""No politeness delay at all: tests that measure delays ask for them explicitly."""

FAST_RETRY = RetryPolicy(base=0.05, cap=1.0, attempts=3)
"""Short back-offs so failing URLs settle within a second."""


@dataclass(frozen=True, slots=True)
class UrlRow:
    """One row of the store's ``urls`` table."""

    url: str
    state: State
    status: int | None
    content_type: str | None
    length: int | None
    error: str | None
    truncated: bool
    attempts: int
    redirect_to: str | None
    redirect_hops: int
    depth: int


@dataclass(frozen=True, slots=True)
class CrawlOutcome:
    """What a finished crawl left behind: its summary and its stored URLs by URL."""

    summary: Summary
    rows: Mapping[str, UrlRow]
    data_dir: Path

    def in_state(self, state: State) -> set[str]:
        """The stored URLs in ``state``."""
        return {url for url, row in self.rows.items() if row.state is state}


ROW_QUERY = (
    "SELECT url, state, status, content_type, length, error, truncated, attempts, "
    "redirect_to, redirect_hops, depth FROM urls"
)


def read_rows(data_dir: Path, store: StoreLocation | None = None) -> dict[str, UrlRow]:
    """Every stored URL of the crawl in ``data_dir``, or at ``store``."""
    if store is not None and store.dsn is not None:
        with psycopg.connect(store.dsn) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
            rows = conn.execute(ROW_QUERY).fetchall()
    else:
        with sqlite3.connect(data_dir / DB_NAME) as db:
            rows = db.execute(ROW_QUERY).fetchall()
    return {
        row[0]: UrlRow(
            url=row[0],
            state=State(row[1]),
            status=row[2],
            content_type=row[3],
            length=row[4],
            error=row[5],
            truncated=bool(row[6]),
            attempts=row[7],
            redirect_to=row[8],
            redirect_hops=row[9],
            depth=row[10],
        )
        for row in rows
    }


class CrawlRunner:
    """Runs one crawl of a served site into a fresh data dir."""

    def __init__(self, base_dir: Path) -> None:
        self._base_dir = base_dir
        self._runs = 0

    async def __call__(
        self,
        server: SiteServer,
        *,
        politeness: Politeness = FAST,
        limits: Limits | None = None,
        retry: RetryPolicy = FAST_RETRY,
        breaker: Breaker | None = None,
        timeouts: Timeouts | None = None,
        concurrency: int = 64,
        scope: ScopeConfig | None = None,
        honour_nofollow: bool = True,
        soft_404: bool = True,
        data_dir: Path | None = None,
        expect_state: str = "done",
        parse_workers: int = 0,
        allow_networks: tuple[IPNetwork, ...] | None = None,
        extra_resolve: Mapping[str, str] | None = None,
        warc: bool = False,
        text: bool = False,
        text_near_duplicates: bool = True,
        text_format: TextFormat = "text",
        events: EventsTarget | None = None,
        store: StoreLocation | None = None,
        freshness: Freshness | None = None,
        render: RenderConfig | None = None,
        sites: Sites | None = None,
        proxy: Proxy | None = None,
        leases: LeasePolicy | None = None,
    ) -> CrawlOutcome:
        """Crawl ``server.site`` from its seeds; every host maps to loopback.

        A given ``data_dir`` resumes the crawl stored there; the run must end in
        ``expect_state``. ``allow_networks`` replaces the server's loopback range;
        ``extra_resolve`` maps more host names.
        """
        self._runs += 1
        data_dir = data_dir or self._base_dir / f"crawl-{self._runs}"
        config = CrawlConfig(
            seeds=server.site.seeds,
            data_dir=data_dir,
            resolve={**server.resolve_map(), **(extra_resolve or {})},
            allow_networks=server.allow_networks() if allow_networks is None else allow_networks,
            politeness=politeness,
            limits=limits or Limits(),
            retry=retry,
            breaker=breaker or Breaker(),
            timeouts=timeouts or Timeouts(connect=2.0, total=10.0),
            concurrency=concurrency,
            scope=scope or ScopeConfig(),
            honour_nofollow=honour_nofollow,
            soft_404=soft_404,
            parse_workers=parse_workers,
            rng_seed=1,
            warc=warc,
            text=text,
            text_near_duplicates=text_near_duplicates,
            text_format=text_format,
            events=events,
            store=store,
            freshness=freshness or Freshness(),
            render=render or RenderConfig(),
            sites=sites or Sites(),
            proxy=proxy,
            leases=leases or LeasePolicy(),
        )
        async with build_engine(config) as crawler:
            summary = await crawler.run()
        assert summary.state == expect_state
        return CrawlOutcome(summary=summary, rows=read_rows(data_dir, store), data_dir=data_dir)


@pytest.fixture
def crawl(tmp_path: Path) -> CrawlRunner:
    """A crawl runner writing its stores under the test's temporary directory."""
    return CrawlRunner(tmp_path)


def is_page(path: str) -> bool:
    """False for the requests a crawler makes of its own accord: robots.txt and the
    soft-404 probe."""
    return path != "/robots.txt" and not path.startswith(PROBE_PREFIX)


def page_requests(server: SiteServer) -> Counter[str]:
    """How often each page was requested (see `is_page`), in ground-truth spelling."""
    site = server.site
    return Counter(
        canonical_url(site.url(record.host, record.path))
        for record in server.requests
        if is_page(record.path)
    )


def robots_requests(server: SiteServer) -> Counter[str]:
    """How often each host's robots.txt was requested."""
    return Counter(record.host for record in server.requests if record.path == "/robots.txt")


def expected_hits(site: Site, url: str) -> int:
    """How many GETs a correct crawl sends for ``url``: one per scripted answer (a 503
    answered before the page makes two), one for a URL the site does not know."""
    parts = urlsplit(url)
    route = site.routes.get(
        route_key(parts.netloc, parts.path + (f"?{parts.query}" * bool(parts.query)))
    )
    return len(route.responses) if route else 1


def loopback_fetcher(
    server: LoopbackServer,
    *,
    timeouts: Timeouts,
    max_body: int,
    user_agent: str = "trawl/0 (test)",
    recorder: Recorder | None = None,
) -> Fetcher:
    """A fetcher that resolves ``server``'s names and may connect to it."""
    return Fetcher(
        user_agent=user_agent,
        timeouts=timeouts,
        max_body=max_body,
        resolver=GuardedResolver(
            AddressPolicy(server.allow_networks()), overrides=server.resolve_map()
        ),
        recorder=recorder,
    )
