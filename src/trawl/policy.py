"""The crawl's policy, kept in the store so that every worker obeys the same one.

``trawl crawl`` writes it (meta key ``policy``, JSON) each time it starts; ``trawl
worker`` reads it and takes from its own command line only what belongs to the machine:
concurrency, extract workers, memory, the resolver and the networks it may reach, the
output files, how it holds leases, and how long this run may last.

In the policy: seeds, scope, politeness (per host, per address, delays), the page and
discovery budgets, depth and size caps, timeouts, retries, the circuit breaker, URL
normalisation, the User-Agent, nofollow, the soft-404 probe, and freshness (revisit
intervals, the priority horizon, sitemaps, continuous crawling) and the per-site settings
(trawl.sites: where each secret comes from, never a secret itself); a run's one recrawl
pass (``trawl recrawl``) is its own, and so are the secrets, which each process reads
from its own environment.

A ``trawl crawl`` that resumes must name the stored crawl's seeds and scope
(:func:`other_crawl`); every other option may change from one run to the next. The
networks a run may fetch from are kept beside the policy (``NETWORKS_KEY``), so that a
run that may reach more of them can give the URLs refused for their address another go.
The page handlers are kept beside it too (``HANDLERS_KEY``): ``trawl worker`` runs them
unless its own ``--handler`` options name another place for the same labels (a module
path of its machine).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection
from typing import Any

from trawl.config import (
    Breaker,
    CrawlConfig,
    Freshness,
    Limits,
    Politeness,
    ScopeConfig,
    Timeouts,
)
from trawl.errors import StoreError, UsageError
from trawl.extract.scope import ScopeMode
from trawl.extract.urls import NormalizeRules, Rejection, normalize
from trawl.fetch.retry import RetryPolicy
from trawl.freshness.recrawl import RecrawlPolicy
from trawl.sites.rules import Sites

POLICY_KEY = "policy"
"""The ``meta`` key the policy is stored under."""
NETWORKS_KEY = "allowed_networks"
"""The ``meta`` key of the networks the last ``trawl crawl`` might fetch from beyond the
public ones (``--allow-network``, :func:`networks_json`)."""
HANDLERS_KEY = "handlers"
"""The ``meta`` key of the page handlers of the last ``trawl crawl`` (:func:`handlers_json`)."""
_LOCAL_LIMITS = ("max_time", "memory_queue", "expected_urls", "bloom_error")
"""Limits that belong to one worker's run, not to the crawl."""


def policy_json(config: CrawlConfig) -> str:
    """The crawl-wide part of ``config``, as stored."""
    limits = dataclasses.asdict(config.limits)
    for name in _LOCAL_LIMITS:
        del limits[name]
    rules, fresh = config.url_rules, config.freshness
    data: dict[str, Any] = {
        "seeds": list(config.seeds),
        "scope": {
            "mode": config.scope.mode.value,
            "include": list(config.scope.include),
            "exclude": list(config.scope.exclude),
        },
        "politeness": dataclasses.asdict(config.politeness),
        "limits": limits,
        "timeouts": dataclasses.asdict(config.timeouts),
        "retry": {
            "base": config.retry.base,
            "cap": config.retry.cap,
            "attempts": config.retry.attempts,
            "statuses": sorted(config.retry.statuses),
        },
        "breaker": dataclasses.asdict(config.breaker),
        "url_rules": {
            "strip_params": sorted(rules.strip_params),
            "strip_prefixes": list(rules.strip_prefixes),
            "max_length": rules.max_length,
            "max_path_depth": rules.max_path_depth,
        },
        "user_agent": config.user_agent,
        "honour_nofollow": config.honour_nofollow,
        "soft_404": config.soft_404,
        "sites": config.sites.to_json(),
        "freshness": {
            "recrawl": dataclasses.asdict(fresh.recrawl),
            "horizon": fresh.horizon,
            "sitemaps": fresh.sitemaps,
            "sitemaps_only": fresh.sitemaps_only,
            "continuous": fresh.continuous,
        },
    }
    return json.dumps(data, sort_keys=True)


