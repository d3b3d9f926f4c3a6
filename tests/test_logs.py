"""Structured logs: with ``--log-format json`` every stderr line of a crawl is one JSON
object, with one ``fetch`` line per page request at debug level and a warning when a
host backs off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import is_page
from trawl.testsite import SiteServer, generate_site


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
    assert all(r["level"] == "debug" and r["logger"] == "trawl.engine" for r in fetches)
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
