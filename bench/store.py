"""Store-scale benchmark: synthetic links through filter, seen-set, store and frontier.

Nothing is fetched. A seeded generator makes "pages" of links the way a crawl meets
them: navigation links and popular pages that are already known, tracking-parameter,
fragment and upper-case-host variants of known pages, off-scope and non-http links, and
a minority of new pages on the same or other hosts, under many subdomains of one
registrable domain. Every page goes through the stages the engine uses:

    LinkFilter.page_links -> InlinkCounter.observe -> SeenSet.filter_new
        -> SQLiteStore.commit -> Frontier.refill

Pages are merged into transactions of ``--batch`` pages (as the committer's group
commit does), each page carrying the DONE outcome of a URL the frontier claimed, so the
outcome update, the inserts and the frontier index all see crawl-like traffic.

As in a crawl, the URL filter runs in a child process (the generator with it) while this
process runs the seen-set, the store and the frontier, so the two cores share the work
(``--workers 1``, the default). ``--workers 0`` runs every stage here, one after the
other, so each stage's time is measured alone.

    python -m bench.store --urls 10000000 [--links-per-page 50] [--workers 0|1]

The run stops once the generator has produced ``--urls`` distinct in-scope URLs; the
store's ``discovered`` count must then equal that number exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TextIO

from bench.procstat import TICKS, read_stat
from trawl.config import Politeness
from trawl.crawl.gc_tuning import young_gc_threshold
from trawl.extract.links import LinkFilter
from trawl.extract.scope import Scope
from trawl.extract.urls import DEFAULT_RULES
from trawl.freshness.recrawl import RecrawlPolicy, revisit
from trawl.frontier.inlinks import InlinkCounter
from trawl.frontier.queue import Frontier
from trawl.frontier.seen import SeenSet
from trawl.politeness.scheduler import HostScheduler
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import CommitBatch, NewURL, Outcome, QueuedURL, State

DOMAIN = "example.com"
NAV_LINKS = 20
_OFF_SCOPE = (
    "https://www.facebook.com/sharer/sharer.php?u=https%3A%2F%2Fexample.com%2F",
    "https://twitter.com/intent/tweet?text=read",
    "https://cdn{n}.static-assets.net/js/app.{n}.js",
    "mailto:info@example.com",
    "javascript:void(0)",
    "tel:+15550100",
)


def page_path(k: int) -> str:
    """The normalised path (and query) of page ``k`` of a host: five URL shapes."""
    shape = k % 5
    if shape == 0:
        return f"/articles/{k}"
    if shape == 1:
        return f"/category/c{k % 37}/item-{k}.html"
    if shape == 2:
        return f"/search?page={k % 9}&q=term{k}"
    if shape == 3:
        return f"/products/{k}?color=c{k % 7}&size={k % 5}"
    return f"/blog/{2000 + k % 25}/{k % 12 + 1:02d}/post-{k}/"


def host_name(n: int) -> str:
    """The name of in-scope host ``n``."""
    return f"h{n}.{DOMAIN}"


def canonical_url(n: int, k: int) -> str:
    """The normalised URL of page ``k`` on host ``n`` (what the store must hold)."""
    return f"https://{host_name(n)}{page_path(k)}"


def _variant(n: int, k: int, choice: int) -> str:
    """A spelling of page ``k`` on host ``n`` that normalises to its canonical URL."""
    path = page_path(k)
    if choice == 0:
        return f"https://{host_name(n).upper()}{path}"
    if choice == 1:
        return f"https://{host_name(n)}{path}#section-{k % 4}"
    if choice == 2:
        glue = "&" if "?" in path else "?"
        return f"https://{host_name(n)}{path}{glue}utm_source=feed&utm_medium=rss&gclid=Cj0K{k}"
    if k % 5 == 2:
        return f"https://{host_name(n)}/search?q=term{k}&page={k % 9}&fbclid=IwAR{k}"
    glue = "&" if "?" in path else "?"
    return f"https://{host_name(n)}{path}{glue}utm_campaign=spring&_ga=2.1{k}"


@dataclass(frozen=True, slots=True)
class Mix:
    """How many links of each kind a page has."""

    nav: int
    popular: int
    variants: int
    off_scope: int
    new: int

    @classmethod
    def for_page(cls, links: int) -> Mix:
        """The default mix (24 % new) scaled to ``links`` links per page."""
        new = max(1, round(links * 0.24))
        variants = round(links * 0.08)
        off_scope = round(links * 0.08)
        nav = min(NAV_LINKS, round(links * 0.40))
        popular = max(0, links - new - variants - off_scope - nav)
        return cls(nav, popular, variants, off_scope, new)


@dataclass(frozen=True, slots=True)
class Page:
    """One synthetic page: its URL, its hrefs, and what each href denotes.

    ``truth[i]`` is the canonical URL ``hrefs[i]`` must normalise to, or ``None`` when
    the href is off scope or not http(s). The ground truth never uses trawl's code.
    """

    base: str
    depth: int
    hrefs: list[str]
    truth: list[str | None]


@dataclass(slots=True)
class SyntheticWeb:
    """Deterministic page generator; ``distinct`` counts the in-scope URLs made so far.

    Host ``n`` has pages ``0 .. created[n] - 1``; a link either names one of those (a
    duplicate) or page ``created[n]`` (new). So ``distinct == sum(created)`` exactly.
    """

    hosts: int
    mix: Mix
    seed: int = 1
    rng: random.Random = field(init=False)
    created: list[int] = field(init=False)
    active: list[int] = field(init=False)
    distinct: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.created = [0] * self.hosts
        self.active = [0]

    def _new(self, n: int) -> int:
        k = self.created[n]
        if k == 0 and n != 0:
            self.active.append(n)
        self.created[n] = k + 1
        self.distinct += 1
        return k

    def _known(self, n: int) -> int:
        return int(self.created[n] * self.rng.random() ** 3)

    def pages(self, target: int) -> Iterator[Page]:
        """Pages until ``target`` distinct in-scope URLs exist."""
        rng, mix = self.rng, self.mix
        while self.distinct < target:
            m = self.active[rng.randrange(len(self.active))]
            k = self._known(m) if self.created[m] else 0
            hrefs: list[str] = []
            truth: list[str | None] = []
            for j in range(min(mix.nav, self.created[m])):
                hrefs.append(page_path(j))
                truth.append(canonical_url(m, j))
            for _ in range(mix.popular + mix.nav - min(mix.nav, self.created[m])):
                n = m if rng.random() < 0.8 else self.active[rng.randrange(len(self.active))]
                if self.created[n]:
                    j = self._known(n)
                    hrefs.append(page_path(j) if n == m else canonical_url(n, j))
                    truth.append(canonical_url(n, j))
            for _ in range(mix.variants):
                n = m if rng.random() < 0.7 else self.active[rng.randrange(len(self.active))]
                if self.created[n]:
                    j = self._known(n)
                    hrefs.append(_variant(n, j, rng.randrange(4)))
                    truth.append(canonical_url(n, j))
            for _ in range(mix.off_scope):
                hrefs.append(_OFF_SCOPE[rng.randrange(len(_OFF_SCOPE))].format(n=rng.randrange(50)))
                truth.append(None)
            for _ in range(mix.new):
                if self.distinct >= target:
                    break
                n = m if rng.random() < 0.7 else rng.randrange(self.hosts)
                j = self._new(n)
                hrefs.append(page_path(j) if n == m else canonical_url(n, j))
                truth.append(canonical_url(n, j))
            yield Page(canonical_url(m, k), 1 + k % 7, hrefs, truth)


def rss_bytes(field_name: str = "VmRSS") -> int:
    """Resident set size (``VmRSS``) or its peak (``VmHWM``) of this process, in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds() -> tuple[float, float]:
    """User and system CPU seconds this process has used so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def thread_cpu_seconds() -> dict[str, tuple[float, float]]:
    """User and system CPU seconds of each live thread of this process, by thread name."""
    seconds: dict[str, tuple[float, float]] = {}
    for thread in threading.enumerate():
        stat = read_stat(f"/proc/self/task/{thread.native_id}/stat")
        if stat is not None:
            seconds[thread.name] = (stat[1] / TICKS, stat[2] / TICKS)
    return seconds


def _since(now: tuple[float, float], before: tuple[float, float]) -> tuple[float, float]:
    """User and system CPU seconds used between two readings."""
    return now[0] - before[0], now[1] - before[1]


def _user_system(name: str, seconds: tuple[float, float]) -> str:
    return f"{name} {seconds[0]:.1f} + {seconds[1]:.1f}"


def _cpu(cpu: dict[str, tuple[float, float]], workers: int) -> str:
    """The processes' CPU seconds as "user + system" each."""
    names = {"store": "this process", "child": "the child"} if workers else {"store": "all"}
    return ", ".join(_user_system(names[name], seconds) for name, seconds in cpu.items())


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


