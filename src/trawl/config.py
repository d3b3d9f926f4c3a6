"""Crawl configuration: small frozen values, validated once at the edge.

The CLI and the TOML config file both end up here. Nothing inside the engine reads a
string-keyed settings dict; each stage receives the typed value it needs.
"""

from __future__ import annotations

import enum
import importlib.util
import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from trawl import __version__
from trawl.errors import UsageError
from trawl.events.target import EventsTarget
from trawl.extract.links import DEFAULT_MAX_DEPTH
from trawl.extract.scope import ScopeMode
from trawl.extract.urls import DEFAULT_RULES, NormalizeRules
from trawl.fetch.proxy import Proxy
from trawl.fetch.retry import RetryPolicy
from trawl.freshness.recrawl import RecrawlPolicy
from trawl.frontier.priority import DEFAULT_HORIZON
from trawl.outputs.target import MAX_OBJECT_SIZE, ObjectTarget
from trawl.sites.rules import Sites
from trawl.store.location import StoreLocation

TextFormat = Literal["text", "markdown"]
"""How a main text is written: plain text or Markdown (trawl.content.text)."""
TEXT_FORMATS: tuple[TextFormat, ...] = ("text", "markdown")


@dataclass(frozen=True, slots=True)
class Politeness:
    """How hard one host may be hit.

    The delay after a response is max(crawl_delay, ``delay``, ``response_factor`` x the
    response time), where the robots Crawl-delay and the response-time term are capped at
    ``max_delay``.
    """

    per_host: int = 1
    delay: float = 1.0
    response_factor: float = 10.0
    max_delay: float = 60.0
    per_ip: int = 1
    per_ip_max: int = 16

    def __post_init__(self) -> None:
        if self.per_host < 1:
            raise UsageError("--per-host must be at least 1")
        if self.per_ip < 1:
            raise UsageError("--per-ip must be at least 1")
        if self.per_ip_max < 1:
            raise UsageError("--per-ip-max must be at least 1")
        if self.delay < 0:
            raise UsageError("--delay must not be negative")
        if self.response_factor < 0 or self.max_delay < 0:
            raise UsageError("delay factors must not be negative")


@dataclass(frozen=True, slots=True)
class Limits:
    """Budgets and caps. ``None`` means unbounded."""

    max_pages: int | None = None
    max_time: float | None = None
    max_body: int = 10 * 1024 * 1024
    max_redirects: int = 5
    max_links: int = 5000
    memory_queue: int = 10_000
    expected_urls: int = 10_000_000
    bloom_error: float = 0.01
    max_depth: int = DEFAULT_MAX_DEPTH
    max_pages_per_host: int = 100_000
    max_discovered_per_host: int | None = None
    """New URLs accepted per host; ``None`` means 10 x ``max_pages_per_host``."""

    @property
    def discovery_budget(self) -> int:
        """New URLs a host may add to the crawl before the rest are counted, not queued."""
        if self.max_discovered_per_host is not None:
            return self.max_discovered_per_host
        return 10 * self.max_pages_per_host

    def __post_init__(self) -> None:
        if self.max_depth < 0:
            raise UsageError("--max-depth must not be negative")
        if self.max_pages_per_host < 1:
            raise UsageError("--max-pages-per-host must be at least 1")
        if self.max_discovered_per_host is not None and self.max_discovered_per_host < 1:
            raise UsageError("--max-discovered-per-host must be at least 1")
        if self.max_pages is not None and self.max_pages < 1:
            raise UsageError("--max-pages must be at least 1")
        if self.max_time is not None and self.max_time <= 0:
            raise UsageError("--max-time must be positive")
        if self.memory_queue < 1:
            raise UsageError("--memory-queue must be at least 1")
        if self.expected_urls < 1:
            raise UsageError("--expected-urls must be at least 1")
        if not 0 < self.bloom_error < 1:
            raise UsageError("bloom error rate must be between 0 and 1")
        if self.max_body < 1 or self.max_redirects < 0 or self.max_links < 0:
            raise UsageError("body, redirect and link caps must not be negative")


START_HOSTS = 1024
"""Hosts held at first when ``--max-hosts`` is not given (trawl.crawl.capacity)."""
START_REQUESTS = 64
"""Requests in flight at most at first when ``--concurrency`` is not given."""


