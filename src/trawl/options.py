"""The option table: every option of a crawl, defined once.

Each :class:`Option` gives its name, kind, default, help, topic and where it applies.
From the table come the click options of ``trawl crawl``, ``demo``, ``worker`` and
``recrawl``, the keys a ``--config`` TOML file may hold (each value checked against its
option's kind), which options ``trawl worker`` takes (`Kept.LOCAL`), and the option
reference docs/OPTIONS.md (trawl.options_reference).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from trawl.config import (
    RENDER_MODES,
    TEXT_FORMATS,
    Breaker,
    CrawlConfig,
    Freshness,
    LeasePolicy,
    Limits,
    Politeness,
    RenderConfig,
    Timeouts,
)
from trawl.extract.scope import ScopeMode
from trawl.fetch.retry import RetryPolicy
from trawl.freshness.recrawl import RecrawlPolicy
from trawl.ops.logs import FORMATS, LEVELS
from trawl.outputs.target import DEFAULT_WAIT
from trawl.store.location import DEFAULT_CRAWL


class Group(enum.Enum):
    """The topics ``trawl crawl --help`` and docs/OPTIONS.md group options by, in order."""

    SCOPE = "Scope"
    POLITENESS = "Politeness"
    BUDGETS = "Budgets and caps"
    OUTPUTS = "Outputs"
    STORE = "Store"
    NETWORK = "Network safety"
    RENDERING = "Rendering"
    FRESHNESS = "Freshness"
    PERFORMANCE = "Performance"
    OPERATIONS = "Operations"


class Kind(enum.Enum):
    """What an option's value is, on the command line and in a config file."""

    FLAG = "a boolean (true or false)"
    INT = "an integer"
    FLOAT = "a number"
    TEXT = "a string"
    PATH = "a string (a path)"
    TARGET = "a string (a path or a URL)"
    CHOICE = "one of"
    LIST = "a string or a list of strings"
    PAIRS = "a string, a list of strings or a table of strings"


class Kept(enum.Enum):
    """Where an option applies."""

    STORED = "crawl"
    """Stored with the crawl: every worker of the crawl obeys the stored value."""
    LOCAL = "machine"
    """Local to the process that runs: ``trawl worker`` takes it, each worker its own."""
    START = "start"
    """How ``trawl crawl`` starts; neither stored nor taken by a worker."""


INT_RANGE = (-(2**63), 2**63 - 1)
"""The integers an option takes: a TOML integer's range (signed 64-bit)."""


class WrongType(ValueError):
    """A config file value that does not fit its option's kind; the message says what fits."""


