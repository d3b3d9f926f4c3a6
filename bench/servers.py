"""Serve a generated site on loopback: nginx when installed, else the built-in server.

`serve` is one context manager for both. It starts the server as a child process in a
fresh run directory, waits until the port accepts connections, and on exit stops it
gracefully (so buffered log lines are written) and parses the access log into
`ServedSite.records`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.accesslog import LogRecord, parse_log
from trawl.demo.server import loopback_address

__all__ = ["ServedSite", "free_port", "nginx_available", "nginx_config", "port_is_free", "serve"]

LOOPBACK = "127.0.0.1"
_START_TIMEOUT = 15.0


@dataclass(slots=True)
class ServedSite:
    """A running (then stopped) server: its kind, port, and once stopped its log."""

    kind: str
    port: int
    version: str
    records: list[LogRecord] = field(default_factory=list)


CONNECTIONS = 8192
"""Client connections nginx can hold at once, besides its listening sockets."""


def nginx_available() -> bool:
    return shutil.which("nginx") is not None


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port(kind: int = socket.SOCK_STREAM, address: str = LOOPBACK) -> int:
    """A port of ``kind`` (TCP, or UDP with ``socket.SOCK_DGRAM``) nothing is bound to on
    ``address`` now (the kernel's choice; "0.0.0.0": on every address)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((address, 0))
        port: int = sock.getsockname()[1]
    return port


def host_addresses(hosts: Sequence[str]) -> dict[str, str]:
    """Each host's own loopback address (127.0.0.1, 127.0.0.2, ...), as trawl's test
    server gives them: separate servers to trawl's per-address limit."""
    return {host: loopback_address(index) for index, host in enumerate(hosts)}


def nginx_config(
    site: Path,
    hosts: Sequence[str],
    redirects: dict[str, dict[str, list[int | str]]],
    port: int,
    run: Path,
) -> str:
    """nginx.conf serving ``site``: loopback only, one server block per host, all paths in
    ``run``, and the bench access-log format.

    Each host's listening socket takes one of nginx's ``worker_connections``, so they are
    counted on top of the ``CONNECTIONS`` for clients: with a fixed 4,096, 4,000 hosts
    left nginx about 95 connections, and it closed clients' connections, fresh ones
    included, to make room."""
    addresses = host_addresses(hosts)
    slots = len(set(addresses.values())) + CONNECTIONS
    lines = [
        "daemon off;",
        "worker_processes 1;",
        f"worker_rlimit_nofile {2 * slots};",
        f"pid {run}/nginx.pid;",
        f"error_log {run}/error.log warn;",
        f"events {{ worker_connections {slots}; }}",
        "http {",
        "    types { text/html html; text/plain txt; }",
        "    default_type application/octet-stream;",
        "    sendfile on;",
        "    tcp_nopush on;",
        "    server_tokens off;",
        "    keepalive_requests 1000000;",
        "    absolute_redirect off;",
        "    log_format bench '$host $request_uri $status $msec $request_time';",
        f"    access_log {run}/access.log bench buffer=256k;",
        *(
            f"    {name}_temp_path {run}/tmp/{name};"
            for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        ),
    ]
    for address in sorted(set(addresses.values())):
        lines.append(f"    server {{ listen {address}:{port} default_server; return 404; }}")
    for host in hosts:
        lines += [
            "    server {",
            f"        listen {addresses[host]}:{port};",
            f"        server_name {host};",
            f"        root {site}/hosts/{host};",
            "        index index.html;",
        ]
        for path, (status, location) in sorted(redirects.get(host, {}).items()):
            lines.append(f"        location = {path} {{ return {status} {location}; }}")
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _wait_listening(
    addresses: Sequence[str], port: int, process: subprocess.Popen[bytes], errors: Path
) -> None:
    """Return once every one of ``addresses`` accepts connections on ``port`` (the
    built-in server starts listening on them one after the other)."""
    deadline = time.monotonic() + _START_TIMEOUT
    waiting = list(addresses)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited at start: {errors.read_text(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection((waiting[0], port), 0.2):
            waiting.pop(0)
            if not waiting:
                return
            continue
        time.sleep(0.02)
    raise RuntimeError(f"server did not listen on {waiting[0]}:{port}")


def _nginx_version() -> str:
    result = subprocess.run(["nginx", "-v"], capture_output=True, text=True, check=False)
    return result.stderr.strip().removeprefix("nginx version: ")


@contextlib.contextmanager
def serve(
    site: Path, hosts: Sequence[str], port: int, run: Path, kind: str = "auto"
) -> Iterator[ServedSite]:
    """Serve ``site`` for ``hosts`` on 127.0.0.1:``port`` with ``kind`` (nginx, builtin or
    auto); ``run`` is a fresh directory for config, pid, logs and temp files."""
    if kind == "auto":
        kind = "nginx" if nginx_available() else "builtin"
    site, run = site.resolve(), run.resolve()
    run.mkdir(parents=True, exist_ok=True)
    log, errors = run / "access.log", run / "server.err"
    if kind == "nginx":
        redirects = json.loads((site / "redirects.json").read_text(encoding="utf-8"))
        (run / "tmp").mkdir(exist_ok=True)
        config = run / "nginx.conf"
        config.write_text(nginx_config(site, hosts, redirects, port, run), encoding="utf-8")
        command = ["nginx", "-p", str(run), "-c", str(config), "-e", str(run / "error.log")]
        stop_signal, version = signal.SIGQUIT, _nginx_version()
    elif kind == "builtin":
        addresses = ",".join(sorted(set(host_addresses(hosts).values())))
        command = [sys.executable, "-m", "bench.builtin_server", str(site), str(port), str(log),
                   addresses]  # fmt: skip
        stop_signal, version = signal.SIGTERM, "aiohttp"
    else:
        raise ValueError(f"unknown server {kind!r}")
    log.touch()
    with errors.open("wb") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=Path(__file__).parents[1]
        )
    served = ServedSite(kind, port, version)
    try:
        _wait_listening(sorted(set(host_addresses(hosts).values())), port, process, errors)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(stop_signal)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    served.records = parse_log(log.read_text(encoding="utf-8"))
