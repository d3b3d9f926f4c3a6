"""The ``trawl`` command line.

Every failure a user can cause ends in one line on stderr and an exit code: 0 done,
1 runtime failure, 2 bad usage or config, 130 interrupted. No traceback reaches the user.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich.console import Console

from trawl import __version__
from trawl.config import (
    Breaker,
    CrawlConfig,
    Freshness,
    LeasePolicy,
    Limits,
    Politeness,
    RecrawlPass,
    ScopeConfig,
    Timeouts,
    default_user_agent,
    default_worker_id,
    load_config_file,
    parse_networks,
    parse_resolve,
)
from trawl.errors import CrawlInterrupted, TrawlError, UsageError
from trawl.exporter import export_rows
from trawl.launch import interrupted
from trawl.logs import FORMATS, LEVELS, configure_logging
from trawl.priority import DEFAULT_HORIZON
from trawl.recrawl import RecrawlPolicy
from trawl.retry import RetryPolicy
from trawl.runner import read_summary, run_crawl
from trawl.scope import ScopeMode
from trawl.store.location import DEFAULT_CRAWL, StoreLocation, newest_unfinished
from trawl.summary import Summary
from trawl.urls import NormalizeRules

T = TypeVar("T")

_CRAWL_OPTIONS = [
    click.option("--scope", type=click.Choice([m.value for m in ScopeMode]), default="domain",
                 help="What counts as in scope: the seed's registrable domain and its "
                      "subdomains, the seed's host, or URLs under the seed URL."),
    click.option("--include", multiple=True, help="Only follow URLs matching this regex."),
    click.option("--exclude", multiple=True, help="Never follow URLs matching this regex."),
    click.option("--max-pages", type=int, help="Stop after this many fetches in total."),
    click.option("--max-time", type=float, help="Stop after this many seconds."),
    click.option("--concurrency", type=int, default=64, help="Requests in flight overall."),
    click.option("--parse-workers", type=int, default=None,
                 help="Child processes that parse pages and filter links; 0 keeps that "
                      "work in the crawl process (default: one per spare core, at most 2)."),
    click.option("--per-host", type=int, default=1, help="Requests in flight per host."),
    click.option("--per-ip", type=int, default=1,
                 help="Requests in flight per server address, over all its host names."),
    click.option("--delay", type=float, default=1.0,
                 help="Minimum seconds between requests to one host."),
    click.option("--response-factor", type=float, default=10.0,
                 help="A host also rests this many times its last response time."),
    click.option("--user-agent", help="User-Agent header (default names trawl and --contact)."),
    click.option("--contact", help="Contact URL or address put in the default User-Agent."),
    click.option("--data-dir", type=click.Path(path_type=Path), default=Path("trawl-data"),
                 help="Where the crawl state lives."),
    click.option("--resolve", multiple=True, metavar="HOST=IP",
                 help="Resolve HOST to IP without DNS (repeatable, like curl)."),
    click.option("--allow-network", multiple=True, metavar="CIDR",
                 help="Also fetch from this address range (repeatable); loopback, private "
                      "and other non-public addresses are refused otherwise."),
    click.option("--nameserver", multiple=True, metavar="IP[:PORT]",
                 help="DNS server to ask (repeatable; default: the system's)."),
    click.option("--max-depth", type=int, default=15,
                 help="Links more hops than this from a seed are counted, not queued."),
    click.option("--max-pages-per-host", type=int, default=100_000,
                 help="Fetches per host before its other URLs are counted, not fetched."),
    click.option("--max-discovered-per-host", type=int,
                 help="New URLs accepted per host (default 10 x --max-pages-per-host)."),
    click.option("--breaker-threshold", type=int, default=5,
                 help="Consecutive failures that pause a host."),
    click.option("--breaker-pause", type=float, default=60.0,
                 help="First pause of a failing host, seconds (doubles per trip)."),
    click.option("--breaker-trips", type=int, default=3,
                 help="Pauses before a failing host's queued URLs are given up."),
    click.option("--warc", is_flag=True,
                 help="Archive every fetch (robots.txt included) as WARC 1.1 files in "
                      "DATA_DIR/warc."),
    click.option("--warc-max-size", type=int, default=1 << 30,
                 help="Start a new WARC file before one would pass this many bytes."),
    click.option("--text", is_flag=True,
                 help="Write each page's main text, title and language as gzip JSONL in "
                      "DATA_DIR/text (exact duplicates once)."),
    click.option("--text-skip-near-duplicates", is_flag=True,
                 help="Leave near-duplicate pages out of the --text output."),
    click.option("--events", type=click.Path(path_type=Path), metavar="FILE",
                 help="Append one PageFetched JSON line per new or changed page to FILE."),
    click.option("--store", metavar="DSN",
                 help="Keep the crawl in this PostgreSQL database (postgresql://...) "
                      "instead of SQLite in the data dir."),
    click.option("--crawl", metavar="NAME", default=DEFAULT_CRAWL,
                 help="Which crawl in the --store database (schema trawl_NAME)."),
    click.option("--fresh", is_flag=True, help="Start over instead of resuming."),
    click.option("--worker-id", metavar="NAME",
                 help="This process's name among the workers of a crawl "
                      "(default: host name and data dir)."),
    click.option("--lease-ttl", type=float, default=60.0,
                 help="Seconds a host stays leased to this process without renewal; "
                      "at least twice --timeout."),
    click.option("--max-hosts", type=int, default=1024,
                 help="Hosts this process holds leases on at once."),
    click.option("--metrics-port", type=int,
                 help="Serve Prometheus metrics at http://127.0.0.1:PORT/metrics."),
    click.option("--log-format", type=click.Choice(FORMATS), default="text",
                 help="Log lines on stderr as text or one JSON object a line."),
    click.option("--log-level", type=click.Choice(LEVELS), default="warning",
                 help="Least severe log lines shown (debug: one line per fetch)."),
    click.option("--sitemaps", is_flag=True,
                 help="Read every host's sitemaps (robots.txt Sitemap: lines and "
                      "/sitemap.xml) for more URLs and their change times."),
    click.option("--sitemaps-only", is_flag=True,
                 help="Start from the seeds' sitemaps instead of the seed pages "
                      "(implies --sitemaps)."),
    click.option("--continuous", is_flag=True,
                 help="Keep crawling: queue pages again as they come due for a recrawl."),
    click.option("--recrawl-min", type=float, default=3600.0,
                 help="Shortest revisit interval of a page, seconds."),
    click.option("--recrawl-max", type=float, default=30 * 86400.0,
                 help="Longest revisit interval of a page, seconds."),
    click.option("--recrawl-initial", type=float, default=86400.0,
                 help="Revisit interval after a page's first fetch, seconds."),
    click.option("--priority-horizon", type=float, default=3600.0,
                 help="Seconds of waiting the whole priority range is worth: a URL is "
                      "never passed by URLs queued this long after it."),
    click.option("--memory-queue", type=int, default=10_000, help="URLs buffered in RAM."),
    click.option("--expected-urls", type=int, default=10_000_000,
                 help="Sizes the Bloom filter (1%% false positives)."),
    click.option("--max-body", type=int, default=10 * 1024 * 1024,
                 help="Body cap in bytes, after decompression."),
    click.option("--retry-base", type=float, default=1.0, help="First retry back-off, seconds."),
    click.option("--retry-cap", type=float, default=300.0, help="Longest retry back-off."),
    click.option("--retry-attempts", type=int, default=5,
                 help="Tries per URL, the first included."),
    click.option("--strip-params", help="Comma-separated query parameters to drop "
                                         "(replaces the default tracking/session list)."),
    click.option("--ignore-nofollow", is_flag=True, help="Follow rel/meta nofollow links too."),
    click.option("--no-soft-404", is_flag=True,
                 help="Do not probe hosts for error pages served with status 200."),
    click.option("--timeout", type=float, default=30.0, help="Total seconds per fetch."),
    click.option("--connect-timeout", type=float, default=10.0, help="Seconds to connect."),
    click.option("--config", "config_file", type=click.Path(path_type=Path),
                 help="TOML file with the same keys as these options."),
    click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON."),
    click.option("--progress/--no-progress", default=None,
                 help="Live progress display (default: on when stderr is a terminal)."),
    click.option("--stats-interval", type=float, default=60.0,
                 help="Seconds between two stats lines on stderr when there is no live "
                      "display; 0: none."),
]  # fmt: skip


def crawl_options(func: Any) -> Any:
    """Attach the options shared by ``crawl`` and ``demo``."""
    for option in reversed(_CRAWL_OPTIONS):
        func = option(func)
    return func


def _merged(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """Options given on the command line win over the config file, which wins over defaults."""
    values = dict(params)
    config_file = values.pop("config_file", None)
    if config_file is not None:
        for key, value in load_config_file(config_file).items():
            if ctx.get_parameter_source(key) != ParameterSource.COMMANDLINE:
                values[key] = tuple(value) if isinstance(value, list) else value
    return values


def build_config(seeds: tuple[str, ...], values: dict[str, Any]) -> CrawlConfig:
    """Turn merged option values into a validated :class:`CrawlConfig`.

    Values from a config file arrive untyped, so a wrong type is a usage error here.
    """
    try:
        return _build_config(seeds, values)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad configuration value: {exc}") from exc


def _build_config(seeds: tuple[str, ...], values: dict[str, Any]) -> CrawlConfig:
    strip = values.get("strip_params")
    rules = (
        NormalizeRules()
        if strip is None
        else NormalizeRules(
            strip_params=frozenset(p.strip().lower() for p in str(strip).split(",") if p.strip())
        )
    )
    resolve = values.get("resolve") or ()
    if isinstance(resolve, dict):
        resolve = tuple(f"{host}={ip}" for host, ip in resolve.items())
    defaults_politeness, defaults_limits = Politeness(), Limits()
    return CrawlConfig(
        seeds=tuple(str(s) for s in seeds),
        data_dir=Path(values["data_dir"]),
        scope=ScopeConfig(
            mode=ScopeMode(values["scope"]),
            include=_strings(values.get("include")),
            exclude=_strings(values.get("exclude")),
        ),
        politeness=Politeness(
            per_host=int(values["per_host"]),
            delay=float(values["delay"]),
            response_factor=float(values["response_factor"]),
            max_delay=float(values.get("max_delay", defaults_politeness.max_delay)),
            per_ip=int(values["per_ip"]),
        ),
        limits=Limits(
            max_pages=_optional(int, values.get("max_pages")),
            max_time=_optional(float, values.get("max_time")),
            max_body=int(values["max_body"]),
            max_redirects=int(values.get("max_redirects", defaults_limits.max_redirects)),
            max_links=int(values.get("max_links", defaults_limits.max_links)),
            memory_queue=int(values["memory_queue"]),
            expected_urls=int(values["expected_urls"]),
            max_depth=int(values["max_depth"]),
            max_pages_per_host=int(values["max_pages_per_host"]),
            max_discovered_per_host=_optional(int, values.get("max_discovered_per_host")),
        ),
        timeouts=Timeouts(connect=float(values["connect_timeout"]), total=float(values["timeout"])),
        retry=RetryPolicy(
            base=float(values["retry_base"]),
            cap=float(values["retry_cap"]),
            attempts=int(values["retry_attempts"]),
        ),
        breaker=Breaker(
            threshold=int(values["breaker_threshold"]),
            pause=float(values["breaker_pause"]),
            trips=int(values["breaker_trips"]),
        ),
        url_rules=rules,
        concurrency=int(values["concurrency"]),
        parse_workers=_optional(int, values.get("parse_workers")),
        user_agent=values.get("user_agent") or default_user_agent(values.get("contact")),
        resolve=parse_resolve(list(_strings(resolve))),
        allow_networks=parse_networks(list(_strings(values.get("allow_network")))),
        nameservers=_strings(values.get("nameserver")),
        warc=bool(values.get("warc")),
        warc_max_size=int(values.get("warc_max_size", 1 << 30)),
        text=bool(values.get("text")),
        text_near_duplicates=not values.get("text_skip_near_duplicates"),
        events=_optional(Path, values.get("events")),
        store=_store_location(values),
        fresh=bool(values.get("fresh")),
        leases=LeasePolicy(
            worker=str(values.get("worker_id") or default_worker_id(Path(values["data_dir"]))),
            ttl=float(values.get("lease_ttl", 60.0)),
            max_hosts=int(values.get("max_hosts", 1024)),
        ),
        join=bool(values.get("join")),
        metrics_port=_optional(int, values.get("metrics_port")),
        freshness=Freshness(
            recrawl=RecrawlPolicy(
                minimum=float(values.get("recrawl_min", 3600.0)),
                maximum=float(values.get("recrawl_max", 30 * 86400.0)),
                initial=float(values.get("recrawl_initial", 86400.0)),
            ),
            horizon=float(values.get("priority_horizon", DEFAULT_HORIZON)),
            sitemaps=bool(values.get("sitemaps")),
            sitemaps_only=bool(values.get("sitemaps_only")),
            continuous=bool(values.get("continuous")),
            recrawl_pass=_optional(RecrawlPass, values.get("recrawl_pass")),
        ),
        honour_nofollow=not values.get("ignore_nofollow"),
        soft_404=not values.get("no_soft_404"),
        rng_seed=_optional(int, values.get("seed")),
    )


def _store_location(values: dict[str, Any]) -> StoreLocation | None:
    """The ``--store`` crawl, or None for SQLite in the data dir."""
    dsn = values.get("store")
    if dsn is None:
        return None
    crawl = str(values.get("crawl") or DEFAULT_CRAWL)
    return StoreLocation(Path(values["data_dir"]), str(dsn), crawl)


def _strings(value: Any) -> tuple[str, ...]:
    """A repeatable option's values; a config file may give one string or a list."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(item) for item in value)


