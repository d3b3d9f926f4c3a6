"""The ``trawl`` command line: exit codes, one-line errors, config files, status, export.

Usage errors run in-process through :func:`trawl.cli.commands.main` (fast, same code path as the
console script); crawls run ``python -m trawl`` as a subprocess against a generated site
on loopback, so the process boundary (exit codes, stdout, stderr, locks) is real.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from conftest import is_page
from test_store import insert, make_version_1_crawl
from test_store import url as new_url
from trawl.cli.commands import cli, main
from trawl.crawl.commit import merge
from trawl.demo import Site, SiteServer, generate_site
from trawl.ops.export import COLUMNS
from trawl.options import OPTIONS, Group
from trawl.store.sqlite.store import SQLiteStore
from trawl.store.values import CommitBatch, Fence, Outcome, State

# Fast settings for tests, given through a config file.
FAST = {"delay": 0, "response_factor": 0.5, "retry_base": 0.05, "retry_cap": 1}
SUMMARY_KEYS = {
    "state", "discovered", "fetched", "queued", "status", "robots_blocked", "off_scope",
    "excluded", "invalid", "invalid_by_reason", "links", "duplicates", "redirects",
    "redirect_limit", "retries", "failed", "errors_by_class", "requests", "elapsed",
    "pages_per_second", "dns", "limits", "content", "freshness", "fetched_this_run",
    "robots_unavailable", "unreachable_hosts", "stale_completions", "uploads", "render",
}  # fmt: skip


@dataclass(frozen=True)
class Run:
    """A finished ``trawl`` process."""

    code: int
    out: str
    err: str


def make_site(port: int) -> Site:
    """A small generated site: quick to crawl completely."""
    return generate_site(port, hosts=4, pages_per_host=30)


def trawl(*args: str, timeout: float = 30) -> Run:
    """Run ``python -m trawl ARGS`` to its end."""
    done = subprocess.run(
        [sys.executable, "-m", "trawl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def trawl_inline(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    """Run the CLI in this process (for invocations that fail before crawling)."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    captured = capsys.readouterr()
    code = exited.value.code
    return Run(code if isinstance(code, int) else 1, captured.out, captured.err)


def assert_one_error_line(run: Run, code: int = 2) -> str:
    """The run failed with ``code`` and exactly one ``trawl: error:`` line; return it."""
    assert run.code == code, run
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("trawl: error:"), lines[0]
    assert "Traceback" not in run.err
    return lines[0]


def write_config(path: Path, settings: dict[str, float]) -> Path:
    """Write ``settings`` as a TOML config file."""
    path.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
    return path


def crawl_args(server: SiteServer, data_dir: Path, *extra: str, **settings: float) -> list[str]:
    """``crawl`` arguments for the site: the fast test config with ``settings`` on top."""
    config = write_config(data_dir.with_name(f"{data_dir.name}.toml"), FAST | settings)
    return [
        "crawl", *server.site.seeds, *server.resolve_args(), "--data-dir", str(data_dir),
        "--config", str(config), "--no-progress", *extra,
    ]  # fmt: skip


def page_gets(server: SiteServer) -> int:
    """Page requests the server has answered (robots.txt and the soft-404 probe aside)."""
    return sum(1 for r in server.requests if is_page(r.path))


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site) as s:
        yield s


@dataclass(frozen=True)
class Crawled:
    """A finished crawl of the module's site and its ``--json`` summary."""

    data_dir: Path
    summary: dict[str, object]


@pytest.fixture(scope="module")
def crawled(server: SiteServer, tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    data_dir = tmp_path_factory.mktemp("crawled")
    run = trawl(*crawl_args(server, data_dir, "--json"))
    assert run.code == 0, run.err
    return Crawled(data_dir, json.loads(run.out))


# -- usage errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["notaurl"], id="not-a-url"),
        pytest.param(["ftp://x"], id="ftp"),
        pytest.param(["http://"], id="no-host"),
        pytest.param([], id="no-seed"),
        pytest.param(["http://x.test/", "--per-host", "0"], id="per-host-0"),
        pytest.param(["http://x.test/", "--scope", "nope"], id="bad-scope"),
        pytest.param(["http://x.test/", "--include", "("], id="bad-regex"),
        pytest.param(["http://x.test/", "--max-pages", "0"], id="max-pages-0"),
        pytest.param(["http://x.test/", "--concurrency", "many"], id="not-an-int"),
        pytest.param(["http://x.test/", "--retry-base", "0"], id="retry-base-0"),
        pytest.param(["http://x.test/", "--resolve", "nohost"], id="bad-resolve"),
        pytest.param(["http://x.test/", "--resolve", "x.test=not-an-ip"], id="resolve-not-ip"),
        pytest.param(["http://x.test/", "--no-such-option"], id="unknown-option"),
        pytest.param(["http://x.test/", "--events", "/dev/null/events.jsonl"], id="events-path"),
        pytest.param(["http://x.test/", "--stats-interval", "-1"], id="stats-interval"),
    ],
)
def test_bad_usage_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    run = trawl_inline(capsys, "crawl", *args, "--data-dir", str(tmp_path), "--no-progress")
    assert_one_error_line(run)
    assert run.out == ""


