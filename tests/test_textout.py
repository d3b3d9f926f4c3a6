"""The clean-text writer on real files: the JSON contract, rotation, publishing, and the
repair of what a killed process left behind (a real child process killed with SIGKILL).

Every published file is checked with ``gzip -t`` and read back with ``gzip.open``.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from trawl.content.text_files import (
    PARTIAL,
    SUFFIX,
    TextRecord,
    TextWriter,
    hex64,
    repair_open_files,
    rfc3339,
    text_json,
)
from trawl.errors import UsageError
from writer_child import LIMIT, write_then_kill, write_until_full

NAME_RE = re.compile(r"text-\d{8}T\d{6}-\d{5}-[0-9a-f]{6}\.jsonl\.gz")
FIELDS = [
    "url", "final_url", "fetched_at", "title", "language", "text", "content_hash", "simhash",
]  # fmt: skip
UNICODE = 'Grüße aus Köln — 東京の港 🐟\nzweite Zeile\t"zitiert" \\ Ende'


def record(i: int, text: str = "") -> TextRecord:
    return TextRecord(
        url=f"https://example.test/old/{i}",
        final_url=f"https://example.test/page/{i}",
        fetched_at=1796065629.123 + i,
        title=f"Seite {i}" if i % 3 else None,
        language="de" if i % 2 else None,
        text=text or f"{UNICODE} {i} " + "Hafenmauer " * (i % 40),
        content_hash=f"{i:064x}",
        simhash=(-1) ** i * (i * 0x9E3779B97F4A7C15 % (1 << 63)),
        near_duplicate_of=f"https://example.test/page/{i - 1}" if i % 4 == 1 else None,
    )


def gzip_test(path: Path) -> None:
    done = subprocess.run(["gzip", "-t", str(path)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


def read_lines(path: Path) -> list[dict[str, Any]]:
    gzip_test(path)
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream]


def read_all(files: Sequence[Path]) -> list[dict[str, Any]]:
    return [line for path in files for line in read_lines(path)]


def test_json_fields_are_the_contract() -> None:
    plain = TextRecord(
        url="https://example.test/old",
        final_url="https://example.test/story",
        fetched_at=1796065629.123,
        title="Harbour wall repairs",
        language="en",
        text="Harbour wall repairs to start in March",
        content_hash="5f" * 32,
        simhash=-0x63C5AE0FF2D81B48,
    )
    assert text_json(plain) == {
        "url": "https://example.test/old",
        "final_url": "https://example.test/story",
        "fetched_at": "2026-11-30T19:07:09.123Z",
        "title": "Harbour wall repairs",
        "language": "en",
        "text": "Harbour wall repairs to start in March",
        "content_hash": "5f" * 32,
        "simhash": "9c3a51f00d27e4b8",
    }
    assert list(text_json(plain)) == FIELDS
    near = TextRecord(
        url="u", final_url="u", fetched_at=0.0, title=None, language=None, text="",
        content_hash="0" * 64, simhash=0, near_duplicate_of="https://example.test/first",
    )  # fmt: skip
    assert text_json(near)["near_duplicate_of"] == "https://example.test/first"
    assert text_json(near)["title"] is None
    assert list(text_json(near)) == [*FIELDS, "near_duplicate_of"]


def test_time_and_hash_formats() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1796065629.9999) == "2026-11-30T19:07:09.999Z"
    assert hex64(0) == "0" * 16
    assert hex64(-1) == "f" * 16
    assert hex64((1 << 63) - 1) == "7" + "f" * 15
    assert hex64(-(1 << 63)) == "8" + "0" * 15
    for bad in (1 << 63, -(1 << 63) - 1):
        with pytest.raises(ValueError, match="signed 64-bit"):
            hex64(bad)


def test_records_round_trip(tmp_path: Path) -> None:
    records = [record(i) for i in range(30)]
    records.append(record(30, text="lone \ud800 surrogate"))
    with TextWriter(tmp_path / "text") as writer:
        for r in records:
            writer.write(r)
        writer.flush()
    assert len(writer.files) == 1
    (path,) = writer.files
    assert NAME_RE.fullmatch(path.name), path.name
    assert sorted((tmp_path / "text").iterdir()) == [path]
    lines = read_lines(path)
    assert lines == [text_json(r) for r in records]
    assert lines[0]["text"].startswith(UNICODE)
    assert lines[-1]["text"] == "lone \ud800 surrogate"
    raw = gzip.decompress(path.read_bytes())
    assert "東京".encode() in raw
    assert raw.count(b"\n") == len(records)


def test_rotation_keeps_every_record_once_in_whole_files(tmp_path: Path) -> None:
    records = [record(i) for i in range(60)]
    writer = TextWriter(tmp_path, max_size=300, prefix="corpus")
    for i, r in enumerate(records):
        writer.write(r)
        if i % 3 == 2:
            writer.flush()
    writer.close()
    files = writer.files
    assert len(files) >= 5
    assert files == sorted(files)
    name = r"corpus-\d{8}T\d{6}-\d{5}-[0-9a-f]{6}\.jsonl\.gz"
    assert all(re.fullmatch(name, f.name) for f in files)
    assert sorted(tmp_path.iterdir()) == files
    assert read_all(files) == [text_json(r) for r in records]
    # Rotation happens only at a flush, so every file but the last holds whole batches.
    assert all(len(read_lines(f)) % 3 == 0 for f in files[:-1])


def test_files_are_created_at_the_first_write_and_published_by_close(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"
    writer = TextWriter(directory)
    writer.flush()
    assert directory.is_dir()
    assert list(directory.iterdir()) == []
    writer.write(record(1))
    writer.flush()
    (partial,) = directory.iterdir()
    assert partial.name.endswith(SUFFIX + PARTIAL)
    writer.close()
    writer.close()
    assert writer.files == [partial.with_name(partial.name.removesuffix(PARTIAL))]
    assert list(directory.iterdir()) == writer.files
    assert read_lines(writer.files[0]) == [text_json(record(1))]
    with pytest.raises(RuntimeError, match="after close"):
        writer.write(record(2))
    empty = TextWriter(tmp_path / "empty")
    empty.close()
    assert empty.files == []
    assert list((tmp_path / "empty").iterdir()) == []


def test_two_writers_in_one_directory_never_share_a_file(tmp_path: Path) -> None:
    written = []
    for run in range(3):
        with TextWriter(tmp_path) as writer:
            writer.write(record(run))
        written += writer.files
    assert len(set(written)) == 3
    assert sorted(tmp_path.iterdir()) == sorted(written)
    assert sorted(r["url"] for r in read_all(written)) == [record(i).url for i in range(3)]


def test_bad_options_and_unwritable_directories(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="prefix"):
        TextWriter(tmp_path, prefix="../up")
    with pytest.raises(UsageError, match="size limit"):
        TextWriter(tmp_path, max_size=0)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(UsageError) as caught:
        TextWriter(blocker / "text")
    message = str(caught.value)
    assert message.startswith(f"cannot write text files in {blocker / 'text'}: ")
    assert "\n" not in message
    assert caught.value.exit_code == 2


def test_a_killed_writer_loses_no_flushed_record(tmp_path: Path) -> None:
    records = [record(i) for i in range(45)]
    directory = tmp_path / "text"
    write_then_kill(
        "trawl.content.text_files.TextWriter", directory, records, tmp_path, flush_every=10
    )
    (partial,) = directory.iterdir()
    assert partial.name.endswith(SUFFIX + PARTIAL)
    unfinished = subprocess.run(["gzip", "-t", str(partial)], capture_output=True, check=False)
    assert unfinished.returncode != 0

    TextWriter(directory).close()
    (path,) = directory.iterdir()
    assert path.name == partial.name.removesuffix(PARTIAL)
    lines = read_lines(path)
    expected = [text_json(r) for r in records]
    assert lines in (expected[:-1], expected)


def test_repair_keeps_the_complete_lines_of_a_file_cut_anywhere(tmp_path: Path) -> None:
    """A real writer's open file cut at many offsets: the repair publishes a prefix of the
    records that holds at least every record flushed before the cut."""
    records = [record(i) for i in range(12)]
    expected = [text_json(r) for r in records]
    writer = TextWriter(tmp_path / "source")
    sizes = []
    for r in records:
        writer.write(r)
        writer.flush()
        (partial,) = (tmp_path / "source").iterdir()
        sizes.append(partial.stat().st_size)
    data = partial.read_bytes()
    writer.close()
    cuts = sorted({*range(0, len(data), 37), *sizes, *(size - 1 for size in sizes)})
    for cut in cuts:
        directory = tmp_path / f"cut-{cut}"
        directory.mkdir()
        (directory / partial.name).write_bytes(data[:cut])
        published = repair_open_files(directory)
        assert sorted(directory.iterdir()) == published
        kept = read_all(published)
        assert kept == expected[: len(kept)], cut
        assert len(kept) >= sum(size <= cut for size in sizes), cut


def test_leftovers_without_a_complete_line_are_deleted(tmp_path: Path) -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    torn = compressor.compress(b'{"url":"https://example.test/torn"') + compressor.flush(
        zlib.Z_SYNC_FLUSH
    )
    leftovers = {"garbage": b"not gzip at all\n" * 50, "empty": b"", "torn": torn}
    for name, data in leftovers.items():
        (tmp_path / f"text-{name}{SUFFIX}{PARTIAL}").write_bytes(data)
    assert repair_open_files(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_a_repair_cut_short_after_its_rename_is_finished(tmp_path: Path) -> None:
    """A final name next to its .open file: the rename was done, only the delete is left."""
    with TextWriter(tmp_path) as writer:
        writer.write(record(1))
    (final,) = writer.files
    published = final.read_bytes()
    final.with_name(final.name + PARTIAL).write_bytes(published[:20])
    TextWriter(tmp_path).close()
    assert list(tmp_path.iterdir()) == [final]
    assert final.read_bytes() == published


def test_a_failed_write_never_publishes_a_torn_file(tmp_path: Path) -> None:
    """Writes beyond 4 KiB fail (RLIMIT_FSIZE, as on a full disk): the writer stops with a
    one-line error and leaves its .open file, whose flushed records the repair keeps."""
    records = [record(i) for i in range(200)]
    directory = tmp_path / "text"
    count, message, refused = write_until_full(
        "trawl.content.text_files.TextWriter", directory, records, tmp_path
    )
    (partial,) = directory.iterdir()
    assert partial.name.endswith(SUFFIX + PARTIAL)
    assert message == f"cannot write text file {partial}: File too large"
    assert refused == "TextWriter used after close"
    assert partial.stat().st_size == LIMIT
    (path,) = repair_open_files(directory)
    kept = read_lines(path)
    assert count <= len(kept) < len(records)
    assert kept == [text_json(r) for r in records[: len(kept)]]
