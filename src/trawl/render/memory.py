"""The resident memory of the browser: the sum over its processes, read from /proc.

Chromium runs as a tree of processes (the browser, its zygotes, a renderer per site,
the GPU and network services); one process's RSS says little. The browser's tree is
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


def browser_rss(root: int | None = None) -> int:
    """Resident bytes of the browser processes below ``root`` (default: this process)."""
    tree = descendants(os.getpid() if root is None else root)
    return sum(size for pid, size in tree.items() if _is_browser(pid))
