"""An S3-API server on loopback for the tests: moto's standalone server, one per test
session (each xdist worker its own), reached with boto3 and test credentials.

The server is a child process (``python -m moto.server``), so a test can stop one of its
own and start it again. The session fixture sets the AWS environment the crawls it
starts inherit: test keys, a region, and no shared files of the machine's user.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from bench.servers import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "trawl-test-key",
    "AWS_SECRET_ACCESS_KEY": "trawl-test-secret",
    "AWS_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@dataclass
class MotoServer:
    """A running moto server on 127.0.0.1."""

    port: int
    proc: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        """A boto3 S3 client of the server."""
        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )  # fmt: skip

    def new_bucket(self, *, create: bool = True, versioned: bool = True) -> str:
        """A bucket name no other test uses, created (with versioning, so that an
        overwrite would show as a second version) unless ``create`` is off."""
        name = f"t-{uuid.uuid4().hex[:20]}"
        if create:
            self.create(name, versioned=versioned)
        return name

    def create(self, bucket: str, *, versioned: bool = True) -> None:
        client = self.client()
        client.create_bucket(Bucket=bucket)
        if versioned:
            client.put_bucket_versioning(
                Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
            )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def start_moto(port: int | None = None) -> MotoServer:
    """Start moto's server on ``port`` (default: a free one); return once it answers."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return MotoServer(port, proc)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("moto's S3 server did not start (pip install 'moto[server]')")
            time.sleep(0.05)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoServer]:
    """The session's moto server, with the AWS test environment set for crawls."""
    server = start_moto()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in CREDENTIALS.items():
            patch.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
            patch.delenv(name, raising=False)
        try:
            yield server
        finally:
            server.stop()


def objects(server: MotoServer, bucket: str) -> dict[str, dict[str, Any]]:
    """Every object of ``bucket`` by key: its versions, body, and metadata."""
    client = server.client()
    found: dict[str, dict[str, Any]] = {}
    versions = client.list_object_versions(Bucket=bucket).get("Versions", [])
    counts: dict[str, int] = {}
    for version in versions:
        counts[version["Key"]] = counts.get(version["Key"], 0) + 1
    for key, count in counts.items():
        got = client.get_object(Bucket=bucket, Key=key)
        body = got["Body"].read()
        found[key] = {"versions": count, "body": body, "metadata": got["Metadata"],
                      "sha256": hashlib.sha256(body).hexdigest()}  # fmt: skip
    return found
