"""Prometheus metrics of a running crawl (``--metrics-port``), served at /metrics.

Counters move when the store commits what they count (the committed counters of each
transaction, as the summary's), so a scrape never shows a fetch that a kill -9 could
still take back. Latencies are histograms, so averages and quantiles come from them:
``trawl_fetch_duration_seconds`` per request, ``trawl_store_write_duration_seconds`` per
transaction. Levels (queues, requests in flight, unique URLs, the resolver's cache) are
read from the crawl when Prometheus scrapes, as are the ``--output`` uploads'
(``trawl_upload_*``: files and bytes uploaded, failures, conflicts, the files pending
and whether the store is refusing, trawl.outputs.uploader). Requests per host are kept
for every host but exposed for the ``TOP_HOSTS`` busiest only, so the label set stays
bounded.

With ``--events`` the sink's own figures (trawl.events.sink's ``SinkStats``: events held,
failed publications, whether it is up) are read at every scrape too.

``trawl_fetch_success_total`` counts every page fetched, its label ``fetch`` telling a
page's first fetch (``first``, the summary's ``fetched``) from a recrawl (``recrawl``,
the summary's ``recrawled``): a continuous crawl that only revisits pages still shows
its rate.

Every metric has its own registry (one per crawl, so tests can run several), plus the
process collector (``process_resident_memory_bytes`` and friends).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from trawl.errors import UsageError
from trawl.resource import Resource

if TYPE_CHECKING:
    from trawl.crawl.capacity import Capacity
    from trawl.events.sink import SinkStats
    from trawl.fetch.resolver import ResolverStats
    from trawl.frontier.queue import Frontier
    from trawl.outputs.uploader import UploadFigures
    from trawl.politeness.scheduler import HostScheduler

TOP_HOSTS = 20
"""Hosts listed in ``trawl_host_requests_total``: the busiest ones."""
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# Committed counters (trawl.ops.summary's names) and the metric each one feeds.
_FAILURE_PREFIX = "error:"
_FETCHES = {"fetched": "first", "recrawled": "recrawl"}
"""The counters of pages fetched, each with its ``fetch`` label."""
_COUNTED = {
    "retries": "retry",
    "redirects": "redirect",
    "robots_blocked": "robots_blocked",
    "duplicates": "duplicate_urls",
    "recrawled": "recrawl",
    "not_modified": "not_modified",
    "recrawl_changed": "recrawl_changed",
    "recrawl_unchanged": "recrawl_unchanged",
    "sitemaps_read": "sitemaps_read",
    "sitemap_urls": "sitemap_urls",
    "sitemap_errors": "sitemap_errors",
    "rendered": "rendered",
    "render_requests": "render_requests",
    "render_blocked_address": "render_blocked_address",
    "render_capped": "render_capped",
    "render_restarts": "render_restarts",
    "proxy_errors": "proxy_errors",
}


@dataclass(frozen=True, slots=True)
class Levels:
    """What the crawl holds right now, read at every scrape."""

    frontier_queue: int
    persistent_queue: int
    active_workers: int
    unique_urls: int
    hosts_backing_off: int
    dns_cache_hits: int
    dns_cache_misses: int
    hosts_held: int
    hosts_limit: int
    requests_limit: int
    turn_wait: float


def levels_of(
    scheduler: HostScheduler,
    frontier: Frontier,
    capacity: Capacity,
    unique_urls: int,
    stats: ResolverStats,
) -> Levels:
    """The levels of a crawl whose hosts ``scheduler`` holds, leased by ``frontier``
    within the limits of ``capacity``, with ``unique_urls`` known, and its DNS cache's
    ``stats``."""
    return Levels(
        frontier_queue=scheduler.buffered,
        persistent_queue=frontier.store_queued,
        active_workers=scheduler.inflight,
        unique_urls=unique_urls,
        hosts_backing_off=sum(1 for slot in scheduler.slots() if slot.backing_off()),
        dns_cache_hits=stats.cache_hits,
        dns_cache_misses=stats.cache_misses,
        hosts_held=frontier.holding,
        hosts_limit=capacity.hosts,
        requests_limit=capacity.requests,
        turn_wait=capacity.turn_wait,
    )


class _LevelsCollector(Collector):
    def __init__(self, read: Callable[[], Levels]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        levels = self._read()
        gauges = (
            ("trawl_frontier_queue_size", "URLs buffered in RAM", levels.frontier_queue),
            (
                "trawl_persistent_queue_size",
                "URLs queued or handed out in the store (all workers)",
                levels.persistent_queue,
            ),
            ("trawl_active_workers", "Fetches in flight in this process", levels.active_workers),
            ("trawl_unique_urls", "Unique in-scope URLs discovered (exact)", levels.unique_urls),
            (
                "trawl_hosts_backing_off",
                "Hosts held back by failures: circuit breaker or robots.txt retries",
                levels.hosts_backing_off,
            ),
            ("trawl_hosts_held", "Hosts this process holds leases on", levels.hosts_held),
            ("trawl_hosts_limit", "Hosts this process may hold now", levels.hosts_limit),
            (
                "trawl_requests_limit",
                "Requests in flight (with pages not yet stored) this process allows now",
                levels.requests_limit,
            ),
            (
                "trawl_turn_wait_seconds",
                "Mean seconds a host whose turn had come waited for a request slot (last second)",
                levels.turn_wait,
            ),
        )
        for name, doc, value in gauges:
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily(
            "trawl_dns_cache_hits", "Host name look-ups answered from the cache",
            value=levels.dns_cache_hits,
        )  # fmt: skip
        yield CounterMetricFamily(
            "trawl_dns_cache_misses", "Host name look-ups that asked DNS",
            value=levels.dns_cache_misses,
        )  # fmt: skip


class _HostsCollector(Collector):
    def __init__(self, tally: Tally[str]) -> None:
        self._tally = tally

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "trawl_host_requests",
            f"Requests sent per host, for the {TOP_HOSTS} busiest hosts",
            labels=["host"],
        )
        for host, count in self._tally.most_common(TOP_HOSTS):
            family.add_metric([host], count)
        yield family


class _UploadsCollector(Collector):
    def __init__(self, read: Callable[[], UploadFigures]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        figures = self._read()
        counters = (
            ("trawl_upload_files", "Output files uploaded to --output", figures.files),
            ("trawl_upload_bytes", "Bytes of output files uploaded to --output", figures.bytes),
            (
                "trawl_upload_failures",
                "Upload attempts the object store refused or could not be reached for",
                figures.failures,
            ),
            (
                "trawl_upload_conflicts",
                "Output files not uploaded: their key holds other content",
                figures.conflicts,
            ),
        )
        for name, doc, value in counters:
            yield CounterMetricFamily(name, doc, value=value)
        gauges = (
            ("trawl_upload_pending_files", "Closed output files waiting for upload",
             figures.pending),
            ("trawl_upload_pending_bytes", "Bytes of the files waiting for upload",
             figures.pending_bytes),
            ("trawl_upload_paused", "1 while the object store refuses uploads",
             int(figures.paused)),
        )  # fmt: skip
        for name, doc, value in gauges:
            yield GaugeMetricFamily(name, doc, value=value)


class _EventsCollector(Collector):
    def __init__(self, stats: SinkStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "trawl_events_published",
            "PageFetched events the sink acknowledged (a repeat after a crash counts again)",
            value=self._stats.published,
        )
        yield CounterMetricFamily(
            "trawl_event_publish_failures",
            "Event publications that failed (broker down or refusing) and were retried",
            value=self._stats.failures,
        )
        yield GaugeMetricFamily(
            "trawl_event_sink_up",
            "1 if the last publication reached the event sink, 0 while it is retried",
            value=int(self._stats.up),
        )


class CrawlMetrics:
    """The crawl's metrics; the engine reports to it, Prometheus reads it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._hosts: Tally[str] = Tally()
        counters = {
            "recrawl": "Fetches of pages fetched before",
            "not_modified": "Recrawls answered 304 Not Modified",
            "recrawl_changed": "Recrawls that found the page changed",
            "recrawl_unchanged": "Recrawls that found the page unchanged (a 304 included)",
            "sitemaps_read": "Sitemaps and sitemap indexes read",
            "sitemap_urls": "URLs listed by the sitemaps read",
            "sitemap_errors": "Sitemaps that could not be read",
            "retry": "Fetches scheduled again after a retryable failure",
            "redirect": "Redirect answers",
            "robots_blocked": "URLs robots.txt kept from being fetched",
            "duplicate_urls": "Discovered links to URLs already known",
            "rendered": "Pages rendered in headless Chromium",
            "render_requests": "Subresources rendered pages loaded through trawl's fetcher",
            "render_blocked_address": "Requests of rendered pages refused for their address",
            "render_capped": "Requests of rendered pages refused past --render-max-requests",
            "render_restarts": "Browser restarts past --render-memory",
            "proxy_errors": "Requests the proxy failed (--proxy), retries included",
        }
        self._counters = {
            key: Counter(f"trawl_{key}", doc, registry=self.registry)
            for key, doc in counters.items()
        }
        self._fetches = Counter(
            "trawl_fetch_success",
            "Pages fetched (any HTTP answer): a page's first fetch, or a recrawl",
            ["fetch"], registry=self.registry,
        )  # fmt: skip
        for label in _FETCHES.values():
            self._fetches.labels(label)
        self._failures = Counter(
            "trawl_fetch_failure", "Fetches given up, by reason", ["reason"],
            registry=self.registry,
        )  # fmt: skip
        self._bytes = Counter(
            "trawl_downloaded_bytes", "Body bytes read off the wire", registry=self.registry
        )
        self._fetch = Histogram(
            "trawl_fetch_duration_seconds", "Time from request to the end of the body",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self._store = Histogram(
            "trawl_store_write_duration_seconds", "Time one store transaction took",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.registry.register(_HostsCollector(self._hosts))
        self.registry.register(ProcessCollector(registry=None))

    def watch(self, levels: Callable[[], Levels]) -> None:
        """Read the crawl's levels from ``levels`` at every scrape."""
        self.registry.register(_LevelsCollector(levels))

    def watch_uploads(self, figures: Callable[[], UploadFigures]) -> None:
        """Read the ``--output`` uploads' figures from ``figures`` at every scrape."""
        self.registry.register(_UploadsCollector(figures))

    def watch_events(self, stats: SinkStats) -> None:
        """Read the event sink's ``stats`` at every scrape."""
        self.registry.register(_EventsCollector(stats))

    def committed(self, counters: Mapping[str, int]) -> None:
        """A transaction committed these counter increments."""
        for name, value in counters.items():
            if value <= 0:
                continue
            fetch = _FETCHES.get(name)
            if fetch is not None:
                self._fetches.labels(fetch).inc(value)
            metric = _COUNTED.get(name)
            if metric is not None:
                self._counters[metric].inc(value)
            elif name.startswith(_FAILURE_PREFIX):
                self._failures.labels(name[len(_FAILURE_PREFIX) :]).inc(value)

    def fetched(self, host: str, seconds: float, received: int) -> None:
        """A request to ``host`` ended after ``seconds`` with ``received`` body bytes."""
        self._hosts[host] += 1
        self._fetch.observe(seconds)
        self._bytes.inc(received)

    def stored(self, seconds: float) -> None:
        """A store transaction took ``seconds``."""
        self._store.observe(seconds)


class MetricsServer(Resource):
    """Serves a registry at http://HOST:PORT/metrics from a background thread."""

    def __init__(self, metrics: CrawlMetrics, port: int, host: str = "127.0.0.1") -> None:
        try:
            self._server, self._thread = start_http_server(
                port, addr=host, registry=metrics.registry
            )
        except OSError as exc:
            raise UsageError(f"--metrics-port {port}: {exc.strerror}") from exc
        self.port = self._server.server_port

    def close(self) -> None:
        """Stop serving; idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
