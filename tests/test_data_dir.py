"""Data dirs: a run resumes only the crawl it names, retries what its options now allow,
never takes a damaged or foreign ``crawl.db`` for a crawl, reads a crawl it may not
write, starts every output over with ``--fresh``, and leaves nothing behind when its
command is refused.

Every crawl is a real ``python -m trawl`` process against the generated site on
loopback; the store's files are damaged for real and permission bits are made to count
by running ``status`` and ``export`` as the unprivileged user ``nobody``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path

import pytest

from pg import URL as PG_URL
from pg import crawl_name
from test_cli import FAST, Run, assert_one_error_line, make_site, trawl, write_config
from trawl.cli.commands import main
from trawl.crawl.runner import TEXT_DIR, WARC_DIR
from trawl.demo import SiteServer
from trawl.store.sqlite.store import DB_NAME

__all__ = ["crawl_name"]

NOBODY = 65534
"""The uid and gid ``status`` and ``export`` run as when the tests run as root."""


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site) as s:
        yield s


def crawl(
    server: SiteServer,
    data_dir: Path,
    *extra: str,
    seeds: Sequence[str] | None = None,
    allow: bool = True,
) -> Run:
    """``trawl crawl`` of the site (or of ``seeds``) into ``data_dir`` with the fast
    test settings; ``allow``: with ``--allow-network`` for loopback."""
    config = write_config(data_dir.with_name(f"{data_dir.name}.toml"), FAST)
    network = server.resolve_args()
    if not allow:
        network = network[:-2]
        assert "--allow-network" not in network
    return trawl(
        "crawl", *(server.site.seeds if seeds is None else seeds), *network,
        "--data-dir", str(data_dir), "--config", str(config), "--no-progress", "--json",
        *extra, timeout=60,
    )  # fmt: skip


def summary_of(run: Run) -> dict[str, object]:
    """The ``--json`` summary a finished run printed."""
    assert run.code == 0, run.err
    summary: dict[str, object] = json.loads(run.out)
    return summary


def status(data_dir: Path, *extra: str) -> dict[str, object]:
    """``trawl status --json`` of ``data_dir``."""
    return summary_of(trawl("status", "--data-dir", str(data_dir), "--json", *extra))


def stored_states(data_dir: Path) -> dict[str, int]:
    """Per URL of the SQLite store in ``data_dir``, its state."""
    with closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        return dict(db.execute("SELECT url, state FROM urls").fetchall())


# -- seeds and scope ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seeds", "extra"),
    [
        pytest.param("first", (), id="fewer-seeds"),
        pytest.param("other", (), id="other-seed"),
        pytest.param("all", ("--scope", "host"), id="scope"),
        pytest.param("all", ("--include", "/p"), id="include"),
        pytest.param("all", ("--exclude", "/private/"), id="exclude"),
    ],
)
def test_a_run_of_other_seeds_or_scope_is_refused_and_changes_nothing(
    server: SiteServer, tmp_path: Path, seeds: str, extra: tuple[str, ...]
) -> None:
    data_dir = tmp_path / "data"
    first = summary_of(crawl(server, data_dir, "--max-pages", "5"))
    before = stored_states(data_dir)
    chosen = {
        "first": server.site.seeds[:1],
        "other": ["http://elsewhere.test/"],
        "all": list(server.site.seeds),
    }[seeds]

    refused = crawl(server, data_dir, "--max-pages", "50", *extra, seeds=chosen)
    line = assert_one_error_line(refused)
    assert f"{data_dir} holds a crawl of {server.site.seeds[0]}" in line
    assert "--fresh" in line
    assert "--data-dir DIR" in line
    assert stored_states(data_dir) == before
    assert status(data_dir)["fetched"] == first["fetched"]


def test_the_same_seeds_in_any_order_and_spelling_resume_with_other_options(
    server: SiteServer, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = summary_of(crawl(server, data_dir, "--max-pages", "5"))
    respelled = [seed.replace("http://www.", "HTTP://WWW.") for seed in reversed(server.site.seeds)]
    assert respelled != list(server.site.seeds)

    again = summary_of(crawl(server, data_dir, "--max-pages", "9", "--delay", "0", seeds=respelled))
    assert again["fetched"] == 9
    assert int(str(again["fetched"])) > int(str(first["fetched"]))


def test_fresh_starts_a_crawl_of_other_seeds_where_one_was_refused(
    server: SiteServer, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    summary_of(crawl(server, data_dir, "--max-pages", "5"))
    seeds = server.site.seeds[:1]
    assert crawl(server, data_dir, "--max-pages", "3", seeds=seeds).code == 2
    fresh = summary_of(crawl(server, data_dir, "--max-pages", "3", "--fresh", seeds=seeds))
    assert fresh["fetched"] == 3


def test_a_postgresql_crawl_of_other_seeds_is_refused_naming_fresh_and_crawl(
    server: SiteServer, tmp_path: Path, crawl_name: str
) -> None:
    store = ("--store", PG_URL, "--crawl", crawl_name)
    summary_of(crawl(server, tmp_path / "data", "--max-pages", "5", *store))
    refused = crawl(server, tmp_path / "data", *store, seeds=server.site.seeds[:1])
    line = assert_one_error_line(refused)
    assert f"crawl {crawl_name!r}" in line
    assert "--fresh" in line
    assert "--crawl NAME" in line


# -- URLs refused for their address ------------------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_urls_refused_for_their_address_are_fetched_once_the_network_is_allowed(
    server: SiteServer, tmp_path: Path, crawl_name: str, engine: str
) -> None:
    data_dir = tmp_path / "data"
    store = ("--store", PG_URL, "--crawl", crawl_name) if engine == "postgresql" else ()
    blocked = crawl(server, data_dir, *store, allow=False)
    assert blocked.code != 2, blocked.err
    refused = status(data_dir, *store)
    seeds = len(server.site.seeds)
    assert (refused["fetched"], refused["failed"]) == (0, seeds)
    assert refused["errors_by_class"] == {"blocked_address": seeds}

    allowed = summary_of(crawl(server, data_dir, *store))
    assert allowed["fetched"] == len(server.site.expected_fetches)
    assert allowed["discovered"] == len(server.site.ground_truth)
    assert (allowed["failed"], allowed["errors_by_class"], allowed["queued"]) == (0, {}, 0)
    shown = status(data_dir, *store)
    for key in ("fetched", "failed", "queued", "discovered", "errors_by_class"):
        assert shown[key] == allowed[key], key
    rows = [
        json.loads(line)
        for line in trawl("export", "--data-dir", str(data_dir), *store).out.splitlines()
    ]
    assert sum(1 for row in rows if row["error"] == "blocked_address") == 0
    assert sum(1 for row in rows if row["fetched_at"]) == allowed["fetched"]


# -- damaged and foreign stores ----------------------------------------------------------


@pytest.fixture(scope="module")
def finished(server: SiteServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data dir of a finished crawl of the site (copy it before changing it)."""
    data_dir = tmp_path_factory.mktemp("finished") / "data"
    summary = summary_of(crawl(server, data_dir))
    assert summary["state"] == "done"
    return data_dir