@dataclass(frozen=True, slots=True)
class Option:
    """One option: ``name`` is its config key and, with ``-`` for ``_``, its long flag."""

    name: str
    kind: Kind
    group: Group
    help: str
    default: Any = None
    kept: Kept = Kept.STORED
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    shown_default: str | None = None
    """The default as help shows it, where the value alone would not say it."""
    details: str = ""
    """More than the one-line help, for docs/OPTIONS.md."""
    negatable: bool = False
    """A ``--NAME/--no-NAME`` pair (its default None: decided at run time)."""
    positional: bool = False
    """Given as the command's arguments, not as an option (the seeds)."""
    in_config: bool = True
    """Accepted as a config file key."""
    required: bool = False

    @property
    def flag(self) -> str:
        """The long option: ``--max-pages`` for ``max_pages``."""
        return "--" + self.name.replace("_", "-")

    @property
    def default_text(self) -> str | None:
        """The default as shown in help and docs, or None for no default worth showing."""
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None or self.kind is Kind.FLAG:
            return None
        if isinstance(self.default, float) and self.default.is_integer():
            return str(int(self.default))
        return str(self.default)

    @property
    def full_help(self) -> str:
        """The help line with the default."""
        shown = self.default_text
        return self.help if shown is None else f"{self.help}  [default: {shown}]"

    def to_click(self, dest: str | None = None) -> click.Parameter:
        """The click option (or, for `positional`, argument) of this option; ``dest``
        renames the parameter the command receives."""
        name = dest or self.name
        if self.positional:
            return click.Argument([name], nargs=-1)
        decls = [f"{self.flag}/--no-{self.flag[2:]}" if self.negatable else self.flag, name]
        if self.kind is Kind.FLAG:
            return click.Option(decls, is_flag=True, default=self.default, help=self.full_help)
        kind: click.ParamType[Any, Any] = click.STRING
        if self.kind is Kind.INT:
            kind = click.INT
        elif self.kind is Kind.FLOAT:
            kind = click.FLOAT
        elif self.kind is Kind.CHOICE:
            kind = click.Choice(self.choices)
        return click.Option(
            decls,
            type=kind,
            default=self.default,
            metavar=self.metavar,
            multiple=self.kind in (Kind.LIST, Kind.PAIRS),
            required=self.required,
            help=self.full_help,
        )

    def from_config(self, value: object) -> Any:
        """``value`` read from a TOML file (or JSON, or a keyword argument) as this option
        takes it; `WrongType` if it is not of the option's kind: a boolean only from a
        boolean, never from a string; an integer in `INT_RANGE`; a number finite (TOML's
        ``nan`` and ``inf`` are not)."""
        fits: Any = None
        if self.kind is Kind.FLAG:
            fits = value if isinstance(value, bool) else None
        elif self.kind is Kind.INT:
            fits = value if _integer(value) else None
        elif self.kind is Kind.FLOAT:
            if isinstance(value, float) and math.isfinite(value):
                fits = value
            elif _integer(value):
                fits = float(value)  # type: ignore[arg-type]  # an int, as _integer says
        elif self.kind is Kind.CHOICE:
            fits = value if value in self.choices else None
        elif self.kind in (Kind.LIST, Kind.PAIRS):
            fits = _strings(value, pairs=self.kind is Kind.PAIRS)
        elif isinstance(value, str):
            fits = value
        if fits is None:
            raise WrongType(self.expected)
        return fits

    @property
    def expected(self) -> str:
        """What this option's config value must be."""
        if self.kind is Kind.CHOICE:
            return f"{self.kind.value} {', '.join(map(toml_text, self.choices))}"
        if self.kind is Kind.PAIRS:
            return f"{self.kind.value} ({self.metavar} each)"
        return str(self.kind.value)


def _integer(value: object) -> bool:
    """Whether ``value`` is an integer (not a boolean) in `INT_RANGE`."""
    low, high = INT_RANGE
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _strings(value: object, pairs: bool) -> tuple[str, ...] | None:
    """A repeatable option's values from a string or a list of strings (or, for
    ``pairs``, a table ``{HOST = "IP"}``); None if ``value`` is none of those."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    if pairs and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return tuple(f"{key}={item}" for key, item in value.items())
    return None


def toml_text(value: object) -> str:
    """``value`` as a TOML file writes it, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "a table"
    return str(value)


_POLITENESS, _LIMITS, _TIMEOUTS = Politeness(), Limits(), Timeouts()
_RETRY, _BREAKER, _LEASES = RetryPolicy(), Breaker(), LeasePolicy()
_RECRAWL, _FRESHNESS, _CRAWL = RecrawlPolicy(), Freshness(), CrawlConfig(seeds=())
_RENDER, _RENDERING = RenderConfig(), Group.RENDERING
_S, _N = "SECONDS", "N"
_SCOPE, _POLITE, _BUDGETS = Group.SCOPE, Group.POLITENESS, Group.BUDGETS
_OUTPUTS, _STORE, _NETWORK = Group.OUTPUTS, Group.STORE, Group.NETWORK
_FRESH, _PERF, _OPS = Group.FRESHNESS, Group.PERFORMANCE, Group.OPERATIONS
_LOCAL, _START = Kept.LOCAL, Kept.START

