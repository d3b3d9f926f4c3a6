"""bench.compare: two versions of trawl on one site, by turns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench.compare import main
from bench.servers import free_port

ROOT = Path(__file__).resolve().parents[1]


def small(work: Path) -> list[str]:
    return ["--hosts", "4", "--pages", "30", "--server", "builtin", "--work-dir", str(work),
            "--port", str(free_port())]  # fmt: skip


def test_both_sides_run_by_turns_and_their_medians_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--against", str(ROOT / "src"), "--runs", "2", *small(tmp_path)])
    table = capsys.readouterr().out.splitlines()
    assert code == 0
    runs = [line.split()[0] for line in table[1:5]]
    assert runs == ["this", "against", "this", "against"]
    assert all(line.endswith("correct") for line in table[1:5])
    assert table[5].startswith("median this")
    assert table[6].startswith("median against")
    assert table[7].startswith("this/against: pages/s ")


def test_the_other_side_runs_the_other_source(tmp_path: Path) -> None:
    broken = tmp_path / "src" / "trawl"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "__main__.py").write_text("raise SystemExit(3)\n")
    command = [sys.executable, "-m", "bench.compare", "--against", str(broken.parent)]
    command += ["--runs", "1", *small(tmp_path / "work")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1
    lines = dict(line.split(maxsplit=1) for line in done.stdout.splitlines()[1:3])
    assert lines["this"].endswith("correct")
    assert "trawl exited with 3" in lines["against"]


def test_a_directory_without_trawl_is_a_usage_error(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench.compare", "--against", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert "not a src directory holding trawl" in done.stderr
    assert "Traceback" not in done.stderr