def _optional(kind: Callable[[Any], T], value: Any) -> T | None:
    """``kind(value)``, or None when the option was not given."""
    return None if value is None else kind(value)


def print_summary(summary: Summary, as_json: bool) -> None:
    """Write the summary to stdout as text or JSON."""
    if as_json:
        click.echo(summary.to_json())
    else:
        for line in summary.lines():
            click.echo(line)


def _console(wanted: bool | None) -> Console | None:
    console = Console(stderr=True)
    show = console.is_terminal if wanted is None else wanted
    return console if show else None


def crawl_and_report(config: CrawlConfig, values: dict[str, Any]) -> Summary:
    """Run the crawl, print its summary, and turn an interruption into exit 130."""
    configure_logging(
        str(values.get("log_format", "text")), str(values.get("log_level", "warning"))
    )
    summary = run_crawl(
        config,
        _console(values.get("progress")),
        stats_interval=float(values.get("stats_interval", 60.0)),
    )
    print_summary(summary, bool(values.get("as_json")))
    return summary


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="trawl")
def cli() -> None:
    """trawl: a polite, resumable web crawler."""


@cli.command()
@click.argument("seeds", nargs=-1)
@crawl_options
@click.pass_context
def crawl(ctx: click.Context, /, seeds: tuple[str, ...], **params: Any) -> None:
    """Crawl from SEEDS (run it again to resume; --fresh to start over)."""
    values = _merged(ctx, params)
    seeds = seeds or _strings(values.get("seeds"))
    if not seeds:
        raise UsageError("give at least one seed URL")
    summary = crawl_and_report(build_config(seeds, values), values)
    if summary.state == "interrupted":
        sys.exit(130)


