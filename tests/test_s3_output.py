"""``--output s3://...``: the closed WARC and text files go to an S3-API bucket (moto's
server on loopback), under the documented keys, checksummed, never overwritten, and the
events' ``storageKey`` range-GETs to the page's WARC record.

Buckets are versioned, so that a PUT over an existing key would leave a second version.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import signal
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from s3_server import MotoServer, moto_s3, objects
from test_content_resume import fingerprinted
from test_resume import crawl_command, run_to_end, server, start_and_wait
from trawl.config import default_worker_id
from trawl.demo import SiteServer
from trawl.outputs.target import worker_tag
from trawl.store.sqlite.store import DB_NAME

__all__ = ["moto_s3", "server"]

PREFIX = "crawls/run-1"
KEY_RE = re.compile(
    r"crawls/run-1/default/(warc|text)/(\d{4})/(\d{2})/(\d{2})/"
    r"((?:trawl|text)-(.+)-(\d{8})[T\d]\d+-\d{5}-[0-9a-f]{6}(?:\.warc\.gz|\.cdxj|\.jsonl\.gz))"
)


def s3_command(
    server: SiteServer, moto: MotoServer, bucket: str, data_dir: Path, *extra: str
) -> list[str]:
    return [
        *crawl_command(server, data_dir, delay=0.01),
        "--warc", "--text", "--warc-max-size", "30000",
        "--output", f"s3://{bucket}/{PREFIX}/", "--s3-endpoint", moto.endpoint, *extra,
    ]  # fmt: skip


def local_outputs(data_dir: Path) -> list[Path]:
    """The closed output files left in the data dir."""
    return sorted(
        path
        for name in ("warc", "text")
        if (data_dir / name).exists()
        for path in (data_dir / name).iterdir()
        if path.name.endswith((".warc.gz", ".cdxj", ".jsonl.gz"))
    )


def warc_responses(body: bytes) -> list[str]:
    """The target URIs of a WARC file's response and revisit records."""
    return [
        record.rec_headers.get_header("WARC-Target-URI")
        for record in ArchiveIterator(io.BytesIO(body))
        if record.rec_type in ("response", "revisit")
    ]


def text_urls(body: bytes) -> list[str]:
    return [json.loads(line)["final_url"] for line in gzip.decompress(body).splitlines()]


def uploads_rows(data_dir: Path) -> dict[str, tuple[str, int, str]]:
    with closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        rows = db.execute("SELECT object_key, file, size, sha256 FROM uploads").fetchall()
    return {key: (file, size, sha) for key, file, size, sha in rows}


def check_bucket(
    server: SiteServer, data_dir: Path, held: dict[str, dict[str, Any]], worker: str
) -> None:
    """Every object is one version under its documented key with its checksum, each WARC
    with its index; the WARC responses cover every page the site must serve, the text
    records every page the store says has text."""
    warcs: list[str] = []
    texts: list[str] = []
    for key, held_object in held.items():
        found = KEY_RE.fullmatch(key)
        assert found, key
        kind, year, month, day, name, tag, stamp = found.groups()
        assert stamp == f"{year}{month}{day}"
        assert tag == worker_tag(worker)
        assert held_object["versions"] == 1, f"{key} was overwritten"
        assert held_object["metadata"]["sha256"] == held_object["sha256"]
        if name.endswith(".warc.gz"):
            assert key.removesuffix(".warc.gz") + ".cdxj" in held
            warcs += warc_responses(held_object["body"])
        elif name.endswith(".jsonl.gz"):
            assert kind == "text"
            texts += text_urls(held_object["body"])
    assert set(warcs) >= server.site.expected_fetches
    pages = fingerprinted(data_dir)
    assert set(texts) == {url for url, (_, text, dup) in pages.items() if text and not dup}
    recorded = uploads_rows(data_dir)
    assert set(recorded) == set(held)
    for key, (_, size, sha) in recorded.items():
        assert (size, sha) == (len(held[key]["body"]), held[key]["sha256"])


