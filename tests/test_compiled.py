"""The build the tests run against: setup.py's modules compiled by mypyc, and what the
compiled classes must still do for the parts of trawl that are not compiled."""

from __future__ import annotations

import ast
import importlib
import os
import pickle
from pathlib import Path

import pytest

from trawl.extract.urls import NormalizeRules, normalize

SETUP = Path(__file__).parent.parent / "setup.py"


def _setup_names(variable: str = "COMPILED") -> tuple[str, ...]:
    """The module names setup.py lists in ``variable``."""
    for node in ast.parse(SETUP.read_text()).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == variable for t in targets):
                assert node.value is not None
                names = ast.literal_eval(node.value)
                assert isinstance(names, tuple)
                return tuple(str(name) for name in names)
    raise AssertionError(f"setup.py has no {variable}")


def _compiled_names() -> tuple[str, ...]:
    return _setup_names() + _setup_names("WRITTEN_IN_C")


@pytest.mark.skipif(bool(os.environ.get("TRAWL_PURE")), reason="the plain-Python build")
@pytest.mark.parametrize("name", _compiled_names())
def test_every_listed_module_is_the_compiled_one(name: str) -> None:
    module = importlib.import_module(f"trawl.{name}")
    assert module.__file__ is not None
    assert module.__file__.endswith(".so"), module.__file__


def test_no_module_is_compiled_that_is_not_listed() -> None:
    """A compiled module left from an older list would shadow its source."""
    package = Path(importlib.import_module("trawl").__file__ or "").parent
    found = {
        ".".join([*so.parent.relative_to(package).parts, so.name.partition(".")[0]])
        for so in package.rglob("*.so")
    }
    assert found <= set(_compiled_names())


def test_normalize_rules_cross_a_pickle_as_they_were() -> None:
    """Extract workers receive the crawl's rules pickled; a compiled frozen dataclass
    has no instance dict for pickle to fill, so the class says how it is rebuilt."""
    rules = NormalizeRules(
        strip_params=frozenset({"Ref"}), strip_prefixes=("trk_",), max_length=64,
        max_path_depth=3,
    )  # fmt: skip
    copy = pickle.loads(pickle.dumps(rules, protocol=pickle.HIGHEST_PROTOCOL))
    assert copy == rules
    assert normalize("http://a.test/x?ref=1&trk_x=2&k=v", rules=copy) == "http://a.test/x?k=v"
    assert normalize("http://a.test/1/2/3/4", rules=copy) != "http://a.test/1/2/3/4"