_WORKER_LOCAL = (
    "data_dir", "concurrency", "parse_workers", "resolve", "allow_network", "nameserver",
    "memory_queue", "expected_urls", "max_time", "warc", "warc_max_size", "text",
    "text_skip_near_duplicates", "events", "worker_id", "lease_ttl", "max_hosts", "metrics_port",
    "log_format", "log_level", "as_json", "progress",
)  # fmt: skip
"""The options ``trawl worker`` takes: what belongs to the machine, not to the crawl."""
_NEWEST = "Which crawl to join (default: the newest unfinished one)."


def _worker_params(*, required: bool = True, which: str = _NEWEST) -> list[click.Parameter]:
    """The options of a command that joins a stored crawl: where it is (``--store``
    ``required``, or else SQLite in the data dir; ``which`` says what ``--crawl``
    defaults to) and the machine-local options."""
    by_name = {param.name: param for param in crawl.params}
    return [
        click.Option(["--store"], metavar="DSN", required=required,
                     help="The PostgreSQL database of the crawl (postgresql://...)."),
        click.Option(["--crawl"], metavar="NAME", help=which),
        *(by_name[name] for name in _WORKER_LOCAL),
    ]  # fmt: skip


@cli.command(params=_worker_params())
def worker(**params: Any) -> None:
    """Join a crawl kept in a PostgreSQL database and work on it until it is done.

    Scope, politeness, budgets and the rest of the crawl's policy come from the store,
    as `trawl crawl --store` wrote them; only machine-local options are taken here.
    """
    values = crawl.make_context("worker", [], resilient_parsing=True).params
    values.update(params)
    if values["crawl"] is None:
        values["crawl"] = asyncio.run(newest_unfinished(str(values["store"])))
    values["join"] = True
    summary = crawl_and_report(build_config((), values), values)
    if summary.state == "interrupted":
        sys.exit(130)