def with_policy(config: CrawlConfig, stored: str) -> CrawlConfig:
    """``config`` (a worker's local options) under the stored crawl policy."""
    try:
        data = json.loads(stored)
        local = {name: getattr(config.limits, name) for name in _LOCAL_LIMITS}
        retry, rules, scope = data["retry"], data["url_rules"], data["scope"]
        return dataclasses.replace(
            config,
            seeds=tuple(str(seed) for seed in data["seeds"]),
            scope=ScopeConfig(
                mode=ScopeMode(scope["mode"]),
                include=tuple(scope["include"]),
                exclude=tuple(scope["exclude"]),
            ),
            politeness=Politeness(**data["politeness"]),
            limits=Limits(**data["limits"], **local),
            timeouts=Timeouts(**data["timeouts"]),
            retry=RetryPolicy(
                base=retry["base"],
                cap=retry["cap"],
                attempts=retry["attempts"],
                statuses=frozenset(retry["statuses"]),
            ),
            breaker=Breaker(**data["breaker"]),
            url_rules=NormalizeRules(
                strip_params=frozenset(rules["strip_params"]),
                strip_prefixes=tuple(rules["strip_prefixes"]),
                max_length=rules["max_length"],
                max_path_depth=rules["max_path_depth"],
            ),
            user_agent=str(data["user_agent"]),
            honour_nofollow=bool(data["honour_nofollow"]),
            soft_404=bool(data["soft_404"]),
            freshness=_freshness(data.get("freshness"), config.freshness),
            sites=Sites.from_json(data.get("sites")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"the crawl's stored policy is unreadable ({exc!r})") from exc


def other_crawl(config: CrawlConfig, stored: str) -> str | None:
    """What the crawl of the stored policy ``stored`` is (its first seed, how many
    more, its scope), when ``config`` names other seeds or another scope; None when it
    names the same. Seeds compare normalised, as a set; the scope by its mode and its
    include and exclude patterns, each as a set."""
    try:
        data = json.loads(stored)
        seeds = [str(seed) for seed in data["seeds"]]
        scope = data["scope"]
        mode = str(scope["mode"])
        include = frozenset(str(p) for p in scope["include"])
        exclude = frozenset(str(p) for p in scope["exclude"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"the crawl's stored policy is unreadable ({exc!r})") from exc
    rules = config.url_rules
    if (
        _seed_set(seeds, rules) == _seed_set(config.seeds, rules)
        and mode == config.scope.mode.value
        and include == frozenset(config.scope.include)
        and exclude == frozenset(config.scope.exclude)
    ):
        return None
    more = len(seeds) - 1
    what = seeds[0] if seeds else "no seed"
    if more:
        what += f" and {more} more seed{'s' if more > 1 else ''}"
    details = [f"scope {mode}"]
    details += [f"include {p!r}" for p in sorted(include)]
    details += [f"exclude {p!r}" for p in sorted(exclude)]
    return f"{what} ({', '.join(details)})"


def _seed_set(seeds: Collection[str], rules: NormalizeRules) -> frozenset[str]:
    """``seeds`` normalised as a crawl normalises them (one that cannot be stays as
    written)."""
    found: set[str] = set()
    for seed in seeds:
        url = normalize(seed, None, rules)
        found.add(seed if isinstance(url, Rejection) else url)
    return frozenset(found)


def networks_json(config: CrawlConfig) -> str:
    """The networks ``config`` may fetch from beyond the public ones, as stored."""
    return json.dumps(sorted(str(network) for network in config.allow_networks))


def _freshness(stored: dict[str, Any] | None, local: Freshness) -> Freshness:
    """The stored freshness policy (a crawl stored before there was one keeps the
    defaults) with this run's own recrawl pass."""
    if stored is None:
        return Freshness(recrawl_pass=local.recrawl_pass)
    return Freshness(
        recrawl=RecrawlPolicy(**stored["recrawl"]),
        horizon=float(stored["horizon"]),
        sitemaps=bool(stored["sitemaps"]),
        sitemaps_only=bool(stored["sitemaps_only"]),
        continuous=bool(stored["continuous"]),
        recrawl_pass=local.recrawl_pass,
    )


def handlers_json(config: CrawlConfig) -> str:
    """The page handlers of ``config``, as stored."""
    return json.dumps([list(pair) for pair in config.handlers])


def joined_handlers(config: CrawlConfig, stored: str | None) -> CrawlConfig:
    """``config`` (a worker's) with the stored handlers ``stored``, unless it names its
    own; its own must be for the same labels (every worker runs the same handlers)."""
    try:
        pairs = tuple((label, str(ref)) for label, ref in json.loads(stored or "[]"))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"the crawl's stored handlers are unreadable ({exc!r})") from exc
    if not config.handlers:
        return dataclasses.replace(config, handlers=pairs)
    if {label for label, _ in config.handlers} != {label for label, _ in pairs}:
        raise UsageError(
            "--handler must name the labels the crawl's handlers have: "
            + (", ".join(sorted(_label_text(label) for label, _ in pairs)) or "none")
        )
    return config


def _label_text(label: str | None) -> str:
    return "(no label)" if label is None else label
