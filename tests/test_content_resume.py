"""Content outputs survive kill -9: nothing is lost, repeats are bounded and keyed.

A real ``python -m trawl crawl --text --events`` is killed part-way and run again; the
text output (its interrupted file repaired) and the events must then cover every
fingerprinted page in the store, and a page appears twice only if it was in flight at
the kill, with the same (urlHash, contentHash).
"""

from __future__ import annotations

import gzip
import json
import signal
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

from test_resume import CONCURRENCY, crawl_command, run_to_end, server, start_and_wait
from trawl.crawl.runner import TEXT_DIR
from trawl.demo import SiteServer
from trawl.store.sqlite.store import DB_NAME

__all__ = ["server"]


def fingerprinted(data_dir: Path) -> dict[str, tuple[str, bool, bool]]:
    """Per URL with a content hash: (hash, has text, is an exact duplicate)."""
    with closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        rows = db.execute(
            "SELECT url, content_hash, simhash IS NOT NULL, duplicate_of IS NOT NULL FROM urls "
            "WHERE content_hash IS NOT NULL"
        ).fetchall()
    return {url: (digest, bool(text), bool(dup)) for url, digest, text, dup in rows}


def test_kill_9_loses_no_text_record_and_no_event(server: SiteServer, tmp_path: Path) -> None:
    data_dir = tmp_path / "crawl"
    events_file = tmp_path / "events.jsonl"
    command = [
        *crawl_command(server, data_dir, delay=0.02),
        "--text", "--events", str(events_file),
    ]  # fmt: skip
    proc = start_and_wait(command, server, requests=120)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    text_dir = data_dir / TEXT_DIR
    assert any(p.name.endswith(".open") for p in text_dir.iterdir())
    summary = run_to_end(command)
    assert summary["content"]

    pages = fingerprinted(data_dir)
    assert len(pages) > 200
    assert not [p for p in text_dir.iterdir() if not p.name.endswith(".jsonl.gz")]
    records: list[dict[str, Any]] = []
    for path in sorted(text_dir.iterdir()):
        with gzip.open(path, "rt", encoding="utf-8") as stream:
            records.extend(json.loads(line) for line in stream)
    written = Counter(r["final_url"] for r in records)
    expected = {url for url, (_, text, dup) in pages.items() if text and not dup}
    assert set(written) == expected
    assert sum(written.values()) - len(written) <= CONCURRENCY
    for record in records:
        assert record["content_hash"] == pages[record["final_url"]][0]

    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    keys = Counter((e["urlHash"], e["contentHash"]) for e in events)
    assert {e["url"] for e in events} == set(pages)
    assert len(keys) == len(pages), "one key per page"
    assert len(events) - len(keys) <= CONCURRENCY
    for event in events:
        assert event["contentHash"] == pages[event["url"]][0]
