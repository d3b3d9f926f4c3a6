"""Name resolution for the fetcher: curl-style overrides in front of async DNS.

``--resolve HOST=IP`` maps a host name to an address without touching /etc/hosts or
DNS; tests use it to point many host names at a loopback server. Names without an
override go to aiodns (through aiohttp's AsyncResolver).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import AsyncResolver


class OverrideResolver(AbstractResolver):
    """Answers overridden names from a table, everything else from DNS.

    ``overrides`` maps lower-case host names to IP literals (checked by
    trawl.config.parse_resolve).
    """

    def __init__(self, overrides: Mapping[str, str]) -> None:
        self._overrides = dict(overrides)
        self._dns: AsyncResolver | None = None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self._overrides.get(host.lower())
        if address is None:
            if self._dns is None:
                self._dns = AsyncResolver()
            return await self._dns.resolve(host, port, family)
        ip = ipaddress.ip_address(address)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        if self._dns is not None:
            await self._dns.close()
            self._dns = None
