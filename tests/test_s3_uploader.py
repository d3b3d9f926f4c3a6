"""The uploader against moto's server, in-process: what it does with a key that exists
(the same file: done; other content: a conflict, never overwritten), how a store that
cannot be reached shows in the metrics, and the key layout and ``--output`` checks."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from bench.servers import free_port
from prometheus_client import generate_latest

from s3_server import MotoServer, moto_s3, objects
from trawl.errors import UsageError
from trawl.ops.metrics import CrawlMetrics
from trawl.outputs.profile import shared_profile
from trawl.outputs.target import KeyLayout, ObjectTarget, parse_output, worker_tag
from trawl.outputs.uploader import Uploader
from trawl.store.sqlite.store import SQLiteStore

__all__ = ["moto_s3"]

WARC = "trawl-w-1a2b3c-20261206120501123456-00001-a1b2c3"
TEXT = "text-w-1a2b3c-20261206T120501-00000-d4e5f6.jsonl.gz"


def outputs(data_dir: Path) -> dict[str, Path]:
    """A closed WARC file with its index, and a text file, as the writers name them."""
    (data_dir / "warc").mkdir(parents=True)
    (data_dir / "text").mkdir()
    files = {
        "warc": data_dir / "warc" / f"{WARC}.warc.gz",
        "cdxj": data_dir / "warc" / f"{WARC}.cdxj",
        "text": data_dir / "text" / TEXT,
        "open": data_dir / "warc" / "trawl-w-1a2b3c-20261206120502123456-00002-a1b2c4.warc.gz.open",
    }
    for name, path in files.items():
        path.write_bytes(name.encode() * 1000)
    return files


def uploader(target: ObjectTarget, data_dir: Path, store: SQLiteStore) -> Uploader:
    layout = KeyLayout(target, "default")
    directories = {"warc": data_dir / "warc", "text": data_dir / "text"}
    return Uploader(layout, directories, store, "w", backoff=(0.05, 0.2))  # type: ignore[arg-type]


async def wait_for(condition: object, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_an_existing_key_is_done_when_it_holds_the_file_and_kept_otherwise(
    moto_s3: MotoServer, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    files = outputs(tmp_path)
    client = moto_s3.client()
    day = "p/default/warc/2026/12/06"
    # A put that a kill cut off after the store took it: same bytes, no metadata.
    client.put_object(Bucket=bucket, Key=f"{day}/{WARC}.warc.gz", Body=files["warc"].read_bytes())
    client.put_object(Bucket=bucket, Key=f"{day}/{WARC}.cdxj", Body=b"other content")
    target = parse_output(f"s3://{bucket}/p", moto_s3.endpoint)
    async with SQLiteStore(tmp_path) as store:
        async with uploader(target, tmp_path, store) as up:
            await wait_for(lambda: up.figures().files == 2 and up.figures().conflicts == 1)
        figures = up.figures()
        recorded = await store.uploaded(bucket, [f"{day}/{WARC}.warc.gz", f"{day}/{WARC}.cdxj"])
    assert figures.files == 2
    assert figures.conflicts == 1
    assert recorded == {f"{day}/{WARC}.warc.gz"}
    assert not files["warc"].exists()
    assert not files["text"].exists()
    assert files["cdxj"].exists(), "a conflict keeps the file"
    assert files["open"].exists(), "a file being written is never uploaded"
    held = objects(moto_s3, bucket)
    assert held[f"{day}/{WARC}.cdxj"]["body"] == b"other content"
    assert held[f"{day}/{WARC}.cdxj"]["versions"] == 1
    text = held[f"p/default/text/2026/12/06/{TEXT}"]
    assert text["body"] == b"text" * 1000
    assert text["metadata"]["sha256"] == hashlib.sha256(b"text" * 1000).hexdigest()


async def test_an_unreachable_store_pauses_uploads_and_shows_in_the_metrics(
    moto_s3: MotoServer, tmp_path: Path
) -> None:
    files = outputs(tmp_path)
    target = parse_output("s3://some-bucket/p", f"http://127.0.0.1:{free_port()}", wait=0.3)
    metrics = CrawlMetrics()
    async with SQLiteStore(tmp_path) as store:
        up = uploader(target, tmp_path, store)
        async with up:
            metrics.watch_uploads(up.figures)
            await wait_for(lambda: up.figures().failures >= 2)
            scraped = generate_latest(metrics.registry).decode()
        assert "trawl_upload_paused 1.0" in scraped
        assert "trawl_upload_pending_files 3.0" in scraped
        assert "trawl_upload_files_total 0.0" in scraped
        assert up.figures().pending == 3
    assert all(path.exists() for path in files.values())


@pytest.mark.parametrize(
    ("output", "endpoint", "message"),
    [
        ("s3://", None, "names no bucket"),
        ("gs://bucket/x", None, "unknown scheme 'gs'"),
        ("bucket/x", None, "unknown scheme 'none'"),
        ("s3://Bad_Bucket/x", None, "is not a bucket name"),
        ("s3://key:secret@bucket/x", None, "must not hold credentials"),
        ("s3://bucket/a/../b", None, "prefix part '..'"),
        ("s3://bucket/x", "ftp://host", "not an http\\(s\\) URL"),
        ("s3://bucket/x", "http://h:99999", "not a URL"),
        ("s3://bucket/x", "http://key:secret@host", "must not hold credentials"),
    ],
)
def test_a_bad_output_is_one_usage_line(output: str, endpoint: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=message) as raised:
        parse_output(output, endpoint)
    assert "secret" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_keys_name_the_crawl_the_output_the_day_and_the_worker() -> None:
    layout = KeyLayout(parse_output("s3://bucket/a/b/", "https://s3.example:9000/"), "c1")
    assert layout.target.endpoint == "https://s3.example:9000"
    assert layout.key("warc", f"{WARC}.warc.gz") == f"a/b/c1/warc/2026/12/06/{WARC}.warc.gz"
    assert layout.key("text", TEXT) == f"a/b/c1/text/2026/12/06/{TEXT}"
    assert layout.key("warc", f"{WARC}.warc.gz.open") is None
    assert layout.key("text", "notes.txt") is None
    items = TEXT.replace("text-", "items-")
    assert layout.key("items", items) == f"a/b/c1/items/2026/12/06/{items}"
    assert layout.key("items", items + ".open") is None
    assert KeyLayout(parse_output("s3://bucket", None), "c1").key("text", TEXT) == (
        f"c1/text/2026/12/06/{TEXT}"
    )
    tags = {worker_tag(w) for w in ("vm:/data/a", "vm:/data-a", "vm/data/a", "x" * 90)}
    assert len(tags) == 4
    assert all(len(tag) <= 47 for tag in tags)


def cli(*args: str, cwd: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys; from trawl.cli.launch import main; sys.argv[0] = 'trawl'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--warc", "--output", "s3://"], "--output s3:// names no bucket"),
        (["--warc", "--output", "s3://bucket/p", "--s3-endpoint", "nope"], "--s3-endpoint"),
        (["--warc", "--output", "file:///tmp/x"], "unknown scheme 'file'"),
    ],
)
def test_the_command_refuses_a_bad_output_in_one_line(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = cli("crawl", "http://a.test/", "--data-dir", "d", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "d").exists()


def test_a_missing_client_names_the_extra(tmp_path: Path) -> None:
    done = cli(
        "crawl", "http://a.test/", "--warc", "--output", "s3://bucket/p", cwd=tmp_path,
        prelude="import sys; sys.modules['obstore'] = None; ",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "trawl: error: --output s3:// needs the S3 client: pip install 'trawl[s3]'"
    ]


def test_the_shared_files_profile_fills_in_what_the_environment_leaves_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text("[crawler]\naws_access_key_id = AKIA1\naws_secret_access_key = s1\n")
    config = tmp_path / "config"
    config.write_text("[default]\nregion = us-east-1\n[profile crawler]\nregion = eu-west-3\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "crawler")
    assert shared_profile() == {
        "access_key_id": "AKIA1", "secret_access_key": "s1", "region": "eu-west-3"
    }  # fmt: skip
    # The environment's keys and region win: nothing is taken from the files then.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA2")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert shared_profile() == {}
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_PROFILE", "missing")
    assert shared_profile() == {}
