"""Naming handlers and loading them again: module functions, script functions loaded
without running the script's crawl, and one-line errors for refs that name nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trawl.errors import UsageError
from trawl.handlers import refs
from trawl.handlers.items import item_json
from trawl.handlers.page import Page
from trawl.handlers.run import run_handler

SCRIPT = """\
from trawl.handlers import refs

crawled = []


def listing(page):
    yield {"url": page.url, "loading": refs.is_loading()}


class Shop:
    @staticmethod
    def book(page):
        return [{"book": page.url}]


def run():
    # What Crawler.run() does at a script's top level.
    if refs.is_loading():
        return None
    crawled.append("crawl")
    print("crawled", flush=True)
    return None


run()
"""


@pytest.fixture(autouse=True)
def restore_import_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave ``sys.path`` and the loaded script module as they were before each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, refs.SCRIPT_MODULE, None)
    monkeypatch.delitem(sys.modules, refs.SCRIPT_MODULE)


def script(tmp_path: Path, text: str = SCRIPT, name: str = "books.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_a_module_function_is_named_by_its_module() -> None:
    assert refs.ref_of(item_json) == "trawl.handlers.items:item_json"
    assert refs.load("trawl.handlers.items:item_json") is item_json
    method: object = refs.load("trawl.handlers.page:Page.follow")
    assert method is Page.follow


def test_loading_a_script_runs_no_crawl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path)
    handler = refs.load(f"{path}:listing")
    module = sys.modules[refs.SCRIPT_MODULE]
    assert module.__file__ == str(path)
    assert module.crawled == []
    assert capsys.readouterr().out == ""
    assert not refs.is_loading()
    assert refs.ref_of(handler) == f"{path}:listing"
    assert refs.load(f"{path}:listing") is handler, "a script is loaded once"
    page = Page(url="http://shop.test/", body=b"")
    assert run_handler(handler, page).items == ['{"url":"http://shop.test/","loading":false}']
    book = refs.load(f"{path}:Shop.book")
    assert run_handler(book, page).items == ['{"book":"http://shop.test/"}']


def test_a_function_of_main_is_named_by_its_script_s_path(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        SCRIPT + "print(refs.ref_of(listing))\n"
        "print(refs.load(refs.ref_of(listing)) is listing, crawled)\n",
    )
    ran = subprocess.run(
        [sys.executable, path.name], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert ran.stdout.splitlines() == ["crawled", f"{path}:listing", "True ['crawl']"]


def test_a_script_that_exits_at_its_top_level_keeps_what_it_defined(tmp_path: Path) -> None:
    path = script(tmp_path, "import sys\n\ndef f(page):\n    return None\n\nsys.exit(3)\n")
    assert refs.load(f"{path}:f").__name__ == "f"


def bad_refs(tmp_path: Path) -> list[tuple[str, str]]:
    broken = script(tmp_path, "raise RuntimeError('no\\nway')\n", "broken.py")
    return [
        ("item_json", "must be module:function or /path/script.py:function"),
        ("trawl.handlers.items:", "must be module:function"),
        ("no_such_module_zz:f", "cannot import no_such_module_zz: No module named"),
        ("trawl.handlers.items:missing", "trawl.handlers.items has no missing"),
        ("trawl.handlers.items:__all__.x", "has no __all__.x"),
        ("trawl.handlers.refs:SCRIPT_MODULE", "SCRIPT_MODULE is not a function"),
        (f"{tmp_path}/absent.py:f", f"no script file {tmp_path}/absent.py"),
        (f"{broken}:f", f"loading {broken} failed: RuntimeError: no"),
    ]


def test_a_bad_ref_is_a_usage_error_of_one_line(tmp_path: Path) -> None:
    for ref, message in bad_refs(tmp_path):
        with pytest.raises(UsageError) as caught:
            refs.load(ref)
        assert message in str(caught.value), ref
        assert "\n" not in str(caught.value), ref
    assert not refs.is_loading()


def test_a_function_another_process_cannot_find_has_no_ref() -> None:
    def nested(page: Page) -> None:
        return None

    with pytest.raises(UsageError, match="must be defined at the top level of its module"):
        refs.ref_of(nested)
    with pytest.raises(UsageError, match="top level"):
        refs.ref_of(lambda page: None)
