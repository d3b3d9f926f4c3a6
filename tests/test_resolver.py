"""The guarded resolver against a real DNS server on loopback: TTL cache, policy, rebinding."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dns_server import ScriptedDns
from listener import PAGE, Listener
from malloc_stats import malloced
from trawl.config import Timeouts
from trawl.fetch.fetcher import Fetcher, FetchError
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import (
    MIN_TTL,
    NEGATIVE_TTL,
    AiodnsBackend,
    BlockedAddress,
    GuardedResolver,
    HostsFile,
    NameNotFound,
)

ALLOW_TWO = AddressPolicy([ipaddress.ip_network("127.0.0.2/32")])
"""127.0.0.2 stands for a public address; the rest of loopback for a private network."""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def resolver(
    dns: ScriptedDns, policy: AddressPolicy, clock: Callable[[], float], size: int = 100
) -> GuardedResolver:
    backend = AiodnsBackend([dns.nameserver])
    return GuardedResolver(policy, backend=backend, cache_size=size, min_ttl=0, clock=clock)


async def test_answers_are_cached_for_their_ttl() -> None:
    clock = FakeClock()
    with ScriptedDns({"a.test": [[("127.0.0.2", 30)]]}) as dns:
        guarded = resolver(dns, ALLOW_TWO, clock)
        try:
            assert await guarded.addresses("a.test") == ("127.0.0.2",)
            clock.now += 29
            assert await guarded.addresses("A.TEST.") == ("127.0.0.2",)
            clock.now += 2
            assert await guarded.addresses("a.test") == ("127.0.0.2",)
        finally:
            await guarded.close()
    assert dns.queries["a.test"] == 1
    stats = guarded.stats.as_counters()
    assert (stats["dns_cache_hits"], stats["dns_cache_misses"]) == (1, 2)


async def test_short_ttls_are_raised_to_the_floor_and_failures_remembered() -> None:
    clock = FakeClock()
    with ScriptedDns({"zero.test": [[("127.0.0.2", 0)]]}) as dns:
        backend = AiodnsBackend([dns.nameserver])
        guarded = GuardedResolver(ALLOW_TWO, backend=backend, clock=clock)
        try:
            await guarded.addresses("zero.test")
            clock.now += MIN_TTL - 0.5
            await guarded.addresses("zero.test")
            assert guarded.stats.cache_misses == 1
            clock.now += 1
            await guarded.addresses("zero.test")
            assert guarded.stats.cache_misses == 2
            for _ in range(2):
                with pytest.raises(NameNotFound):
                    await guarded.addresses("missing.test")
            assert guarded.stats.cache_misses == 3
            clock.now += NEGATIVE_TTL + 1
            with pytest.raises(NameNotFound):
                await guarded.addresses("missing.test")
        finally:
            await guarded.close()
    assert guarded.stats.cache_misses == 4


async def test_the_cache_is_bounded() -> None:
    clock = FakeClock()
    names = {f"h{i}.test": [[("127.0.0.2", 300)]] for i in range(10)}
    with ScriptedDns(names) as dns:
        guarded = resolver(dns, ALLOW_TWO, clock, size=4)
        try:
            for name in names:
                await guarded.addresses(name)
            assert guarded.cached == 4
            await guarded.addresses("h9.test")
            assert guarded.stats.cache_hits == 1
            await guarded.addresses("h0.test")
            assert guarded.stats.cache_misses == 11
        finally:
            await guarded.close()


async def test_the_cache_holds_the_names_of_the_hosts_a_crawl_may_hold() -> None:
    """Hosts come back to their names turn after turn: with more hosts held than the
    cache's own bound, every round of turns would look every name up again."""
    clock = FakeClock()
    names = [f"h{i}.test" for i in range(12)]
    with ScriptedDns({name: [[("127.0.0.2", 300)]] for name in [*names, "new.test"]}) as dns:
        guarded = resolver(dns, ALLOW_TWO, clock, size=4)
        try:
            guarded.hold_hosts(8)
            for _ in range(3):
                for name in names:
                    await guarded.addresses(name)
            assert guarded.cached == 12
            assert guarded.stats.cache_misses == 12
            guarded.hold_hosts(2)
            await guarded.addresses("new.test")
            assert guarded.cached == 4
        finally:
            await guarded.close()
    assert set(dns.queries.values()) == {1}


