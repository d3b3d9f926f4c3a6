"""Run an output writer (``module.Class`` built on a path) in a child process: until its
files may grow no more (RLIMIT_FSIZE, as on a full disk), or until it kills itself."""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

LIMIT = 4096

_KILLED = """
import importlib, os, pickle, signal, sys
from pathlib import Path

module, name = sys.argv[3].rsplit(".", 1)
writer = getattr(importlib.import_module(module), name)(Path(sys.argv[2]))
items = pickle.loads(Path(sys.argv[1]).read_bytes())
every = int(sys.argv[4])
for i, item in enumerate(items[:-1]):
    writer.write(item)
    if i % every == every - 1:
        writer.flush()
writer.flush()
writer.write(items[-1])
os.kill(os.getpid(), signal.SIGKILL)
"""

_FULL = """
import importlib, pickle, resource, signal, sys
from pathlib import Path
from trawl.errors import TrawlError

module, name = sys.argv[3].rsplit(".", 1)
writer = getattr(importlib.import_module(module), name)(Path(sys.argv[2]))
items = pickle.loads(Path(sys.argv[1]).read_bytes())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[4])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
flushed = 0
try:
    for item in items:
        writer.write(item)
        writer.flush()
        flushed += 1
except TrawlError as exc:
    print(flushed)
    print(exc)
try:
    writer.write(items[0])
except RuntimeError as exc:
    print(exc)
writer.close()
"""


def write_until_full(
    writer: str, target: Path, items: Sequence[object], scratch: Path
) -> tuple[int, str, str]:
    """Have ``writer`` (``module.Class``, built on ``target``) write and flush ``items``
    one by one until a write fails; return how many were flushed, the error's message,
    and the error a write after it raised."""
    done = _run(_FULL, writer, target, items, scratch, LIMIT)
    assert done.returncode == 0, done.stderr
    count, message, refused = done.stdout.splitlines()
    return int(count), message, refused


def write_then_kill(
    writer: str, target: Path, items: Sequence[object], scratch: Path, flush_every: int
) -> None:
    """Have ``writer`` write all ``items`` but the last, flushing every ``flush_every``
    and after the last of them, then write the last one and die by SIGKILL unflushed."""
    done = _run(_KILLED, writer, target, items, scratch, flush_every)
    assert done.returncode == -signal.SIGKILL, done.stderr


def _run(
    script: str, writer: str, target: Path, items: Sequence[object], scratch: Path, number: int
) -> subprocess.CompletedProcess[str]:
    saved = scratch / "items.pickle"
    saved.write_bytes(pickle.dumps(list(items)))
    return subprocess.run(
        [sys.executable, "-c", script, str(saved), str(target), writer, str(number)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
