"""Ctrl-C at any moment: while trawl loads, while it opens its store and starts its
extract workers, while it crawls; a second one; SIGTERM. Each ends with exit 130, one
line on stderr saying that the same command resumes, no traceback, and a store the same
command resumes.

The signal goes to the crawl's whole process group, as a terminal sends Ctrl-C: the
extract workers must not die of it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from trawl.cli.launch import INTERRUPTED
from trawl.demo import Site, SiteServer, generate_site

DELAY = 0.05
"""The crawls' politeness delay: the seconds from one answer of a host to the next
request, at least."""


def make_site(port: int) -> Site:
    """Enough pages that no crawl here ends before its interrupt: www.trawl.test alone
    has 83 pages to fetch one after another, which take at least 82 * `DELAY` (4.1 s),
    twice the latest moment in `MOMENTS`."""
    return generate_site(port, hosts=4, pages_per_host=40)


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site) as s:
        yield s


@dataclass(frozen=True)
class Interrupt:
    """When the signals go, after the process starts, and which."""

    after: float
    signals: tuple[signal.Signals, ...] = (signal.SIGINT,)
    gap: float = 0.2
    """Seconds between two signals."""
    text: bool = False
    """Crawl with --text: two extract workers that load the text extractor."""


def crawl_command(server: SiteServer, data_dir: Path, *extra: str) -> list[str]:
    config = data_dir.with_name(f"{data_dir.name}.toml")
    config.write_text(f"delay = {DELAY}\nresponse_factor = 0.5\n")
    return [
        sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
        "--data-dir", str(data_dir), "--config", str(config), "--no-progress", "--json",
        *extra,
    ]  # fmt: skip


def interrupted_run(command: list[str], interrupt: Interrupt) -> tuple[int, str, str]:
    """Run ``command`` in a process group of its own and signal the group."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    time.sleep(interrupt.after)
    for index, sig in enumerate(interrupt.signals):
        if index:
            time.sleep(interrupt.gap)
        if process.poll() is None:
            os.killpg(process.pid, sig)
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def python_start() -> float:
    """Seconds after which a Python process here surely runs trawl's code: three times
    the longest of a few starts that load trawl's package, at least 0.05 s. Before
    trawl's first line runs, a Ctrl-C meets Python's own start-up, which no program can
    handle (Python prints a traceback, or dies of the signal, which a shell reports as
    130)."""
    tries = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import trawl"], check=True)
        tries.append(time.monotonic() - started)
    return max(0.05, 3 * max(tries))


LOADING = (0.0, 0.05, 0.1, 0.2)
"""Moments after Python's start-up, while trawl's modules load (about 0.3 s)."""
MOMENTS = [
    # While the store opens and the workers start, then while it crawls.
    Interrupt(0.4, text=True), Interrupt(0.5), Interrupt(0.6, text=True), Interrupt(0.8),
    Interrupt(1.0, text=True), Interrupt(1.3), Interrupt(1.6, text=True), Interrupt(2.0),
    # A second Ctrl-C cancels at once; SIGTERM acts as Ctrl-C.
    Interrupt(0.6, (signal.SIGINT, signal.SIGINT), text=True),
    Interrupt(1.2, (signal.SIGINT, signal.SIGINT), gap=0.01, text=True),
    Interrupt(1.0, (signal.SIGTERM,), text=True),
    Interrupt(1.0, (signal.SIGTERM, signal.SIGINT)),
]  # fmt: skip


def test_every_interrupt_exits_130_says_how_to_resume_and_resumes(
    server: SiteServer, tmp_path: Path
) -> None:
    start = python_start()
    loading = [Interrupt(start + moment) for moment in LOADING]
    loading += [
        Interrupt(start + 0.05, (signal.SIGINT, signal.SIGINT), gap=0.05),
        Interrupt(start + 0.05, (signal.SIGTERM,)),
    ]

    def attempt(numbered: tuple[int, Interrupt]) -> tuple[Interrupt, int, str, str]:
        index, interrupt = numbered
        extra = ("--text", "--parse-workers", "2") if interrupt.text else ()
        command = crawl_command(server, tmp_path / f"crawl-{index}", *extra)
        return (interrupt, *interrupted_run(command, interrupt))

    # One at a time while trawl loads, so that the load of the others does not delay
    # it past the moment; then three at a time (the moments vary with the load anyway).
    results = [attempt((-index - 1, interrupt)) for index, interrupt in enumerate(loading)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results += pool.map(attempt, enumerate(MOMENTS))
    for interrupt, code, _, err in results:
        assert code == 130, (interrupt, err)
        assert "Traceback" not in err, (interrupt, err)
        assert "internal error" not in err, (interrupt, err)
        assert err.splitlines()[-1] == INTERRUPTED, (interrupt, err)

    # The same command resumes a crawl interrupted mid-way to its end.
    resumed = subprocess.run(
        crawl_command(server, tmp_path / "crawl-4", "--text", "--parse-workers", "2"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["state"] == "done"
