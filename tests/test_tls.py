"""TLS is verified against the host name, although trawl connects by checked address."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from trawl.fetch.client import HttpClient
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver
from trawl.fetch.tls import tls_context

GOOD, OTHER = "tls.trawl.test", "other.trawl.test"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(where: Path) -> None:
    """A test CA, and a certificate it signed for ``GOOD`` only."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=trawl test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", cwd=where)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
            "-subj", f"/CN={GOOD}", cwd=where)  # fmt: skip
    (where / "leaf.ext").write_text(f"subjectAltName=DNS:{GOOD}\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext",
            cwd=where)  # fmt: skip


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """An HTTPS server on 127.0.0.1 presenting the ``GOOD`` certificate; (port, CA file)."""
    make_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")

    async def page(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        return web.Response(text="<title>secure</title>", content_type="text/html")

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield port, tmp_path / "ca.pem"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


@pytest.mark.parametrize("trust", ["--ca-file", "SSL_CERT_FILE"])
def test_the_certificate_must_name_the_host(
    https_server: tuple[int, Path], tmp_path: Path, trust: str
) -> None:
    port, ca = https_server
    seeds = [f"https://{GOOD}:{port}/", f"https://{OTHER}:{port}/"]
    command = [sys.executable, "-m", "trawl", "crawl", *seeds, "--resolve", f"{GOOD}=127.0.0.1",
               "--resolve", f"{OTHER}=127.0.0.1", "--allow-network", "127.0.0.1/32",
               "--data-dir", str(tmp_path / "crawl"), "--json", "--no-progress",
               "--retry-attempts", "1", "--no-soft-404"]  # fmt: skip
    env = dict(os.environ)
    env.pop("SSL_CERT_FILE", None)
    if trust == "--ca-file":
        command += ["--ca-file", str(ca)]  # the system's trust store stays in use besides
    else:
        env["SSL_CERT_FILE"] = str(ca)
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["status"]["2xx"] == 1
    assert summary["fetched"] == 1
    export = subprocess.run(
        [sys.executable, "-m", "trawl", "export", "--format", "jsonl",
         "--data-dir", str(tmp_path / "crawl")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    rows = {row["url"]: row for row in map(json.loads, export.stdout.splitlines())}
    assert rows[seeds[0]]["status"] == 200
    # Same server, same address, same certificate: only the name differs, and the TLS
    # failure on OTHER's robots.txt makes it unreachable, so nothing of it is fetched.
    assert (rows[seeds[1]]["status"], rows[seeds[1]]["error"]) == (None, "tls")
    assert summary["unreachable_hosts"] == 1


@pytest.mark.parametrize("content", [None, "not a certificate\n"])
def test_an_unusable_ca_file_is_one_line_and_exit_2(tmp_path: Path, content: str | None) -> None:
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_text(content)
    command = [sys.executable, "-m", "trawl", "crawl", f"https://{GOOD}/", "--ca-file", str(ca),
               "--data-dir", str(tmp_path / "crawl"), "--no-progress"]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1
    assert "Traceback" not in run.stderr
    assert f"--ca-file {ca}" in run.stderr


async def test_a_closed_tls_connection_is_freed_at_once(https_server: tuple[int, Path]) -> None:
    """A crawl runs the cycle collector rarely, so what a closed connection holds must go
    by reference counting: asyncio's TLS transports kept a 256 KB read buffer each, and
    trawl's holds the connection's OpenSSL state (tests/test_tls_transport.py)."""
    port, ca = https_server
    policy = AddressPolicy([ipaddress.ip_network("127.0.0.0/8")])
    resolver = GuardedResolver(policy, overrides={GOOD: "127.0.0.1"})
    client = HttpClient(resolver, headers=[("User-Agent", "trawl-test")], connect_timeout=5.0,
                        max_idle=0, ssl_context=tls_context(ca))  # fmt: skip
    connections = 16
    gc.disable()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(connections):
            with await client.get(f"https://{GOOD}:{port}/{n}") as answer:
                assert answer.status == 200
                async for _ in answer.chunks():
                    pass
        await asyncio.sleep(0.2)  # the TLS transports report their closing
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gc.enable()
        await client.close()
    assert client.opened == connections
    assert client.sockets == 0
    assert kept < 64 * 1024 * connections, f"{kept} bytes kept after closing {connections}"
