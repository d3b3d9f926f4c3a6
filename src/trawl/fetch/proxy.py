"""Crawling through an HTTP proxy: the proxy's address and credentials, and the CONNECT
handshake that opens a tunnel through it.

``--proxy http://HOST[:PORT]`` (port 80 unless given) sends every request through one
forward proxy; the HTTP client takes the choice as a function of the target's host name
(:data:`ProxyFor`), so a proxy per site is one more such function. Through a proxy:

- an https URL goes through a tunnel: ``CONNECT`` to the target, then TLS end to end
  with the target, its certificate verified for the target's name (SNI the same), as
  without a proxy; the proxy sees neither the request nor the answer;
- an http URL is asked of the proxy in absolute form (``GET http://host/path HTTP/1.1``).

The target's name is resolved and checked by trawl's guarded resolver first, exactly as
without a proxy, so a loopback, private or metadata address is refused before the proxy
is asked. A tunnel is asked for the checked address (``CONNECT 203.0.113.7:443``, the
name in its Host header), so the proxy connects where trawl checked and a name that
rebinds between the two lookups gains nothing; an http request must name its host in
the request line (the proxy takes the Host it sends on from there), so for http the
proxy resolves the name again.

Credentials come from the environment only (`USER_ENV`, `PASSWORD_ENV`), never from the
URL, which may be stored or logged: they go to the proxy alone, as Proxy-Authorization
(Basic), are left out of every ``repr``, log line and archived request, and never reach
the target. A proxy given as ``https://`` (TLS to the proxy itself) is refused: it is
not supported.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from trawl.errors import UsageError

log = logging.getLogger("trawl.fetch.proxy")

USER_ENV = "TRAWL_PROXY_USER"
PASSWORD_ENV = "TRAWL_PROXY_PASSWORD"
DEFAULT_PORT = 80
MAX_CONNECT_HEAD = 16 * 1024
"""Bytes a proxy's answer to CONNECT may take up to the end of its head."""
AUTH_REQUIRED = 407


class ProxyFailed(Exception):
    """The proxy could not be reached, refused the request (a 407, a CONNECT answered
    with anything but 2xx) or closed the connection before answering: nothing is known
    of the target."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """A forward HTTP proxy: where it listens, and its credentials (never shown)."""

    host: str
    """A name or an IP address (IPv6 without brackets)."""
    port: int
    authorization: str | None = field(default=None, repr=False)
    """The Proxy-Authorization value (``Basic ...``), when credentials were given."""

    @property
    def key(self) -> str:
        """``host:port``: what connections through this proxy are pooled by."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def shown(self) -> str:
        """The proxy as messages and logs show it: no credentials."""
        return f"http://{self.key}"


ProxyFor = Callable[[str], Proxy | None]
"""The proxy a request to a host (its name) goes through; None: straight to the host."""


def always(proxy: Proxy) -> ProxyFor:
    """A :data:`ProxyFor` that sends every host through ``proxy`` (``--proxy``)."""

    def proxy_for(_host: str) -> Proxy:
        return proxy

    return proxy_for