@cli.command(
    params=_worker_params(
        required=False, which=f"Which crawl in the --store database (default: {DEFAULT_CRAWL})."
    )
)
@click.option("--all", "every", is_flag=True,
              help="Recrawl every known page, whatever its due time.")  # fmt: skip
def recrawl(every: bool, **params: Any) -> None:
    """Recrawl the pages of a crawl that are due (one pass), then stop.

    Conditional requests (If-None-Match, If-Modified-Since) spare the pages that did not
    change; new links found on changed pages are crawled too. The crawl's policy comes
    from its store, as for `trawl worker`; `--continuous` on the crawl does this forever.
    """
    values = crawl.make_context("recrawl", [], resilient_parsing=True).params
    values.update(params)
    values["crawl"] = values["crawl"] or DEFAULT_CRAWL
    values["join"] = True
    values["recrawl_pass"] = RecrawlPass.ALL if every else RecrawlPass.DUE
    summary = crawl_and_report(build_config((), values), values)
    if summary.state == "interrupted":
        sys.exit(130)


STORE_OPTIONS = (
    click.option("--data-dir", type=click.Path(path_type=Path), default=Path("trawl-data")),
    click.option("--store", "dsn", metavar="DSN",
                 help="PostgreSQL database of the crawl (default: SQLite in the data dir)."),
    click.option("--crawl", "crawl_name", default=DEFAULT_CRAWL, metavar="NAME",
                 help="Which crawl in the --store database."),
)  # fmt: skip


