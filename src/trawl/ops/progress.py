"""How a running crawl shows its progress, from :meth:`Crawler.progress`.

On a terminal, one live line redrawn twice a second (rich), as wide as the terminal
allows: the least needed figures go first as it narrows (`render`). Without one (under
nohup, in CI, in a service's log), one stats line on stderr every ``--stats-interval``
seconds through the ``trawl.stats`` logger (trawl.ops.logs), in the text or JSON log format
(`log_stats`), like Scrapy's "Crawled N pages (at X pages/min)".

Both show the store's counts, as ``trawl status`` does, and this run's rate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.text import Text

from trawl.ops.logs import STATS_LOGGER

if TYPE_CHECKING:
    from trawl.store.protocols import Store

REDRAW_PERIOD = 0.5
"""Seconds between two redraws of the live line."""
READ_SHARE = 0.05
"""At most this share of the time goes to reading the store's figures for the live line:
they are sums over the hosts, which take about 0.1 s each at a million hosts."""
SEPARATOR = "  "


@dataclass(frozen=True, slots=True)
class Progress:
    """Live figures for the progress display and the periodic stats line: the counts
    as the store has them (what ``trawl status`` shows), what this process has in
    flight, and this run's rate and time."""

    fetched: int
    queued: int
    """URLs waiting to be fetched: queued in the store or handed out to a worker
    (buffered in its memory or in flight), each once."""
    discovered: int
    errors: int
    inflight: int
    hosts_active: int
    pages_per_second: float
    elapsed: float


FIGURE_READS = 5
"""Tries at reading the store's counters and its work left with no commit between."""


async def store_figures(store: Store) -> tuple[dict[str, int], bool]:
    """The store's counters with ``queued`` set to the URLs waiting to be fetched (queued
    or handed out, :meth:`Store.work_left`), and whether the two agree: the counters are
    read before and after the work left, until no commit came between (any commit that
    changes the work left changes a counter too), at most `FIGURE_READS` times."""
    after: Mapping[str, int] = {}
    waiting = 0
    for _ in range(FIGURE_READS):
        before = await store.counters()
        waiting = await store.work_left()
        after = await store.counters()
        if before == after:
            return {**after, "queued": waiting}, True
    return {**after, "queued": waiting}, False


Source = Callable[[], Awaitable[Progress]]

stats_log = logging.getLogger(STATS_LOGGER)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _figure(label: str, value: int) -> Text:
    return Text.assemble(f"{label} ", (f"{value:,}", "bold"))


def _fields(p: Progress) -> dict[str, list[Text]]:
    """Each figure of the live line by name, in display order, as its forms from the
    longest to the shortest."""
    fetched = _figure("fetched", p.fetched)
    return {
        "elapsed": [Text(_clock(p.elapsed))],
        "fetched": [
            fetched + f" ({p.pages_per_second:,.1f} pages/s)",
            fetched + f" ({p.pages_per_second:,.0f}/s)",
            fetched,
        ],
        "queued": [_figure("queued", p.queued)],
        "unique": [_figure("unique", p.discovered)],
        "errors": [_figure("errors", p.errors)],
        "hosts": [_figure("hosts", p.hosts_active)],
        "inflight": [_figure("in flight", p.inflight)],
    }


NARROWER = ("inflight", "hosts", "fetched", "elapsed", "unique", "fetched", "errors")
"""How the live line narrows, one step at a time: the figure that takes its next
shorter form, or is left out when it has none."""


def _layouts(p: Progress) -> Iterator[Text]:
    """The live line from the widest to the narrowest."""
    fields = _fields(p)
    for step in (None, *NARROWER):
        if step is not None:
            fields[step].pop(0)
        yield Text(SEPARATOR, no_wrap=True, overflow="ellipsis").join(
            forms[0] for forms in fields.values() if forms
        )


def render(progress: Progress, width: int) -> Text:
    """The live line for a terminal ``width`` columns wide: as many figures as fit on
    one line (fetched and queued fit in 40 columns whatever the counts)."""
    line = Text()
    for line in _layouts(progress):
        if line.cell_len <= width:
            return line
    line.truncate(width, overflow="ellipsis")
    return line


def stats_line(p: Progress) -> str:
    """The periodic stats line: every figure of the live line, in words."""
    return (
        f"fetched {p.fetched:,} ({p.pages_per_second:,.1f} pages/s), queued {p.queued:,}, "
        f"unique {p.discovered:,}, errors {p.errors:,}, hosts {p.hosts_active:,}, "
        f"in flight {p.inflight:,}"
    )


def stats_fields(p: Progress) -> dict[str, float]:
    """The stats line's figures as the fields of a JSON log line (named as in
    ``trawl status --json``)."""
    return {
        "fetched": p.fetched,
        "pages_per_second": round(p.pages_per_second, 1),
        "queued": p.queued,
        "discovered": p.discovered,
        "failed": p.errors,
        "hosts_active": p.hosts_active,
        "in_flight": p.inflight,
        "elapsed": round(p.elapsed, 3),
    }


async def _timed(source: Source) -> tuple[Progress, float, float]:
    """The figures, when they were read, and how long that took."""
    started = time.monotonic()
    progress = await source()
    read_at = time.monotonic()
    return progress, read_at, read_at - started


async def show_progress(source: Source, console: Console) -> None:
    """Redraw the live line on ``console`` until cancelled; the figures are read again
    at most every `REDRAW_PERIOD` and no more than `READ_SHARE` of the time."""
    progress, read_at, took = await _timed(source)
    with Live(
        render(progress, console.width),
        console=console,
        transient=True,
        auto_refresh=False,
    ) as live:
        while True:
            await asyncio.sleep(REDRAW_PERIOD)
            if time.monotonic() - read_at >= took / READ_SHARE:
                progress, read_at, took = await _timed(source)
                shown = progress
            else:
                since = time.monotonic() - read_at
                shown = dataclasses.replace(progress, elapsed=progress.elapsed + since)
            live.update(render(shown, console.width), refresh=True)


async def log_stats(source: Source, interval: float) -> None:
    """Log a stats line every ``interval`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        progress = await source()
        stats_log.info(stats_line(progress), extra=stats_fields(progress))
