"""Extract workers load their code while the crawl starts. One that dies mid-crawl is
replaced and only the page it held fails; one that cannot start, dies before answering
anything or keeps dying fails the crawl with one line saying why, never silently and
never with a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import is_page
from test_cli import Run, assert_one_error_line, trawl
from test_crawl import page
from trawl.children import stop_reason
from trawl.config import ScopeConfig
from trawl.demo import Site, SiteServer, generate_site
from trawl.extract.pool import (
    DEATH_WINDOW,
    MAX_DEATHS,
    Extracted,
    ExtractFailed,
    ExtractPool,
    ExtractSettings,
    WorkerStopped,
)
from trawl.extract.urls import DEFAULT_RULES

SETTINGS = ExtractSettings(("http://a.test/",), ScopeConfig(), DEFAULT_RULES, "trawl", True, 10)


async def kill_worker(pool: ExtractPool) -> None:
    """Kill the pool's one worker process with SIGKILL and wait until the pool knows."""
    (worker,) = pool._workers
    assert worker.process is not None
    assert worker.reader is not None
    worker.process.kill()
    await worker.reader


async def test_the_pool_starts_without_waiting_for_its_workers_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A "Python" that takes a second to load and then dies without reading a frame.
    loaded = tmp_path / "loaded"
    slow = tmp_path / "slow-python"
    slow.write_text(f"#!/bin/sh\nsleep 1\ntouch {loaded}\nexit 1\n")
    slow.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(slow))
    async with ExtractPool(SETTINGS, workers=1) as pool:
        assert not loaded.exists()
        with pytest.raises(
            WorkerStopped, match="link-extraction worker stopped: exited with status 1"
        ):
            await pool.extract("http://a.test/", 1, b'<a href="/x">x</a>', None, ())
        assert loaded.exists()


async def test_pages_sent_while_a_worker_loads_are_answered_in_order() -> None:
    async with ExtractPool(SETTINGS, workers=1) as pool:
        first, second = await asyncio.gather(
            pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ()),
            pool.extract("http://a.test/", 1, b'<a href="/two">2</a>', None, ()),
        )
    assert [link.url for link in first.links] == ["http://a.test/one"]
    assert [link.url for link in second.links] == ["http://a.test/two"]


async def test_a_worker_killed_between_pages_is_replaced(caplog: pytest.LogCaptureFixture) -> None:
    async with ExtractPool(SETTINGS, workers=1) as pool:
        await pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
        (worker,) = pool._workers
        killed = worker.process
        await kill_worker(pool)
        found = await pool.extract("http://a.test/", 1, b'<a href="/two">2</a>', None, ())
        assert worker.process is not killed
    assert [link.url for link in found.links] == ["http://a.test/two"]
    assert [r.getMessage() for r in caplog.records] == [
        "a link-extraction worker stopped (killed by signal 9 (SIGKILL)): starting another"
    ]


async def test_a_worker_killed_while_extracting_fails_that_page_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with ExtractPool(SETTINGS, workers=1) as pool:
        await pool.extract("http://a.test/", 1, b'<a href="/zero">0</a>', None, ())
        # Stopped first, the worker answers none of the pages sent to it before it dies,
        # however fast it would have been.
        (worker,) = pool._workers
        assert worker.process is not None
        worker.process.send_signal(signal.SIGSTOP)
        # Pages queued behind the one the worker holds when it dies: answers come in
        # order, so the first page owed is the one it held, whether it had read it or not.
        pages = [
            asyncio.create_task(
                pool.extract(f"http://a.test/{n}", 1, f'<a href="/p{n}">{n}</a>'.encode(), None, ())
            )
            for n in range(1, 5)
        ]
        await asyncio.sleep(0)
        await kill_worker(pool)
        answers = await asyncio.gather(*pages, return_exceptions=True)
    held, *others = answers
    assert isinstance(held, ExtractFailed), held
    assert str(held) == "its link-extraction worker stopped: killed by signal 9 (SIGKILL)"
    assert [[link.url for link in a.links] for a in others if isinstance(a, Extracted)] == [
        [f"http://a.test/p{n}"] for n in range(2, 5)
    ]
    assert [r.getMessage() for r in caplog.records] == [
        "a link-extraction worker stopped (killed by signal 9 (SIGKILL)) while extracting "
        "http://a.test/1: that page failed; starting another"
    ]


async def test_a_replaced_worker_that_dies_before_answering_stops_the_pool() -> None:
    async with ExtractPool(SETTINGS, workers=1) as pool:
        await pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
        (worker,) = pool._workers
        for _ in range(2):
            await kill_worker(pool)
            if worker.restart is not None:
                await worker.restart
        with pytest.raises(WorkerStopped, match=r"stopped: killed by signal 9 \(SIGKILL\)$"):
            await pool.extract("http://a.test/", 1, b'<a href="/two">2</a>', None, ())


async def test_a_worker_that_keeps_dying_stops_the_pool() -> None:
    now = [0.0]
    async with ExtractPool(SETTINGS, workers=1, clock=lambda: now[0]) as pool:
        # Deaths further apart than the window are not counted together.
        for _ in range(MAX_DEATHS + 1):
            await pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
            await kill_worker(pool)
            now[0] += DEATH_WINDOW
        for _ in range(MAX_DEATHS - 1):
            await pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
            await kill_worker(pool)
            now[0] += DEATH_WINDOW / MAX_DEATHS
        await pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
        await kill_worker(pool)
        with pytest.raises(WorkerStopped, match=r"stopped: killed by signal 9 \(SIGKILL\)$"):
            await pool.extract("http://a.test/", 1, b'<a href="/two">2</a>', None, ())


