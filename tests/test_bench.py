"""The crawl benchmark: its log arithmetic, its ground truth, and a small run end to end."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from bench.accesslog import (
    LogRecord,
    canonical_url,
    duplicate_gets,
    max_inflight_per_host,
    page_requests,
    parse_log,
)
from bench.crawl import BenchResult, run_bench, tree_rss
from bench.servers import free_port, host_addresses, serve
from bench.site import DOMAIN, GroundTruth, SiteParams, ensure_site

ROOT = Path(__file__).resolve().parents[1]


def _record(host: str, start: float, end: float, uri: str = "/") -> LogRecord:
    return LogRecord(host, uri, 200, end, end - start)


def test_back_to_back_requests_do_not_overlap() -> None:
    records = [_record("a", 0.0, 1.0), _record("a", 1.0, 2.0), _record("a", 2.5, 3.0)]
    assert max_inflight_per_host(records) == {"a": 1}


def test_overlapping_requests_count_per_host() -> None:
    records = [
        _record("a", 0.0, 1.0),
        _record("a", 0.5, 1.5),
        _record("a", 0.9, 1.2),
        _record("b", 0.0, 2.0),
        _record("b", 2.0, 3.0),
    ]
    assert max_inflight_per_host(records) == {"a": 3, "b": 1}


def test_zero_length_requests_count_only_inside_another() -> None:
    assert max_inflight_per_host([_record("a", 1.0, 1.0), _record("a", 1.0, 1.0)]) == {"a": 1}
    assert max_inflight_per_host([_record("a", 0.0, 2.0), _record("a", 1.0, 1.0)]) == {"a": 2}
    assert max_inflight_per_host([_record("a", 0.0, 1.0), _record("a", 1.0, 1.0)]) == {"a": 1}


def test_log_lines_and_duplicates_in_ground_truth_spelling() -> None:
    text = (
        "www.bench.test /a.html 200 100.250 0.050\n"
        "www.bench.test /a.html?utm_source=x&gclid=y 200 100.300 0.001\n"
        "www.bench.test /robots.txt 200 99.000 0.001\n"
        "www.bench.test /robots.txt 200 99.500 0.001\n"
        "h1.bench.test /b.html?z=1&utm_medium=m 404 101.000 0.000\n"
    )
    records = parse_log(text)
    assert records[0] == LogRecord("www.bench.test", "/a.html", 200, 100.25, 0.05)
    assert records[0].start == pytest.approx(100.2)
    requests = page_requests(records, 8080)
    assert requests == {
        "http://www.bench.test:8080/a.html": 2,
        "http://h1.bench.test:8080/b.html?z=1": 1,
    }
    assert duplicate_gets(requests) == 1
    assert canonical_url("WWW.BENCH.TEST.", "/x?b=2&a=1", 1) == "http://www.bench.test:1/x?a=1&b=2"


class _Links(HTMLParser):
    """Every ``<a href>`` of a page, as written."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href is not None:
            self.hrefs.append(href)


def _in_scope_targets(file: Path, url: str, port: int) -> set[str]:
    parser = _Links()
    parser.feed(file.read_text(encoding="utf-8"))
    targets = set()
    for href in parser.hrefs:
        parts = urlsplit(urljoin(url, href))
        host = (parts.hostname or "").lower()
        if host == DOMAIN or host.endswith("." + DOMAIN):
            path = parts.path + ("?" + parts.query if parts.query else "")
            targets.add(canonical_url(host, path, port))
    return targets


@pytest.fixture(scope="module")
def small_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GroundTruth]:
    return ensure_site(SiteParams(4, 30, free_port()), tmp_path_factory.mktemp("bench"))


def test_ground_truth_holds_every_link_of_every_fetched_page(
    small_site: tuple[Path, GroundTruth],
) -> None:
    root, truth = small_site
    port = truth.params.port
    redirects = json.loads((root / "redirects.json").read_text(encoding="utf-8"))
    unfetched_pages = 0
    for file in sorted((root / "hosts").rglob("*.html")):
        host, *rest = file.relative_to(root / "hosts").parts
        path = "/" + "/".join(rest)
        url = f"http://{host}:{port}{path.removesuffix('index.html')}"
        targets = _in_scope_targets(file, url, port)
        assert len(targets) >= 3
        if url in truth.fetched:
            assert targets <= truth.discovered, url
        else:
            unfetched_pages += 1
    for host, table in redirects.items():
        for path, (status, location) in table.items():
            assert status in (301, 302)
            if f"http://{host}:{port}{path}" in truth.fetched:
                assert location in truth.discovered
    assert unfetched_pages > 0
    assert truth.discovered == truth.fetched | truth.robots_blocked
    assert truth.robots_blocked
    assert all(urlsplit(u).path.startswith("/private/") for u in truth.robots_blocked)
    assert not any(urlsplit(u).path.startswith("/private/") for u in truth.fetched)


