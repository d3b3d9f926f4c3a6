"""The end of a run as its user must hear it: which seeds were not fetched, and why.

A crawl whose every seed failed has done nothing, and must not end as if it had: the
command exits with :data:`NOTHING_FETCHED` and prints one line per failing seed with the
cause and, where there is one, the fix::

    trawl: http://127.0.0.1:8000/ not fetched: 127.0.0.1 is a loopback address: add
      --allow-network 127.0.0.0/8 to crawl it
    trawl: http://127.0.0.1:1/ not fetched: connection refused (nothing listens on
      that port)
    trawl: http://nowhere.test/ not fetched: no such host (DNS)

(each one line, folded here).

The seeds' states are read from the store (their rows), so a resumed run that fetches
nothing new reports on them just the same.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from trawl.config import CrawlConfig
from trawl.crawl.seeds import seeds_of
from trawl.extract.urls import hostname, url_hash
from trawl.fetch.fetcher import FetchError
from trawl.fetch.netguard import AddressPolicy, IPAddress
from trawl.fetch.resolver import AiodnsBackend, GuardedResolver, HostsFile
from trawl.ops.summary import Summary
from trawl.policy import POLICY_KEY, with_policy
from trawl.politeness.rules import BLOCKED_ERROR
from trawl.store.protocols import Reports
from trawl.store.values import ExportRow, State

NOTHING_FETCHED = 3
"""Exit code of a run that ends with no page fetched at all."""
MAX_LINES = 20
"""Failing seeds named one a line; a count stands for the rest."""

_CAUSES = {
    FetchError.DNS.value: "no such host (DNS)",
    FetchError.CONNECTION_REFUSED.value: "connection refused (nothing listens on that port)",
    FetchError.CONNECT.value: "could not connect (no route to the host, or connecting timed "
    "out: --connect-timeout)",
    FetchError.TLS.value: "TLS handshake failed (the certificate is not trusted, or not "
    "for this host; SSL_CERT_FILE adds a private CA)",
    FetchError.PROTOCOL.value: "the server's answer is not valid HTTP",
    FetchError.DECODE.value: "the body could not be decoded",
    FetchError.INVALID_URL.value: "not a URL trawl can fetch",
    FetchError.PROXY.value: "the proxy failed (--proxy: not reachable, wants credentials in "
    "TRAWL_PROXY_USER and TRAWL_PROXY_PASSWORD, or refused the site; the log says which)",
    "host_failing": "the host kept failing, so its URLs were given up (--breaker-trips)",
    BLOCKED_ERROR: "blocked by the operator's rules",
    "robots_unavailable": "robots.txt unavailable (an error status, or no valid HTTP "
    "answer); run the same command again later",
}
"""What a stored error class means to the user (``timeout`` and ``blocked_address`` are
spelled out with the crawl's figures)."""

_ALL = AddressPolicy([ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")])
"""A policy that refuses nothing: to see which addresses a name has."""
_BLOCKS = tuple(
    ipaddress.ip_network(block)
    for block in (
        "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
        "100.64.0.0/10", "::1/128", "fc00::/7", "fe80::/10",
    )
)  # fmt: skip
"""The ranges ``--allow-network`` is suggested with, when a refused address is in one."""


_BUDGET_HINTS = {
    "page budget reached": "--max-pages counts every run's pages, so run the same command "
    "with a larger --max-pages to go on",
    "time budget reached": "run the same command to go on",
}
"""What to do when a budget ended a run that left URLs waiting."""


@dataclass(frozen=True, slots=True)
class SeedFailure:
    """A seed that was not fetched, and why."""

    url: str
    cause: str

    def line(self) -> str:
        """The line on stderr that reports it."""
        return f"trawl: {self.url} not fetched: {self.cause}"


def nothing_fetched(summary: Summary) -> bool:
    """The crawl ended (not interrupted) and has no fetched page at all."""
    return summary.state != "interrupted" and summary.fetched == 0


def report_lines(failures: Sequence[SeedFailure], summary: Summary) -> list[str]:
    """The lines on stderr at the end of a run: one per failing seed (at most
    :data:`MAX_LINES`), and, when nothing was fetched, why if no seed says it."""
    lines = [failure.line() for failure in failures[:MAX_LINES]]
    if len(failures) > MAX_LINES:
        lines.append(f"trawl: {len(failures) - MAX_LINES} more seeds not fetched")
    if not lines and nothing_fetched(summary):
        lines.append(f"trawl: no page fetched ({summary.state})")
    hint = _BUDGET_HINTS.get(summary.state)
    if hint is not None and summary.queued:
        lines.append(f"trawl: {summary.state} with {summary.queued:,} URLs queued; {hint}")
    return lines


async def seed_failures(config: CrawlConfig) -> list[SeedFailure]:
    """The seeds of the crawl at ``config.location`` that failed or were blocked, each
    with its cause (a worker's seeds come from the stored policy)."""
    async with config.location.open(readonly=True) as store:
        if config.join:
            stored = await store.get_meta(POLICY_KEY)
            if stored is not None:
                config = with_policy(config, stored)
        rows = [row for row in [await _row(store, seed) for seed in seeds_of(config)] if row]
    failed = [row for row in rows if row.state in (State.FAILED, State.BLOCKED)]
    return [SeedFailure(row.url, await _cause(row, config)) for row in failed]


async def _row(store: Reports, url: str) -> ExportRow | None:
    """The stored row of ``url``, None when the store has none."""
    page = await store.url_page(url_hash(url), 1)
    if page and page[0][1].url == url:
        return page[0][1]
    return None


async def _cause(row: ExportRow, config: CrawlConfig) -> str:
    error = row.error or ""
    if row.state == State.BLOCKED:
        return _CAUSES.get(error, "blocked by robots.txt")
    if error == FetchError.BLOCKED_ADDRESS.value:
        return await _refused_cause(hostname(row.url), config)
    if error == FetchError.TIMEOUT.value:
        return f"no answer within {config.timeouts.total:g} s (--timeout)"
    if row.status is not None:
        return f"answered HTTP {row.status} on every attempt"
    return _CAUSES.get(error, error)


async def _refused_cause(host: str, config: CrawlConfig) -> str:
    """Why the host's address is refused, and the ``--allow-network`` that opens it."""
    policy = AddressPolicy(config.allow_networks)
    name = host.strip("[]")
    try:
        refused: list[IPAddress] = [ipaddress.ip_address(name)]
        said = ""
    except ValueError:
        resolver = GuardedResolver(
            _ALL,
            overrides=config.resolve,
            hosts=HostsFile.read(config.hosts_file),
            backend=AiodnsBackend(config.nameservers),
        )
        try:
            found = await resolver.addresses(name)
        except OSError:
            found = ()
        finally:
            await resolver.close()
        refused = [ipaddress.ip_address(a) for a in found if not policy.permits(a)]
        said = f"{name} resolves to "
    if not refused:
        return "its address is not one trawl may connect to (see --allow-network)"
    address = refused[0]
    reason = policy.refusal(address)
    network = next(
        (block for block in _BLOCKS if address.version == block.version and address in block),
        ipaddress.ip_network(address),
    )
    what = f"{said}{address}, a {reason} address" if said else f"{address} is a {reason} address"
    return f"{what}: add --allow-network {network} to crawl it"
