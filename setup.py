"""Build trawl with its per-link and per-page modules compiled to C by mypyc.

These modules run for every link or every page of a crawl (the URL filter, the parser,
the seen-set, the host scheduler) and are plain, strictly typed Python, which mypyc
turns into C extensions from the same source. On the crawl benchmark the compiled
build needs 0.87-0.88x the CPU a page of the plain one (docs/PERFORMANCE.md). The sources
stay the reference: every module also runs as plain Python (``TRAWL_PURE=1`` builds
without compiling), and the tests run against the compiled build.

Two tables that every link candidate meets are written in C outright (``WRITTEN_IN_C``):
``trawl._idtable`` behind the seen-set's cache of confirmed ids (trawl.known_ids) and
``trawl._inlink_counts`` behind the in-link counter (trawl.inlinks); their 64-bit slots
are what compiled Python can only read as new int objects. Each has a reference in
Python (``known_ids._Generation``, ``inlinks._Counts``) that a build without compiling
uses.

``python setup.py build_ext --inplace`` (``make setup``) compiles them next to their
sources, which an editable install then imports in their place.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

COMPILED = (
    "urls",
    "links",
    "scope",
    "parser",
    "recrawl",
    "seen",
    "known_ids",
    "inlinks",
    "hosts",
)
"""Modules of ``src/trawl`` compiled by mypyc (tests/conftest.py checks they are current)."""

WRITTEN_IN_C = ("_idtable", "_inlink_counts")
"""Modules of ``src/trawl`` written in C (``<name>.c``), each with a reference in Python."""


def _extensions() -> list[object]:
    if os.environ.get("TRAWL_PURE"):
        return []
    from mypyc.build import mypycify

    paths = [os.path.join("src", "trawl", f"{name}.py") for name in COMPILED]
    written = [
        Extension(f"trawl.{name}", [os.path.join("src", "trawl", f"{name}.c")])
        for name in WRITTEN_IN_C
    ]
    return [*mypycify(paths, opt_level="3", group_name="trawl"), *written]


setup(ext_modules=_extensions())
