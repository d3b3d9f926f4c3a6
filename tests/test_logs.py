"""Structured logs: with ``--log-format json`` every stderr line of a crawl is one JSON
object, with one ``fetch`` line per page request at debug level and a warning when a
host backs off."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import is_page
from trawl.demo import SiteServer, generate_site
from trawl.ops.logs import QUIET_LIBRARIES, configure_logging


def test_json_logs_give_one_line_per_fetch_and_warn_on_back_off(tmp_path: Path) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=10)) as server:
        done = subprocess.run(
            [
                sys.executable, "-m", "trawl", "crawl", *server.site.seeds,
                *server.resolve_args(), "--data-dir", str(tmp_path), "--delay", "0",
                "--retry-base", "0.05", "--retry-cap", "0.2", "--no-progress", "--json",
                "--log-format", "json", "--log-level", "debug",
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        page_fetches = sum(1 for r in server.requests if is_page(r.path))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    fetches = [r for r in records if r["message"].startswith("fetch ")]
    assert len(fetches) == page_fetches
    assert all(r["level"] == "debug" and r["logger"] == "trawl.crawl.page_job" for r in fetches)
    assert all({"url", "host", "status", "duration_ms", "bytes"} <= set(r) for r in fetches)
    assert {r["status"] for r in fetches} >= {200, 404, 503}
    backing_off = [r for r in records if r["level"] == "warning" and r.get("status") == 503]
    assert backing_off, "no warning for a host answering 503"
    assert all(r["backoff_s"] > 0 and r["host"] for r in backing_off)
    assert json.loads(done.stdout)["state"] == "done"


def test_the_default_shows_no_fetch_lines(tmp_path: Path) -> None:
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=5)) as server:
        done = subprocess.run(
            [
                sys.executable, "-m", "trawl", "crawl", *server.site.seeds,
                *server.resolve_args(), "--data-dir", str(tmp_path), "--delay", "0",
                "--retry-base", "0.05", "--retry-cap", "0.2", "--no-progress", "--json",
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fetch " not in done.stderr


@pytest.fixture
def kept_loggers() -> Iterator[None]:
    """Put back the loggers `configure_logging` changes."""
    loggers = [logging.getLogger(name) for name in ("trawl", *QUIET_LIBRARIES)]
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, handlers, level, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


def test_the_database_driver_speaks_only_at_debug_level_or_in_error(
    kept_loggers: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("text", "warning")
    logging.getLogger("psycopg").warning("query cancellation interrupted: closing connection")
    logging.getLogger("psycopg.pool").warning("discarding closed connection")
    assert capsys.readouterr().err == ""
    logging.getLogger("psycopg").error("error processing notice callback")
    assert capsys.readouterr().err == "trawl: ERROR: error processing notice callback\n"
    configure_logging("json", "debug")
    logging.getLogger("psycopg.pool").warning("discarding closed connection")
    record = json.loads(capsys.readouterr().err)
    assert (record["logger"], record["level"]) == ("psycopg.pool", "warning")
