"""Prometheus metrics (``--metrics-port``): scraped over HTTP from a real crawl, they agree
with the crawl's summary and the server's log, counters only grow, and names follow
Prometheus conventions."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import yaml
from bench.servers import free_port
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import FAST, FAST_RETRY, is_page
from test_cli import assert_one_error_line, trawl
from test_freshness import fresh_site
from trawl.config import CrawlConfig, Freshness, Limits, Timeouts
from trawl.crawl.runner import build_engine
from trawl.demo import SiteServer, generate_site
from trawl.freshness.recrawl import RecrawlPolicy
from trawl.ops.metrics import CrawlMetrics, Levels

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

REQUIRED = {
    "trawl_frontier_queue_size": "gauge",
    "trawl_persistent_queue_size": "gauge",
    "trawl_active_workers": "gauge",
    "trawl_unique_urls": "gauge",
    "trawl_hosts_backing_off": "gauge",
    "trawl_fetch_success": "counter",
    "trawl_fetch_failure": "counter",
    "trawl_retry": "counter",
    "trawl_redirect": "counter",
    "trawl_robots_blocked": "counter",
    "trawl_duplicate_urls": "counter",
    "trawl_host_requests": "counter",
    "trawl_fetch_duration_seconds": "histogram",
    "trawl_store_write_duration_seconds": "histogram",
    "trawl_dns_cache_hits": "counter",
    "trawl_dns_cache_misses": "counter",
    "trawl_downloaded_bytes": "counter",
    "trawl_recrawl": "counter",
    "trawl_not_modified": "counter",
    "trawl_recrawl_changed": "counter",
    "trawl_sitemap_urls": "counter",
    "process_resident_memory_bytes": "gauge",
}


async def scrape(port: int) -> tuple[dict[str, str], Samples]:
    """Every metric family's type, and every sample, from /metrics."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.content_type == "text/plain"
        text = await response.text()
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return types, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def labelled(samples: Samples, name: str, label: str) -> Mapping[str, float]:
    return {dict(key)[label]: v for (sample, key), v in samples.items() if sample == name}


async def test_scraped_metrics_agree_with_the_summary_and_the_server(tmp_path: Path) -> None:
    port = free_port()
    with SiteServer(lambda p: generate_site(p, hosts=5, pages_per_host=20, seed=4)) as server:
        config = CrawlConfig(
            seeds=server.site.seeds,
            data_dir=tmp_path,
            resolve=server.resolve_map(),
            allow_networks=server.allow_networks(),
            politeness=FAST,
            retry=FAST_RETRY,
            timeouts=Timeouts(connect=2.0, total=10.0),
            parse_workers=0,
            metrics_port=port,
        )
        during: list[Samples] = []
        async with build_engine(config) as crawler:
            run = asyncio.create_task(crawler.run())
            while not run.done():
                during.append((await scrape(port))[1])
                await asyncio.sleep(0.02)
            summary = await run
            types, final = await scrape(port)
        page_fetches = sum(1 for r in server.requests if is_page(r.path))

    for name, kind in REQUIRED.items():
        assert types.get(name) == kind, name
    assert labelled(final, "trawl_fetch_success_total", "fetch") == {
        "first": summary.fetched,
        "recrawl": 0,
    }
    assert labelled(final, "trawl_fetch_failure_total", "reason") == summary.errors_by_class
    assert value(final, "trawl_retry_total") == summary.retries > 0
    assert value(final, "trawl_redirect_total") == summary.redirects > 0
    assert value(final, "trawl_robots_blocked_total") == summary.robots_blocked > 0
    assert value(final, "trawl_duplicate_urls_total") == summary.duplicates
    assert value(final, "trawl_unique_urls") == summary.discovered
    assert value(final, "trawl_fetch_duration_seconds_count") == page_fetches
    assert sum(labelled(final, "trawl_host_requests_total", "host").values()) == page_fetches
    assert value(final, "trawl_downloaded_bytes_total") > 0
    assert value(final, "trawl_store_write_duration_seconds_count") >= 1
    assert value(final, "trawl_dns_cache_misses_total") == summary.dns.get("cache_misses", 0)
    assert value(final, "trawl_dns_cache_hits_total") == summary.dns.get("cache_hits", 0)
    assert value(final, "process_resident_memory_bytes") > 10_000_000
    assert value(final, "trawl_frontier_queue_size") == value(final, "trawl_active_workers") == 0
    # Scraped while the crawl ran: counters never went back, and it was seen at work.
    assert len(during) >= 3
    for earlier, later in zip(during, [*during[1:], final], strict=True):
        for key, seen in earlier.items():
            if key[0].endswith(("_total", "_count", "_sum")):
                assert later.get(key, 0.0) >= seen, key
    assert any(value(s, "trawl_active_workers") > 0 for s in during)


