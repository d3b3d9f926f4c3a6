"""The PageFetched event writer on real files: the JSON contract, appending across
writers, cutting a torn last line, one-line errors, and a writer killed with SIGKILL in a
real child process."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from trawl.content.events import EventWriter, PageFetched, event_json
from trawl.errors import UsageError
from trawl.extract.urls import url_hash
from trawl.store.values import StorageKey
from writer_child import LIMIT, write_then_kill, write_until_full


def event(i: int, *, warc: bool = True) -> PageFetched:
    url = f"https://example.test/page/{i}?q=été"
    return PageFetched(
        url=url,
        url_id=url_hash(url),
        fetched_at=1796065629.123 + i,
        http_status=200,
        content_hash=f"{i:064x}",
        simhash=None if i % 5 == 4 else -(i + 1),
        storage_key=StorageKey(f"trawl-{i:05d}.warc.gz", 1000 * i, 500 + i) if warc else None,
        out_links=i,
        changed=True,
    )


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_json_fields_are_the_contract() -> None:
    key = StorageKey("trawl-20261130190709123456-00000-1a2b3c.warc.gz", 48213, 5120)
    full = PageFetched(
        url="https://example.com/story",
        url_id=0x0F3E6A1C9B2D4E57,
        fetched_at=1796065629.123,
        http_status=200,
        content_hash="5f" * 32,
        simhash=-0x63C5AE0FF2D81B48,
        storage_key=key,
        out_links=41,
        changed=True,
    )
    assert event_json(full) == {
        "type": "PageFetched",
        "url": "https://example.com/story",
        "urlHash": "0f3e6a1c9b2d4e57",
        "fetchedAt": "2026-11-30T19:07:09.123Z",
        "httpStatus": 200,
        "contentHash": "5f" * 32,
        "simhash": "9c3a51f00d27e4b8",
        "storageKey": {"file": key.file, "offset": 48213, "length": 5120},
        "outLinks": 41,
        "changed": True,
    }
    bare = PageFetched(
        url="https://example.com/", url_id=-1, fetched_at=0.0, http_status=404,
        content_hash="0" * 64, simhash=None, storage_key=None, out_links=0, changed=False,
    )  # fmt: skip
    shown = event_json(bare)
    assert shown["urlHash"] == "f" * 16
    assert shown["simhash"] is None
    assert shown["storageKey"] is None
    assert shown["changed"] is False


def test_a_second_writer_appends(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "events.jsonl"
    with EventWriter(path) as writer:
        for i in range(3):
            writer.write(event(i))
        writer.flush()
    writer.close()
    with EventWriter(path) as writer:
        for i in range(3, 5):
            writer.write(event(i, warc=False))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    compact = json.dumps(event_json(event(0)), ensure_ascii=False, separators=(",", ":"))
    assert lines[0] == compact.encode()
    assert "été".encode() in lines[0]
    assert read_events(path) == [event_json(event(i, warc=i < 3)) for i in range(5)]
    for shown in read_events(path):
        unsigned = url_hash(shown["url"]) & ((1 << 64) - 1)
        assert shown["urlHash"] == f"{unsigned:016x}"
    with pytest.raises(RuntimeError, match="after close"):
        writer.write(event(9))


@pytest.mark.parametrize("torn", [b'{"type":"PageFe', b"x" * 200_000])
def test_a_torn_last_line_is_cut_off(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "events.jsonl"
    complete = b"".join(json.dumps(event_json(event(i))).encode() + b"\n" for i in range(2))
    path.write_bytes(complete + torn)
    with EventWriter(path) as writer:
        writer.write(event(2))
    assert read_events(path) == [event_json(event(i)) for i in range(3)]


def test_a_file_without_any_complete_line_is_emptied(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"Pa')
    EventWriter(path).close()
    assert path.read_bytes() == b""


def test_an_unwritable_path_is_a_one_line_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory\n")
    for path in (blocker / "events.jsonl", tmp_path):
        with pytest.raises(UsageError) as caught:
            EventWriter(path)
        message = str(caught.value)
        assert message.startswith(f"cannot write events file {path}: ")
        assert "\n" not in message
        assert caught.value.exit_code == 2
    assert blocker.read_text() == "a file, not a directory\n"


def test_a_named_pipe_receives_the_events(tmp_path: Path) -> None:
    """A pipe has nothing to cut back: the writer streams into it."""
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    with EventWriter(fifo) as writer:
        writer.write(event(1))
    reader.join(timeout=10)
    assert [json.loads(line) for line in received[0].splitlines()] == [event_json(event(1))]


def test_a_killed_writer_loses_no_flushed_event(tmp_path: Path) -> None:
    events = [event(i) for i in range(30)]
    path = tmp_path / "out" / "events.jsonl"
    write_then_kill("trawl.content.events.EventWriter", path, events, tmp_path, flush_every=7)
    expected = [event_json(e) for e in events]
    assert read_events(path) in (expected[:-1], expected)
    with EventWriter(path) as writer:
        writer.write(event(99))
    assert read_events(path)[-1] == event_json(event(99))


def test_a_failed_write_is_a_one_line_error_and_the_torn_line_is_cut(tmp_path: Path) -> None:
    """Writes beyond 4 KiB fail (RLIMIT_FSIZE, as on a full disk)."""
    events = [event(i) for i in range(100)]
    path = tmp_path / "events.jsonl"
    count, message, refused = write_until_full(
        "trawl.content.events.EventWriter", path, events, tmp_path
    )
    assert message == f"cannot write events file {path}: File too large"
    assert refused == "EventWriter used after close"
    assert path.stat().st_size == LIMIT
    EventWriter(path).close()
    kept = read_events(path)
    assert len(kept) == count
    assert kept == [event_json(e) for e in events[:count]]