def test_unknown_subcommand_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_error_line(trawl_inline(capsys, "crawlz"))


def test_console_script_reports_bad_seed_in_one_line(tmp_path: Path) -> None:
    run = trawl("crawl", "notaurl", "--data-dir", str(tmp_path))
    line = assert_one_error_line(run)
    assert "notaurl" in line


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(None, "cannot read config file", id="missing"),
        pytest.param("delay = [\n", "not valid TOML", id="invalid-toml"),
        pytest.param("dealy = 1\n", "unknown key 'dealy' (did you mean 'delay'?)", id="unknown"),
        pytest.param('delay = "slow"\n', 'delay must be a number, got "slow"', id="wrong-type"),
        pytest.param("per_host = 0\n", "--per-host must be at least 1", id="bad-value"),
        pytest.param("delay = -1\n", "--delay must not be negative", id="negative-delay"),
        pytest.param('scope = "nope"\n', 'must be one of "domain", "host", "prefix"', id="scope"),
    ],
)
def test_bad_config_file_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str | None, message: str
) -> None:
    config = tmp_path / "trawl.toml"
    if text is not None:
        config.write_text(text)
    run = trawl_inline(
        capsys, "crawl", "http://x.test/", "--config", str(config),
        "--data-dir", str(tmp_path / "data"), "--no-progress",
    )  # fmt: skip
    assert message in assert_one_error_line(run)


# -- seeds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ("example.com", "seed 'example.com' has no scheme: did you mean https://example.com/?"),
        ("example.com/docs?a=1", "has no scheme: did you mean https://example.com/docs?a=1?"),
        ("localhost:8080", "has no scheme: did you mean https://localhost:8080/?"),
        (
            "http://a.test/ http://b.test/",
            "seed 'http://a.test/ http://b.test/' holds whitespace: "
            "pass each seed URL as an argument of its own",
        ),
        ("ftp://a.test/", "seed 'ftp://a.test/' is not an http(s) URL"),
        ("mailto:me@a.test", "is not an http(s) URL"),
        ("http://", "seed 'http://' has no host"),
        ("http://a.test:99999/", "has a port outside 1-65535"),
        ("", "seed '' is empty"),
    ],
)
def test_an_unusable_seed_is_one_line_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, seed: str, message: str
) -> None:
    data_dir = tmp_path / "data"
    run = trawl_inline(capsys, "crawl", seed, "--data-dir", str(data_dir), "--no-progress")
    line = assert_one_error_line(run)
    assert line.startswith("trawl: error: seed ")
    assert message in line
    assert not data_dir.exists()


def test_a_bad_seed_with_fresh_leaves_the_old_crawl_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "crawl.db").write_bytes(b"the crawl before")
    run = trawl_inline(capsys, "crawl", "example.com", "--fresh", "--data-dir", str(tmp_path))
    assert "did you mean https://example.com/?" in assert_one_error_line(run)
    assert (tmp_path / "crawl.db").read_bytes() == b"the crawl before"


def test_seeds_from_a_config_file_are_checked_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "c.toml"
    config.write_text('seeds = ["https://a.test/", "b.test"]\n')
    run = trawl_inline(capsys, "crawl", "--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert assert_one_error_line(run) == (
        "trawl: error: seed 'b.test' has no scheme: did you mean https://b.test/?"
    )


# -- help --------------------------------------------------------------------------------


def test_bare_trawl_prints_the_help_and_exits_0() -> None:
    run = trawl()
    assert run.code == 0, run.err
    assert run.err == ""
    assert run.out.startswith("Usage: trawl [OPTIONS] COMMAND")
    commands = run.out.split("Commands:\n", 1)[1]
    for name in ("crawl", "demo", "export", "recrawl", "serve", "status", "worker"):
        assert f"  {name} " in commands, name