OPTIONS: tuple[Option, ...] = (
    # Scope
    Option("seeds", Kind.LIST, _SCOPE, "Where the crawl starts: http(s) URLs.",
           metavar="URL", positional=True,
           details="Given as the arguments of `trawl crawl` (`trawl crawl URL...`), or as "
                   "`seeds = [...]` in a config file."),
    Option("scope", Kind.CHOICE, _SCOPE,
           "What counts as in scope: the seed's registrable domain and its subdomains, the "
           "seed's host, or URLs under the seed URL.",
           default=ScopeMode.DOMAIN.value, choices=tuple(m.value for m in ScopeMode),
           details="Registrable domains come from the public suffix list (bundled)."),
    Option("include", Kind.LIST, _SCOPE, "Only follow URLs matching this regex (repeatable).",
           metavar="REGEX"),
    Option("exclude", Kind.LIST, _SCOPE, "Never follow URLs matching this regex (repeatable).",
           metavar="REGEX"),
    Option("max_depth", Kind.INT, _SCOPE,
           "Links more hops than this from a seed are counted, not queued.",
           default=_LIMITS.max_depth, metavar=_N,
           details="Counted as `too_deep`. The pages people link to are a few clicks from a "
                   "home page, while endless chains (calendars, paginators) go on for ever."),
    Option("strip_params", Kind.TEXT, _SCOPE,
           "Comma-separated query parameters to drop (replaces the default "
           "tracking/session list).",
           metavar="A,B,C", shown_default="tracking and session parameters"),
    Option("ignore_nofollow", Kind.FLAG, _SCOPE, "Follow rel/meta nofollow links too."),
    Option("no_soft_404", Kind.FLAG, _SCOPE,
           "Do not probe hosts for error pages served with status 200.",
           details="By default each host is asked once for a path that cannot exist; if it "
                   "answers 200 with a page, pages that match that page are recorded with "
                   "error `soft_404` and their links not followed. Costs one request a host."),
    # Politeness
    Option("contact", Kind.TEXT, _POLITE, "Contact URL or address put in the default User-Agent.",
           metavar="URL",
           details="Site owners read it in their logs; a crawl of sites you do not run "
                   "should give one."),
    Option("user_agent", Kind.TEXT, _POLITE, "User-Agent header.", metavar="TEXT",
           shown_default="trawl/VERSION (polite crawler; +CONTACT)"),
    Option("per_host", Kind.INT, _POLITE, "Requests in flight per host.",
           default=_POLITENESS.per_host, metavar=_N),
    Option("per_ip", Kind.INT, _POLITE,
           "Requests in flight to a server address that serves one site.",
           default=_POLITENESS.per_ip, metavar=_N,
           details="An address serving n sites allows N x ceil(sqrt(n)) requests in flight "
                   "and as many request starts per `--delay`, up to `--per-ip-max`: a "
                   "shared server of small sites is asked a few things at once, an address "
                   "in front of hundreds of sites (a CDN) more. Each host keeps its own "
                   "`--per-host` and `--delay`."),
    Option("per_ip_max", Kind.INT, _POLITE,
           "Requests in flight to one server address at most, however many sites it serves.",
           default=_POLITENESS.per_ip_max, metavar=_N,
           details="`--per-ip-max 1` asks every address one thing at a time."),
    Option("delay", Kind.FLOAT, _POLITE, "Minimum seconds between requests to one host.",
           default=_POLITENESS.delay, metavar=_S,
           details="The delay after a response is the largest of this, the host's robots.txt "
                   "Crawl-delay and `--response-factor` times the response time."),
    Option("response_factor", Kind.FLOAT, _POLITE,
           "A host also rests this many times its last response time.",
           default=_POLITENESS.response_factor, metavar="FACTOR"),
    Option("max_delay", Kind.FLOAT, _POLITE,
           "Cap on a robots.txt Crawl-delay and on the response-time rest.",
           default=_POLITENESS.max_delay, metavar=_S),
    Option("retry_base", Kind.FLOAT, _POLITE, "First retry back-off.",
           default=_RETRY.base, metavar=_S,
           details="Back-off is exponential with full jitter; a Retry-After header is "
                   "honoured."),
    Option("retry_cap", Kind.FLOAT, _POLITE, "Longest retry back-off.",
           default=_RETRY.cap, metavar=_S),
    Option("retry_attempts", Kind.INT, _POLITE, "Tries per URL, the first included.",
           default=_RETRY.attempts, metavar=_N),
    Option("breaker_threshold", Kind.INT, _POLITE, "Consecutive failures that pause a host.",
           default=_BREAKER.threshold, metavar=_N,
           details="Failures are timeouts, connection errors and 5xx answers."),
    Option("breaker_pause", Kind.FLOAT, _POLITE,
           "First pause of a failing host (doubles at each trip).",
           default=_BREAKER.pause, metavar=_S),
    Option("breaker_trips", Kind.INT, _POLITE,
           "Pauses before a failing host's queued URLs are given up.",
           default=_BREAKER.trips, metavar=_N,
           details="They fail as `host_failing`, so one dead host costs a handful of "
                   "requests, not one a URL."),
    # Budgets and caps
    Option("max_pages", Kind.INT, _BUDGETS, "Stop after this many fetches in total.",
           metavar=_N, shown_default="no limit",
           details="Counted across resumes: a rerun of a finished budget fetches nothing more."),
    Option("max_time", Kind.FLOAT, _BUDGETS, "Stop this run after this many seconds.",
           metavar=_S, shown_default="no limit", kept=_LOCAL),
    Option("max_pages_per_host", Kind.INT, _BUDGETS,
           "Fetches per host before its other URLs are counted, not fetched.",
           default=_LIMITS.max_pages_per_host, metavar=_N,
           details="Exact, also across resumes; the rest of the host's URLs are parked "
                   "(error `host_page_budget`) and a later run with a larger value fetches "
                   "them."),
    Option("max_discovered_per_host", Kind.INT, _BUDGETS, "New URLs accepted per host.",
           metavar=_N, shown_default="10 x --max-pages-per-host",
           details="Beyond it new URLs of the host are counted "
                   "(`over_host_discovery_budget`), which bounds the store of a host that "
                   "makes up URLs."),
    Option("max_body", Kind.INT, _BUDGETS, "Body cap in bytes, after decompression.",
           default=_LIMITS.max_body, metavar="BYTES", shown_default="10485760 (10 MiB)"),
    Option("max_redirects", Kind.INT, _BUDGETS, "Redirects followed from one URL.",
           default=_LIMITS.max_redirects, metavar=_N),
    Option("max_links", Kind.INT, _BUDGETS, "Links taken from one page.",
           default=_LIMITS.max_links, metavar=_N),
    # Outputs
    Option("warc", Kind.FLAG, _OUTPUTS,
           "Archive every fetch (robots.txt included) as WARC 1.1 files in DATA_DIR/warc.",
           kept=_LOCAL,
           details="Request and response records (a 304: a revisit record), gzip per "
                   "record, bodies as received (not only HTML) up to --max-body, a CDXJ "
                   "index beside each closed file."),
    Option("warc_max_size", Kind.INT, _OUTPUTS,
           "Start a new WARC file before one would pass this many bytes.",
           default=_CRAWL.warc_max_size, metavar="BYTES", shown_default="1073741824 (1 GiB)",
           kept=_LOCAL),
    Option("text", Kind.FLAG, _OUTPUTS,
           "Write each page's main text, title and language as gzip JSONL in DATA_DIR/text "
           "(exact duplicates once).",
           kept=_LOCAL),
    Option("text_skip_near_duplicates", Kind.FLAG, _OUTPUTS,
           "Leave near-duplicate pages out of the --text output.", kept=_LOCAL,
           details="Near duplicates are pages within 3 bits of an earlier page's SimHash; "
                   "they are recorded either way."),
    Option("text_format", Kind.CHOICE, _OUTPUTS,
           "The --text output's main text as plain text or as Markdown.",
           default=_CRAWL.text_format, choices=TEXT_FORMATS, kept=_LOCAL,
           details="Markdown keeps headings, lists, tables, emphasis and links (made "
                   "absolute). The content hash and SimHash are of the plain text either way."),
    Option("events", Kind.TARGET, _OUTPUTS,
           "Send one PageFetched event per new or changed page: append a JSON line to "
           "FILE, or publish to nats://HOST:PORT/SUBJECT or amqp://HOST:PORT/VHOST.",
           metavar="FILE|URL", kept=_LOCAL,
           details="A broker acknowledges every event of a batch before the batch "
                   "commits. NATS query parameters: `stream`, `duplicate_window`, "
                   "`max_age`, `max_bytes`; AMQP: `exchange`, `routing_key`, `queue`. "
                   "Credentials in the URL or in `TRAWL_EVENTS_USER` and "
                   "`TRAWL_EVENTS_PASSWORD`; never stored or logged "
                   "(docs/OUTPUTS.md#events)."),
    Option("output", Kind.TEXT, _OUTPUTS, "Upload each closed --warc, --text and items file "
           "to this S3-API bucket and key prefix.", metavar="s3://BUCKET/PREFIX", kept=_LOCAL,
           details="Keys are PREFIX/CRAWL/warc|text|items/YYYY/MM/DD/FILE, each put once with "
                   "If-None-Match and its SHA-256; credentials and region from the AWS "
                   "environment, profile or instance role (docs/OUTPUTS.md)."),
    Option("s3_endpoint", Kind.TEXT, _OUTPUTS, "The S3-API endpoint of --output: MinIO, "
           "Cloudflare R2, Ceph RGW...", metavar="URL", shown_default="AWS S3", kept=_LOCAL),
    Option("keep_local", Kind.FLAG, _OUTPUTS, "Keep uploaded files in the data dir.", kept=_LOCAL),
    Option("upload_wait", Kind.FLOAT, _OUTPUTS, "Seconds the end of a crawl waits for pending "
           "--output uploads; the next start uploads what is left.", default=DEFAULT_WAIT,
           metavar=_S, kept=_LOCAL),
    Option("json", Kind.FLAG, _OUTPUTS, "Print the summary as JSON.", kept=_LOCAL),
    Option("handler", Kind.LIST, _OUTPUTS,
           "Run this function on the pages of LABEL (none: on pages without a label) "
           "(repeatable): it yields items and the links to follow.",
           metavar="[LABEL=]MODULE:FUNCTION", kept=_LOCAL,
           details="Items go to the store (`trawl export --items`); a page's follows take "
                   "the place of its links. `trawl crawl` stores its handlers with the "
                   "crawl; a `trawl worker` without `--handler` runs those, one with it "
                   "must name the same labels (docs/API.md)."),
    # Store
    Option("data_dir", Kind.PATH, _STORE, "Where the crawl state and output files live.",
           default=str(_CRAWL.data_dir), metavar="DIR", kept=_LOCAL),
    Option("fresh", Kind.FLAG, _STORE, "Start over instead of resuming.", kept=_START,
           details="Without it a rerun of the same command resumes where the last run "
                   "stopped."),
    Option("store", Kind.TEXT, _STORE,
           "Keep the crawl in this PostgreSQL database (postgresql://...) instead of "
           "SQLite in the data dir.",
           metavar="DSN", kept=_LOCAL,
           details="Any number of `trawl worker` processes can then share the crawl."),
    Option("crawl", Kind.TEXT, _STORE, "Which crawl in the --store database (schema trawl_NAME).",
           default=DEFAULT_CRAWL, metavar="NAME", kept=_LOCAL),
    Option("worker_id", Kind.TEXT, _STORE, "This process's name among the workers of a crawl.",
           metavar="NAME", shown_default="host name and data dir", kept=_LOCAL,
           details="The default is the same after a restart, so a restarted worker takes its "
                   "own hosts back at once."),
    Option("lease_ttl", Kind.FLOAT, _STORE,
           "Seconds a host stays leased to this process without renewal; at least twice "
           "--timeout.",
           default=_LEASES.ttl, metavar=_S, kept=_LOCAL),
    Option("max_hosts", Kind.INT, _STORE, "Hosts this process holds leases on at once, at most.",
           metavar=_N, kept=_LOCAL, shown_default="sized as the crawl runs, from 1,024",
           details="Without it the limit starts at 1,024 and grows while every host slot "
                   "is taken and request slots go unused (a polite crawl of many hosts), "
                   "up to 65,536; with it, the limit never passes N."),
    # Network safety
    Option("allow_network", Kind.LIST, _NETWORK,
           "Also fetch from this address range (repeatable); loopback, private and other "
           "non-public addresses are refused otherwise.",
           metavar="CIDR", kept=_LOCAL,
           details="Refused by default: loopback, private, link-local, CGNAT, multicast, "
                   "reserved and cloud-metadata addresses, so that links and DNS answers "
                   "chosen by strangers cannot reach the machine or its network."),
    Option("resolve", Kind.PAIRS, _NETWORK,
           "Resolve HOST to IP without DNS (repeatable, like curl).",
           metavar="HOST=IP", kept=_LOCAL,
           details='In a config file also a table: `resolve = {"a.test" = "127.0.0.1"}`. '
                   "The address is still checked (see `--allow-network`)."),
    Option("hosts_file", Kind.PATH, _NETWORK,
           "Hosts file read before DNS, as the system's resolver does ('' reads none).",
           default=str(_CRAWL.hosts_file), metavar="PATH", kept=_LOCAL),
    Option("nameserver", Kind.LIST, _NETWORK, "DNS server to ask (repeatable).",
           metavar="IP[:PORT]", shown_default="the system's", kept=_LOCAL),
    Option("ca_file", Kind.PATH, _NETWORK,
           "Also trust the CA certificates in this PEM file for https.",
           metavar="PATH", shown_default="the system's trust store only", kept=_LOCAL,
           details="For sites signed by a private or test CA. The certificates are added to "
                   "the system's, and names are still verified."),
    Option("proxy", Kind.TEXT, _NETWORK,
           "Send every request through this HTTP proxy.",
           metavar="http://HOST:PORT", kept=_LOCAL,
           details="https sites through a CONNECT tunnel, TLS end to end with the site "
                   "(its certificate checked for its name, `--ca-file` applies); http sites "
                   "in absolute form. Credentials from `TRAWL_PROXY_USER` and "
                   "`TRAWL_PROXY_PASSWORD`, never in the URL. Sites' names are still "
                   "resolved and checked (`--allow-network`) before the proxy is asked; the "
                   "proxy's own address is not checked. See PIPELINE.md, Proxies."),
    Option("timeout", Kind.FLOAT, _NETWORK, "Total seconds per fetch.",
           default=_TIMEOUTS.total, metavar=_S),
    Option("connect_timeout", Kind.FLOAT, _NETWORK, "Seconds to connect.",
           default=_TIMEOUTS.connect, metavar=_S),
    # Rendering
    Option("render", Kind.CHOICE, _RENDERING,
           "Render HTML pages in headless Chromium: never, when the markup looks built by "
           "scripts (auto), or always.",
           default=_RENDER.mode, choices=RENDER_MODES, kept=_LOCAL,
           details="Needs Chromium (`apt-get install chromium`) and `pip install "
                   "'trawl[render]'`. The rendered page is read as a fetched one (links, "
                   "text, soft 404s, handlers); the rule `auto` follows is in "
                   "docs/RENDERING.md."),
    Option("render_include", Kind.LIST, _RENDERING,
           "Always render URLs matching this regex (repeatable), whatever --render says.",
           metavar="REGEX", kept=_LOCAL),
    Option("render_concurrency", Kind.INT, _RENDERING, "Pages rendered at once, at most.",
           default=_RENDER.concurrency, metavar=_N, kept=_LOCAL),
    Option("render_timeout", Kind.FLOAT, _RENDERING,
           "Seconds one render may take, its subresources included; past it the page is "
           "read as fetched.",
           default=_RENDER.timeout, metavar=_S, kept=_LOCAL),
    Option("render_memory", Kind.INT, _RENDERING,
           "MiB of resident memory of the browser's processes past which it is restarted.",
           default=_RENDER.memory, metavar="MIB", kept=_LOCAL),
    Option("render_max_requests", Kind.INT, _RENDERING,
           "Subresource requests one rendered page may make; the rest are refused.",
           default=_RENDER.max_requests, metavar=_N, kept=_LOCAL,
           details="Images, fonts and media are never requested and do not count."),
    Option("render_browser", Kind.PATH, _RENDERING, "The Chromium executable.",
           default=str(_RENDER.browser), metavar="PATH", kept=_LOCAL),
    # Freshness
    Option("sitemaps", Kind.FLAG, _FRESH,
           "Read every host's sitemaps (robots.txt Sitemap: lines and /sitemap.xml) for more "
           "URLs and their change times."),
    Option("sitemaps_only", Kind.FLAG, _FRESH,
           "Start from the seeds' sitemaps instead of the seed pages (implies --sitemaps).",
           details="Add `--max-depth 1` to fetch only what the seeds' /sitemap.xml lists "
                   "(2 when it is a sitemap index)."),
    Option("continuous", Kind.FLAG, _FRESH,
           "Keep crawling: queue pages again as they come due for a recrawl.",
           details="Stop it with Ctrl-C or `--max-time`."),
    Option("recrawl_min", Kind.FLOAT, _FRESH, "Shortest revisit interval of a page.",
           default=_RECRAWL.minimum, metavar=_S),
    Option("recrawl_max", Kind.FLOAT, _FRESH, "Longest revisit interval of a page.",
           default=_RECRAWL.maximum, metavar=_S, shown_default="2592000 (30 days)"),
    Option("recrawl_initial", Kind.FLOAT, _FRESH, "Revisit interval after a page's first fetch.",
           default=_RECRAWL.initial, metavar=_S),
    Option("priority_horizon", Kind.FLOAT, _FRESH,
           "Seconds of waiting the whole priority range is worth: a URL is never passed by "
           "URLs queued this long after it.",
           default=_FRESHNESS.horizon, metavar=_S),
    # Performance
    Option("concurrency", Kind.INT, _PERF, "Requests in flight overall, at most.",
           metavar=_N, kept=_LOCAL, shown_default="sized as the crawl runs, from 64",
           details="Without it the limit starts at 64 and grows while hosts wait for a "
                   "request slot and the event loop has CPU to spare, and shrinks when it "
                   "has none, up to 4,096 or half the open-file limit; with it, the limit "
                   "never passes N. Pages fetched and not yet stored count too, so a kill -9 "
                   "loses at most this many fetches."),
    Option("parse_workers", Kind.INT, _PERF,
           "Child processes that parse pages and filter links; 0 keeps that work in the "
           "crawl process.",
           metavar=_N, kept=_LOCAL,
           shown_default="one per spare core, at most 2; one per core with --text or --events"),
    Option("store_thread", Kind.FLAG, _PERF,
           "Run the SQLite store on a thread of the crawl process, not in a process of its "
           "own.",
           kept=_LOCAL,
           details="By default, on a machine of two cores or more, a crawl on the embedded "
                   "store runs the store in a child process, so that the crawl's event loop "
                   "has its interpreter to itself (docs/PERFORMANCE.md); one core keeps it on "
                   "a thread."),
    Option("memory_queue", Kind.INT, _PERF,
           "URLs buffered in RAM (at least two a host the host limit allows); the rest wait "
           "in the store.",
           default=_LIMITS.memory_queue, metavar=_N, kept=_LOCAL),
    Option("expected_urls", Kind.INT, _PERF, "Sizes the Bloom filter (1% false positives).",
           default=_LIMITS.expected_urls, metavar=_N, kept=_LOCAL,
           details="About 12 MB at the default."),
    # Operations
    Option("config", Kind.PATH, _OPS, "TOML file with the same keys as these options.",
           metavar="FILE", kept=_START, in_config=False,
           details="Options given on the command line win over the file. Per-site "
                   "settings are its `[sites.\"HOST\"]` tables (docs/SITES.md)."),
    Option("progress", Kind.FLAG, _OPS, "Live progress display.",
           negatable=True, shown_default="on when stderr is a terminal", kept=_LOCAL),
    Option("stats_interval", Kind.FLOAT, _OPS,
           "Seconds between stats lines on stderr when there is no live display; 0: none.",
           default=60.0, metavar=_S, kept=_LOCAL),
    Option("log_format", Kind.CHOICE, _OPS,
           "Log lines on stderr as text or one JSON object a line.",
           default="text", choices=FORMATS, kept=_LOCAL),
    Option("log_level", Kind.CHOICE, _OPS,
           "Least severe log lines shown (debug: one line per fetch).",
           default="warning", choices=LEVELS, kept=_LOCAL),
    Option("metrics_port", Kind.INT, _OPS,
           "Serve Prometheus metrics at http://127.0.0.1:PORT/metrics.",
           metavar="PORT", kept=_LOCAL, details="0 takes any free port."),
    Option("random_seed", Kind.INT, _OPS,
           "Seed of the random choices (retry jitter), for a reproducible run.",
           metavar=_N, shown_default="random", kept=_LOCAL),
)  # fmt: skip
"""Every option, by group in `Group` order."""

BY_NAME = {option.name: option for option in OPTIONS}
CONFIG_KEYS = frozenset(option.name for option in OPTIONS if option.in_config)
"""The keys a config file may hold (with ``-`` or ``_``)."""
LOCAL_NAMES = tuple(option.name for option in OPTIONS if option.kept is Kept.LOCAL)
"""The options ``trawl worker`` takes: what belongs to the machine, not to the crawl."""


def params(names: Sequence[str] | None = None, **defaults: Any) -> list[click.Parameter]:
    """Click parameters of the options ``names`` (default: all, in table order), with
    ``defaults`` in place of the table's for one command."""
    chosen = OPTIONS if names is None else tuple(BY_NAME[name] for name in names)
    return [
        (
            dataclasses.replace(option, default=defaults[option.name], shown_default=None)
            if option.name in defaults
            else option
        ).to_click()
        for option in chosen
    ]


def group_of(name: str | None) -> Group | None:
    """The topic of the parameter called ``name``, or None for one not in the table."""
    option = BY_NAME.get(name or "")
    return None if option is None else option.group
