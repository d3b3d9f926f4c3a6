"""The shape of the package: small modules, stages that import downwards only.

These read the sources (no import runs): a module over the size limit or an import
cycle between modules fails here before it can hide the architecture
(docs/ARCHITECTURE.md). tests/test_store_imports.py keeps the store below the stages.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src"
PACKAGE = SRC / "trawl"
MAX_LINES = 600
"""No module of trawl is longer than this."""


def _modules() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names[name] = path
    return names


MODULES = _modules()


def _top_level_imports(body: list[ast.stmt]) -> Iterator[str]:
    """What a module imports at its top level, for its own use or for its types (behind
    ``TYPE_CHECKING``); not the imports inside functions, loaded on first use."""
    for node in body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            yield from _top_level_imports(node.body)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        imported = _top_level_imports(ast.parse(path.read_text(encoding="utf-8")).body)
        graph[name] = {m for m in imported if m in MODULES and m not in (name, "trawl")}
    return graph


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_the_size_limit(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by what its parts do"


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    cycles = []
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycles.append(" -> ".join([*path[path.index(name) :], name]))
            return
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert not cycles, cycles
