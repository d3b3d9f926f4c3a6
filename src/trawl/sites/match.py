"""Which site rule a host falls under: an exact host, or ``*.DOMAIN`` for its subdomains.

A host matching several rules gets the most specific one, whole (rules never merge):
its exact rule when there is one, else the wildcard of the longest domain. ``*.a.com``
matches ``b.a.com`` and ``c.b.a.com`` but not ``a.com`` itself. Rules name hosts, not
ports: a rule applies to its host on every port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


class BadPattern(ValueError):
    """A site key that is neither a host name nor ``*.`` and a domain."""


def check_pattern(pattern: str) -> str:
    """``pattern`` as rules keep it (lower case, IDNA for other scripts); BadPattern when
    it is not a host name, nor ``*.`` followed by one."""
    text = pattern.strip().lower().rstrip(".")
    wild = text.startswith("*.")
    name = text[2:] if wild else text
    try:
        name = name.encode("idna").decode("ascii") if not name.isascii() else name
    except UnicodeError as exc:
        raise BadPattern(f"{pattern!r} is not a host name nor *.DOMAIN") from exc
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise BadPattern(f"{pattern!r} is not a host name nor *.DOMAIN")
    return f"*.{name}" if wild else name


class HostPatterns(Generic[T]):
    """Values by site pattern, looked up by host name (without port) or host key."""

    def __init__(self, entries: Iterable[tuple[str, T]]) -> None:
        self._exact: dict[str, T] = {}
        self._domains: dict[str, T] = {}
        for pattern, value in entries:
            if pattern.startswith("*."):
                self._domains[pattern[2:]] = value
            else:
                self._exact[pattern] = value
        self._found: dict[str, T | None] = {}

    def __bool__(self) -> bool:
        return bool(self._exact or self._domains)

    def find(self, host: str) -> T | None:
        """The value of the most specific pattern ``host`` matches (a port is ignored),
        None when it matches none."""
        if host in self._found:
            return self._found[host]
        name = host.lower()
        if not name.endswith("]") and ":" in name:
            name = name.rpartition(":")[0]
        name = name.rstrip(".")
        value = self._exact.get(name)
        if value is None and self._domains:
            parts = name.split(".")
            for start in range(1, len(parts)):
                value = self._domains.get(".".join(parts[start:]))
                if value is not None:
                    break
        if len(self._found) >= 65_536:
            self._found.clear()
        self._found[host] = value
        return value
