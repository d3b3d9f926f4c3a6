"""The address policy: only public unicast addresses, unless a range is allowed."""

from __future__ import annotations

import ipaddress

import pytest

from trawl.fetch.netguard import AddressPolicy, refusal

REFUSED = {
    "127.0.0.1": "loopback", "127.255.0.9": "loopback", "10.1.2.3": "private",
    "172.16.0.1": "private", "172.31.255.254": "private", "192.168.1.1": "private",
    "100.64.0.1": "shared (CGNAT)", "100.100.100.200": "shared (CGNAT)",
    "169.254.169.254": "link-local", "169.254.0.1": "link-local", "224.0.0.1": "multicast",
    "239.1.2.3": "multicast", "255.255.255.255": "private", "0.0.0.0": "unspecified",
    "0.1.2.3": "private", "240.0.0.1": "private", "192.0.2.1": "private",
    "198.18.0.1": "private", "192.0.0.192": "cloud metadata", "192.0.0.8": "reserved",
    "168.63.129.16": "cloud metadata",
    "::1": "loopback", "::": "unspecified", "fc00::1": "private", "fd00:ec2::254": "private",
    "fe80::1": "link-local", "ff02::1": "multicast", "2001:db8::1": "private",
    "::ffff:127.0.0.1": "loopback (inside ::ffff:7f00:1)",
    "::ffff:169.254.169.254": "link-local (inside ::ffff:a9fe:a9fe)",
    "64:ff9b::a00:1": "private (inside 64:ff9b::a00:1)",
    "64:ff9b:1::c0a8:101": "private (inside 64:ff9b:1::c0a8:101)",
    "2002:7f00:1::": "loopback (inside 2002:7f00:1::)",
    "2002:a9fe:a9fe::": "link-local (inside 2002:a9fe:a9fe::)",
}  # fmt: skip
PUBLIC = ["8.8.8.8", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700::1111",
          "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::"]  # fmt: skip


@pytest.mark.parametrize(("address", "reason"), REFUSED.items())
def test_non_public_addresses_are_refused_with_their_kind(address: str, reason: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == reason
    assert not AddressPolicy().permits(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_permitted(address: str) -> None:
    assert AddressPolicy().permits(address)


def test_allowed_ranges_open_exactly_those_addresses() -> None:
    policy = AddressPolicy([ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("fd00::/8")])
    assert policy.permits("127.0.0.1")
    assert policy.permits("127.9.9.9")
    assert policy.permits("::ffff:127.0.0.1")
    assert policy.permits("fd12::5")
    assert not policy.permits("::1")
    assert not policy.permits("10.0.0.1")
    assert policy.refusal("169.254.169.254") == "link-local"


def test_a_remembered_verdict_is_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each address string is judged once and its verdict kept: asked again, in any
    order and past the point where the kept verdicts start again, the answer is the
    same as a fresh policy's."""
    monkeypatch.setattr("trawl.fetch.netguard.VERDICTS_KEPT", 8)
    allowed = [ipaddress.ip_network("127.0.0.0/8")]
    policy = AddressPolicy(allowed)
    addresses = [*REFUSED, *PUBLIC] * 3
    verdicts = [policy.refusal(address) for address in addresses]
    assert verdicts == [AddressPolicy(allowed).refusal(address) for address in addresses]
    assert policy.refusal("127.0.0.1") is None
    assert policy.refusal("10.0.0.1") == "private"
    assert len(policy._verdicts) <= 8
