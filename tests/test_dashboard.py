"""The live dashboard of ``trawl serve``, loaded in real headless Chromium against a
running crawl: it shows the crawl, its figures match the API, and a screenshot is kept."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench.servers import free_port

from test_api import AUTH, FAST, TOKEN, slow_site
from trawl.demo import SiteServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FIGURES = ("discovered", "fetched", "queued", "failed", "status2xx", "status3xx")


class Rows(HTMLParser):
    """The dashboard's crawl rows: ``{crawl id: {cell class: text}}``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.hosts: dict[tuple[str, str, str], dict[str, str]] = {}
        """``{(crawl id, kind, host): {cell class: text}}`` of the host rankings."""
        self._row: dict[str, str] | None = None
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "tr" and found.get("data-host"):
            key = (found["data-crawl"], found["data-kind"], found["data-host"])
            self._row = self.hosts[key] = {}
        elif tag == "tr" and found.get("data-crawl"):
            self._row = self.rows[found["data-crawl"]] = {}
        elif tag == "td" and self._row is not None:
            self._cell = found.get("class", "").split(" ")[0] or None

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell is not None:
            self._row[self._cell] = data


def chromium(*args: str) -> str:
    """Run headless Chromium; its standard output."""
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *args],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout


def rendered(url: str) -> Rows:
    """The dashboard's rows after its script has run (two refreshes)."""
    parser = Rows()
    parser.feed(chromium("--virtual-time-budget=2500", "--dump-dom", url))
    return parser


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SiteServer]]:
    """``trawl serve`` on a free loopback port, its crawls aimed at a slow local site."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: apt-get install chromium (see docs/DEVELOPMENT.md)")
    port = free_port()
    with SiteServer(slow_site) as site:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "trawl", "serve", "--port", str(port), "--token", TOKEN,
                "--data-dir", str(tmp_path / "crawls"), "--", *site.resolve_args(), *FAST,
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{base}/crawls", timeout=1)
                    break
                except httpx.TransportError:
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            yield base, site
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)


def test_the_dashboard_shows_a_running_crawl_as_the_api_does(
    served: tuple[str, SiteServer], tmp_path: Path
) -> None:
    base, site = served
    body = {"seeds": list(site.site.seeds)}
    crawl_id = httpx.post(f"{base}/crawls", json=body, headers=AUTH).json()["crawlId"]

    def api() -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{base}/crawls/{crawl_id}").json()
        return answer

    deadline = time.monotonic() + 30
    while api()["counts"]["fetched"] < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = api()
    row = rendered(base + "/").rows[crawl_id]
    after = api()
    assert row["state"] == "running"
    for key in FIGURES[:2]:
        assert before["counts"][key] <= int(row[key]) <= after["counts"][key], key
    assert re.fullmatch(r"\d+\.\d", row["rate"])

    while api()["state"] != "done":
        assert time.monotonic() < deadline + 60
        time.sleep(0.1)
    final = api()
    # A crawl whose store cannot be read, listed first, hides nothing of the others.
    (tmp_path / "crawls" / "a_broken").mkdir()
    (tmp_path / "crawls" / "a_broken" / "crawl.db").write_bytes(b"garbage\n" * 512)
    page = rendered(base + "/")
    assert page.rows["a_broken"]["state"] == "unreadable"
    row = page.rows[crawl_id]
    assert row["state"] == "done"
    assert {key: int(row[key]) for key in FIGURES} == {key: final["counts"][key] for key in FIGURES}
    icon = httpx.get(f"{base}/favicon.ico")
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"

    shot = tmp_path / "dashboard.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,600", "--virtual-time-budget=2500",
             base + "/")  # fmt: skip
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 5000