@dataclass(frozen=True, slots=True)
class LeasePolicy:
    """How this worker holds hosts: its name in the store, the lease length in seconds
    and how many hosts it holds at most."""

    worker: str = "local"
    ttl: float = 60.0
    max_hosts: int | None = None
    """At most this many hosts held; None: sized as the crawl runs (trawl.crawl.capacity)."""

    def __post_init__(self) -> None:
        if self.ttl <= 0:
            raise UsageError("--lease-ttl must be positive")
        if self.max_hosts is not None and self.max_hosts < 1:
            raise UsageError("--max-hosts must be at least 1")

    @property
    def renew_every(self) -> float:
        """Seconds between renewals: a held lease always has 3/4 of ``ttl`` left."""
        return self.ttl / 4


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed to connect and for one whole fetch."""

    connect: float = 10.0
    total: float = 30.0

    def __post_init__(self) -> None:
        if self.connect <= 0 or self.total <= 0:
            raise UsageError("timeouts must be positive")


RenderMode = Literal["never", "auto", "always"]
RENDER_MODES: tuple[RenderMode, ...] = ("never", "auto", "always")
DEFAULT_BROWSER = Path("/usr/bin/chromium")
"""Debian's Chromium (``apt-get install chromium``)."""
NO_BROWSER = (
    "--render needs Chromium at {path}: apt-get install chromium (or name it with --render-browser)"
)
NO_PLAYWRIGHT = "--render needs Playwright for Python: pip install 'trawl[render]'"


@dataclass(frozen=True, slots=True)
class RenderConfig:
    """Rendering pages in headless Chromium (trawl.render): when, how many at once, and
    each render's caps."""

    mode: RenderMode = "never"
    include: tuple[str, ...] = ()
    """Regexes of URLs (searched in the whole URL) always rendered."""
    concurrency: int = 2
    """Browser pages open at once."""
    timeout: float = 15.0
    """Seconds one render may take, its subresources included."""
    memory: int = 2048
    """MiB of resident memory of the browser's processes past which it is restarted."""
    max_requests: int = 50
    """Subresource requests one page may make; the rest are refused."""
    browser: Path = DEFAULT_BROWSER

    def __post_init__(self) -> None:
        if self.mode not in RENDER_MODES:
            raise UsageError(f"--render must be one of {', '.join(RENDER_MODES)}")
        if self.concurrency < 1:
            raise UsageError("--render-concurrency must be at least 1")
        if self.timeout <= 0:
            raise UsageError("--render-timeout must be positive")
        if self.memory < 64:
            raise UsageError("--render-memory must be at least 64 (MiB)")
        if self.max_requests < 0:
            raise UsageError("--render-max-requests must not be negative")
        for pattern in self.include:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"--render-include {pattern!r} is not a regex: {exc}") from exc
        if self.enabled:
            self.check_browser()

    def check_browser(self) -> None:
        """Refuse, before anything is made on disk, a crawl that renders without Chromium
        or Playwright."""
        if not os.access(self.browser, os.X_OK):
            raise UsageError(NO_BROWSER.format(path=self.browser))
        if importlib.util.find_spec("playwright") is None:
            raise UsageError(NO_PLAYWRIGHT)

    @property
    def enabled(self) -> bool:
        """Whether any page may be rendered (a browser is needed)."""
        return self.mode != "never" or bool(self.include)


@dataclass(frozen=True, slots=True)
class Breaker:
    """The per-host circuit breaker.

    After ``threshold`` consecutive failures (timeouts, connection errors, 5xx) a host
    pauses for ``pause`` seconds, doubling at each further trip; after ``trips`` trips its
    queued URLs are recorded as failed and the crawl goes on without it.
    """

    threshold: int = 5
    pause: float = 60.0
    trips: int = 3

    def __post_init__(self) -> None:
        if self.threshold < 1 or self.trips < 1:
            raise UsageError("--breaker-threshold and --breaker-trips must be at least 1")
        if self.pause < 0:
            raise UsageError("--breaker-pause must not be negative")


