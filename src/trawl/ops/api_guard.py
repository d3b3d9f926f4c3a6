"""The door of the REST API: the token and the body limit, checked before the app runs.

Each HTTP request goes through :class:`Guard` (plain ASGI, no parsing), in this order:

1. With a token, every request that may change something (any method but GET, HEAD and
   OPTIONS) must carry ``Authorization: Bearer TOKEN`` (compared in constant time); it is
   answered 401 before a byte of its body is read.
2. A ``Content-Length`` over `BODY_LIMIT` is answered 413 at once; a body without one
   (chunked) is counted as it arrives and answered 413 as soon as it passes the limit.
3. The body, read whole (at most `BODY_LIMIT` bytes), is handed to the app.

A request answered before its body was read has its connection closed, so the rest of
the body is never read. Every answer here is ``{"detail": "..."}``.
"""

from __future__ import annotations

import json
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_LIMIT = 64 * 1024
"""Bytes a request body may have: a crawl request with 1,000 seeds fits."""
READING = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: they need no token."""


class Guard:
    """ASGI middleware: the token, then the body limit, then ``app`` with the body read."""

    def __init__(self, app: ASGIApp, token: str | None, limit: int = BODY_LIMIT) -> None:
        self.app = app
        self.token = None if token is None else token.encode()
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.token is not None and scope["method"] not in READING:
            given = headers.get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            if scheme.lower() != b"bearer" or not secrets.compare_digest(
                credentials.strip(), self.token
            ):
                await _refuse(send, 401, "a valid bearer token is required", bearer=True)
                return
        length = headers.get(b"content-length")
        if length is not None and not (length.isdigit() and len(length) <= 19):
            await _refuse(send, 400, "Content-Length is not a number")
            return
        if length is not None and int(length) > self.limit:
            await _refuse(send, 413, f"the request body is over {self.limit} bytes")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.limit:
                await _refuse(send, 413, f"the request body is over {self.limit} bytes")
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` whole, then whatever ``receive`` gives next."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def _refuse(send: Send, status: int, detail: str, bearer: bool = False) -> None:
    """Answer ``status`` with ``detail`` and close the connection (its body unread)."""
    content = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"connection", b"close"),
    ]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