def test_site_is_deterministic_and_cached(
    small_site: tuple[Path, GroundTruth], tmp_path: Path
) -> None:
    root, truth = small_site
    again_root, again = ensure_site(truth.params, tmp_path)
    assert again == truth
    page = Path("hosts", "h2.bench.test", "articles", "5.html")
    assert (again_root / page).read_bytes() == (root / page).read_bytes()
    assert 8_000 <= len((root / page).read_bytes()) <= 40_000
    marker = again_root / "hosts" / "marker"
    marker.write_text("kept")
    ensure_site(truth.params, tmp_path)
    assert marker.exists()


def test_every_host_address_accepts_once_the_built_in_server_is_served(tmp_path: Path) -> None:
    # It starts listening on its addresses one after the other; a client that connects
    # to the last host at once must not be refused.
    port = free_port()
    site, truth = ensure_site(SiteParams(30, 4, port), tmp_path / "sites")
    addresses = sorted(set(host_addresses(truth.hosts).values()))
    assert len(addresses) == 30
    with serve(site, truth.hosts, port, tmp_path / "run", "builtin"):
        for address in reversed(addresses):
            socket.create_connection((address, port), timeout=1).close()


@pytest.fixture(scope="module")
def bench_result(tmp_path_factory: pytest.TempPathFactory) -> BenchResult:
    return run_bench(
        hosts=4,
        pages=30,
        server="builtin",
        work_dir=tmp_path_factory.mktemp("run"),
        port=free_port(),
        reference=True,
    )


def test_small_crawl_is_correct(bench_result: BenchResult) -> None:
    r = bench_result
    assert r.failures == []
    assert r.unique_discovered == r.ground_truth_discovered > 100
    assert r.pages_fetched == r.ground_truth_fetched
    assert r.missing_fetches == r.unexpected_fetches == 0
    assert r.duplicate_gets == 0
    assert r.max_inflight_per_host == 1
    assert r.robots_requests == 4
    assert r.links_checked > 30 * r.pages_fetched // 2


def test_every_speed_figure_is_printed(bench_result: BenchResult) -> None:
    table = bench_result.table()
    number = r"\d+(\.\d+)?"
    for label in ("pages/s", "links checked/s", "CPU ms/page", "peak RSS", "wall time"):
        assert re.search(rf"^{re.escape(label)} +{number}", table, re.M), label
    figures = json.loads(bench_result.to_json())
    for key in ("pages_per_second", "links_per_second", "cpu_ms_per_page", "peak_rss_mb"):
        assert figures[key] > 0, key
    assert figures["machine"]["nproc"] >= 1
    assert figures["failures"] == []


def test_startup_and_shutdown_are_the_wall_time_around_the_requests(
    bench_result: BenchResult,
) -> None:
    r = bench_result
    # The interpreter and its imports come before the first request, so startup is never 0.
    assert 0 < r.startup_seconds < r.wall_seconds
    assert 0 <= r.shutdown_seconds < r.wall_seconds - r.startup_seconds
    assert re.search(
        r"^startup, shutdown +\d+\.\d\d s to the first request, \d+\.\d\d s after the last",
        r.table(),
        re.M,
    )


def test_the_reference_is_wget_crawling_the_same_site(bench_result: BenchResult) -> None:
    wget = bench_result.reference
    assert wget is not None, "wget is needed for the reference (apt-get install wget)"
    # Each host through its relative links: most of the site, nothing outside it, once each.
    assert bench_result.ground_truth_fetched // 2 < wget.pages <= bench_result.ground_truth_fetched
    assert wget.outside_truth == 0
    assert wget.requests == wget.pages
    assert wget.wall_seconds > 0
    assert wget.cpu_seconds > 0
    assert re.search(r"^reference \(wget\) +\d+\.\d pages/s", bench_result.table(), re.M)
    assert json.loads(bench_result.to_json())["reference"]["pages_per_second"] > 0


def test_the_reference_without_wget_is_a_usage_error(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    command = [sys.executable, "-m", "bench.crawl", "--reference", "--work-dir", str(tmp_path)]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PATH": str(bare)}
    )
    assert done.returncode == 2
    assert "--reference needs wget" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_command_exits_nonzero_only_for_wrong_figures(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench.crawl", "--hosts", "4", "--pages", "30"]
    command += ["--server", "builtin", "--work-dir", str(tmp_path), "--port", str(free_port())]
    ok = subprocess.run([*command, "--json"], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["duplicate_gets"] == 0
    capped = subprocess.run(
        [*command, "--extra", "--max-pages 20"], cwd=ROOT, capture_output=True, text=True
    )
    assert capped.returncode == 1
    assert "unique" in capped.stdout


def test_tree_rss_counts_child_processes() -> None:
    hog = "b = bytearray(64 * 2**20); import sys; sys.stdin.read()"
    alone = tree_rss(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", hog], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while tree_rss(child.pid) < 64 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tree_rss(os.getpid()) >= alone + 64 * 2**20
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    assert tree_rss(child.pid) == 0