def store_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the options that say where a crawl's state is."""
    for option in reversed(STORE_OPTIONS):
        command = option(command)
    return command


@cli.command()
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def status(data_dir: Path, dsn: str | None, crawl_name: str, as_json: bool) -> None:
    """Print the summary of the crawl in the data dir (or the --store database)."""
    location = StoreLocation(data_dir, dsn, crawl_name)
    print_summary(asyncio.run(read_summary(location)), as_json)


@cli.command()
@store_options
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="jsonl")
@click.option("--output", "-o", type=click.Path(path_type=Path),
              help="Write here instead of stdout.")  # fmt: skip
def export(data_dir: Path, dsn: str | None, crawl_name: str, fmt: str, output: Path | None) -> None:
    """Write one row per known URL (csv or jsonl)."""
    location = StoreLocation(data_dir, dsn, crawl_name)
    if output is None:
        asyncio.run(export_rows(location, fmt, sys.stdout))
        return
    try:
        with output.open("w", newline="", encoding="utf-8") as handle:
            asyncio.run(export_rows(location, fmt, handle))
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from exc


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=int, default=8470, help="Port of the API.")
@click.option("--host", default="127.0.0.1", help="Address to listen on (default: loopback).")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=Path("trawl-crawls"),
    help="Where the crawls' data dirs go, one per crawl.",
)
@click.option(
    "--store",
    "dsn",
    metavar="DSN",
    help="Keep the crawls in this PostgreSQL database instead of SQLite.",
)
@click.option(
    "--token",
    envvar="TRAWL_API_TOKEN",
    help="Bearer token every changing request must carry (or TRAWL_API_TOKEN).",
)
@click.argument("crawl_options", nargs=-1, type=click.UNPROCESSED)
def serve(
    port: int,
    host: str,
    data_dir: Path,
    dsn: str | None,
    token: str | None,
    crawl_options: tuple[str, ...],
) -> None:
    """Serve the REST API: start, watch, pause, resume and cancel crawls.

    CRAWL_OPTIONS (after --) go to every crawl the API starts, e.g.
    `trawl serve -- --concurrency 32 --contact https://example.com/bot`.
    """
    from trawl.api import serve as run_api
    from trawl.crawls import Crawls

    if dsn is not None:
        StoreLocation(data_dir, dsn)  # checks the DSN's form
    run_api(Crawls(data_dir, dsn, crawl_options), host, port, token)


@cli.command()
@click.option("--hosts", type=int, default=6, help="Host names in the demo site.")
@click.option("--pages", type=int, default=60, help="Pages per host.")
@crawl_options
@click.pass_context
def demo(ctx: click.Context, /, hosts: int, pages: int, **params: Any) -> None:
    """Serve a generated multi-host site on loopback and crawl it."""
    from trawl.demo import run_demo

    values = _merged(ctx, params)
    if ctx.get_parameter_source("delay") != ParameterSource.COMMANDLINE:
        values["delay"] = 0.05
    if ctx.get_parameter_source("data_dir") != ParameterSource.COMMANDLINE:
        values["data_dir"] = Path("trawl-demo-data")
    values["fresh"] = True
    run_demo(hosts, pages, values, lambda seeds, v: crawl_and_report(build_config(seeds, v), v))


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group`` that is not itself a group."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and map every error to one line and an exit code; an
    interruption (Ctrl-C, SIGTERM, or a crawl cancelled by a second one) exits 130 and
    says how to resume."""
    try:
        try:
            cli.main(args=argv, prog_name="trawl", standalone_mode=False)
        except BaseExceptionGroup as group:
            # A task of the crawl failed: report the first failure itself.
            raise _first_leaf(group) from group
    except (click.exceptions.Abort, CrawlInterrupted, KeyboardInterrupt):
        interrupted()
    except click.ClickException as exc:
        click.echo(f"trawl: error: {exc.format_message()}", err=True)
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except TrawlError as exc:
        click.echo(f"trawl: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        if os.environ.get("TRAWL_DEBUG"):
            raise
        click.echo(f"trawl: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