def copy_of(finished: Path, where: Path) -> Path:
    """A copy of the finished crawl's data dir at ``where``."""
    shutil.copytree(finished, where)
    return where


def write_page(path: Path, page: int, data: bytes) -> None:
    """Overwrite page ``page`` (counted from 1) of the database at ``path``."""
    with closing(sqlite3.connect(path)) as db:
        (size,) = db.execute("PRAGMA page_size").fetchone()
    with path.open("r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(data[:size].ljust(size, b"\xa5"))


def root_page(path: Path, table: str) -> int:
    """The first page of ``table`` in the database at ``path``."""
    with closing(sqlite3.connect(path)) as db:
        (page,) = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    return int(page)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"<html>not a database</html>\n" * 200, id="not-sqlite"),
    ],
)
def test_a_crawl_db_that_holds_no_crawl_is_refused_by_every_command(
    server: SiteServer, tmp_path: Path, content: bytes
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / DB_NAME).write_bytes(content)
    runs = [
        crawl(server, data_dir),
        trawl("status", "--data-dir", str(data_dir)),
        trawl("export", "--data-dir", str(data_dir)),
    ]
    for run in runs:
        line = assert_one_error_line(run, code=1)
        assert str(data_dir / DB_NAME) in line
    assert (data_dir / DB_NAME).read_bytes() == content
    assert sorted(p.name for p in data_dir.iterdir()) == [DB_NAME, "crawl.lock"]


def test_status_refuses_a_store_damaged_where_crawl_and_export_refuse_it(
    server: SiteServer, finished: Path, tmp_path: Path
) -> None:
    source = finished / DB_NAME
    with closing(sqlite3.connect(source)) as db:
        (pages,) = db.execute("PRAGMA page_count").fetchone()
    damaged = {
        "urls": root_page(source, "urls"),
        "ready": root_page(source, "ready"),
        "urls_claimed": root_page(source, "urls_claimed"),
        "middle": pages // 2,
    }
    refused_somewhere = 0
    for name, page in damaged.items():
        data_dir = copy_of(finished, tmp_path / name)
        write_page(data_dir / DB_NAME, page, os.urandom(1 << 16))
        shown = trawl("status", "--data-dir", str(data_dir))
        exported = trawl("export", "--data-dir", str(data_dir))
        crawled = crawl(server, copy_of(data_dir, tmp_path / f"{name}-crawled"))
        rejected = [run for run in (exported, crawled) if run.code != 0]
        for run in rejected:
            assert "malformed" in assert_one_error_line(run, code=1)
        if rejected:
            refused_somewhere += 1
            line = assert_one_error_line(shown, code=1)
            assert "malformed" in line
            assert str(data_dir / DB_NAME) in line
    assert refused_somewhere >= 3


