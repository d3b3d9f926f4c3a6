"""Option values to a crawl's configuration, for the command line and the library alike.

The command line merges its options with a ``--config`` file (trawl.cli.commands); the
library (:class:`trawl.Crawler`) takes the same options as keyword arguments, each
checked as a config file's value is (trawl.options). Both end in :func:`build_config`,
which validates the whole and makes the :class:`CrawlConfig`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from trawl.config import (
    Breaker,
    CrawlConfig,
    Freshness,
    LeasePolicy,
    Limits,
    Politeness,
    RenderConfig,
    ScopeConfig,
    Timeouts,
    default_user_agent,
    default_worker_id,
    parse_networks,
    parse_resolve,
)
from trawl.errors import UsageError
from trawl.events.target import parse_events
from trawl.extract.scope import ScopeMode
from trawl.extract.urls import NormalizeRules
from trawl.fetch.proxy import parse_proxy
from trawl.fetch.retry import RetryPolicy
from trawl.freshness.recrawl import RecrawlPolicy
from trawl.options import BY_NAME, OPTIONS, Kind, WrongType, toml_text
from trawl.outputs.bucket import check_client
from trawl.outputs.target import ObjectTarget, parse_output
from trawl.sites.requests import site_requests
from trawl.sites.rules import parse_sites
from trawl.store.location import DEFAULT_CRAWL, StoreLocation

COMMAND_LINE_ONLY = frozenset(
    {"seeds", "config", "handler", "json", "progress", "stats_interval", "log_format",
     "log_level"}
)  # fmt: skip
"""Options the library does not take as keywords: the seeds and handlers have their own
arguments, and the rest are about the command's terminal and logging, which a program
sets up itself."""
_LABEL = re.compile(r"[A-Za-z0-9_.-]+")


def build_config(seeds: tuple[str, ...], values: dict[str, Any]) -> CrawlConfig:
    """Turn merged option values into a validated :class:`CrawlConfig`; a value a
    policy refuses is a usage error, and so is a site setting (``values["sites"]``)
    that cannot be used, an environment variable it names included."""
    sites = parse_sites(values.get("sites") or {})
    site_requests(sites)
    try:
        config = _build_config(seeds, values)
    except ValueError as exc:
        raise UsageError(f"bad configuration value: {exc}") from exc
    return dataclasses.replace(config, sites=sites)


def _build_config(seeds: tuple[str, ...], values: dict[str, Any]) -> CrawlConfig:
    strip = values["strip_params"]
    rules = (
        NormalizeRules()
        if strip is None
        else NormalizeRules(
            strip_params=frozenset(p.strip().lower() for p in strip.split(",") if p.strip())
        )
    )
    resolve = values["resolve"] or ()
    if isinstance(resolve, dict):
        resolve = tuple(f"{host}={ip}" for host, ip in resolve.items())
    data_dir = Path(values["data_dir"])
    return CrawlConfig(
        seeds=seeds,
        data_dir=data_dir,
        scope=ScopeConfig(
            mode=ScopeMode(values["scope"]),
            include=tuple(values["include"] or ()),
            exclude=tuple(values["exclude"] or ()),
        ),
        politeness=Politeness(
            per_host=values["per_host"],
            delay=values["delay"],
            response_factor=values["response_factor"],
            max_delay=values["max_delay"],
            per_ip=values["per_ip"],
            per_ip_max=values["per_ip_max"],
        ),
        limits=Limits(
            max_pages=values["max_pages"],
            max_time=values["max_time"],
            max_body=values["max_body"],
            max_redirects=values["max_redirects"],
            max_links=values["max_links"],
            memory_queue=values["memory_queue"],
            expected_urls=values["expected_urls"],
            max_depth=values["max_depth"],
            max_pages_per_host=values["max_pages_per_host"],
            max_discovered_per_host=values["max_discovered_per_host"],
        ),
        timeouts=Timeouts(connect=values["connect_timeout"], total=values["timeout"]),
        retry=RetryPolicy(
            base=values["retry_base"], cap=values["retry_cap"], attempts=values["retry_attempts"]
        ),
        breaker=Breaker(
            threshold=values["breaker_threshold"],
            pause=values["breaker_pause"],
            trips=values["breaker_trips"],
        ),
        url_rules=rules,
        concurrency=values["concurrency"],
        parse_workers=values["parse_workers"],
        store_thread=values["store_thread"],
        user_agent=values["user_agent"] or default_user_agent(values["contact"]),
        resolve=parse_resolve(list(resolve)),
        allow_networks=parse_networks(list(values["allow_network"] or ())),
        nameservers=tuple(values["nameserver"] or ()),
        hosts_file=_path(values["hosts_file"]),
        ca_file=_path(values["ca_file"]),
        proxy=parse_proxy(values["proxy"]) if values["proxy"] else None,
        warc=bool(values["warc"]),
        warc_max_size=values["warc_max_size"],
        text=bool(values["text"]),
        text_near_duplicates=not values["text_skip_near_duplicates"],
        text_format=values["text_format"],
        events=parse_events(values["events"]) if values["events"] else None,
        output=_output(values),
        store=_store_location(values),
        fresh=bool(values["fresh"]),
        leases=LeasePolicy(
            worker=values["worker_id"] or default_worker_id(data_dir),
            ttl=values["lease_ttl"],
            max_hosts=values["max_hosts"],
        ),
        join=bool(values.get("join")),
        metrics_port=values["metrics_port"],
        freshness=Freshness(
            recrawl=RecrawlPolicy(
                minimum=values["recrawl_min"],
                maximum=values["recrawl_max"],
                initial=values["recrawl_initial"],
            ),
            horizon=values["priority_horizon"],
            sitemaps=bool(values["sitemaps"]),
            sitemaps_only=bool(values["sitemaps_only"]),
            continuous=bool(values["continuous"]),
            recrawl_pass=values.get("recrawl_pass"),
        ),
        honour_nofollow=not values["ignore_nofollow"],
        soft_404=not values["no_soft_404"],
        rng_seed=values["random_seed"],
        render=RenderConfig(
            mode=values["render"],
            include=tuple(values["render_include"] or ()),
            concurrency=values["render_concurrency"],
            timeout=values["render_timeout"],
            memory=values["render_memory"],
            max_requests=values["render_max_requests"],
            browser=Path(values["render_browser"]),
        ),
        handlers=parse_handlers(values.get("handler") or ()),
    )


def _store_location(values: dict[str, Any]) -> StoreLocation | None:
    """The ``--store`` crawl, or None for SQLite in the data dir."""
    dsn = values["store"]
    if dsn is None:
        return None
    return StoreLocation(Path(values["data_dir"]), dsn, values["crawl"] or DEFAULT_CRAWL)


def _output(values: dict[str, Any]) -> ObjectTarget | None:
    """The ``--output`` bucket, or None without one; the S3 client must be installed."""
    if not values["output"]:
        return None
    target = parse_output(
        values["output"],
        values["s3_endpoint"],
        keep_local=bool(values["keep_local"]),
        wait=values["upload_wait"],
    )
    check_client()
    return target


def _path(value: str | None) -> Path | None:
    """A path option's value; None when it is not given or empty."""
    return Path(value) if value else None