async def test_an_extraction_cancelled_while_its_worker_dies_is_left_alone() -> None:
    # The answer of a cancelled extraction (a crawl cancelled by a second Ctrl-C) and the
    # failure of a worker that dies afterwards are dropped, not set on a finished future.
    async with ExtractPool(SETTINGS, workers=1) as pool:
        pending = asyncio.create_task(
            pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
        )
        await asyncio.sleep(0)
        pending.cancel()
        await kill_worker(pool)
        assert pending.cancelled()


def test_the_reason_is_the_exception_a_traceback_ends_with() -> None:
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        '  File "/venv/lib/python3.11/site-packages/lxml/html/clean.py", line 18\n'
        "    raise ImportError(\n"
        "ImportError: lxml.html.clean module is now a separate project lxml_html_clean.\n"
        "Install lxml[html-clean] or lxml_html_clean directly.\n"
    )
    assert stop_reason(1, stderr) == (
        "ImportError: lxml.html.clean module is now a separate project lxml_html_clean. "
        "Install lxml[html-clean] or lxml_html_clean directly."
    )
    assert stop_reason(1, "") == "exited with status 1"
    assert stop_reason(-9, stderr) == "killed by signal 9 (SIGKILL)"


def crawl_command(server: SiteServer, data_dir: Path, *extra: str) -> list[str]:
    """``trawl crawl`` of the site with one extract worker, a request per host every
    0.1 s."""
    config = data_dir.with_name(f"{data_dir.name}.toml")
    config.write_text("delay = 0.1\nresponse_factor = 0.5\n")
    return [
        sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
        "--data-dir", str(data_dir), "--config", str(config), "--no-progress",
        "--parse-workers", "1", *extra,
    ]  # fmt: skip


PAGES = 40


def linked_site(port: int) -> Site:
    """One host of HTML pages: the root links every page, each page the next."""
    root = "http://www.kill.test"
    routes = {f"{root}/": page(*(f"/p{n}" for n in range(1, PAGES)))}
    routes |= {f"{root}/p{n}": page(f"/p{n + 1}") for n in range(1, PAGES - 1)}
    routes[f"{root}/p{PAGES - 1}"] = page()
    return Site.build(port, routes, [f"{root}/"])


def wait_for_pages(crawl: subprocess.Popen[str], server: SiteServer, count: int) -> None:
    """Wait until the server has answered ``count`` page requests."""
    deadline = time.monotonic() + 30
    while sum(1 for r in server.requests if is_page(r.path)) < count:
        assert crawl.poll() is None, crawl.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_worker_killed_mid_crawl_fails_the_page_it_held_and_the_crawl_goes_on(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with SiteServer(linked_site) as server:
        crawl = subprocess.Popen(
            crawl_command(server, data_dir, "--json"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for_pages(crawl, server, 5)
        children = Path(f"/proc/{crawl.pid}/task/{crawl.pid}/children").read_text().split()
        (worker,) = [
            c for c in children if b"worker_main" in Path(f"/proc/{c}/cmdline").read_bytes()
        ]
        # Stopped, the worker holds the pages sent to it: the host's requests follow one
        # another, so once two more have been answered, one page at least waits on it.
        os.kill(int(worker), signal.SIGSTOP)
        seen = sum(1 for r in server.requests if is_page(r.path))
        wait_for_pages(crawl, server, seen + 2)
        os.kill(int(worker), signal.SIGKILL)
        out, err = crawl.communicate(timeout=60)
        gets = Counter(r.path for r in server.requests if is_page(r.path))
    assert crawl.returncode == 0, err
    (line,) = err.splitlines()
    held = re.fullmatch(
        r"trawl: WARNING: a link-extraction worker stopped \(killed by signal 9 \(SIGKILL\)\) "
        r"while extracting (\S+): that page failed; starting another",
        line,
    )
    assert held is not None, line
    summary = json.loads(out)
    assert (summary["fetched"], summary["failed"]) == (PAGES - 1, 1)
    assert summary["errors_by_class"] == {"extract_failed": 1}
    exported = trawl("export", "--data-dir", str(data_dir), "--format", "jsonl")
    rows = [json.loads(row) for row in exported.out.splitlines()]
    assert [(r["url"], r["status"]) for r in rows if r["error"]] == [(held[1], 200)]
    # Every page was asked for once: the one that failed is not retried, and the pages
    # queued behind it were extracted by the next worker.
    assert len(gets) == PAGES
    assert set(gets.values()) == {1}


def test_a_worker_that_cannot_import_its_text_extractor_says_why(tmp_path: Path) -> None:
    # A broken install: an empty resiliparse package first on the path, so that the
    # text extractor's ``from resiliparse.extract.html2text import ...`` fails in the
    # worker (the crawl process itself never loads the text extractor).
    broken = tmp_path / "broken" / "resiliparse"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(broken.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    )}  # fmt: skip
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=10)) as server:
        done = subprocess.run(
            crawl_command(server, tmp_path / "data", "--text"),
            capture_output=True, text=True, timeout=60, check=False, env=env,
        )  # fmt: skip
    line = assert_one_error_line(Run(done.returncode, done.stdout, done.stderr), code=1)
    assert line.startswith(
        "trawl: error: a link-extraction worker stopped: ModuleNotFoundError: No module "
        "named 'resiliparse.extract'"
    ), line
