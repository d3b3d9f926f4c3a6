"""``trawl demo``, the README's first command: a real crawl that checks itself."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_the_demo_counts_its_site_exactly(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "trawl", "demo", "--hosts", "4", "--pages", "20",
         "--delay", "0", "--response-factor", "0", "--retry-base", "0.05", "--retry-cap", "1",
         "--no-progress",
         "--data-dir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    verdict = re.search(
        r"ground truth: (\d+) unique in-scope URLs, (\d+) fetchable, \d+ robots-blocked; "
        r"trawl counted (\d+) \(matches\); server saw (\d+) page requests and (\d+) soft-404",
        run.stdout,
    )
    assert verdict is not None, run.stdout
    truth, fetchable, counted, requested, probes = map(int, verdict.groups())
    assert counted == truth
    assert requested == fetchable
    assert 1 <= probes <= 4


def test_a_demo_site_too_small_to_generate_is_bad_usage(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trawl", "demo", "--hosts", "2", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("trawl: error: Invalid value for '--hosts'"), done.stderr
    assert len(done.stderr.splitlines()) == 1
