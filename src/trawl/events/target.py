"""Where ``--events`` sends PageFetched events: a file, a NATS JetStream subject or a
RabbitMQ exchange, read from the option's one value.

- ``FILE`` (any value without ``SCHEME://``): a JSONL file, appended to.
- ``nats://[USER[:PASSWORD]@]HOST[:PORT]/SUBJECT[?PARAMS]``: NATS JetStream (port 4222),
  published on ``SUBJECT`` (dot-separated tokens, no wildcards). ``PARAMS``:
  ``stream`` (the stream's name; default the subject in capitals with ``.`` and ``-``
  as ``_``: ``trawl.pages`` -> ``TRAWL_PAGES``), ``duplicate_window`` (seconds,
  default 600), ``max_age`` (seconds a message is kept, default 604800 = 7 days; 0:
  for ever), ``max_bytes`` (default -1: no limit). They shape a stream trawl creates;
  a stream that exists is used as it is.
- ``amqp://[USER[:PASSWORD]@]HOST[:PORT][/VHOST][?PARAMS]``: RabbitMQ (port 5672,
  virtual host ``/`` unless the path names one, ``%2F`` for ``/``). ``PARAMS``:
  ``exchange`` (a durable topic exchange, default ``trawl``), ``routing_key``
  (default ``page.fetched``), ``queue`` (a durable queue bound to the exchange with
  the routing key, default ``trawl.page_fetched``).

Credentials come from the URL or, for what it leaves out, from the environment:
``TRAWL_EVENTS_USER`` and ``TRAWL_EVENTS_PASSWORD`` (a NATS token is a user without a
password). They are kept out of every message and log line: :attr:`NatsTarget.shown`
and :attr:`AmqpTarget.shown` are the URL without them, and the dataclasses leave them
out of their ``repr``. An unknown scheme or a malformed URL is a one-line
:class:`~trawl.errors.UsageError`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from trawl.errors import UsageError

USER_ENV = "TRAWL_EVENTS_USER"
PASSWORD_ENV = "TRAWL_EVENTS_PASSWORD"
NATS_PORT = 4222
AMQP_PORT = 5672
DUPLICATE_WINDOW = 600.0
"""Seconds JetStream remembers a message id (and drops a repeat), unless ``?duplicate_window``."""
MAX_AGE = 7 * 24 * 3600.0
"""Seconds JetStream keeps a message in a stream trawl creates, unless ``?max_age``."""
EXCHANGE = "trawl"
ROUTING_KEY = "page.fetched"
QUEUE = "trawl.page_fetched"
SCHEMES = ("nats", "amqp")

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_TOKEN = re.compile(r"[^\s.*>]+")
_STREAM = re.compile(r"[A-Za-z0-9_-]{1,255}")
_AMQP_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,255}")
_NATS_PARAMS = ("stream", "duplicate_window", "max_age", "max_bytes")
_AMQP_PARAMS = ("exchange", "routing_key", "queue")


@dataclass(frozen=True, slots=True)
class NatsTarget:
    """A NATS JetStream subject (see the module doc)."""

    host: str
    port: int
    subject: str
    stream: str
    duplicate_window: float = DUPLICATE_WINDOW
    max_age: float = MAX_AGE
    max_bytes: int = -1
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def server(self) -> str:
        """The server's URL as the client takes it, credentials included: never log it."""
        return f"nats://{_credentials(self.user, self.password)}{_netloc(self.host, self.port)}"

    @property
    def shown(self) -> str:
        """The target as messages and logs show it: no credentials."""
        return f"nats://{_netloc(self.host, self.port)}/{self.subject}"


@dataclass(frozen=True, slots=True)
class AmqpTarget:
    """A RabbitMQ exchange and the queue bound to it (see the module doc)."""

    host: str
    port: int
    vhost: str = "/"
    exchange: str = EXCHANGE
    routing_key: str = ROUTING_KEY
    queue: str = QUEUE
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """The target as messages and logs show it: no credentials."""
        return (
            f"amqp://{_netloc(self.host, self.port)}/{quote(self.vhost, safe='')}"
            f"?exchange={self.exchange}&routing_key={self.routing_key}&queue={self.queue}"
        )


EventsTarget = Path | NatsTarget | AmqpTarget
"""What ``--events`` names."""


def is_url(value: str) -> bool:
    """Whether ``value`` is written as a URL (``SCHEME://...``), not as a file path."""
    return _URL.match(value) is not None


def has_credentials(value: str) -> bool:
    """Whether the URL ``value`` carries a user or password."""
    return "@" in urlsplit(value).netloc


