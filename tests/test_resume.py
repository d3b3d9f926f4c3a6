"""Crash safety: a crawl killed at any moment resumes to the same result.

Each test runs ``python -m trawl crawl`` as a real subprocess against a generated
multi-host site on loopback, stops it part-way (``kill -9`` or SIGINT), runs the same
command again, and compares the store with the site's ground truth and with an
uninterrupted crawl. The server's request log shows how many pages were fetched twice:
at most the ones that were in flight (or fetched but not yet committed) at the kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import is_page
from trawl.demo import Site, SiteServer, generate_site
from trawl.store.sqlite.store import DB_NAME, SQLiteStore
from trawl.store.values import ExportRow, State

HOSTS = 6
PAGES_PER_HOST = 60
CONCURRENCY = 8
FAST = ["--retry-base", "0.05", "--retry-cap", "1", "--no-progress", "--json"]
# No command-line option sets the response-time factor of the politeness delay; a slow
# page would otherwise hold its host back for ten times its response time.
CONFIG = "response_factor = 0.5\n"


def make_site(port: int) -> Site:
    """The generated site every test here crawls."""
    return generate_site(port, hosts=HOSTS, pages_per_host=PAGES_PER_HOST)


@pytest.fixture
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site) as s:
        yield s


def crawl_command(server: SiteServer, data_dir: Path, delay: float) -> list[str]:
    """The ``trawl crawl`` command line for the generated site."""
    config = data_dir.with_name(f"{data_dir.name}.toml")
    config.write_text(CONFIG)
    return [
        sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
        "--data-dir", str(data_dir), "--delay", str(delay), "--config", str(config),
        "--concurrency", str(CONCURRENCY), *FAST,
    ]  # fmt: skip


def run_to_end(command: list[str]) -> dict[str, object]:
    """Run a crawl to completion; return its JSON summary."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    summary: dict[str, object] = json.loads(done.stdout)
    assert summary["state"] == "done"
    return summary


def stored_rows(data_dir: Path) -> list[ExportRow]:
    """Every URL in the store of ``data_dir``."""

    async def read() -> list[ExportRow]:
        async with SQLiteStore(data_dir, readonly=True) as store:
            return [row async for row in store.export()]

    return asyncio.run(read())


def page_gets(server: SiteServer) -> Counter[tuple[str, str]]:
    """How often each page (robots.txt and the soft-404 probe aside) was requested."""
    return Counter(
        (r.host, r.path) for r in server.requests if r.method == "GET" and is_page(r.path)
    )


def start_and_wait(command: list[str], server: SiteServer, requests: int) -> subprocess.Popen[str]:
    """Start a crawl and return once the server has answered ``requests`` requests."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(server.requests) < requests:
        assert proc.poll() is None, "the crawl ended before it could be interrupted"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.005)
    assert proc.poll() is None, "the crawl ended before it could be interrupted"
    return proc


def assert_matches_ground_truth(server: SiteServer, rows: list[ExportRow]) -> None:
    """The store holds exactly the ground truth, each URL in its final state."""
    site = server.site
    states = {row.url: row.state for row in rows}
    assert len(states) == len(rows)
    assert set(states) == site.ground_truth
    for url in site.expected_fetches:
        assert states[url] in (State.DONE, State.FAILED), url
    for url in site.robots_blocked:
        assert states[url] == State.BLOCKED, url


@pytest.fixture(scope="module")
def baseline(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[frozenset[str], Counter[tuple[str, str]]]:
    """An uninterrupted crawl: its stored URLs and how often it requested each page."""
    data_dir = tmp_path_factory.mktemp("baseline")
    with SiteServer(make_site) as s:
        run_to_end(crawl_command(s, data_dir, delay=0))
        rows = stored_rows(data_dir)
        assert_matches_ground_truth(s, rows)
        return frozenset(row.url.replace(f":{s.port}/", "/") for row in rows), page_gets(s)


@pytest.mark.parametrize("kill_after", [20, 90, 200])
def test_kill_9_then_resume_reaches_the_same_crawl(
    server: SiteServer,
    tmp_path: Path,
    baseline: tuple[frozenset[str], Counter[tuple[str, str]]],
    kill_after: int,
) -> None:
    baseline_urls, baseline_gets = baseline
    command = crawl_command(server, tmp_path, delay=0.02)
    proc = start_and_wait(command, server, kill_after)
    proc.kill()
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    status = subprocess.run(
        [sys.executable, "-m", "trawl", "status", "--json", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert json.loads(status.stdout)["state"] == "stopped (resumable)"
    interrupted = page_gets(server)
    assert sum(interrupted.values()) < len(server.site.expected_fetches)

    run_to_end(command)

    rows = stored_rows(tmp_path)
    assert_matches_ground_truth(server, rows)
    port = f":{server.port}/"
    assert {row.url.replace(port, "/") for row in rows} == baseline_urls
    gets = page_gets(server)
    refetched = sum(max(0, n - baseline_gets[key]) for key, n in gets.items())
    assert refetched <= CONCURRENCY, refetched
    missing = [key for key in baseline_gets if key not in gets]
    assert not missing


def test_sigint_stops_gracefully_commits_and_resumes(server: SiteServer, tmp_path: Path) -> None:
    command = crawl_command(server, tmp_path, delay=0.02)
    proc = start_and_wait(command, server, 60)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["state"] == "interrupted"
    assert 0 < summary["fetched"] < len(server.site.expected_fetches)
    assert "Traceback" not in err
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        claimed = db.execute("SELECT COUNT(*) FROM urls WHERE state = ?", (State.CLAIMED,))
        assert claimed.fetchone()[0] == 0
        fetched = db.execute(
            "SELECT COUNT(*) FROM urls WHERE state IN (?, ?)", (State.DONE, State.FAILED)
        ).fetchone()[0]
    assert fetched == summary["fetched"] + summary["failed"]

    final = run_to_end(command)
    assert_matches_ground_truth(server, stored_rows(tmp_path))
    assert final["discovered"] == len(server.site.ground_truth)


def test_kill_9_leaves_no_parse_worker_or_store_process_behind(
    server: SiteServer, tmp_path: Path
) -> None:
    command = [*crawl_command(server, tmp_path, delay=0.02), "--parse-workers", "1"]
    proc = start_and_wait(command, server, 30)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    runs = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children}
    # One parse worker, and the store's own process (two cores or more: trawl.store.process).
    assert sorted(b"worker_main" in cmd for cmd in runs.values()) == [False, True]
    own_store = len(os.sched_getaffinity(0)) >= 2
    assert sum(b"trawl.store.process" in cmd for cmd in runs.values()) == own_store
    proc.kill()
    proc.communicate(timeout=10)  # returns only once no process holds the output pipes
    deadline = time.monotonic() + 10
    for pid, cmd in runs.items():
        child = Path(f"/proc/{pid}")
        while child.exists() and (child / "cmdline").read_bytes() == cmd:
            assert time.monotonic() < deadline, f"{cmd!r} outlived its crawl"
            time.sleep(0.05)

    final = run_to_end(command)
    assert final["discovered"] == len(server.site.ground_truth)
