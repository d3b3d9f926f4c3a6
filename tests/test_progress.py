"""A crawl's progress: the live line fits the terminal, a crawl without a terminal logs
a stats line every ``--stats-interval`` seconds, and every count shown (live, in the
stats line, and by ``trawl status`` during the run) is the store's: queued counts each
waiting URL once."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from conftest import is_page
from trawl.config import CrawlConfig, Limits, Politeness
from trawl.crawl.engine import Crawler
from trawl.crawl.runner import build_engine, read_summary
from trawl.demo import Site, SiteServer, generate_site
from trawl.ops.progress import Progress, render
from trawl.store.location import StoreLocation

SMALL = Progress(
    fetched=1234, queued=567, discovered=8901, errors=23, inflight=45,
    hosts_active=67, pages_per_second=89.5, elapsed=12.0,
)  # fmt: skip
LARGE = Progress(
    fetched=12_345_678, queued=98_765_432, discovered=123_456_789, errors=1_234_567,
    inflight=1024, hosts_active=10_000, pages_per_second=2345.6, elapsed=3.5 * 86400,
)  # fmt: skip
ANSI_CODE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STATS_LINE = re.compile(
    r"trawl: \d\d:\d\d:\d\d fetched (?P<fetched>[\d,]+) \((?P<rate>[\d,.]+) pages/s\), "
    r"queued (?P<queued>[\d,]+), unique (?P<unique>[\d,]+), errors (?P<errors>[\d,]+), "
    r"hosts (?P<hosts>[\d,]+), in flight (?P<inflight>[\d,]+)"
)


def shown(progress: Progress, width: int) -> list[str]:
    """The lines a terminal ``width`` columns wide shows for ``progress``."""
    console = Console(width=width, force_terminal=True, record=True, color_system="standard")
    console.print(render(progress, console.width))
    return console.export_text().splitlines()


@pytest.mark.parametrize("progress", [SMALL, LARGE], ids=["small", "large"])
@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_the_live_line_fits_the_terminal_on_one_line(progress: Progress, width: int) -> None:
    lines = shown(progress, width)
    assert len(lines) == 1, lines
    assert cell_len(lines[0]) <= width, lines
    # Fetched and queued always show, in full.
    assert f"fetched {progress.fetched:,}" in lines[0]
    assert f"queued {progress.queued:,}" in lines[0]
    assert "…" not in lines[0]


def test_the_live_line_leaves_out_less_needed_figures_as_it_narrows() -> None:
    wide = shown(SMALL, 120)[0]
    for expected in ("0:00:12", "fetched 1,234 (89.5 pages/s)", "queued 567", "unique 8,901",
                     "errors 23", "hosts 67", "in flight 45"):  # fmt: skip
        assert expected in wide
    at_80 = shown(SMALL, 80)[0]
    for expected in ("fetched 1,234", "pages/s", "queued 567", "unique 8,901", "errors 23"):
        assert expected in at_80
    at_60 = shown(SMALL, 60)[0]
    for expected in ("fetched 1,234", "queued 567", "errors 23"):
        assert expected in at_60


def slow_site(port: int) -> Site:
    """Four hosts of 40 pages: www.trawl.test alone has 83 pages to fetch one after
    another, 82 politeness delays at least."""
    return generate_site(port, hosts=4, pages_per_host=40)


def crawl_command(server: SiteServer, data_dir: Path, *extra: str, delay: float) -> list[str]:
    """``trawl crawl`` of the site, one request per host every ``delay`` seconds, and the
    site's failing pages retried after short back-offs."""
    config = data_dir.with_name(f"{data_dir.name}.toml")
    config.write_text(
        f"delay = {delay}\nresponse_factor = 0.5\nretry_base = 0.05\nretry_cap = 1.0\n"
    )
    return [
        sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
        "--data-dir", str(data_dir), "--config", str(config), "--no-progress", "--json",
        *extra,
    ]  # fmt: skip


