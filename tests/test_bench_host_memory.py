"""bench.host_memory: the memory of a queued host, held through trawl's own parts."""

from __future__ import annotations

import re

import pytest
from bench.host_memory import main
from bench.world_map import Dns, World, WorldParams


@pytest.mark.parametrize("flags", [[], ["--unique-robots"]])
def test_every_resolvable_host_is_held_and_its_memory_printed(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--hosts", "1500", *flags]) == 0
    out = capsys.readouterr().out
    resolvable = sum(1 for host in World(WorldParams(1500, 30)).hosts() if host.dns is Dns.OK)
    held = re.search(r"^(\d+) hosts held", out, re.M)
    assert held is not None
    assert int(held.group(1)) == resolvable
    per_host = re.search(r"a queued host: (-?\d+) B of RSS, (-?\d+) B malloc'd", out)
    assert per_host is not None, out
    # At 1,500 hosts the RSS may not move (a queued host is under 2 KB, and the process's
    # earlier frees leave room), but the hosts' tables are malloc'd.
    rss, malloced = int(per_host.group(1)), int(per_host.group(2))
    assert -8_000 < rss < 8_000
    assert 0 < malloced < 8_000