def run_as_nobody(*args: str) -> Run:
    """Run the CLI with ``args`` in a child process whose user may not write to files
    it does not own (``nobody`` when this process is root, else this process's user)."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its pipes and exit code
        code = 1
        try:
            sys.stdout = os.fdopen(out_write, "w")
            sys.stderr = os.fdopen(err_write, "w")
            if os.geteuid() == 0:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(out_write)
    os.close(err_write)
    with os.fdopen(out_read) as out, os.fdopen(err_read) as err:
        stdout, stderr = out.read(), err.read()
    _, wait_status = os.waitpid(pid, 0)
    return Run(os.waitstatus_to_exitcode(wait_status), stdout, stderr)


@pytest.fixture
def readonly_crawl(finished: Path) -> Iterator[Path]:
    """A copy of the finished crawl that ``run_as_nobody`` may read but not write: in a
    directory of its own that everyone may enter, its files owned by this process."""
    root = Path(tempfile.mkdtemp(prefix="trawl-readonly-"))
    try:
        root.chmod(0o755)
        data_dir = copy_of(finished, root / "data")
        for path in data_dir.iterdir():
            path.chmod(0o444)
        data_dir.chmod(0o555)
        yield data_dir
    finally:
        data_dir.chmod(0o755)
        shutil.rmtree(root)


def test_status_and_export_read_a_crawl_they_may_not_write(
    finished: Path, readonly_crawl: Path
) -> None:
    probe = run_as_nobody("crawl", "http://a.test/", "--data-dir", str(readonly_crawl / "new"))
    assert "Permission denied" in assert_one_error_line(probe, code=1)

    shown = run_as_nobody("status", "--data-dir", str(readonly_crawl), "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out) == status(finished)
    for fmt in ("jsonl", "csv"):
        exported = run_as_nobody("export", "--data-dir", str(readonly_crawl), "--format", fmt)
        assert exported.code == 0, exported.err
        expected = trawl("export", "--data-dir", str(finished), "--format", fmt)
        assert exported.out == expected.out
    assert sorted(p.name for p in readonly_crawl.iterdir()) == [DB_NAME, "crawl.lock"]


def test_a_crawl_db_that_cannot_be_read_is_refused_naming_it(readonly_crawl: Path) -> None:
    database = readonly_crawl / DB_NAME
    readonly_crawl.chmod(0o755)
    database.chmod(0o000)
    readonly_crawl.chmod(0o555)
    for command in ("status", "export"):
        run = run_as_nobody(command, "--data-dir", str(readonly_crawl))
        line = assert_one_error_line(run, code=1)
        assert f"cannot read {database}: Permission denied" in line


# -- --fresh -----------------------------------------------------------------------------


def text_records(data_dir: Path) -> int:
    """The records in the data dir's ``--text`` files."""
    count = 0
    for path in (data_dir / TEXT_DIR).glob("*.jsonl.gz"):
        with gzip.open(path, "rt", encoding="utf-8") as stream:
            count += sum(1 for _ in stream)
    return count


def warc_responses(data_dir: Path) -> int:
    """The response records in the data dir's WARC files."""
    return sum(
        gzip.decompress(path.read_bytes()).count(b"WARC-Type: response\r\n")
        for path in (data_dir / WARC_DIR).glob("*.warc.gz")
    )


def test_fresh_starts_every_output_over(tmp_path: Path) -> None:
    # Each run crawls a site of its own, so that each meets the site's one-off answers
    # (a 503 before a 200) and writes the same outputs.
    data_dir = tmp_path / "data"
    events = tmp_path / "events.jsonl"
    outputs = ("--text", "--warc", "--events", str(events))
    written = []
    for extra in ((), ("--fresh",)):
        with SiteServer(make_site) as server:
            summary = summary_of(crawl(server, data_dir, *outputs, *extra))
            assert summary["fetched"] == len(server.site.expected_fetches)
        lines = len(events.read_text().splitlines())
        written.append((text_records(data_dir), warc_responses(data_dir), lines))
    assert all(written[0]), written
    assert written[1] == written[0]


# -- refused commands --------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["notaurl"], id="bad-seed"),
        pytest.param(["http://x.test/", "--lease-ttl", "10"], id="short-lease"),
        pytest.param(["http://x.test/", "--events", "/dev/null/events.jsonl"], id="events-path"),
    ],
)
def test_a_refused_command_leaves_no_data_dir(tmp_path: Path, args: list[str]) -> None:
    data_dir = tmp_path / "data"
    run = trawl("crawl", *args, "--data-dir", str(data_dir), "--no-progress")
    assert_one_error_line(run)
    assert not data_dir.exists()


def test_a_data_dir_that_is_a_file_is_bad_usage(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    run = trawl("crawl", "http://x.test/", "--data-dir", str(afile), "--no-progress")
    line = assert_one_error_line(run)
    assert f"--data-dir {afile} is a file" in line
    assert afile.read_text() == "mine\n"
