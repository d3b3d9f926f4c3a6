"""The SQLite store in a process of its own (trawl.store.process): what crosses to the
crawl when the child fails, and what a crawl does when it dies. The store's contract
suite runs against it as the ``sqlite-process`` engine (tests/test_store.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_resume import (
    assert_matches_ground_truth,
    crawl_command,
    run_to_end,
    start_and_wait,
    stored_rows,
)
from trawl.demo import SiteServer, generate_site
from trawl.errors import StoreError
from trawl.store.process import StoreProcess
from trawl.store.sqlite.store import SQLiteStore

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a crawl runs its store in a process on 2+ cores"
)


@pytest.fixture
def server() -> Iterator[SiteServer]:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=60)) as s:
        yield s


def store_child(crawl_pid: int) -> int:
    """The pid of the crawl's store process."""
    children = Path(f"/proc/{crawl_pid}/task/{crawl_pid}/children").read_text().split()
    (pid,) = [
        c for c in children if b"trawl.store.process" in Path(f"/proc/{c}/cmdline").read_bytes()
    ]
    return int(pid)


async def test_an_error_opening_the_store_is_the_same_error_as_in_process(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(StoreError) as in_process:
        async with SQLiteStore(missing, readonly=True):
            pass
    with pytest.raises(StoreError) as in_child:
        async with StoreProcess(missing, readonly=True):
            pass
    assert str(in_child.value) == str(in_process.value)


async def test_a_dead_store_process_fails_every_later_call_in_one_line(tmp_path: Path) -> None:
    async with StoreProcess(tmp_path) as store:
        await store.set_meta("k", "v")
        assert await store.get_meta("k") == "v"
        os.kill(store_child(os.getpid()), signal.SIGKILL)
        for _ in range(2):
            with pytest.raises(StoreError) as failed:
                await store.get_meta("k")
            assert str(failed.value) == ("the store process stopped: killed by signal 9 (SIGKILL)")
    # What it committed before it died is there.
    async with SQLiteStore(tmp_path, readonly=True) as reopened:
        assert await reopened.get_meta("k") == "v"


def test_the_store_process_killed_mid_crawl_stops_the_crawl_and_a_rerun_finishes_it(
    server: SiteServer, tmp_path: Path
) -> None:
    command = crawl_command(server, tmp_path, delay=0.02)
    crawl = start_and_wait(command, server, 40)
    os.kill(store_child(crawl.pid), signal.SIGKILL)
    _out, err = crawl.communicate(timeout=30)
    assert crawl.returncode not in (0, None)
    assert err.strip().splitlines() == [
        "trawl: error: the store process stopped: killed by signal 9 (SIGKILL)"
    ], err
    assert "Traceback" not in err
    final = run_to_end(command)
    assert final["discovered"] == len(server.site.ground_truth)
    assert_matches_ground_truth(server, stored_rows(tmp_path))


def test_the_store_process_of_a_killed_crawl_holds_the_data_dir_until_it_exits(
    server: SiteServer, tmp_path: Path
) -> None:
    command = crawl_command(server, tmp_path, delay=0.02)
    crawl = start_and_wait(command, server, 40)
    child = store_child(crawl.pid)
    os.kill(child, signal.SIGSTOP)  # mid-call, for all the crawl knows
    crawl.kill()
    crawl.communicate(timeout=30)
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0
    assert "another trawl is already crawling in" in refused.stderr
    os.kill(child, signal.SIGCONT)  # it sees its input closed, ends and exits
    deadline = time.monotonic() + 20
    while (
        Path(f"/proc/{child}").exists()
        and b"trawl.store.process" in Path(f"/proc/{child}/cmdline").read_bytes()
    ):
        assert time.monotonic() < deadline, "the store process outlived its crawl"
        time.sleep(0.05)
    final = run_to_end(command)
    assert final["discovered"] == len(server.site.ground_truth)
    assert_matches_ground_truth(server, stored_rows(tmp_path))
