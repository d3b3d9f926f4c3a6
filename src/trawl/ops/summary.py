"""Crawl figures: one frozen value read by the progress bar, the summary and the tests.

The figures come from the store's counters, which are updated in the same transaction
as the results they count, so ``discovered`` is the exact number of unique in-scope URLs
and every other count matches what is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from trawl.store.values import STALE_COUNTER

STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")


LIMIT_COUNTERS = (
    "too_deep", "over_host_page_budget", "over_host_discovery_budget", "soft_404",
    "breaker_trips", "breaker_gave_up", "truncated", "fd_limit", "proxy_errors",
)  # fmt: skip
"""Counters of what a budget, a trap guard, the circuit breaker, the file-descriptor
limit (``fd_limit``: requests put off for want of a connection) or a failing proxy
(``proxy_errors``: requests the proxy failed, retries included) held back."""

CONTENT_COUNTERS = (
    "text_records", "events", "exact_duplicates", "near_duplicates", "unchanged",
    "noindex_pages", "nofollow_pages",
)  # fmt: skip
"""Counters of the content outputs and of pages' robots meta tags and headers."""

FRESHNESS_COUNTERS = (
    "recrawls_queued", "recrawled", "not_modified", "recrawl_changed", "recrawl_unchanged",
    "sitemaps_read", "sitemap_urls", "sitemap_errors", "sitemap_urls_refused",
)  # fmt: skip
"""Counters of recrawls (trawl.freshness.recrawl) and sitemaps (trawl.freshness.sitemaps)."""

