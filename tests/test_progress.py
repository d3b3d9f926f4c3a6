"""The live progress line shows every figure the crawl reports."""

from __future__ import annotations

from rich.console import Console

from trawl.engine import Progress
from trawl.progress import render


def test_progress_line_shows_each_figure() -> None:
    figures = Progress(
        fetched=1234, queued=567, discovered=8901, errors=23, inflight=45,
        hosts_active=67, pages_per_second=89.5, elapsed=12.0,
    )  # fmt: skip
    console = Console(width=200, record=True, color_system=None)
    console.print(render(figures))
    text = console.export_text()
    for expected in ("fetched 1234", "queued 567", "unique 8901", "errors 23",
                     "pages/s 89.5", "hosts active 67", "in flight 45", "12.0s"):  # fmt: skip
        assert expected in text