@dataclass(slots=True)
class Figures:
    """What a run measured; printed as it goes and at the end."""

    known: int = 0
    links: int = 0
    pages: int = 0
    discovered: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    rss_at_1m: int | None = None
    rss_at_end: int = 0
    peak_rss: int = 0
    filter_peak_rss: int = 0
    """The child's peak RSS (``ChildTotals.peak_rss``; 0 without a child)."""
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    """User and system CPU seconds of the run, by process: "store" (this one), "child"."""
    threads: dict[str, tuple[float, float]] = field(default_factory=dict)
    """User and system CPU seconds of the run of this process's threads, by name: the
    main thread (the seen-set pass, claims; with ``--workers 0`` the generator and the
    URL filter too), the store's SQLite thread (commits, look-ups) and its checkpoint
    thread."""
    bloom_bytes: int = 0
    db_bytes: int = 0
    last_million_rate: float | None = None
    expected: int = 0
    workers: int = 0
    candidates: int = 0
    lookups: int = 0
    boosts: int = 0
    """In-link levels reached (trawl.frontier.inlinks): each a row update in the commit."""

    def add_time(self, stage: str, seconds: float) -> None:
        """Charge ``seconds`` to ``stage``."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds


def hosts_for(urls: int) -> int:
    """How many in-scope hosts a run of ``urls`` URLs spreads over (about 2,000 URLs each)."""
    return max(10, min(5000, urls // 2000))


@dataclass(slots=True)
class Produced:
    """A batch of pages after the URL filter: what the committer would merge."""

    pages: int
    links: int
    new_urls: list[NewURL]
    counters: dict[str, int]


@dataclass(slots=True)
class Producer:
    """The generator and the URL filter, the work a crawl does in its extract workers."""

    urls: int
    links_per_page: int
    seed: int
    batch_pages: int
    web: SyntheticWeb = field(init=False)
    seconds: dict[str, float] = field(default_factory=dict)
    child: ChildTotals | None = None
    """The totals of the child process it ran in (None when it ran in the store's
    process, whose own figures then include it)."""

    def __post_init__(self) -> None:
        self.web = SyntheticWeb(hosts_for(self.urls), Mix.for_page(self.links_per_page), self.seed)

    def batches(self) -> Iterator[Produced]:
        """Filtered pages, ``batch_pages`` at a time, until the generator is done."""
        links = LinkFilter(Scope([f"https://{host_name(0)}/"]), DEFAULT_RULES)
        clock = time.perf_counter
        pages = self.web.pages(self.urls)
        done = False
        while not done:
            batch = CommitBatch()
            count = hrefs = 0
            while count < self.batch_pages:
                t0 = clock()
                page = next(pages, None)
                t1 = clock()
                self._charge("generate", t1 - t0)
                if page is None:
                    done = True
                    break
                batch.new_urls.extend(links.page_links(page.hrefs, page.base, page.depth, batch))
                self._charge("filter", clock() - t1)
                count += 1
                hrefs += len(page.hrefs)
            if count:
                yield Produced(count, hrefs, batch.new_urls, batch.counters)

    def _charge(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds


@dataclass(frozen=True, slots=True)
class ChildTotals:
    """The child process's last message: what it generated, its stages' seconds, its
    peak RSS and its CPU seconds (user, system)."""

    distinct: int
    seconds: dict[str, float]
    peak_rss: int
    cpu: tuple[float, float]


def _produce_into(conn: Connection, producer: Producer) -> None:
    """Child process: send each batch, its links as columns, then its totals
    (:class:`ChildTotals`). It collects garbage as a crawl's extract worker does
    (trawl.crawl.gc_tuning).

    Four flat lists pickle and load faster than one tuple per link (per link: pickling
    0.64 -> 0.43 us here, loading and rebuilding the named tuples 1.65 -> 1.2-1.5 us in
    the parent). Links of pages have no redirect hops, no origin and no label, so those
    three fields are left to their defaults.
    """
    with young_gc_threshold():
        for produced in producer.batches():
            links = produced.new_urls
            columns = (
                [u.id for u in links],
                [u.url for u in links],
                [u.host for u in links],
                [u.depth for u in links],
            )
            conn.send((produced.pages, produced.links, columns, produced.counters))
    conn.send(
        ChildTotals(producer.web.distinct, producer.seconds, rss_bytes("VmHWM"), cpu_seconds())
    )
    conn.close()


def _new_urls(ids: list[int], urls: list[str], hosts: list[str], depths: list[int]) -> list[NewURL]:
    """The links of a batch from their columns. Built with ``tuple.__new__``, because a
    named tuple's own ``__new__`` is a Python function: 0.13 against 0.35 us a link."""
    rows = zip(ids, urls, hosts, depths, repeat(0), repeat(None), repeat(None), strict=False)
    return list(map(tuple.__new__, repeat(NewURL), rows))