def test_crawl_help_lists_options_by_topic_with_defaults_and_examples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    run = trawl("crawl", "--help")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert max(map(len, lines)) <= 80
    assert not [line for line in lines if re.search(r"[a-z]-$", line)]  # no word split at "-"
    headings = [line for line in lines if re.fullmatch(r"[A-Z][a-z ]+:", line)]
    assert headings == [f"{group.value}:" for group in Group]
    for option in OPTIONS:
        if option.positional:
            continue
        section = lines.index(f"{option.group.value}:")
        end = next(i for i in range(section + 1, len(lines)) if not lines[i])
        term = next((line for line in lines[section:end] if f" {option.flag} " in f"{line} "), None)
        assert term is not None, option.name
        if option.default_text is not None:
            assert f"[default: {option.default_text}]" in " ".join(run.out.split()), option.name
    text = " ".join(run.out.split())
    assert "[default: sized as the crawl runs, from 64]" in text
    assert "(1% false positives)" in text
    examples = run.out.split("Examples:", 1)[1]
    assert "trawl crawl https://example.com/ --contact " in examples
    assert "--max-pages 10000" in examples
    assert "--warc --text" in examples
    assert "--store postgresql://" in examples
    assert "trawl worker --store postgresql://" in examples


def test_every_command_and_option_has_help() -> None:
    def commands(command: click.Command) -> Iterator[click.Command]:
        yield command
        if isinstance(command, click.Group):
            for sub in command.commands.values():
                yield from commands(sub)

    seen = 0
    for command in commands(cli):
        assert command.help, command.name
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{command.name} {param.opts}"
                seen += 1
    assert seen > len(OPTIONS) * 3


# -- crawls ------------------------------------------------------------------------------


def test_json_summary_has_the_documented_keys(server: SiteServer, crawled: Crawled) -> None:
    summary = crawled.summary
    assert set(summary) == SUMMARY_KEYS
    assert summary["state"] == "done"
    assert summary["discovered"] == len(server.site.ground_truth)
    assert summary["queued"] == 0
    assert summary["robots_blocked"] == len(server.site.robots_blocked)


def test_status_matches_the_crawl_summary(crawled: Crawled) -> None:
    run = trawl("status", "--data-dir", str(crawled.data_dir), "--json")
    assert run.code == 0, run.err
    status = json.loads(run.out)
    assert status["state"] == "done"
    assert float(str(status["elapsed"])) >= float(str(crawled.summary["elapsed"])) - 0.01
    for key in SUMMARY_KEYS - {"state", "elapsed", "pages_per_second", "fetched_this_run"}:
        assert status[key] == crawled.summary[key], key

    text = trawl("status", "--data-dir", str(crawled.data_dir))
    assert text.code == 0, text.err
    rows = dict(line.split("  ", 1) for line in text.out.splitlines())
    figures = {name.strip(): value.strip() for name, value in rows.items()}
    assert figures["unique URLs discovered"] == str(crawled.summary["discovered"])
    assert figures["fetched"].startswith(f"{crawled.summary['fetched']} ")
    assert figures["requests sent"] == str(crawled.summary["requests"])
    blocked = int(str(crawled.summary["robots_blocked"]))
    blocked -= int(str(crawled.summary["robots_unavailable"]))
    assert figures["blocked by robots.txt"] == str(blocked)


async def test_status_shows_results_refused_as_stale(tmp_path: Path) -> None:
    """A worker that reports a fetch after its host's lease passed to another worker has
    its result refused: ``trawl status`` and ``--json`` say how many."""
    async with SQLiteStore(tmp_path) as store:
        await insert(store, new_url("a.test", 1))
        (old,) = await store.lease_hosts("worker-a", limit=1, ttl=0.2)
        (page,) = await store.claim({old.host_id: 1}, now=1e12, worker="worker-a")
        await asyncio.sleep(0.3)
        await store.lease_hosts("worker-b", limit=1, ttl=60)
        stale = CommitBatch(
            outcomes=[Outcome(page.id, old.host_id, State.DONE, 1, status=200, fetched_at=1.0)],
            fence=Fence(old.host_id, old.generation),
        )
        batch = CommitBatch()
        merge(batch, stale)
        await store.commit(batch)
    run = trawl("status", "--data-dir", str(tmp_path), "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["stale_completions"] == 1
    text = trawl("status", "--data-dir", str(tmp_path))
    assert text.code == 0, text.err
    rows = dict(line.split("  ", 1) for line in text.out.splitlines())
    assert rows["stale results refused"].strip() == "1"


def test_status_without_a_crawl_is_a_clear_error(tmp_path: Path) -> None:
    run = trawl("status", "--data-dir", str(tmp_path / "nothing"))
    line = assert_one_error_line(run, code=1)
    assert "no crawl found" in line
    assert not (tmp_path / "nothing").exists()


def test_export_of_a_crawl_an_older_trawl_wrote_says_how_to_upgrade_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "old"
    make_version_1_crawl(data_dir)
    run = trawl("export", "--data-dir", str(data_dir))
    line = assert_one_error_line(run, code=1)
    assert "older trawl" in line
    assert "trawl crawl" in line


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_export_writes_one_row_per_stored_url(
    server: SiteServer, crawled: Crawled, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"urls.{fmt}"
    run = trawl("export", "--data-dir", str(crawled.data_dir), "--format", fmt, "-o", str(out))
    assert run.code == 0, run.err
    text = out.read_text(encoding="utf-8")
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text))
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = [dict(row) for row in reader]
    else:
        rows = [json.loads(line) for line in text.splitlines()]
        assert all(tuple(row) == COLUMNS for row in rows)
    urls = [row["url"] for row in rows]
    assert len(urls) == len(set(urls)) == crawled.summary["discovered"]
    assert set(urls) == server.site.ground_truth
    by_url = {row["url"]: row for row in rows}
    for url in server.site.robots_blocked:
        assert str(by_url[url]["error"]).startswith("robots")
        assert by_url[url]["status"] in ("", None)
    for url in server.site.expected_fetches:
        assert by_url[url]["fetched_at"]
        assert str(by_url[url]["status"]).isdigit()

    stdout = trawl("export", "--data-dir", str(crawled.data_dir), "--format", fmt)
    assert stdout.code == 0
    assert stdout.out == text