RENDER_COUNTERS = (
    "rendered", "render_timeout", "render_failed", "render_requests", "render_blocked_address",
    "render_robots", "render_capped", "render_skipped", "render_refused",
    "render_failed_requests", "render_restarts",
)  # fmt: skip
"""Counters of renders and of their pages' requests (trawl.render)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """What a crawl has done so far."""

    state: str
    discovered: int
    fetched: int
    queued: int
    status: Mapping[str, int]
    robots_blocked: int
    off_scope: int
    excluded: int
    invalid: int
    invalid_by_reason: Mapping[str, int]
    links: int
    duplicates: int
    redirects: int
    redirect_limit: int
    retries: int
    failed: int
    errors_by_class: Mapping[str, int]
    requests: int
    dns: Mapping[str, int]
    limits: Mapping[str, int]
    content: Mapping[str, int]
    elapsed: float
    pages_per_second: float
    freshness: Mapping[str, int] = field(default_factory=dict)
    """Recrawl and sitemap counters (``recrawled``: fetches of pages fetched before,
    which ``fetched``, a count of unique pages, leaves out)."""
    fetched_this_run: int = 0
    """Pages this process fetched in the span ``elapsed`` covers (other workers' and
    earlier runs' fetches left out)."""
    robots_unavailable: int = 0
    """Of ``robots_blocked``, the URLs held back because their host's robots.txt was
    unavailable (a 5xx or a broken answer), not because its rules disallow them."""
    unreachable_hosts: int = 0
    """Hosts that gave no answer at all (no such name, no connection, no answer in time,
    a failed TLS handshake); their URLs count under ``failed`` by error class."""
    stale_completions: int = 0
    """Results the store refused because their host's lease had passed to another
    worker (trawl.store.rows.settle_fences): 0 in a crawl of one process."""
    render: Mapping[str, int] = field(default_factory=dict)
    """Pages rendered in headless Chromium and their requests (``RENDER_COUNTERS``; zeros
    left out)."""
    uploads: Mapping[str, int] = field(default_factory=dict)
    """This run's ``--output`` uploads (trawl.outputs.uploader.UploadFigures): ``files``
    and ``bytes`` uploaded, ``pending`` files (``pending_bytes``) left for the next
    start, ``failures`` (attempts the store refused or could not be reached for) and
    ``conflicts`` (keys holding other content); zeros left out."""

    @property
    def disallowed(self) -> int:
        """URLs that robots.txt rules disallow."""
        return self.robots_blocked - self.robots_unavailable

    @classmethod
    def from_counters(
        cls, counters: Mapping[str, int], *, state: str, elapsed: float, fetched_before: int = 0
    ) -> Summary:
        """Build the summary from store counters.

        ``elapsed`` is the time the figures cover; ``fetched_before`` is how many fetches
        happened outside it (earlier runs, other workers), so the rate counts only this
        span's pages.
        """
        fetched = counters.get("fetched", 0)
        rate = (fetched - fetched_before) / elapsed if elapsed > 0 else 0.0

        def prefixed(prefix: str) -> dict[str, int]:
            return {
                name[len(prefix) :]: value
                for name, value in sorted(counters.items())
                if name.startswith(prefix) and value
            }

        return cls(
            state=state,
            discovered=counters.get("discovered", 0),
            fetched=fetched,
            queued=counters.get("queued", 0),
            status={c: counters.get(f"status_{c}", 0) for c in STATUS_CLASSES},
            robots_blocked=counters.get("robots_blocked", 0),
            off_scope=counters.get("off_scope", 0),
            excluded=counters.get("excluded", 0),
            invalid=counters.get("invalid", 0),
            invalid_by_reason=prefixed("invalid:"),
            links=counters.get("links", 0),
            duplicates=counters.get("duplicates", 0),
            redirects=counters.get("redirects", 0),
            redirect_limit=counters.get("redirect_limit", 0),
            retries=counters.get("retries", 0),
            failed=counters.get("failed", 0),
            errors_by_class=prefixed("error:"),
            requests=counters.get("requests", 0),
            dns=prefixed("dns_"),
            limits={name: counters[name] for name in LIMIT_COUNTERS if counters.get(name)},
            content={name: counters[name] for name in CONTENT_COUNTERS if counters.get(name)},
            freshness={name: counters[name] for name in FRESHNESS_COUNTERS if counters.get(name)},
            elapsed=round(elapsed, 3),
            pages_per_second=round(rate, 1),
            fetched_this_run=fetched - fetched_before,
            robots_unavailable=counters.get("blocked:robots_unavailable", 0),
            unreachable_hosts=counters.get("unreachable_hosts", 0),
            stale_completions=counters.get(STALE_COUNTER, 0),
            render={name: counters[name] for name in RENDER_COUNTERS if counters.get(name)},
        )

    def to_json(self) -> str:
        """The summary as one JSON object."""
        return json.dumps(asdict(self), sort_keys=True)

    def lines(self) -> list[str]:
        """The summary as aligned text lines for a terminal."""
        status = ", ".join(f"{c} {n}" for c, n in self.status.items() if n) or "none"
        invalid = ", ".join(f"{r} {n}" for r, n in self.invalid_by_reason.items())
        errors = ", ".join(f"{r} {n}" for r, n in self.errors_by_class.items())
        rows = [
            ("state", self.state),
            ("unique URLs discovered", str(self.discovered)),
            ("fetched", f"{self.fetched} ({self.pages_per_second:.1f} pages/s)"),
            ("by status", status),
            ("queued", str(self.queued)),
            ("blocked by robots.txt", str(self.disallowed)),
            ("robots.txt unavailable", f"{self.robots_unavailable} URLs held back"),
            ("hosts unreachable", str(self.unreachable_hosts)),
            ("off-scope links", str(self.off_scope)),
            ("excluded links", str(self.excluded)),
            ("invalid links", f"{self.invalid}" + (f" ({invalid})" if invalid else "")),
            ("links checked", str(self.links)),
            ("duplicates skipped", str(self.duplicates)),
            ("redirects", f"{self.redirects} ({self.redirect_limit} over the hop limit)"),
            ("retries", str(self.retries)),
            ("failed", f"{self.failed}" + (f" ({errors})" if errors else "")),
            ("requests sent", str(self.requests)),
            ("stale results refused", str(self.stale_completions)),
            ("limits", ", ".join(f"{n} {v}" for n, v in self.limits.items()) or "-"),
            ("content", ", ".join(f"{n} {v}" for n, v in self.content.items()) or "-"),
            ("freshness", ", ".join(f"{n} {v}" for n, v in self.freshness.items()) or "-"),
            ("DNS", ", ".join(f"{n} {v}" for n, v in self.dns.items()).replace("_", " ") or "-"),
            ("elapsed", f"{self.elapsed:.1f} s"),
        ]
        if self.render:
            render = ", ".join(f"{n} {v}" for n, v in self.render.items()).replace("_", " ")
            rows.insert(-2, ("rendering", render))
        if self.uploads:
            uploads = ", ".join(f"{n} {v}" for n, v in self.uploads.items()).replace("_", " ")
            rows.insert(-2, ("uploads", uploads))
        width = max(len(name) for name, _ in rows)
        return [f"{name:<{width}}  {value}" for name, value in rows]
