"""The request target of a URL: the origin its connection goes to, the target of its
request line and its Host header.

Every fetch splits its URL so. ``urlsplit`` and its ``port`` and ``hostname`` parse a
URL three times; a URL as trawl normalises it (lower-case scheme and host name, a path,
printable ASCII, no fragment) is read with one regular expression instead, about a tenth
of the time, for the same answer (tests/test_http_client.py holds the two to it). Any
other URL is read by :func:`split_general`, which ``urlsplit`` does.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from trawl.fetch.pool import DEFAULT_PORTS, Origin

_UNSENDABLE = re.compile(r"[^\x21-\x7e]")
"""Characters a request target cannot carry: controls, spaces and non-ASCII."""
_PLAIN = re.compile(r"(https?)://([a-z0-9.\-]+)(?::([0-9]{1,5}))?(/[\x21-\x22\x24-\x7e]*)\Z")
"""An absolute http(s) URL as trawl normalises it: scheme, host name, port, and a path
(with its query) of printable ASCII without a ``#``."""
_MAX_PORT = 65535


class BadTarget(ValueError):
    """The URL is not one a request can be made for: not http(s), no host, a bad port, or
    a character a request line cannot carry."""


def split_url(url: str) -> tuple[Origin, str, str]:
    """(origin, request target, Host header) of an absolute http(s) URL; BadTarget when
    it is not one a request can be made for."""
    plain = _PLAIN.match(url)
    if plain is None:
        return split_general(url)
    scheme, host, port_text, rest = plain.groups()
    port = None if port_text is None else int(port_text)
    if port is not None and port > _MAX_PORT:
        return split_general(url)
    path, _, query = rest.partition("?")
    return _parts(scheme, host, port, path, query)


def split_general(url: str) -> tuple[Origin, str, str]:
    """:func:`split_url` of any URL, by ``urlsplit``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadTarget(f"bad URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in DEFAULT_PORTS or not host:
        raise BadTarget(f"not an http(s) URL with a host: {url!r}")
    if _UNSENDABLE.search(url):
        raise BadTarget(f"a space, control or non-ASCII character in URL {url!r}")
    return _parts(scheme, host, port, parts.path, parts.query)


def _parts(
    scheme: str, host: str, port: int | None, path: str, query: str
) -> tuple[Origin, str, str]:
    default = DEFAULT_PORTS[scheme]
    named = f"[{host}]" if ":" in host else host
    target = path or "/"
    if query:
        target += "?" + query
    host_header = named if port in (None, default) else f"{named}:{port}"
    return (scheme, named, port or default), target, host_header