def test_a_busy_metrics_port_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = trawl(
            "crawl", "http://a.test/", "--data-dir", str(tmp_path), "--metrics-port", str(port)
        )
    assert f"--metrics-port {port}" in assert_one_error_line(run)


def samples_of(metrics: CrawlMetrics) -> Samples:
    """Every sample ``metrics`` would serve, read from its text exposition."""
    samples: Samples = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_failures_are_counted_by_reason_and_only_once_committed() -> None:
    metrics = CrawlMetrics()
    metrics.committed({"fetched": 3, "error:timeout": 2, "error:http_503": 1, "failed": 3})
    metrics.committed({"error:timeout": 1, "discovered": 7, "retries": 0})
    samples = samples_of(metrics)
    assert labelled(samples, "trawl_fetch_failure_total", "reason") == {
        "timeout": 3,
        "http_503": 1,
    }
    assert value(samples, "trawl_fetch_success_total", fetch="first") == 3
    assert value(samples, "trawl_retry_total") == 0


def test_every_fetch_counts_as_a_success_labelled_first_or_recrawl() -> None:
    metrics = CrawlMetrics()
    metrics.committed({"fetched": 1, "recrawled": 5, "not_modified": 3, "recrawl_changed": 2})
    metrics.committed({"sitemap_urls": 40, "recrawled": 1, "recrawl_unchanged": 4})
    metrics.committed({"sitemaps_read": 2, "sitemap_errors": 1})
    samples = samples_of(metrics)
    assert labelled(samples, "trawl_fetch_success_total", "fetch") == {"first": 1, "recrawl": 6}
    assert value(samples, "trawl_recrawl_total") == 6
    assert value(samples, "trawl_not_modified_total") == 3
    assert value(samples, "trawl_recrawl_changed_total") == 2
    assert value(samples, "trawl_recrawl_unchanged_total") == 4
    assert value(samples, "trawl_sitemaps_read_total") == 2
    assert value(samples, "trawl_sitemap_urls_total") == 40
    assert value(samples, "trawl_sitemap_errors_total") == 1


def test_renders_and_their_requests_are_counted_once_committed() -> None:
    metrics = CrawlMetrics()
    metrics.committed({"fetched": 2, "rendered": 1, "render_requests": 3, "render_capped": 2})
    metrics.committed({"rendered": 1, "render_blocked_address": 1, "render_restarts": 1})
    samples = samples_of(metrics)
    assert value(samples, "trawl_rendered_total") == 2
    assert value(samples, "trawl_render_requests_total") == 3
    assert value(samples, "trawl_render_capped_total") == 2
    assert value(samples, "trawl_render_blocked_address_total") == 1
    assert value(samples, "trawl_render_restarts_total") == 1


def test_both_kinds_of_fetch_are_served_before_the_first_one() -> None:
    """A rate over the counter is 0, not missing, until something is fetched."""
    samples = samples_of(CrawlMetrics())
    assert labelled(samples, "trawl_fetch_success_total", "fetch") == {"first": 0, "recrawl": 0}


