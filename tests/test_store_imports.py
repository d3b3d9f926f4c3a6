"""The store stands below the pipeline's stages: it imports nothing from the stages that
use it (the crawl loop, the content stage, operations, the command line), so none of
them can import each other through it in a cycle."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import trawl.store

STORE = Path(trawl.store.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, also under ``if TYPE_CHECKING``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


ABOVE_THE_STORE = frozenset({"cli", "crawl", "content", "ops", "demo"})
"""The packages of trawl that use the store."""

STAGES = [["trawl", package] for package in sorted(ABOVE_THE_STORE)]


def test_no_store_module_imports_a_stage_that_uses_the_store() -> None:
    modules = sorted(STORE.rglob("*.py"))
    assert modules
    for path in modules:
        upward = {m for m in imported_modules(path) if m.split(".")[:2] in STAGES}
        assert not upward, f"{path.relative_to(STORE)} imports {sorted(upward)}"


def test_importing_the_store_loads_nothing_of_the_content_stage() -> None:
    probe = (
        "import sys\n"
        "import trawl.store.protocols, trawl.store.values, trawl.store.rows\n"
        "import trawl.store.sqlite.store\n"
        "print(sorted(m for m in sys.modules if m.startswith('trawl.content')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=True,
    )
    assert done.stdout.strip() == "[]"
