"""The live progress display (rich), fed by :meth:`Crawler.progress`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from trawl.engine import Progress


def render(progress: Progress) -> Table:
    """One compact table of the live figures."""
    table = Table.grid(padding=(0, 2))
    for _ in range(8):
        table.add_column(justify="right")
    table.add_row(
        f"[bold]{progress.elapsed:6.1f}s[/]",
        f"[bold]fetched[/] {progress.fetched}",
        f"[bold]queued[/] {progress.queued}",
        f"[bold]unique[/] {progress.discovered}",
        f"[bold]errors[/] {progress.errors}",
        f"[bold]pages/s[/] {progress.pages_per_second:.1f}",
        f"[bold]hosts active[/] {progress.hosts_active}",
        f"[bold]in flight[/] {progress.inflight}",
    )
    return table


async def show_progress(source: Callable[[], Progress], console: Console) -> None:
    """Redraw the progress line four times a second until cancelled."""
    with Live(render(source()), console=console, transient=True, auto_refresh=False) as live:
        while True:
            await asyncio.sleep(0.25)
            live.update(render(source()), refresh=True)