def library_values(options: Mapping[str, object]) -> dict[str, Any]:
    """Every option's value for a library crawl: the table's defaults, with ``options``
    (keyword arguments named as the option table names them) checked as a config file's
    values are; an unknown name or a value of the wrong kind is a :class:`UsageError`."""
    values: dict[str, Any] = {option.name: option.default for option in OPTIONS}
    for name, value in options.items():
        option = BY_NAME.get(name)
        if option is None or name in COMMAND_LINE_ONLY:
            raise UsageError(f"unknown crawl option {name!r}")
        if option.kind in (Kind.PATH, Kind.TARGET) and isinstance(value, os.PathLike):
            value = os.fspath(value)
        try:
            values[name] = option.from_config(value)
        except WrongType as exc:
            raise UsageError(f"option {name} must be {exc}, got {toml_text(value)}") from exc
    return values


def parse_handlers(given: Iterable[str]) -> tuple[tuple[str | None, str], ...]:
    """``--handler`` values, ``[LABEL=]MODULE:FUNCTION`` each, as (label, ref) pairs; a
    value of another form, or two handlers for one label, is a :class:`UsageError`."""
    found: dict[str | None, str] = {}
    for value in given:
        label: str | None = None
        ref = value
        head, sep, rest = value.partition("=")
        if sep and _LABEL.fullmatch(head):
            label, ref = head, rest
        module, colon, function = ref.rpartition(":")
        if not colon or not module or not function:
            raise UsageError(f"--handler {value!r} must be [LABEL=]MODULE:FUNCTION")
        if label in found:
            which = "pages without a label" if label is None else f"label {label!r}"
            raise UsageError(f"--handler: two handlers for {which}")
        found[label] = ref
    return tuple(found.items())