def terminal_output(command: list[str], columns: int) -> str:
    """What ``command`` writes to its stderr, a terminal ``columns`` wide, ANSI codes
    left out."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERM")}
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=child,
        env={**env, "TERM": "xterm"},
    )  # fmt: skip
    os.close(child)
    chunks = []
    with contextlib.suppress(OSError):  # EIO once the crawl closed the terminal
        while chunk := os.read(main, 65536):
            chunks.append(chunk)
    os.close(main)
    process.communicate(timeout=60)
    assert process.returncode == 0
    return ANSI_CODE.sub("", b"".join(chunks).decode())


def test_on_a_terminal_80_columns_wide_the_live_line_never_wraps(tmp_path: Path) -> None:
    with SiteServer(slow_site) as server:
        output = terminal_output(
            crawl_command(server, tmp_path, "--progress", delay=0.05), columns=80
        )
    lines = [line for line in re.split(r"[\r\n]", output) if line.strip()]
    shown = [line for line in lines if "fetched" in line]
    assert len(shown) >= 3, output
    assert all(cell_len(line) <= 80 for line in lines), output
    assert all("queued" in line and "unique" in line for line in shown), output


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_without_a_terminal_a_stats_line_comes_every_interval(tmp_path: Path) -> None:
    with SiteServer(slow_site) as server:
        done = subprocess.run(
            crawl_command(server, tmp_path, "--stats-interval", "0.25", delay=0.025),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    stats = [m for line in done.stderr.splitlines() if (m := STATS_LINE.fullmatch(line))]
    # The default log level (warning) does not hide them.
    assert len(stats) >= 4, done.stderr
    figures = [{key: number(value) for key, value in m.groupdict().items()
                if key != "rate"} for m in stats]  # fmt: skip
    for before, after in itertools.pairwise(figures):
        assert after["fetched"] >= before["fetched"]
        assert after["unique"] >= before["unique"]
    for line in figures:
        # Each waiting URL counted once: no more waiting and done than known.
        assert line["queued"] + line["fetched"] + line["errors"] <= line["unique"], line
        assert line["fetched"] <= summary["fetched"]
        assert line["unique"] <= summary["discovered"]
    assert any(line["queued"] > 0 for line in figures)
    assert all(float(m["rate"].replace(",", "")) > 0 for m in stats[1:])
    assert summary["queued"] == 0


def test_stats_lines_are_json_objects_in_the_json_log_format(tmp_path: Path) -> None:
    with SiteServer(slow_site) as server:
        done = subprocess.run(
            crawl_command(server, tmp_path, "--stats-interval", "0.5", "--log-format", "json",
                          delay=0.025),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]
    stats = [r for r in records if r["logger"] == "trawl.stats"]
    assert len(stats) >= 2, done.stderr
    fields = {"fetched", "pages_per_second", "queued", "discovered", "failed",
              "hosts_active", "in_flight", "elapsed"}  # fmt: skip
    for record in stats:
        assert fields <= set(record)
        assert record["level"] == "info"
        assert record["queued"] + record["fetched"] + record["failed"] <= record["discovered"]
        assert f"fetched {record['fetched']:,} " in record["message"]


def test_a_stats_interval_of_0_logs_no_stats_line(tmp_path: Path) -> None:
    with SiteServer(slow_site) as server:
        done = subprocess.run(
            crawl_command(server, tmp_path, "--stats-interval", "0", delay=0.02),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fetched" not in done.stderr


def test_status_during_a_run_shows_its_time_queue_and_rate(tmp_path: Path) -> None:
    with SiteServer(slow_site) as server:
        crawl = subprocess.Popen(
            crawl_command(server, tmp_path, delay=0.2),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while sum(1 for r in server.requests if is_page(r.path)) < 8:
                assert crawl.poll() is None, crawl.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            readings = []
            for _ in range(2):
                status = subprocess.run(
                    [sys.executable, "-m", "trawl", "status", "--data-dir", str(tmp_path),
                     "--json"],
                    capture_output=True, text=True, timeout=30, check=False,
                )  # fmt: skip
                assert status.returncode == 0, status.stderr
                readings.append(json.loads(status.stdout))
                time.sleep(0.3)
            assert crawl.poll() is None, "the crawl ended before status was read"
        finally:
            crawl.terminate()
            crawl.communicate(timeout=30)
    first, second = readings
    for figures in readings:
        assert figures["state"] == "running"
        assert figures["fetched"] >= 8
        assert figures["pages_per_second"] > 0
        # The URLs the crawl holds in memory are waiting too: 160 pages are not crawled
        # in a few seconds at 5 requests a second per host.
        assert figures["queued"] > 0
        done = figures["fetched"] + figures["failed"] + figures["robots_blocked"]
        assert figures["queued"] + done <= figures["discovered"]
    assert 0 < first["elapsed"] < second["elapsed"]
    assert second["elapsed"] - first["elapsed"] >= 0.3


async def test_the_live_figures_are_the_stores_and_count_each_waiting_url_once(
    tmp_path: Path,
) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=6, pages_per_host=60)) as server:
        config = CrawlConfig(
            seeds=server.site.seeds,
            data_dir=tmp_path,
            resolve=server.resolve_map(),
            allow_networks=server.allow_networks(),
            politeness=Politeness(delay=0.0, response_factor=0.0),
            limits=Limits(memory_queue=50),
            parse_workers=0,
            rng_seed=1,
        )
        samples: list[Progress] = []

        async def sample(crawler: Crawler) -> None:
            while True:
                samples.append(await crawler.progress())
                await asyncio.sleep(0.01)

        async with build_engine(config) as crawler:
            sampler = asyncio.create_task(sample(crawler))
            summary = await crawler.run()
            sampler.cancel()
            final = await crawler.progress()
    assert summary.state == "done"
    assert len(samples) >= 10
    assert any(p.queued > 0 for p in samples)
    for p in samples:
        assert p.queued + p.fetched + p.errors <= p.discovered, p
    stored = await read_summary(StoreLocation(tmp_path))
    assert final.queued == stored.queued == 0
    assert (final.fetched, final.discovered, final.errors) == (
        stored.fetched,
        stored.discovered,
        stored.failed,
    )