async def test_literals_are_not_looked_up_and_names_like_them_are() -> None:
    """An IP literal is its own answer; a name that only starts with a digit, or looks
    like a bracketed IPv4 address, is a name, looked up in DNS."""
    clock = FakeClock()
    script = {"1.test": [[("127.0.0.2", 60)]], "2e100.test": [[("127.0.0.1", 60)]]}
    with ScriptedDns(script) as dns:
        guarded = resolver(dns, ALLOW_TWO, clock)
        try:
            assert await guarded.addresses("127.0.0.2") == ("127.0.0.2",)
            assert await guarded.addresses("1.test") == ("127.0.0.2",)
            with pytest.raises(BlockedAddress, match=r"127\.0\.0\.1, a loopback address"):
                await guarded.addresses("2e100.test")
            with pytest.raises(BlockedAddress, match=r"::1, a loopback address"):
                await guarded.addresses("[::1]")
            with pytest.raises(BlockedAddress, match=r"a loopback \(inside ::ffff:7f00:1\)"):
                await guarded.addresses("[::ffff:7f00:1]")
        finally:
            await guarded.close()
    assert (dns.queries["1.test"], dns.queries["2e100.test"]) == (1, 1)
    assert "127.0.0.2" not in dns.queries


async def test_rebinding_to_a_private_address_is_refused() -> None:
    script = {"rebind.test": [[("127.0.0.2", 1)], [("127.0.0.1", 1)]]}
    with ScriptedDns(script) as dns:
        guarded = resolver(dns, ALLOW_TWO, time.monotonic)
        try:
            assert await guarded.addresses("rebind.test") == ("127.0.0.2",)
            await asyncio.sleep(1.2)  # the record's TTL, in every cache on the way
            with pytest.raises(BlockedAddress, match=r"127\.0\.0\.1, a loopback address"):
                await guarded.addresses("rebind.test")
        finally:
            await guarded.close()
    assert dns.queries["rebind.test"] == 2
    assert guarded.stats.blocked == 1


async def test_refused_addresses_are_dropped_from_an_answer() -> None:
    clock = FakeClock()
    with ScriptedDns({"mixed.test": [[("127.0.0.1", 60), ("127.0.0.2", 60)]]}) as dns:
        guarded = resolver(dns, ALLOW_TWO, clock)
        try:
            found = await guarded.addresses("mixed.test")
        finally:
            await guarded.close()
    assert found == ("127.0.0.2",)


async def test_c_ares_keeps_no_answer_past_its_channels_lookups() -> None:
    """c-ares caches every answer for its TTL, about 2 KB a name, out of Python's sight:
    on one channel that grows with every name asked; replaced every 40 lookups, it is
    what the last channel holds. Every answer stays right across the replacements."""
    if malloced() is None:
        pytest.skip("no mallinfo2: not glibc")
    names = [f"n{i}.test" for i in range(600)]
    with ScriptedDns({name: [[("127.0.0.2", 3600)]] for name in names}) as dns:
        kept = {}
        for channel_names in (len(names) + 10, 40):
            backend = AiodnsBackend([dns.nameserver], channel_names=channel_names)
            try:
                for name in names[:10]:
                    await backend.lookup(name)
                gc.collect()
                before = malloced() or 0
                answers = [await backend.lookup(name) for name in names[10:]]
                gc.collect()
                kept[channel_names] = ((malloced() or 0) - before) / (len(names) - 10)
            finally:
                await backend.close()
            assert answers == [[("127.0.0.2", 3600.0)]] * (len(names) - 10)
    assert kept[len(names) + 10] > 1000, kept
    assert kept[40] < 400, kept


def dns_fetcher(dns: ScriptedDns) -> Fetcher:
    """A fetcher that asks ``dns`` and may reach 127.0.0.2 only."""
    return Fetcher(
        user_agent="trawl-test/1", timeouts=Timeouts(connect=2, total=5), max_body=1 << 16,
        resolver=resolver(dns, ALLOW_TWO, time.monotonic),
    )  # fmt: skip


@pytest.fixture
def servers() -> Iterator[tuple[Listener, Listener]]:
    """A 'public' server on 127.0.0.2 and a 'private' one on 127.0.0.1, same port."""
    with (
        Listener("127.0.0.2", answer=PAGE) as public,
        Listener("127.0.0.1", public.port, answer=PAGE) as private,
    ):
        yield public, private


async def test_the_fetcher_connects_only_to_checked_addresses(
    servers: tuple[Listener, Listener],
) -> None:
    public, private = servers
    script = {"mixed.test": [[("127.0.0.1", 60), ("127.0.0.2", 60)]],
              "inside.test": [[("127.0.0.1", 60)]]}  # fmt: skip
    with ScriptedDns(script) as dns:
        async with dns_fetcher(dns) as fetcher:
            ok = await fetcher.fetch(f"http://mixed.test:{public.port}/")
            refused = await fetcher.fetch(f"http://inside.test:{public.port}/")
            literal = await fetcher.fetch(f"http://127.0.0.1:{public.port}/")
            mapped = await fetcher.fetch(f"http://[::ffff:127.0.0.1]:{public.port}/")
    assert ok.status == 200
    assert [r.error for r in (refused, literal, mapped)] == [FetchError.BLOCKED_ADDRESS] * 3
    assert (public.accepted, private.accepted) == (1, 0)