def test_max_pages_budget_is_honoured(tmp_path: Path) -> None:
    with SiteServer(make_site) as server:
        run = trawl(*crawl_args(server, tmp_path, "--max-pages", "7", "--json"))
        assert run.code == 0, run.err
        summary = json.loads(run.out)
        assert summary["state"] == "page budget reached"
        assert summary["fetched"] <= 7
        assert page_gets(server) <= 7
        queued = f"{summary['queued']:,}"
        assert run.err.splitlines() == [
            f"trawl: page budget reached with {queued} URLs queued; --max-pages counts every "
            "run's pages, so run the same command with a larger --max-pages to go on"
        ]


def test_config_file_keys_take_effect(tmp_path: Path) -> None:
    with SiteServer(make_site) as server:
        run = trawl(*crawl_args(server, tmp_path / "data", "--json", max_pages=4, delay=0.3))
        assert run.code == 0, run.err
        summary = json.loads(run.out)
        assert summary["state"] == "page budget reached"
        assert summary["fetched"] <= 4
        assert page_gets(server) <= 4
        host = server.site.hosts[0]
        gaps = server.gaps(host)
        assert gaps
        assert min(gaps) >= 0.3 - 0.02


def test_command_line_wins_over_config_file(tmp_path: Path) -> None:
    with SiteServer(make_site) as server:
        run = trawl(
            *crawl_args(server, tmp_path / "data", "--max-pages", "3", "--json", max_pages=1)
        )
        assert run.code == 0, run.err
        assert json.loads(run.out)["fetched"] == 3


def test_rerun_resumes_and_fresh_starts_over(tmp_path: Path) -> None:
    with SiteServer(make_site) as server:
        first = trawl(*crawl_args(server, tmp_path, "--json"))
        assert first.code == 0, first.err
        expected = len(server.site.expected_fetches)
        assert json.loads(first.out)["fetched"] >= expected - 10
        gets = page_gets(server)

        again = trawl(*crawl_args(server, tmp_path, "--json"))
        assert again.code == 0, again.err
        assert json.loads(again.out)["state"] == "done"
        assert page_gets(server) == gets

        fresh = trawl(*crawl_args(server, tmp_path, "--fresh", "--json"))
        assert fresh.code == 0, fresh.err
        summary = json.loads(fresh.out)
        assert summary["discovered"] == len(server.site.ground_truth)
        assert summary["fetched"] == json.loads(first.out)["fetched"]
        assert page_gets(server) >= gets + len(server.site.expected_fetches)


def test_second_crawl_is_refused_and_status_works_while_crawling(tmp_path: Path) -> None:
    with SiteServer(make_site) as server:
        args = crawl_args(server, tmp_path, "--json", delay=0.3)
        slow = subprocess.Popen(
            [sys.executable, "-m", "trawl", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while page_gets(server) < 3:
                assert slow.poll() is None, slow.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.02)

            second = trawl(*crawl_args(server, tmp_path))
            assert "already crawling" in assert_one_error_line(second)

            status = trawl("status", "--data-dir", str(tmp_path), "--json")
            assert status.code == 0, status.err
            figures = json.loads(status.out)
            assert figures["discovered"] >= 1
            assert 1 <= figures["requests"] <= page_gets(server)
            assert slow.poll() is None
        finally:
            slow.kill()
            slow.communicate(timeout=10)
