"""The upload benchmark: what trawl's S3 client costs to put one file.

    python -m bench.upload [--mb 200] [--runs 2] [--json]

Starts moto's S3 server (``moto[server]``) on loopback, makes a file of random bytes
and puts it, ``--runs`` times under new keys, as ``--output`` does
(trawl.outputs.bucket: memory-mapped, ``If-None-Match: *``, SHA-256 checksum and
metadata). Prints the MB/s, the CPU time a MB (this process, the client's threads
included) and the peak RSS. Speed is reported, never judged.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.servers import LOOPBACK, free_port
from trawl.outputs.bucket import Bucket, PutOutcome
from trawl.outputs.target import parse_output

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class UploadRun:
    """One put of the file."""

    megabytes: float
    seconds: float
    megabytes_per_second: float
    cpu_ms_per_megabyte: float
    peak_rss_mb: float


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _moto(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection((LOOPBACK, port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(
                    "moto's S3 server did not start (pip install 'moto[server]')"
                ) from None
            time.sleep(0.05)


def run(megabytes: int, runs: int) -> list[UploadRun]:
    """Put a file of ``megabytes`` MB ``runs`` times to a fresh moto server."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_REGION", "us-east-1")
    port = free_port()
    server = _moto(port)
    try:
        endpoint = f"http://{LOOPBACK}:{port}"
        # S3's CreateBucket: a PUT of the bucket's name (moto takes it unsigned).
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/bench", method="PUT")).close()
        bucket = Bucket(parse_output("s3://bench/upload", endpoint))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "file.bin"
            with path.open("wb") as file:
                for _ in range(megabytes):
                    file.write(os.urandom(_CHUNK))
            size = path.stat().st_size / 1e6
            results = []
            for number in range(runs):
                started, cpu = time.monotonic(), _cpu()
                put = bucket.put_new(f"upload/{number}", path)
                seconds, spent = time.monotonic() - started, _cpu() - cpu
                assert put.outcome is PutOutcome.CREATED
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                results.append(
                    UploadRun(
                        round(size, 1), round(seconds, 3), round(size / seconds, 1),
                        round(spent * 1000 / size, 3), round(rss, 1),
                    )
                )  # fmt: skip
            return results
    finally:
        server.terminate()
        server.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.upload", description=__doc__)
    parser.add_argument("--mb", type=int, default=200, help="the file's size in MB")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = run(args.mb, args.runs)
    if args.json:
        print(json.dumps([asdict(result) for result in results]))
    else:
        for result in results:
            print(
                f"{result.megabytes} MB in {result.seconds} s: {result.megabytes_per_second} "
                f"MB/s, {result.cpu_ms_per_megabyte} ms of CPU a MB, peak RSS "
                f"{result.peak_rss_mb} MB"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
