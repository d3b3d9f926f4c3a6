"""CPU time of a process or thread from its ``/proc`` stat file, for the benchmarks."""

from __future__ import annotations

import os

TICKS = os.sysconf("SC_CLK_TCK")
"""Clock ticks a second, the unit of a stat file's CPU times."""


def read_stat(path: str) -> tuple[str, int, int] | None:
    """The command name and the user and system CPU clock ticks in the stat file at
    ``path`` (``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat``); None once the
    process or thread is gone."""
    try:
        with open(path, encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    # The name may hold spaces and parentheses: the fields follow its last ")".
    name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
    return name, int(fields[11]), int(fields[12])
