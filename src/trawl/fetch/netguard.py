"""Which addresses trawl may connect to: the SSRF defence's one decision.

A crawler fetches URLs chosen by strangers, so a link or a DNS answer must not turn it
against the machine it runs on or the network behind it. Only public unicast addresses
are fetched by default; every other kind is refused:

- IPv4: "this network" 0/8, private 10/8, 172.16/12 and 192.168/16, CGNAT 100.64/10,
  loopback 127/8, link-local 169.254/16 (cloud metadata lives there), the IETF, test,
  benchmark and reserved blocks (192.0.0/24, 192.0.2/24, 198.18/15, 198.51.100/24,
  203.0.113/24, 240/4), multicast 224/4 and broadcast;
- IPv6: unspecified, loopback, unique-local fc00::/7, link-local fe80::/10, multicast,
  documentation and other IANA special-purpose blocks; an address that carries an IPv4
  address (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``,
  6to4 ``2002::/16``) is judged by that IPv4 address;
- cloud metadata endpoints outside those blocks (Azure's 168.63.129.16, Oracle's
  192.0.0.192).

``--allow-network CIDR`` opens chosen ranges; an allowed range wins over every rule.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from trawl.config import IPNetwork

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA = (ipaddress.ip_network("168.63.129.16/32"), ipaddress.ip_network("192.0.0.192/32"))
# Special-purpose blocks that Python 3.11's ipaddress still calls global.
_SPECIAL = (ipaddress.ip_network("192.0.0.0/24"), ipaddress.ip_network("192.88.99.0/24"))
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, NAT64 or 6to4), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or None when it is one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            reason = refusal(inner)
            return None if reason is None else f"{reason} (inside {address})"
    if any(address in network for network in _METADATA):
        return "cloud metadata"
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "shared (CGNAT)"
    if address.is_private:
        return "private"
    if address.is_reserved or not address.is_global or any(address in n for n in _SPECIAL):
        return "reserved"
    return None


VERDICTS_KEPT = 65_536
"""Verdicts on address strings a policy remembers; past that it starts again."""


class AddressPolicy:
    """Decides whether trawl may connect to an address.

    A verdict depends only on the address and the allowed ranges, which never change, so
    the verdict on each address string is remembered: the resolver asks for every
    address of a host each time the client opens a connection to it, and parsing and
    classifying an address costs about 10 us of the crawl's one event loop."""

    def __init__(self, allowed: Iterable[IPNetwork] = ()) -> None:
        self._allowed = tuple(allowed)
        self._verdicts: dict[str, str | None] = {}

    @property
    def allowed(self) -> tuple[IPNetwork, ...]:
        """The ranges opened with ``--allow-network``."""
        return self._allowed

    def refusal(self, address: IPAddress | str) -> str | None:
        """Why trawl must not connect to ``address``, or None when it may."""
        if not isinstance(address, str):
            return self._judge(address)
        verdicts = self._verdicts
        try:
            return verdicts[address]
        except KeyError:
            pass
        verdict = self._judge(ipaddress.ip_address(address))
        if len(verdicts) >= VERDICTS_KEPT:
            verdicts.clear()
        verdicts[address] = verdict
        return verdict

    def _judge(self, ip: IPAddress) -> str | None:
        inner = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
        for candidate in (ip, inner):
            if candidate is not None and any(
                candidate.version == net.version and candidate in net for net in self._allowed
            ):
                return None
        return refusal(ip)

    def permits(self, address: IPAddress | str) -> bool:
        """True when trawl may connect to ``address``."""
        return self.refusal(address) is None