class RecrawlPass(enum.StrEnum):
    """What ``trawl recrawl`` queues again before it crawls: the pages due, or all."""

    DUE = "due"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class Freshness:
    """Keeping a crawl fresh: revisit intervals, queue priority and sitemaps.

    ``continuous`` keeps the crawl running, queueing pages again as they come due;
    ``recrawl_pass`` queues due (or all) pages again once, when the run starts.
    ``sitemaps`` reads every host's sitemaps (robots.txt ``Sitemap:`` lines and
    ``/sitemap.xml``); ``sitemaps_only`` also starts from the seeds' sitemaps instead of
    the seed pages.
    """

    recrawl: RecrawlPolicy = field(default_factory=RecrawlPolicy)
    horizon: float = DEFAULT_HORIZON
    sitemaps: bool = False
    sitemaps_only: bool = False
    continuous: bool = False
    recrawl_pass: RecrawlPass | None = None

    def __post_init__(self) -> None:
        if self.horizon < 0:
            raise UsageError("--priority-horizon must not be negative")

    @property
    def reads_sitemaps(self) -> bool:
        """Whether sitemaps are fetched at all."""
        return self.sitemaps or self.sitemaps_only


@dataclass(frozen=True, slots=True)
class ScopeConfig:
    """Which discovered URLs belong to the crawl."""

    mode: ScopeMode = ScopeMode.DOMAIN
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for pattern in (*self.include, *self.exclude):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"bad regular expression {pattern!r}: {exc}") from exc


def default_worker_id(data_dir: Path) -> str:
    """A worker's default name: its machine and data dir. Unique among running workers
    (a data dir has one crawl process at a time) and the same after a restart, so a
    restarted worker takes its own hosts back at once instead of waiting for its leases
    to expire."""
    return f"{socket.gethostname()}:{data_dir.resolve()}"