async def test_a_continuous_crawl_that_only_revisits_pages_keeps_its_fetch_rate(
    tmp_path: Path,
) -> None:
    """Once every page has had its first fetch, a continuous crawl goes on fetching: the
    success counter must keep rising, or the dashboard reads 0 pages/s and the stalled
    crawl alert fires on a healthy crawl."""
    port = free_port()
    policy = RecrawlPolicy(minimum=0.2, maximum=1.0, initial=0.3)
    with SiteServer(fresh_site) as server:
        config = CrawlConfig(
            seeds=server.site.seeds,
            data_dir=tmp_path,
            resolve=server.resolve_map(),
            allow_networks=server.allow_networks(),
            politeness=FAST,
            retry=FAST_RETRY,
            timeouts=Timeouts(connect=2.0, total=10.0),
            parse_workers=0,
            soft_404=False,
            metrics_port=port,
            limits=Limits(max_time=3.0),
            freshness=Freshness(recrawl=policy, continuous=True),
        )
        during: list[Samples] = []
        async with build_engine(config) as crawler:
            run = asyncio.create_task(crawler.run())
            while not run.done():
                during.append((await scrape(port))[1])
                await asyncio.sleep(0.05)
            summary = await run
            _, final = await scrape(port)
        page_fetches = sum(1 for r in server.requests if is_page(r.path))

    recrawled = summary.freshness["recrawled"]
    assert summary.fetched == 5
    assert recrawled >= 5
    assert labelled(final, "trawl_fetch_success_total", "fetch") == {
        "first": 5,
        "recrawl": recrawled,
    }
    assert value(final, "trawl_recrawl_total") == recrawled
    assert page_fetches == 5 + recrawled
    # From the scrape that first saw every page fetched, the total still rose.
    total = [sum(labelled(s, "trawl_fetch_success_total", "fetch").values()) for s in during]
    firsts = [value(s, "trawl_fetch_success_total", fetch="first") for s in during]
    settled = firsts.index(5)
    assert total[-1] > total[settled]


DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
_METRIC_NAME = re.compile(r"\b(?:trawl|process)_[a-z_]+")


def served_names() -> set[str]:
    """The sample names trawl serves (histograms as _bucket, _sum and _count)."""
    metrics = CrawlMetrics()
    metrics.watch(lambda: Levels(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0))
    metrics.fetched("a.test", 0.1, 10)
    metrics.committed({"error:timeout": 1})
    text = generate_latest(metrics.registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_grafana_dashboard_uses_only_served_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "trawl-dashboard.json").read_text())
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {name for expr in expressions for name in _METRIC_NAME.findall(expr)}
    assert used <= served_names(), used - served_names()
    # Every metric the issue asks operators to see is on the dashboard.
    assert {name.removesuffix("_bucket") for name in used} >= {
        "trawl_fetch_success_total", "trawl_fetch_failure_total", "trawl_frontier_queue_size",
        "trawl_persistent_queue_size", "trawl_active_workers", "trawl_unique_urls",
        "trawl_fetch_duration_seconds", "trawl_store_write_duration_seconds",
        "trawl_host_requests_total", "process_resident_memory_bytes", "trawl_recrawl_total",
        "trawl_not_modified_total", "trawl_recrawl_changed_total",
        "trawl_recrawl_unchanged_total", "trawl_sitemaps_read_total",
        "trawl_sitemap_urls_total", "trawl_sitemap_errors_total",
    }  # fmt: skip
    assert 'up{job="trawl"}' in " ".join(expressions)


def test_the_alert_rules_are_valid_and_use_served_metrics() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    (group,) = rules["groups"]
    alerts = {rule["alert"]: rule for rule in group["rules"]}
    assert set(alerts) == {
        "TrawlCrawlStalled", "TrawlHighErrorRate", "TrawlHostStuckInBackoff",
        "TrawlCrawlerDown", "TrawlNoCrawlerReporting",
    }  # fmt: skip
    for rule in alerts.values():
        assert {"expr", "for", "labels", "annotations"} <= set(rule)
        assert set(_METRIC_NAME.findall(rule["expr"])) <= served_names()
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    # A crawler that stops answering scrapes alerts, named by the job that scrapes it.
    (job,) = (scrape["job_name"] for scrape in config["scrape_configs"])
    assert alerts["TrawlCrawlerDown"]["expr"] == f'up{{job="{job}"}} == 0'
    assert alerts["TrawlNoCrawlerReporting"]["expr"].startswith("absent(trawl_")
