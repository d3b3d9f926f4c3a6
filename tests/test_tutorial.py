"""docs/TUTORIAL.md's script crawls the quotes site and gives every quote and every
author once.

The script is the fenced ``python`` block right after the line
``<!-- tested: quotes.py -->`` in docs/TUTORIAL.md. It is run as the tutorial says,
``python quotes.py`` in a directory of its own, with the trawl under test, against the
quotes site (tests/quotes_site.py) served on loopback, with two changes to its text,
each of which must match exactly once (so an edit of the tutorial that breaks them fails
here): the public start URL becomes the served site's, and the crawler's ``delay=1.0``
becomes no delay together with the loopback settings (``resolve``, ``allow_network``)
that let it reach the site. Its items are then read as the tutorial reads them, with
``trawl export --items --format jsonl``. The same handlers are run once more from the
command line (``trawl crawl URL --handler quotes:listing --handler
author=quotes:author``), with the same result.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import page_requests
from quotes_site import PUBLIC_START, author_items, quote_items, quotes_site, start_url
from trawl.demo import SiteServer

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "TUTORIAL.md"
MARK = "<!-- tested: quotes.py -->"
BLOCK = re.compile(re.escape(MARK) + r"\n```python\n(?P<code>.*?)\n```\n", re.DOTALL)
DELAY = "delay=1.0"
FAST = "delay=0.0, response_factor=0.0, resolve={resolve!r}, allow_network=['127.0.0.0/8']"
ITEM_FIELDS = ("_url", "_key", "_fetched_at")


def tutorial_script() -> str:
    """The code of the block marked for testing, as the tutorial shows it."""
    found = BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))
    assert len(found) == 1, f"docs/TUTORIAL.md needs one python block right after {MARK}"
    code: str = found[0]
    return code + "\n"


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the tutorial's script must name {old} once"
    return text.replace(old, new)


def for_the_site(code: str, server: SiteServer) -> str:
    """``code`` crawling the served site instead of the public one, without delay."""
    code = replace_once(code, repr(PUBLIC_START).replace("'", '"'), repr(start_url(server.site)))
    return replace_once(code, DELAY, FAST.format(resolve=server.resolve_map()))


def run(args: list[str], cwd: Path, env: Mapping[str, str]) -> str:
    """Run ``args`` in ``cwd``; its standard output, after checking it succeeded."""
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def trawl_command(*args: str) -> list[str]:
    """The trawl under test's command line with ``args``."""
    return [sys.executable, "-m", "trawl", *args]


def exported(folder: Path, data_dir: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The items of the crawl in ``folder/data_dir``, as ``trawl export`` writes them."""
    out = run(
        trawl_command("export", "--data-dir", data_dir, "--items", "--format", "jsonl"),
        folder,
        env,
    )
    return [json.loads(line) for line in out.splitlines()]


def check_items(items: list[dict[str, Any]], server: SiteServer) -> None:
    """``items`` are every quote and every author once, each from its page, and the crawl
    fetched each listing and author page once and nothing else."""
    assert len({item["_key"] for item in items}) == len(items)
    own = [{k: v for k, v in item.items() if k not in ITEM_FIELDS} for item in items]
    quotes = [item for item in own if "text" in item]
    authors = [item for item in own if "name" in item]
    assert len(quotes) + len(authors) == len(items)

    def order(item: dict[str, Any]) -> str:
        return json.dumps(item, sort_keys=True)

    assert sorted(quotes, key=order) == sorted(quote_items(), key=order)
    assert sorted(authors, key=order) == sorted(author_items(), key=order)
    for item in items:
        assert ("/author/" in item["_url"]) == ("name" in item)
    requests = page_requests(server)
    assert set(requests) == server.site.ground_truth
    assert set(requests.values()) == {1}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of the test run, with the script's folder on the module path
    (for ``--handler quotes:...``)."""
    path = os.environ.get("PYTHONPATH")
    folder = str(tmp_path)
    return {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{path}" if path else folder}


def test_the_tutorial_script_gives_every_quote_and_author_once(
    tmp_path: Path, env: dict[str, str]
) -> None:
    with SiteServer(quotes_site) as server:
        (tmp_path / "quotes.py").write_text(
            for_the_site(tutorial_script(), server), encoding="utf-8"
        )
        out = run([sys.executable, "quotes.py"], tmp_path, env)
        assert out == f"done: {len(server.site.ground_truth)} pages fetched\n"
        check_items(exported(tmp_path, "quotes", env), server)


def test_the_tutorial_handlers_run_from_the_command_line(
    tmp_path: Path, env: dict[str, str]
) -> None:
    with SiteServer(quotes_site) as server:
        (tmp_path / "quotes.py").write_text(
            for_the_site(tutorial_script(), server), encoding="utf-8"
        )
        resolve = [f"--resolve={host}={ip}" for host, ip in server.resolve_map().items()]
        run(
            trawl_command(
                "crawl", start_url(server.site), "--data-dir", "cli", "--delay", "0",
                "--response-factor", "0", "--allow-network", "127.0.0.0/8", *resolve,
                "--handler", "quotes:listing", "--handler", "author=quotes:author",
            ),
            tmp_path,
            env,
        )  # fmt: skip
        check_items(exported(tmp_path, "cli", env), server)
