"""``trawl demo``: crawl a generated multi-host site served on loopback.

The site comes from the same deterministic generator the tests use, so the demo can
print its ground truth next to trawl's own count, on a machine with no internet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from trawl.demo.generator import generate_site
from trawl.demo.server import SiteServer
from trawl.extract.soft404 import PROBE_PREFIX
from trawl.ops.summary import Summary

CrawlFn = Callable[[tuple[str, ...], dict[str, Any]], Summary]


def run_demo(hosts: int, pages: int, values: dict[str, Any], crawl: CrawlFn) -> Summary:
    """Serve the demo site, crawl it with ``crawl`` and compare with the ground truth."""
    with SiteServer(lambda port: generate_site(port, hosts=hosts, pages_per_host=pages)) as server:
        site = server.site
        values = {
            **values,
            "resolve": server.resolve_map(),
            "allow_network": [str(n) for n in server.allow_networks()],
        }
        click.echo(
            f"demo site: {len(site.hosts)} hosts on loopback port {server.port}, "
            f"seed {site.seeds[0]}",
            err=True,
        )
        summary = crawl(site.seeds, values)
        requests = [r for r in server.requests if not r.path.startswith("/robots.txt")]
        probes = sum(1 for r in requests if r.path.startswith(PROBE_PREFIX))
        pages_requested = {
            (r.host, r.path) for r in requests if not r.path.startswith(PROBE_PREFIX)
        }
        verdict = "matches" if summary.discovered == len(site.ground_truth) else "DIFFERS"
        click.echo(
            f"ground truth: {len(site.ground_truth)} unique in-scope URLs, "
            f"{len(site.expected_fetches)} fetchable, {len(site.robots_blocked)} robots-blocked; "
            f"trawl counted {summary.discovered} ({verdict}); "
            f"server saw {len(pages_requested)} page requests and {probes} soft-404 probes"
        )
        return summary
