"""The operator console of ``trawl serve``, driven in a real browser (Playwright with
Debian's Chromium) against a running server and a slow local site: an operator enters
the token, starts a crawl from the form, watches its counts and charts move, pauses and
resumes it with the buttons, slows one host down from the rule form, and cancels it; the
API and the site's request log say each took effect, the page logs no error, and it fits
a 1,400 px and a 390 px wide screen. Screenshots go to the test's tmp_path only."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench.servers import free_port
from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

from test_api import FAST, TOKEN, slow_site
from trawl.demo import SiteServer

CHROMIUM = "/usr/bin/chromium"
FIGURES = ("discovered", "fetched", "queued", "failed", "status2xx", "status3xx")
HOST_DELAY = 0.6
"""The delay the operator sets for one host from the console, in seconds."""
WAIT = 60_000
"""Milliseconds the page may take to show what is expected."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SiteServer]]:
    """``trawl serve --token`` on a free loopback port, its crawls aimed at a slow local
    site."""
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


@pytest.fixture
def page() -> Iterator[tuple[Page, list[str]]]:
    """A page of headless Chromium 1,400 px wide, and the errors it logs (console errors
    and warnings, failed loads, uncaught exceptions)."""
    problems: list[str] = []

    def logged(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(f"{message.type}: {message.text}")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            opened = browser.new_page(viewport={"width": 1400, "height": 900})
            opened.on("console", logged)
            opened.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
            yield opened, problems
        finally:
            browser.close()


def until(check: Callable[[], Any], seconds: float = 60) -> Any:
    """Poll ``check`` until it gives something true; that."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def fits(page: Page) -> bool:
    """Whether the page is no wider than the window (no horizontal scrolling)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_an_operator_runs_a_crawl_from_the_console(
    served: tuple[str, SiteServer], page: tuple[Page, list[str]], tmp_path: Path
) -> None:
    base, site = served
    browser, problems = page

    def api(crawl_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{base}/crawls/{crawl_id}").json()
        return answer

    # The token is asked for once, before anything can be changed.
    browser.goto(base + "/")
    expect(browser.locator("#token-card")).to_be_visible()
    browser.fill("#token", TOKEN)
    browser.click("#token-form button")
    expect(browser.locator("#token-card")).to_be_hidden()

    # A crawl started from the form, with a policy field of its own.
    browser.fill("#seeds", "\n".join(site.site.seeds))
    browser.fill("#delay", "0.25")
    browser.click("#start")
    expect(browser.locator("#detail")).to_be_visible(timeout=WAIT)
    crawl_id = browser.locator("#detail-id").inner_text()
    assert browser.url.endswith(f"#crawl={crawl_id}")
    until(lambda: api(crawl_id)["state"] == "running")
    stored = until(lambda: httpx.get(f"{base}/crawls/{crawl_id}/settings").json())
    assert stored["politeness"]["delay"] == 0.25

    # Counts and charts move without a reload.
    row = browser.locator(f'#crawls tr[data-crawl="{crawl_id}"]')
    fetched = row.locator("td.fetched")
    first = until(lambda: int(fetched.inner_text() or 0) >= 2 and int(fetched.inner_text()))
    until(lambda: int(fetched.inner_text()) > first)
    chart = browser.locator("#chart-pages")
    until(lambda: int(chart.get_attribute("data-points") or 0) >= 2)
    line = browser.locator('#chart-pages path[data-series="2xx"]')
    drawn = line.get_attribute("d")
    until(lambda: line.get_attribute("d") != drawn)
    assert browser.locator("#chart-pages text", has_text="pages/s").count() == 1
    assert browser.locator("#chart-queue path.line").count() == 1
    # The page catches up with the API (a count past the API's was read after it), and
    # shows nothing the API has not counted.
    before = api(crawl_id)["counts"]
    until(lambda: int(fetched.inner_text()) > before["fetched"])
    shown = {key: int(row.locator(f"td.{key}").inner_text()) for key in FIGURES[:2]}
    after = api(crawl_id)["counts"]
    assert all(before[key] <= shown[key] <= after[key] for key in shown), (before, shown)

    # Pause and resume with the buttons: the API agrees, and so does the page.
    browser.click("#pause")
    until(lambda: api(crawl_id)["state"] == "paused")
    expect(browser.locator("#detail-state")).to_have_text("paused", timeout=WAIT)
    paused = api(crawl_id)["counts"]["fetched"]
    time.sleep(0.5)
    assert api(crawl_id)["counts"]["fetched"] == paused
    expect(browser.locator("#resume")).to_be_enabled()
    browser.click("#resume")
    until(lambda: api(crawl_id)["state"] == "running")
    expect(browser.locator("#detail-state")).to_have_text("running", timeout=WAIT)

    # A host's delay set from its row of the host table and the rule form.
    www = browser.locator('#hosts tr[data-host^="www.trawl.test"]')
    expect(www).to_have_count(1, timeout=WAIT)
    host = www.get_attribute("data-host")
    www.locator("button").click()
    expect(browser.locator("#rule-host")).to_have_value(host or "")
    browser.fill("#rule-delay", str(HOST_DELAY))
    browser.click("#host-rule-form button")
    expect(browser.locator(f'#rules tr[data-host="{host}"] td.delay')).to_have_text(str(HOST_DELAY))
    applied = time.monotonic() + 1.0  # workers read the rules twice a second
    policy = httpx.get(f"{base}/crawls/{crawl_id}/policy").json()
    assert policy["hosts"][host] == {"delay": HOST_DELAY, "blocked": False}
    name = (host or "").rpartition(":")[0]

    def later() -> list[Any]:
        return sorted(
            (r for r in site.requests if r.start > applied and r.host == name
             and r.path != "/robots.txt"),
            key=lambda r: r.start,
        )  # fmt: skip

    asked = until(lambda: len(later()) >= 4 and later(), seconds=30)
    assert min(b.start - a.end for a, b in itertools.pairwise(asked)) >= HOST_DELAY - 0.02

    # A URL pattern blocked from its form.
    browser.fill("#block-pattern", "/features/")
    browser.click("#block-form button")
    expect(browser.locator("#patterns")).to_have_text("/features/")
    assert httpx.get(f"{base}/crawls/{crawl_id}/policy").json()["patterns"] == ["/features/"]

    # The host table sorts, and the URL browser filters by host.
    browser.click('#hosts th button[data-sort="name"]')
    expect(browser.locator('#hosts th button[data-sort="name"]')).to_have_attribute(
        "aria-sort", "ascending"
    )
    names = browser.locator("#hosts td.host").all_inner_texts()
    assert names == sorted(names)
    browser.fill("#url-host", host or "")
    browser.click("#url-filter button")

    def of_host() -> bool:
        urls = browser.locator("#urls td.url").all_inner_texts()
        return bool(urls) and all(httpx.URL(url).netloc.decode() == host for url in urls)

    until(of_host)
    browser.wait_for_timeout(3500)  # a refresh of the URLs keeps the filter
    assert of_host()

    # Readable at 1,400 px and on a 390 px wide phone.
    assert fits(browser)
    browser.screenshot(path=tmp_path / "console-1400.png", full_page=True)
    browser.set_viewport_size({"width": 390, "height": 844})
    browser.wait_for_timeout(1500)
    assert fits(browser)
    browser.screenshot(path=tmp_path / "console-390.png", full_page=True)
    browser.set_viewport_size({"width": 1400, "height": 900})

    # Cancelled with its button; a damaged crawl is listed and hides nothing.
    browser.click("#cancel")
    until(lambda: api(crawl_id)["state"] == "cancelled")
    (tmp_path / "crawls" / "a_broken").mkdir()
    (tmp_path / "crawls" / "a_broken" / "crawl.db").write_bytes(b"garbage\n" * 512)
    browser.reload()
    expect(browser.locator("#token-card")).to_be_hidden()  # kept for the tab
    expect(browser.locator('#crawls tr[data-crawl="a_broken"] td.state')).to_have_text(
        "unreadable", timeout=WAIT
    )
    expect(row.locator("td.state")).to_have_text("cancelled")
    final = api(crawl_id)
    until(lambda: {k: int(row.locator(f"td.{k}").inner_text()) for k in FIGURES}
          == {k: final["counts"][k] for k in FIGURES})  # fmt: skip
    expect(browser.locator("#resume")).to_be_disabled()
    icon = httpx.get(f"{base}/favicon.ico")
    assert (icon.status_code, icon.headers["content-type"]) == (200, "image/svg+xml")
    assert problems == []
