"""The built-in server: serves a generated site's files by Host header, like the nginx config.

Run as ``python -m bench.builtin_server ROOT PORT LOG [ADDRESS,...]``. It answers on the
given loopback addresses (127.0.0.1 by default) only,
applies ``ROOT/redirects.json``, serves ``ROOT/hosts/<host>/<path>`` (``index.html`` for a
path ending in ``/``), answers 404 otherwise, and logs each request in nginx's bench format
after its last byte is handed to the socket. SIGTERM or SIGINT stop it and flush the log.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

from aiohttp import web

__all__ = ["main", "make_app"]

_TYPES = {".html": "text/html", ".txt": "text/plain"}
_NOT_FOUND = b"<html><head><title>404 Not Found</title></head><body>Not found</body></html>\n"


def _file(root: Path, host: str, path: str) -> Path | None:
    """The file serving ``path`` on ``host``, or None (also for any path escaping the root)."""
    if ".." in path or "\\" in path or not path.startswith("/") or "/" in host:
        return None
    rel = path[1:] + ("index.html" if path.endswith("/") else "")
    file = root / "hosts" / host / rel
    return file if file.is_file() else None


def make_app(root: Path, log: TextIO) -> web.Application:
    """The aiohttp application serving ``root`` and writing its access log to ``log``."""
    redirects: dict[str, dict[str, list[int | str]]] = json.loads(
        (root / "redirects.json").read_text(encoding="utf-8")
    )

    async def handle(request: web.Request) -> web.StreamResponse:
        start = time.time()
        host = (request.host or "").rsplit(":", 1)[0].lower()
        path = request.path
        redirect = redirects.get(host, {}).get(path)
        if redirect is not None:
            status, location = redirect
            response = web.Response(status=int(status), headers={"Location": str(location)})
        else:
            file = _file(root, host, path)
            if file is None:
                response = web.Response(status=404, body=_NOT_FOUND, content_type="text/html")
            else:
                response = web.Response(
                    body=file.read_bytes(), content_type=_TYPES.get(file.suffix, "text/plain")
                )
        await response.prepare(request)
        await response.write_eof()
        end = time.time()
        log.write(f"{host} {request.raw_path} {response.status} {end:.6f} {end - start:.6f}\n")
        return response

    async def close_log(_: web.Application) -> None:
        log.close()

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    app.on_cleanup.append(close_log)
    return app


def main(argv: list[str]) -> None:
    """Serve until SIGTERM or SIGINT."""
    root, port, log_path = Path(argv[0]), int(argv[1]), Path(argv[2])
    addresses = argv[3].split(",") if len(argv) > 3 else ["127.0.0.1"]
    log = log_path.open("a", encoding="utf-8", buffering=1 << 16)
    web.run_app(
        make_app(root, log),
        host=addresses,
        port=port,
        print=None,
        access_log=None,
        shutdown_timeout=2.0,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
