"""The docs name the modules that exist: docs/ARCHITECTURE.md's module map names every
module of src/trawl and no other, and every module path a page of docs/ or the README
names is a file of the checkout, so a module that moves or goes fails here until the docs
follow it.

A path such as ``crawl/engine.py`` is read from src/trawl; one that starts with
``src/``, ``tests/`` or ``bench/`` from the checkout's root. In the module map, a name
without a slash belongs to the package of the bold heading above it (``**crawl/**``;
``**Top level.**`` for src/trawl itself).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "trawl"
MAP_DOC = "docs/ARCHITECTURE.md"
MAP_SECTION = "## The modules"

PAGES = sorted(
    [p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")] + ["README.md"]
)
PAGES.remove("docs/PERFORMANCE.md")
"""The pages checked for module paths. docs/PERFORMANCE.md is left out: its dated log
keeps the names a change had when it was measured."""

MODULE_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*\.py)\b")
"""A path of a Python file below at least one directory (``store/sqlite/ids.py``), not
the tail of a longer path or address."""

FROM_ROOT = ("src/", "tests/", "bench/")

HEADING = re.compile(r"^\*\*(?P<name>[^*]+)\*\*")
MAP_ENTRY = re.compile(r"`(?P<name>[\w/]+\.py)`")


def text_of(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def file_of(path: str) -> Path:
    """Where a module path named in the docs points."""
    return ROOT / path if path.startswith(FROM_ROOT) else SRC / path


def modules() -> set[str]:
    """Every Python module of src/trawl by its path below it, packages' ``__init__.py``
    left out."""
    return {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if p.name != "__init__.py"}


def map_section() -> str:
    """The module map: docs/ARCHITECTURE.md's section "The modules"."""
    text = text_of(MAP_DOC)
    start = text.index(f"\n{MAP_SECTION}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def mapped() -> set[str]:
    """The modules the map names, by their paths below src/trawl."""
    named: set[str] = set()
    package = ""
    for line in map_section().splitlines():
        heading = HEADING.match(line)
        if heading is not None:
            name = heading["name"]
            package = name if name.endswith("/") else ""
        for entry in MAP_ENTRY.finditer(line):
            path = entry["name"]
            named.add(path if "/" in path else package + path)
    return named


def test_the_module_map_names_every_module() -> None:
    missing = sorted(modules() - mapped())
    assert not missing, "\n".join(
        f"{MAP_DOC} does not name {path} in its module map ({MAP_SECTION!r})" for path in missing
    )


def test_every_module_the_map_names_exists() -> None:
    named = mapped()
    assert "crawl/engine.py" in named, f"{MAP_DOC}'s module map was not found or not read"
    gone = sorted(path for path in named if not file_of(path).is_file())
    assert not gone, "\n".join(
        f"{MAP_DOC} names {path} in its module map, which does not exist" for path in gone
    )


@pytest.mark.parametrize("page", PAGES)
def test_every_module_path_a_page_names_exists(page: str) -> None:
    named = sorted(set(MODULE_PATH.findall(text_of(page))))
    gone = [path for path in named if not file_of(path).is_file()]
    assert not gone, "\n".join(f"{page} names {path}, which does not exist" for path in gone)


def test_module_paths_are_found_where_the_docs_name_them() -> None:
    """The path pattern reads the forms the docs use, and only those."""
    text = (
        "`crawl/engine.py`, src/trawl/store/sqlite/ids.py and tests/test_crawl.py; "
        "not https://example.com/a/b.py or `engine.py` alone"
    )
    assert MODULE_PATH.findall(text) == [
        "crawl/engine.py",
        "src/trawl/store/sqlite/ids.py",
        "tests/test_crawl.py",
    ]
    assert file_of("src/trawl/store/sqlite/ids.py") == SRC / "store" / "sqlite" / "ids.py"
    assert file_of("store/sqlite/ids.py") == SRC / "store" / "sqlite" / "ids.py"