async def test_a_rebound_name_never_reaches_the_private_server(
    servers: tuple[Listener, Listener],
) -> None:
    public, private = servers
    script = {"rebind.test": [[("127.0.0.2", 1)], [("127.0.0.1", 1)]]}
    with ScriptedDns(script) as dns:
        async with dns_fetcher(dns) as fetcher:
            first = await fetcher.fetch(f"http://rebind.test:{public.port}/")
            await asyncio.sleep(1.2)
            second = await fetcher.fetch(f"http://rebind.test:{public.port}/")
    assert (first.status, second.error) == (200, FetchError.BLOCKED_ADDRESS)
    assert (public.accepted, private.accepted) == (1, 0)


# -- the hosts file ----------------------------------------------------------------------

HOSTS = """\
# a comment line, then an address with several names and a comment after them
127.0.0.2   Staging.Example.test  staging   # the staging site
::1         staging.example.test  ip6-only.test
127.0.0.3   staging.example.test  second.test
10.0.0.7    intranet.test
not-an-address  broken.test
*.wild.test 127.0.0.2
127.0.0.9
fe80::1%eth0 scoped.test
"""


def test_the_hosts_file_is_read_as_the_system_reads_it() -> None:
    hosts = HostsFile.parse(HOSTS)
    # Case-insensitive; the first line naming a host gives its address of each family.
    assert hosts.addresses("staging.example.test") == ("127.0.0.2", "::1")
    assert hosts.addresses("staging") == ("127.0.0.2",)
    assert hosts.addresses("second.test") == ("127.0.0.3",)
    assert hosts.addresses("ip6-only.test") == ("::1",)
    assert hosts.addresses("scoped.test") == ("fe80::1%eth0",)
    # No wildcards, nothing from lines without a valid address, comments ignored.
    for name in ("broken.test", "a.wild.test", "*.wild.test", "the", "comment", "example.test"):
        assert hosts.addresses(name) == (), name


def test_a_missing_or_unreadable_hosts_file_has_no_entries(tmp_path: Path) -> None:
    assert HostsFile.read(tmp_path / "missing").addresses("localhost") == ()
    assert HostsFile.read(tmp_path).addresses("localhost") == ()  # a directory
    assert HostsFile.read(None).addresses("localhost") == ()
    written = tmp_path / "hosts"
    written.write_bytes(b"127.0.0.1 localhost\n\xff\xfe 127.0.0.2 garbage\n")
    assert HostsFile.read(written).addresses("localhost") == ("127.0.0.1",)


async def test_the_hosts_file_comes_after_overrides_and_before_dns() -> None:
    clock = FakeClock()
    script = {"staging.example.test": [[("127.0.0.4", 60)]], "dns-only.test": [[("127.0.0.5", 60)]]}
    allow = AddressPolicy([ipaddress.ip_network("127.0.0.0/8")])
    with ScriptedDns(script) as dns:
        guarded = GuardedResolver(
            allow, overrides={"second.test": "127.0.0.6"}, hosts=HostsFile.parse(HOSTS),
            backend=AiodnsBackend([dns.nameserver]), clock=clock,
        )  # fmt: skip
        try:
            # ::1 is not in the allowed range, so it is dropped from the hosts-file answer.
            assert await guarded.addresses("STAGING.example.test.") == ("127.0.0.2",)
            assert await guarded.addresses("second.test") == ("127.0.0.6",)
            assert await guarded.addresses("dns-only.test") == ("127.0.0.5",)
        finally:
            await guarded.close()
    assert dns.queries == {"dns-only.test": 1}


async def test_hosts_file_answers_pass_the_address_policy() -> None:
    hosts = HostsFile.parse("127.0.0.1 localhost\n10.0.0.7 intranet.test\n127.0.0.2 ok.test\n")
    with ScriptedDns({}) as dns:
        guarded = GuardedResolver(ALLOW_TWO, hosts=hosts, backend=AiodnsBackend([dns.nameserver]))
        try:
            with pytest.raises(BlockedAddress, match=r"127\.0\.0\.1, a loopback address"):
                await guarded.addresses("localhost")
            with pytest.raises(BlockedAddress, match=r"10\.0\.0\.7, a private address"):
                await guarded.addresses("intranet.test")
            assert await guarded.addresses("ok.test") == ("127.0.0.2",)
        finally:
            await guarded.close()
    assert guarded.stats.blocked == 2
    assert not dns.queries