def check_events(moto: MotoServer, bucket: str, events: Path | list[dict[str, Any]]) -> None:
    """Each event (of a file, or as read from a broker) has a storageKey that range-GETs
    to the response record of its page."""
    client = moto.client()
    if isinstance(events, Path):
        events = [json.loads(line) for line in events.read_text().splitlines()]
    assert events
    for event in events:
        where = event["storageKey"]
        assert where["bucket"] == bucket
        assert where["key"].endswith("/" + where["file"])
        end = where["offset"] + where["length"] - 1
        span = f"bytes={where['offset']}-{end}"
        got = client.get_object(Bucket=bucket, Key=where["key"], Range=span)
        record = next(iter(ArchiveIterator(io.BytesIO(got["Body"].read()))))
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Target-URI") == event["url"]


def test_a_crawl_uploads_every_file_and_events_name_their_records(
    server: SiteServer, moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    data_dir = tmp_path / "crawl"
    events = tmp_path / "events.jsonl"
    summary = run_to_end(
        s3_command(server, moto_s3, bucket, data_dir, "--events", str(events), "--worker-id", "w:1")
    )
    uploads = summary["uploads"]
    assert isinstance(uploads, dict)
    assert uploads["files"] > 6
    assert "pending" not in uploads
    assert "failures" not in uploads
    assert local_outputs(data_dir) == []
    assert not (data_dir / "items").exists(), "a crawl without handlers writes no items files"
    held = objects(moto_s3, bucket)
    assert len(held) == uploads["files"]
    check_bucket(server, data_dir, held, "w:1")

    check_events(moto_s3, bucket, events)


def test_keep_local_keeps_the_files_and_a_rerun_puts_nothing_again(
    server: SiteServer, moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    data_dir = tmp_path / "crawl"
    command = s3_command(server, moto_s3, bucket, data_dir, "--keep-local")
    first = run_to_end(command)
    kept = local_outputs(data_dir)
    held = objects(moto_s3, bucket)
    assert len(kept) == len(held) == first["uploads"]["files"]  # type: ignore[index]
    assert {path.name for path in kept} == {key.rsplit("/", 1)[1] for key in held}
    for path in kept:
        key = next(key for key in held if key.endswith("/" + path.name))
        assert held[key]["body"] == path.read_bytes()
    again = run_to_end(command)
    assert "files" not in again["uploads"]  # type: ignore[operator]
    assert objects(moto_s3, bucket).keys() == held.keys()


def test_a_store_that_refuses_keeps_the_files_for_the_next_start(
    server: SiteServer, moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket(create=False)
    data_dir = tmp_path / "crawl"
    command = s3_command(server, moto_s3, bucket, data_dir, "--upload-wait", "1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["state"] == "done"
    kept = local_outputs(data_dir)
    assert summary["uploads"]["pending"] == len(kept) > 6
    assert summary["uploads"]["failures"] >= 1
    said = [line for line in done.stderr.splitlines() if "not uploaded" in line]
    assert len(said) == 1, done.stderr
    assert f"{len(kept)} files" in said[0]
    assert "404 NoSuchBucket" in said[0]
    assert "trawl-test-secret" not in done.stderr

    sizes = sum(path.stat().st_size for path in kept)
    moto_s3.create(bucket)
    again = run_to_end(command)
    assert again["uploads"] == {"files": len(kept), "bytes": sizes}
    assert local_outputs(data_dir) == []
    check_bucket(server, data_dir, objects(moto_s3, bucket), default_worker_id(data_dir))


def test_kill_9_mid_upload_loses_nothing_and_overwrites_nothing(
    server: SiteServer, moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    data_dir = tmp_path / "crawl"
    events = tmp_path / "events.jsonl"
    command = s3_command(
        server, moto_s3, bucket, data_dir, "--worker-id", "killed", "--events", str(events)
    )
    rng = random.Random()
    at = 0
    for _ in range(3):
        at += rng.randint(30, 110)
        proc = start_and_wait(command, server, requests=at)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_to_end(command)
    assert local_outputs(data_dir) == []
    check_bucket(server, data_dir, objects(moto_s3, bucket), "killed")
    # Events written before a kill name files that were still open then: published by
    # the next start, and uploaded under the keys the events named.
    check_events(moto_s3, bucket, events)