def default_user_agent(contact: str | None) -> str:
    """The User-Agent trawl sends: its name, version and, if given, a contact URL."""
    suffix = f"; +{contact}" if contact else ""
    return f"trawl/{__version__} (polite crawler{suffix})"


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Everything one crawl needs; built by :func:`build_config`."""

    seeds: tuple[str, ...]
    data_dir: Path = Path("trawl-data")
    scope: ScopeConfig = field(default_factory=ScopeConfig)
    politeness: Politeness = field(default_factory=Politeness)
    limits: Limits = field(default_factory=Limits)
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    breaker: Breaker = field(default_factory=Breaker)
    url_rules: NormalizeRules = DEFAULT_RULES
    concurrency: int | None = None
    """At most this many requests in flight (with pages not yet committed); None: sized
    as the crawl runs (trawl.crawl.capacity)."""
    parse_workers: int | None = None
    store_thread: bool = False
    """Keep the SQLite store on a thread of the crawl process even with cores to spare
    (trawl.store.process)."""
    user_agent: str = field(default_factory=lambda: default_user_agent(None))
    resolve: Mapping[str, str] = field(default_factory=dict)
    allow_networks: tuple[IPNetwork, ...] = ()
    """Address ranges fetched from although they are not public (loopback, private...)."""
    nameservers: tuple[str, ...] = ()
    """DNS servers (``IP`` or ``IP:PORT``); empty means the system's."""
    hosts_file: Path | None = Path("/etc/hosts")
    """Names looked up here before DNS (/etc/hosts format); None: DNS only."""
    ca_file: Path | None = None
    """A PEM file of CA certificates trusted for https besides the system's."""
    proxy: Proxy | None = None
    """The HTTP proxy every request goes through (``--proxy``), None: none."""
    warc: bool = False
    """Archive every fetch to WARC files in ``data_dir / "warc"``."""
    warc_max_size: int = 1 << 30
    text: bool = False
    """Write each page's main text to gzip JSONL files in ``data_dir / "text"``."""
    text_near_duplicates: bool = True
    """Near-duplicate pages go to the text output too."""
    text_format: TextFormat = "text"
    """The text output's main text as plain text or as Markdown."""
    events: EventsTarget | None = None
    """Where a PageFetched event per new or changed page goes: a JSONL file (a path), a
    NATS JetStream subject or a RabbitMQ exchange (trawl.events.target)."""
    output: ObjectTarget | None = None
    """Upload the closed WARC, text and items files to this bucket (trawl.outputs.uploader)."""
    store: StoreLocation | None = None
    """Where the crawl state lives; None: SQLite in ``data_dir``."""
    fresh: bool = False
    honour_nofollow: bool = True
    soft_404: bool = True
    """Probe each host for an error page served with status 200 (trawl.extract.soft404)."""
    rng_seed: int | None = None
    leases: LeasePolicy = field(default_factory=LeasePolicy)
    """This worker's name in the store and how it holds hosts (trawl.frontier.queue)."""
    join: bool = False
    """Join a crawl that exists, under the policy stored with it (``trawl worker``)."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on 127.0.0.1 at this port (0: any free port)."""
    freshness: Freshness = field(default_factory=Freshness)
    render: RenderConfig = field(default_factory=RenderConfig)
    """Which pages are rendered in headless Chromium, and how (trawl.render)."""
    sites: Sites = field(default_factory=Sites)
    """Per-site settings by host pattern (trawl.sites.rules): the most specific rule a
    host matches overrides the crawl's politeness and tightens its budgets for it."""
    handlers: tuple[tuple[str | None, str], ...] = ()
    """The page handlers, (label, ``module:function`` or ``/path/script.py:function``):
    a page of a label with a handler yields items and the links to follow
    (trawl.extract.handled); a label of None is the default handler's."""

    @property
    def location(self) -> StoreLocation:
        """The crawl's store: ``store``, or SQLite in ``data_dir``."""
        return self.store or StoreLocation(self.data_dir)

    def check_leases(self) -> None:
        """A lease must outlast a whole fetch with room for renewals. Checked once the
        policy is known (a worker takes ``timeouts`` from the crawl it joins)."""
        if self.leases.ttl < 2 * self.timeouts.total:
            raise UsageError("--lease-ttl must be at least twice --timeout")

    @property
    def content(self) -> bool:
        """Whether pages' main text and fingerprints are taken (``--text``, ``--events``)."""
        return self.text or self.events is not None

    @property
    def renders(self) -> bool:
        """Whether any page may be rendered: by ``--render`` or by a site's ``render``."""
        return self.render.enabled or self.sites.renders

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.parse_workers is not None and self.parse_workers < 0:
            raise UsageError("--parse-workers must not be negative")
        if self.text_format not in TEXT_FORMATS:
            raise UsageError(f"--text-format must be one of {', '.join(TEXT_FORMATS)}")
        if self.sites.renders and not self.render.enabled:
            self.render.check_browser()
        for site in self.sites.rules:
            if site.max_pages is not None and site.max_pages > self.limits.max_pages_per_host:
                raise UsageError(
                    f"site {site.pattern!r}: max_pages {site.max_pages} is above "
                    f"--max-pages-per-host {self.limits.max_pages_per_host}: a site may only "
                    "tighten the crawl's budgets"
                )
            if site.max_depth is not None and site.max_depth > self.limits.max_depth:
                raise UsageError(
                    f"site {site.pattern!r}: max_depth {site.max_depth} is above "
                    f"--max-depth {self.limits.max_depth}: a site may only tighten the "
                    "crawl's budgets"
                )
        if self.output is not None and self.warc and self.warc_max_size > MAX_OBJECT_SIZE:
            raise UsageError(
                f"--warc-max-size must be at most {MAX_OBJECT_SIZE} with --output "
                "(S3's limit for one PUT)"
            )


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: tuple[str, ...] | list[str]) -> tuple[IPNetwork, ...]:
    """Parse ``--allow-network`` CIDR ranges (a bare address means just that address)."""
    networks: list[IPNetwork] = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError as exc:
            raise UsageError(f"--allow-network {entry!r} is not an address range") from exc
    return tuple(networks)


def parse_resolve(entries: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Parse curl-style ``HOST=IP`` overrides (``HOST:PORT:IP`` is accepted too)."""
    mapping: dict[str, str] = {}
    for entry in entries:
        if "=" in entry:
            host, _, address = entry.partition("=")
        else:
            parts = entry.split(":")
            if len(parts) != 3:
                raise UsageError(f"--resolve wants HOST=IP, got {entry!r}")
            host, address = parts[0], parts[2]
        host, address = host.strip().lower(), address.strip()
        if not host or not address:
            raise UsageError(f"--resolve wants HOST=IP, got {entry!r}")
        try:
            ipaddress.ip_address(address)
        except ValueError as exc:
            raise UsageError(f"--resolve {entry}: {address!r} is not an IP address") from exc
        mapping[host] = address
    return mapping
