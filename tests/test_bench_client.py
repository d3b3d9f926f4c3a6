"""bench.client: trawl's HTTP client and aiohttp's GET the same pages, by turns."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.client import main, measure
from bench.servers import free_port


def test_both_clients_fetch_the_same_pages_and_their_costs_are_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--requests", "300", "--connections", "8", "--runs", "2", "--server", "builtin"]
    code = main([*argv, "--work-dir", str(tmp_path), "--port", str(free_port())])
    table = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [line.split()[0] for line in table[1:5]] == ["trawl", "aiohttp", "trawl", "aiohttp"]
    assert len({line.split()[-1] for line in table[1:5]}) == 1  # the same body bytes
    assert table[5].startswith("median trawl")
    assert table[6].startswith("median aiohttp")
    assert table[7].startswith("trawl/aiohttp: CPU per request ")


def test_every_page_is_fetched_whole_by_both_clients(tmp_path: Path) -> None:
    runs = measure(
        requests=200, connections=5, runs=1, server="builtin", work_dir=tmp_path, port=free_port()
    )
    trawl, aiohttp = runs
    assert (trawl.client, aiohttp.client) == ("trawl", "aiohttp")
    assert trawl.statuses == aiohttp.statuses
    assert sum(trawl.statuses.values()) == 200
    assert trawl.statuses.get(200, 0) > 150  # the site's pages, a few redirects and 404s
    assert trawl.body_bytes == aiohttp.body_bytes > 200 * 8_000  # 8-40 KB pages


def test_bad_counts_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--requests", "0"])
    assert exit_.value.code == 2
    assert "must be positive" in capsys.readouterr().err