def _from_child(producer: Producer) -> tuple[Iterator[Produced], Callable[[], Producer]]:
    """Run ``producer`` in a child process; the batches it sends, and a function that
    returns the producer with the child's totals once they are all read."""
    parent, child = multiprocessing.get_context("spawn").Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(
        target=_produce_into, args=(child, producer), daemon=True
    )
    process.start()
    child.close()
    totals: list[Producer] = []

    def batches() -> Iterator[Produced]:
        while True:
            message = parent.recv()
            if isinstance(message, ChildTotals):
                producer.web.distinct, producer.seconds = message.distinct, message.seconds
                producer.child = message
                totals.append(producer)
                process.join()
                return
            pages, links, columns, counters = message
            yield Produced(pages, links, _new_urls(*columns), counters)

    def finished() -> Producer:
        return totals[0]

    return batches(), finished


async def run(
    urls: int,
    links_per_page: int,
    data_dir: Path,
    *,
    seed: int = 1,
    batch_pages: int = 256,
    report_every: int = 1_000_000,
    workers: int = 1,
    out: TextIO = sys.stdout,
) -> Figures:
    """Push synthetic pages through the stages until ``urls`` URLs are known.

    With ``workers`` = 1 the generator and the URL filter run in a child process, as a
    crawl's extract worker runs the filter, while this process runs the seen-set, the
    store and the frontier; with 0 everything runs here, one stage after the other.
    """
    cpu_at_start = cpu_seconds()
    threads_at_start = thread_cpu_seconds()
    producer = Producer(urls, links_per_page, seed, batch_pages)
    if workers:
        batches, finished = _from_child(producer)
    else:
        batches, finished = producer.batches(), lambda: producer
    figures = Figures()
    clock = time.perf_counter
    async with SQLiteStore(data_dir) as store:
        seen = SeenSet(store, expected_urls=urls, error_rate=0.01)
        inlinks = InlinkCounter()
        policy = RecrawlPolicy()
        scheduler = HostScheduler(Politeness(delay=0.0))
        frontier = Frontier(store, scheduler, capacity=10_000)
        claimed: deque[QueuedURL] = deque()
        started = clock()
        window = (started, 0)
        next_report = report_every
        million_mark: tuple[float, int] | None = None
        for produced in batches:
            t1 = clock()
            pending = CommitBatch(new_urls=produced.new_urls, counters=produced.counters)
            for _ in range(min(produced.pages, len(claimed))):
                url = claimed.popleft()
                # As a crawl's answer: with its change hash and revisit schedule.
                fresh = revisit(policy, url, t1, 200, url.id)
                pending.outcomes.append(
                    Outcome(
                        url.id, url.host_id, State.DONE, 1, status=200, fetched_at=t1,
                        revisit_interval=fresh.interval, due_at=fresh.due_at, change_hash=url.id,
                    )
                )  # fmt: skip
            figures.pages += produced.pages
            figures.links += produced.links
            t2 = clock()
            if pending.new_urls:
                figures.candidates += len(pending.new_urls)
                pending.inlinks = inlinks.observe(pending.new_urls)
                figures.boosts += len(pending.inlinks)
                verdict = await seen.filter_new(pending.new_urls)
                figures.lookups += verdict.store_lookups
                pending.new_urls = verdict.new
                pending.count("duplicates", verdict.duplicates)
                pending.count("hash_collisions", verdict.collisions)
            t3 = clock()
            result = await store.commit(pending)
            t4 = clock()
            figures.add_time("seen", t3 - t2)
            figures.add_time("commit", t4 - t3)
            figures.known += result.inserted
            if len(claimed) < 2 * batch_pages:
                await frontier.refill()
                for slot in scheduler.slots():
                    claimed.extend(scheduler.drain(slot))
                figures.add_time("claim", clock() - t4)
            now = clock()
            if million_mark is None and figures.known >= max(0, urls - 1_000_000):
                million_mark = (now, figures.links)
            if figures.rss_at_1m is None and figures.known >= 1_000_000:
                figures.rss_at_1m = rss_bytes()
            if figures.known >= next_report or figures.known >= urls:
                moving = (figures.links - window[1]) / max(now - window[0], 1e-9)
                overall = figures.links / max(now - started, 1e-9)
                print(
                    f"known {figures.known:>11,}  links {figures.links:>12,}  "
                    f"links/s moving {moving:>9,.0f} overall {overall:>9,.0f}  "
                    f"rss {_mb(rss_bytes())}",
                    file=out,
                    flush=True,
                )
                window = (now, figures.links)
                while next_report <= figures.known:
                    next_report += report_every
        elapsed = clock() - started
        for name, seconds in thread_cpu_seconds().items():
            figures.threads[name] = _since(seconds, threads_at_start.get(name, (0.0, 0.0)))
        done = finished()
        figures.cpu["store"] = _since(cpu_seconds(), cpu_at_start)
        if done.child is not None:
            figures.filter_peak_rss = done.child.peak_rss
            figures.cpu["child"] = done.child.cpu
        for stage in ("generate", "filter"):
            figures.add_time(stage, done.seconds.get(stage, 0.0))
        figures.add_time("total", elapsed)
        figures.expected = done.web.distinct
        figures.workers = workers
        if million_mark is not None:
            span = elapsed - (million_mark[0] - started)
            figures.last_million_rate = (figures.links - million_mark[1]) / max(span, 1e-9)
        figures.discovered = (await store.counters()).get("discovered", 0)
        figures.bloom_bytes = seen.bloom_bytes
        figures.rss_at_end = rss_bytes()
        figures.peak_rss = rss_bytes("VmHWM")
    figures.db_bytes = sum(
        path.stat().st_size
        for path in (data_dir / DB_NAME, data_dir / f"{DB_NAME}-wal")
        if path.exists()
    )
    report(figures, out)
    return figures


