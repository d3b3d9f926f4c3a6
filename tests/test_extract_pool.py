"""Extract workers load their code while the crawl starts; one that cannot start or dies
fails the crawl with one line saying why, never silently and never with a traceback."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import is_page
from test_cli import Run, assert_one_error_line
from trawl.config import ScopeConfig
from trawl.extract import ExtractPool, ExtractSettings, WorkerStopped, stop_reason
from trawl.testsite import SiteServer, generate_site
from trawl.urls import DEFAULT_RULES

SETTINGS = ExtractSettings(("http://a.test/",), ScopeConfig(), DEFAULT_RULES, "trawl", True, 10)


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


async def test_a_worker_killed_between_pages_fails_the_next_one_with_the_signal() -> None:
    async with ExtractPool(SETTINGS, workers=1) as pool:
        await pool.extract("http://a.test/", 1, b'<a href="/one">1</a>', None, ())
        (worker,) = pool._workers
        worker.process.kill()
        await worker.reader
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
        (worker,) = pool._workers
        worker.process.kill()
        await worker.reader
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


def test_a_worker_killed_mid_crawl_ends_it_with_one_line(tmp_path: Path) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=40)) as server:
        crawl = subprocess.Popen(
            crawl_command(server, tmp_path / "data"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while sum(1 for r in server.requests if is_page(r.path)) < 5:
            assert crawl.poll() is None, crawl.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        (worker,) = Path(f"/proc/{crawl.pid}/task/{crawl.pid}/children").read_text().split()
        os.kill(int(worker), signal.SIGKILL)
        out, err = crawl.communicate(timeout=30)
    line = assert_one_error_line(Run(crawl.returncode, out, err), code=1)
    assert line == "trawl: error: a link-extraction worker stopped: killed by signal 9 (SIGKILL)"


def test_a_worker_that_cannot_import_its_text_extractor_says_why(tmp_path: Path) -> None:
    # A broken install: an empty lxml_html_clean package first on the path, so that the
    # text extractor's ``from lxml.html.clean import Cleaner`` fails in the worker (the
    # crawl process itself never loads the text extractor).
    broken = tmp_path / "broken" / "lxml_html_clean"
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
        "trawl: error: a link-extraction worker stopped: ImportError: cannot import name "
        "'Cleaner' from 'lxml.html.clean'"
    ), line