def parse_proxy(value: str, env: Mapping[str, str] = os.environ) -> Proxy:
    """The proxy ``--proxy value`` names (``http://HOST[:PORT]``), with the credentials
    of ``env`` (`USER_ENV`, `PASSWORD_ENV`); anything else is a one-line
    :class:`UsageError` that never repeats a credential."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise UsageError(f"--proxy is not a URL ({exc}): use http://HOST:PORT") from None
    if parts.username is not None or parts.password is not None:
        raise UsageError(f"--proxy must not hold credentials: set {USER_ENV} and {PASSWORD_ENV}")
    if parts.scheme == "https":
        raise UsageError(
            "--proxy https:// (TLS to the proxy) is not supported: use an http:// proxy; "
            "https sites are still fetched with TLS end to end through it"
        )
    if parts.scheme != "http" or not host:
        raise UsageError("--proxy must be an http:// URL with a host: http://HOST:PORT")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError("--proxy takes no path, query or fragment: http://HOST:PORT")
    user, password = env.get(USER_ENV), env.get(PASSWORD_ENV)
    if password is not None and user is None:
        raise UsageError(f"{PASSWORD_ENV} is set without {USER_ENV}")
    authorization = None
    if user is not None:
        if ":" in user:
            raise UsageError(f"{USER_ENV} must not hold a ':' (Basic authentication)")
        pair = f"{user}:{password or ''}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode("ascii")
    return Proxy(host, port or DEFAULT_PORT, authorization)


Prelude = Callable[[socket.socket, Callable[[], Awaitable[None]]], Awaitable[None]]
"""What is said on a connected, non-blocking socket before TLS starts over it: given the
socket and a wait for it to become readable (trawl.fetch.tls ``connect``)."""


def tunnel(proxy: Proxy, address: str, port: int, host_header: str) -> Prelude:
    """The CONNECT exchange that has ``proxy`` open a tunnel to ``address``:``port``
    (the target's checked address; ``host_header`` its name); ProxyFailed unless the
    proxy answers 2xx with nothing after its head."""
    authority = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    request = f"CONNECT {authority} HTTP/1.1\r\nHost: {host_header}\r\n"
    if proxy.authorization is not None:
        request += f"Proxy-Authorization: {proxy.authorization}\r\n"
    payload = (request + "\r\n").encode("ascii")

    async def connect(sock: socket.socket, readable: Callable[[], Awaitable[None]]) -> None:
        try:
            sent = sock.send(payload)
        except OSError as exc:
            raise ProxyFailed(f"proxy {proxy.shown}: CONNECT not sent: {exc}") from exc
        if sent != len(payload):
            raise ProxyFailed(f"proxy {proxy.shown}: CONNECT not sent whole")
        head = b""
        while b"\r\n\r\n" not in head:
            try:
                data = sock.recv(MAX_CONNECT_HEAD)
            except BlockingIOError:
                await readable()
                continue
            except OSError as exc:
                raise ProxyFailed(f"proxy {proxy.shown}: {exc} in the CONNECT answer") from exc
            if not data:
                raise ProxyFailed(f"proxy {proxy.shown} closed the connection before answering")
            head += data
            if len(head) > MAX_CONNECT_HEAD:
                raise ProxyFailed(f"proxy {proxy.shown}: CONNECT answer head too long")
        status, reason = status_of(head.split(b"\r\n", 1)[0], proxy)
        if not 200 <= status < 300:
            raise refusal(proxy, status, reason, "CONNECT")
        if not head.endswith(b"\r\n\r\n"):
            raise ProxyFailed(f"proxy {proxy.shown} sent bytes after its CONNECT answer")

    return connect


def status_of(line: bytes, proxy: Proxy) -> tuple[int, str]:
    """The status and reason of a proxy's status line; ProxyFailed if it is not one."""
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ProxyFailed(f"proxy {proxy.shown} answered CONNECT with no HTTP status line")
    return int(code), reason.decode("latin-1").strip()


def refusal(proxy: Proxy, status: int, reason: str, what: str) -> ProxyFailed:
    """The failure of a request ``proxy`` answered with ``status``."""
    if status == AUTH_REQUIRED:
        if proxy.authorization is None:
            return ProxyFailed(
                f"proxy {proxy.shown} wants credentials (407): set {USER_ENV} and {PASSWORD_ENV}"
            )
        return ProxyFailed(f"proxy {proxy.shown} refused the credentials of {USER_ENV} (407)")
    return ProxyFailed(f"proxy {proxy.shown} answered {what} with {status} {reason}".rstrip())


class ProxyHealth:
    """Whether the proxies answer, as the crawl last saw them: a proxy that starts
    failing is logged once (with why), and once again when it answers again, so a proxy
    down at the start or for long is one line, not one a URL. ``failures`` counts every
    request a proxy failed."""

    def __init__(self) -> None:
        self._failing: dict[str, int] = {}
        self.failures = 0

    def failed(self, proxy: Proxy, error: ProxyFailed) -> None:
        """A request through ``proxy`` failed at the proxy."""
        self.failures += 1
        count = self._failing.get(proxy.key)
        if count is None:
            log.warning(
                "proxy failing: %s; its URLs are retried and fail as proxy_error", error,
                extra={"proxy": proxy.shown},
            )  # fmt: skip
            count = 0
        self._failing[proxy.key] = count + 1

    def answered(self, proxy: Proxy) -> None:
        """A request through ``proxy`` got through it."""
        if self._failing:
            count = self._failing.pop(proxy.key, None)
            if count is not None:
                log.warning(
                    "proxy %s answers again after %d failed requests", proxy.shown, count,
                    extra={"proxy": proxy.shown},
                )  # fmt: skip
