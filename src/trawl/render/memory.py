"""The resident memory of the browser: the sum over its processes, read from /proc.

Chromium runs as a tree of processes (the browser, its zygotes, a renderer per site,
the GPU and network services); one process's RSS says little, and their RSS summed
counts the pages they share once per process (1.5 GB for a browser that holds 0.4 GB).
Each process is counted by its proportional set size (``Pss`` of
``/proc/PID/smaps_rollup``: a shared page divided among the processes sharing it), so
the sum is what the tree holds; RSS where smaps_rollup cannot be read. The tree is
every process below this one whose executable's name starts with ``chrom`` (Debian's
``/usr/lib/chromium/chromium`` and its ``chrome_crashpad_handler``), so the extract
workers, also children of the crawl, are not counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_PROC = Path("/proc")


def _processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, resident pages) of every process readable now."""
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name, in parentheses, may hold spaces: fields follow its end.
        fields = stat[stat.rfind(")") + 2 :].split()
        yield int(entry.name), int(fields[1]), int(fields[21])


def _is_browser(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("chrom")
    except OSError:
        return False


def descendants(root: int) -> dict[int, int]:
    """Every process below ``root`` (pid to resident bytes)."""
    children: dict[int, list[int]] = {}
    resident: dict[int, int] = {}
    for pid, parent, pages in _processes():
        children.setdefault(parent, []).append(pid)
        resident[pid] = pages * PAGE_SIZE
    found: dict[int, int] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found[pid] = resident.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return found


def proportional(pid: int, rss: int) -> int:
    """The proportional set size of ``pid`` in bytes; ``rss`` when it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss


def tree_memory(root: int, *, browser_only: bool = False) -> int:
    """Bytes the processes below ``root`` hold (proportionally), the browser's only
    with ``browser_only``."""
    tree = descendants(root)
    return sum(
        proportional(pid, rss) for pid, rss in tree.items() if not browser_only or _is_browser(pid)
    )


def browser_rss(root: int | None = None) -> int:
    """Bytes the browser processes below ``root`` (default: this process) hold."""
    return tree_memory(os.getpid() if root is None else root, browser_only=True)