def report(figures: Figures, out: TextIO) -> None:
    """Print the end-of-run figures."""
    total = figures.seconds.get("total", 0.0)
    store_time = figures.seconds.get("seen", 0.0) + figures.seconds.get("commit", 0.0)
    lines = [
        f"known URLs            {figures.known:,} (generator: {figures.expected:,}; "
        f"store discovered: {figures.discovered:,})",
        f"pages, links          {figures.pages:,}, {figures.links:,}",
        f"ingest overall        {figures.links / max(total, 1e-9):,.0f} links/s",
        "ingest last 1M known  "
        + (f"{figures.last_million_rate:,.0f} links/s" if figures.last_million_rate else "n/a"),
        f"store stage           {figures.links / max(store_time, 1e-9):,.0f} links/s "
        "(seen-set + commit only)",
        "stage seconds         "
        + ", ".join(f"{name} {value:.1f}" for name, value in figures.seconds.items())
        + (" (generate and filter in a child process, beside the rest)" if figures.workers else ""),
        f"peak RSS              {_mb(figures.peak_rss)}"
        + (" (this process: seen-set, store, frontier)" if figures.workers else ""),
        *(
            [f"peak RSS, URL filter  {_mb(figures.filter_peak_rss)} (the child process)"]
            if figures.filter_peak_rss
            else []
        ),
        f"CPU seconds           {_cpu(figures.cpu, figures.workers)} (user + system); "
        f"{sum(sum(pair) for pair in figures.cpu.values()) / max(total, 1e-9):.2f} of "
        f"{os.cpu_count()} cores busy",
        "CPU by thread         "
        + ", ".join(
            f"{_user_system(name, seconds)} ({sum(seconds) / max(total, 1e-9):.0%})"
            for name, seconds in figures.threads.items()
        )
        + " (this process, each with its share of the run; the store's SQLite thread commits "
        "and looks up, its checkpoint thread copies the log into the database)",
        "RSS at 1M known       "
        + (_mb(figures.rss_at_1m) if figures.rss_at_1m is not None else "n/a"),
        f"RSS at end            {_mb(figures.rss_at_end)} ({figures.known:,} known)",
        f"seen-set RAM          {figures.bloom_bytes / max(figures.known, 1):.2f} bytes/known URL "
        f"(Bloom {_mb(figures.bloom_bytes)})",
        f"seen-set look-ups     {figures.lookups:,} in the store for {figures.candidates:,} "
        "candidates",
        f"in-link levels        {figures.boosts:,} reached (a row update each)",
        f"database on disk      {_mb(figures.db_bytes)} (db + wal)",
    ]
    print("\n".join(lines), file=out, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m bench.store --urls N [--links-per-page L]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__)
    parser.add_argument("--urls", type=int, default=1_000_000, help="known URLs to reach")
    parser.add_argument("--links-per-page", type=int, default=50)
    parser.add_argument("--batch", type=int, default=256, help="pages per transaction")
    parser.add_argument(
        "--workers",
        type=int,
        choices=(0, 1),
        default=1,
        help="1: generate and filter links in a child process, as a crawl's extract worker "
        "does; 0: every stage in this process, one after the other",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report-every", type=int, default=0, help="default: urls / 10")
    parser.add_argument("--data-dir", type=Path, help="default: a temporary directory")
    args = parser.parse_args(argv)
    every = args.report_every or max(1, args.urls // 10)
    with tempfile.TemporaryDirectory(prefix="trawl-bench-") as scratch:
        data_dir = args.data_dir or Path(scratch)
        with young_gc_threshold():  # as in a crawl's process (trawl.crawl.runner)
            asyncio.run(
                run(
                    args.urls,
                    args.links_per_page,
                    data_dir,
                    seed=args.seed,
                    batch_pages=args.batch,
                    report_every=every,
                    workers=args.workers,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