def shown(target: EventsTarget) -> str:
    """``target`` as messages and logs show it (never its credentials)."""
    return str(target) if isinstance(target, Path) else target.shown


def parse_events(value: str, env: Mapping[str, str] = os.environ) -> EventsTarget:
    """The target ``--events value`` names; credentials missing from a URL come from
    ``env`` (`USER_ENV`, `PASSWORD_ENV`)."""
    if not is_url(value):
        return Path(value)
    scheme = value.split(":", 1)[0].lower()
    try:
        parts = urlsplit(value)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise UsageError(f"--events {_redacted(value)}: {exc}") from exc
    if scheme not in SCHEMES:
        raise UsageError(f"--events: unknown scheme {scheme}:// (nats://, amqp:// or a file path)")
    where = f"--events {_redacted(value)}"
    if not host:
        raise UsageError(f"{where}: no host")
    if parts.fragment:
        raise UsageError(f"{where}: a fragment (#...) means nothing here")
    user = unquote(parts.username) if parts.username is not None else env.get(USER_ENV)
    password = unquote(parts.password) if parts.password is not None else env.get(PASSWORD_ENV)
    params = _params(where, parts.query, _NATS_PARAMS if scheme == "nats" else _AMQP_PARAMS)
    if scheme == "nats":
        return _nats(where, host, port or NATS_PORT, unquote(parts.path), params, user, password)
    return _amqp(where, host, port or AMQP_PORT, parts.path, params, user, password)


def _nats(
    where: str, host: str, port: int, path: str, params: dict[str, str],
    user: str | None, password: str | None,
) -> NatsTarget:  # fmt: skip
    subject = path[1:]
    if not subject:
        raise UsageError(f"{where}: no subject (nats://HOST:PORT/SUBJECT)")
    if not all(_TOKEN.fullmatch(token) for token in subject.split(".")):
        raise UsageError(
            f"{where}: the subject must be tokens separated by '.', without spaces or "
            "wildcards (* >)"
        )
    stream = params.get("stream") or re.sub(r"[.-]", "_", subject).upper()
    if not _STREAM.fullmatch(stream):
        raise UsageError(
            f"{where}: stream name {stream!r} must be letters, digits, _ and - "
            "(give one with ?stream=NAME)"
        )
    window = _seconds(where, params, "duplicate_window", DUPLICATE_WINDOW, positive=True)
    max_age = _seconds(where, params, "max_age", MAX_AGE, positive=False)
    if max_age and window > max_age:
        raise UsageError(f"{where}: duplicate_window must not be longer than max_age")
    max_bytes = _integer(where, params, "max_bytes", -1)
    return NatsTarget(
        host, port, subject, stream, window, max_age, max_bytes, user=user, password=password
    )


def _amqp(
    where: str, host: str, port: int, path: str, params: dict[str, str],
    user: str | None, password: str | None,
) -> AmqpTarget:  # fmt: skip
    vhost = unquote(path[1:]) if len(path) > 1 else "/"
    names = {
        "exchange": params.get("exchange", EXCHANGE),
        "routing_key": params.get("routing_key", ROUTING_KEY),
        "queue": params.get("queue", QUEUE),
    }
    for name, text in names.items():
        if not _AMQP_NAME.fullmatch(text):
            raise UsageError(f"{where}: {name} must be letters, digits and _ . : -")
    return AmqpTarget(host, port, vhost, **names, user=user, password=password)


def _params(where: str, query: str, known: tuple[str, ...]) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise UsageError(f"{where}: bad query: {exc}") from exc
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in known:
            raise UsageError(f"{where}: unknown parameter {name!r} (known: {', '.join(known)})")
        if name in params:
            raise UsageError(f"{where}: {name} given twice")
        params[name] = value
    return params


def _seconds(
    where: str, params: dict[str, str], name: str, default: float, *, positive: bool
) -> float:
    text = params.get(name)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        least = "more than 0" if positive else "0 or more"
        raise UsageError(f"{where}: {name} must be a number of seconds, {least}")
    return seconds


def _integer(where: str, params: dict[str, str], name: str, default: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        number = -2
    if number < -1 or number == 0:
        raise UsageError(f"{where}: {name} must be a positive integer (or -1: no limit)")
    return number


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _credentials(user: str | None, password: str | None) -> str:
    if user is None:
        return ""
    secret = "" if password is None else ":" + quote(password, safe="")
    return f"{quote(user, safe='')}{secret}@"


def _redacted(value: str) -> str:
    """``value`` with any user and password in it replaced by ``***``."""
    return _USERINFO.sub(r"\1***@", value)
