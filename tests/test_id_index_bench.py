"""The id-index model finds every id it looks up and indexes every row it stores, in
both layouts, and the layouts differ as described: trawl's primary key on ``urls.id``,
or no index on it and the ids merged from an inbox."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from bench.id_index import LAYOUTS, main, run

ROWS = 20_000


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_row_is_indexed_and_every_look_up_found(tmp_path: Path, layout: str) -> None:
    out = io.StringIO()
    figures = run(
        layout, ROWS, tmp_path, transaction=1_000, lookups=300, hosts=50, merge_every=5_000, out=out
    )

    assert figures.rows == figures.stored == figures.indexed == ROWS
    assert figures.lookups > 0
    assert figures.found == figures.lookups
    assert f"{layout}: {ROWS:,} rows" in out.getvalue()
    db = sqlite3.connect(tmp_path / "model.db")
    indexes = {row[1]: row[3] for row in db.execute("PRAGMA index_list(urls)")}
    if layout == "inplace":
        assert "pk" in indexes.values()
        assert figures.merge_seconds == 0
    else:
        assert set(indexes) == {"urls_ready"}
        assert db.execute("SELECT COUNT(*) FROM ids_inbox").fetchone() == (0,)
        assert figures.merge_seconds > 0
    db.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--layout", "inbox", "--rows", "0"], "must be positive"),
        (["--layout", "inbox", "--lookups", "16001"], "--lookups must be at most 16,000"),
    ],
)
def test_bad_arguments_exit_with_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_command_line_run_exits_zero_on_right_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--layout", "inbox", "--rows", "5000", "--transaction", "500", "--lookups", "50"]
    argv += ["--hosts", "10", "--merge", "1000", "--data-dir", str(tmp_path / "run")]
    assert main(argv) == 0
    assert "inbox: 5,000 rows" in capsys.readouterr().out
