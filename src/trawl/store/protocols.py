"""The store's roles: what each part of the crawl needs from durable state.

One schema, two engines (SQLite embedded, PostgreSQL for many workers); both pass one
contract suite (tests/test_store*.py). A caller names the role it uses, so its needs
are plain from its signature: the frontier queue leases hosts and claims their URLs,
the seen-set reads the known ids, the committer commits, the content stage reads the
content index, the robots gate and the soft-404 probe read host records, and the
reports read counters and rows. :class:`Store` is all of them, for the code that opens
a crawl and runs it. Every method is async so a networked engine fits; the SQLite
engine runs its blocking calls on one dedicated thread.

A lease method takes ``now``, the time leases are judged at: None is the store's own
clock (the process's wall clock for SQLite, the database server's for PostgreSQL, which
all workers share); a test gives it explicitly to run leases on a virtual clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import Protocol

from trawl.store.values import (
    ANY_URL,
    Blocks,
    CommitBatch,
    CommitResult,
    ExportRow,
    HostFigures,
    HostRow,
    ItemRow,
    Lease,
    QueuedURL,
    RobotsRecord,
    Soft404Record,
    UploadRecord,
    UrlFilter,
)


class Leases(Protocol):
    """Hosts leased to workers: one worker fetches from a host at a time."""

    async def recover(self, worker: str | None = None, *, now: float | None = None) -> int:
        """Return CLAIMED URLs to QUEUED after a crash or stop, and end their hosts'
        leases; return how many. A shared store does so for the hosts leased to
        ``worker`` (all hosts when None); an exclusive one for every host. ``now`` is
        the time leases are judged at (None: the store's clock)."""
        ...

    async def lease_hosts(
        self,
        worker: str,
        limit: int,
        ttl: float,
        holding: Collection[int] = (),
        *,
        crowded: Collection[str] = (),
        now: float | None = None,
    ) -> Sequence[Lease]:
        """Lease up to ``limit`` hosts with work to ``worker`` for ``ttl`` seconds, soonest
        eligible first, in one transaction that skips hosts other leasers hold locked.

        A host is free when it has no lease, its lease expired, or it is leased to
        ``worker`` but not among the hosts it is ``holding``, and no other worker holds
        a live lease on a host at the same address (its release is not
        committed yet; the new generation makes that release stale). Each lease raises
        the host's generation. A host taken over from an earlier lease gets its CLAIMED
        URLs back in the queue (nobody answers them any more). Hosts last seen at one of
        the ``crowded`` addresses (this worker holds as many hosts there as the address
        can serve) are left in the queue.

        ``now`` is the time expiry is judged at and the leases run from (None: the
        store's clock).
        """
        ...

    async def claim_address(
        self,
        worker: str,
        host_id: int,
        generation: int,
        address: str,
        *,
        now: float | None = None,
    ) -> bool:
        """Record the address a leased host resolved to; False when another worker holds
        a live lease on a host at that address (the caller then gives the host back, and
        :meth:`lease_hosts` leaves hosts on an address held by another worker alone, so
        one server address is served by one worker at a time). ``now`` is the time other
        leases are judged live at (None: the store's clock)."""
        ...

    async def renew_leases(
        self, worker: str, leases: Mapping[int, int], ttl: float, *, now: float | None = None
    ) -> frozenset[int]:
        """Extend ``{host_id: generation}`` leases of ``worker`` to ``ttl`` seconds from
        ``now`` (None: the store's clock); return the hosts still held (a lease lost
        to a newer generation is not)."""
        ...


class Frontier(Protocol):
    """The URLs waiting to be fetched: claimed, counted, queued again."""

    async def claim(
        self,
        wanted: Mapping[int, int],
        now: float,
        worker: str | None = None,
        budgets: Mapping[int, int] | None = None,
    ) -> Sequence[QueuedURL]:
        """For each ``{host_id: n}``, move up to n due QUEUED URLs to CLAIMED, lowest
        queue rank first (trawl.frontier.priority).

        With ``worker``, only hosts leased to that worker and not expired (by the
        store's clock) get any.

        Never more than the host's page budget leaves room for; once the host has used
        it all, its QUEUED URLs become PARKED (counted as ``over_host_page_budget``).
        ``budgets`` gives hosts a page budget of their own (their site's, trawl.sites),
        which applies where it is below the store's.
        """
        ...

    async def work_left(self) -> int:
        """URLs queued or handed out over all hosts: 0 when the crawl is finished."""
        ...

    async def requeue_due(
        self, now: float, limit: int, *, every: bool = False, sitemaps: bool = False
    ) -> int:
        """Queue again up to ``limit`` DONE or FAILED URLs due for a recrawl by ``now``,
        most overdue first, each ranked by its due time and priority; with ``every``,
        all of them whatever their due time; with ``sitemaps``, all the sitemaps (kind
        SITEMAP) whatever their due time, and nothing else. Returns how many. The
        pages leave their hosts' answered counts, so the page budget still holds."""
        ...

    async def next_due(self) -> float | None:
        """The earliest due time of a DONE or FAILED URL (None: none is waiting)."""
        ...

    async def requeue_failed(self, error: str) -> int:
        """Queue again every FAILED URL whose error is ``error``, as if new (no attempts,
        due now); returns how many. They leave the ``failed`` and ``error:ERROR``
        counters and their hosts' answered counts, so every count stays exact."""
        ...

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        """Return ids for host names, creating hosts that are new."""
        ...


class LeasedFrontier(Leases, Frontier, Protocol):
    """What the frontier queue uses: leases, and the claims made under them."""


class UrlLookup(Protocol):
    """The URLs the store knows, by id."""

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        """Return ``{id: url}`` for the given ids that are already known."""
        ...


class Known(UrlLookup, Protocol):
    """Every known URL id, to fill the seen-set on start (trawl.frontier.seen)."""

    async def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        """Yield the ids of every known URL, in batches (to rebuild the Bloom filter)."""
        yield ()

    def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        """Yield (id, depth) of every URL waiting to be fetched (QUEUED or PARKED), in
        batches (to fill the seen-set's depth sketch)."""
        ...


class Commits(Protocol):
    """The one write of a crawl: a batch in one transaction (trawl.crawl.commit)."""

    async def commit(self, batch: CommitBatch) -> CommitResult:
        """Apply a batch in one transaction; new URLs are inserted only if absent.

        Fenced parts are applied only if their host's lease is still at their
        generation; the others are refused and counted (:func:`settle_fences`).
        Releases come last.

        New URLs beyond their host's discovery budget are not inserted; they are counted
        as ``over_host_discovery_budget``.
        """
        ...


class ContentIndex(UrlLookup, Protocol):
    """What the content stage reads to decide duplicates (trawl.content.stage)."""

    async def content_owners(self, hashes: Sequence[str]) -> Mapping[str, int]:
        """``{content_hash: url_id}`` of the page owning each known hash: the first
        committed with it, or the page it was handed to (:attr:`CommitBatch.owners`)."""
        ...

    async def content_hashes(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        """The content hash of each given URL's latest fingerprinted fetch, if it has one."""
        ...

    async def canonicals(self, url_ids: Sequence[int]) -> Mapping[int, str]:
        """The URL each given page's ``<link rel=canonical>`` names, where it names one."""
        ...

    async def simhash_candidates(self, blocks: Blocks) -> list[tuple[int, int]]:
        """``(url_id, simhash)`` of every indexed page sharing a block with ``blocks``
        (see trawl.content.neardup), each once, earliest indexed first."""
        ...


class HostRecords(Protocol):
    """Host state kept with the crawl: the robots.txt cache and the soft-404 probe's answer."""

    async def robots(self, host_id: int) -> RobotsRecord | None:
        """The cached robots.txt of a host, if any."""
        ...

    async def soft404(self, host_id: int) -> Soft404Record | None:
        """The host's stored answer to the soft-404 probe, if it was probed."""
        ...


class Reports(Protocol):
    """What the status, export and dashboard read, and the crawl-level settings."""

    async def counters(self) -> Mapping[str, int]:
        """All counters, plus ``discovered`` (exact unique URLs) and ``queued``."""
        ...

    async def get_meta(self, key: str) -> str | None:
        """A crawl-level setting (seeds, start time)."""
        ...

    async def set_meta(self, key: str, value: str) -> None:
        """Store a crawl-level setting."""
        ...

    def export(self) -> AsyncIterator[ExportRow]:
        """Every known URL with its latest result."""
        ...

    def items(self) -> AsyncIterator[ItemRow]:
        """Every stored item (the items of each page's latest committed fetch), ordered
        by URL id, then by its place among the page's items."""
        ...

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        """The ``limit`` slowest hosts (highest mean response time, with at least one
        response) and the ``limit`` hosts with the most robots-blocked URLs (at least one)."""
        ...

    async def url_page(
        self, start: int, limit: int, wanted: UrlFilter = ANY_URL
    ) -> list[tuple[int, ExportRow]]:
        """Up to ``limit`` URLs that are as ``wanted`` (state, host, status, error) with
        ids from ``start`` on, in id order, each with its id (the next page starts after
        the last one)."""
        ...

    async def host_page(
        self, order: str, descending: bool, limit: int, offset: int, now: float
    ) -> tuple[int, list[HostRow]]:
        """How many hosts the crawl has, and ``limit`` of them from ``offset`` on, sorted
        by ``order`` (one of `HOST_ORDERS`) then by name, each with its state at wall
        clock time ``now`` (trawl.store.host_table)."""
        ...

    async def host_states(self, now: float) -> dict[str, int]:
        """How many hosts are in each state (`HOST_STATES`) at wall clock time ``now``;
        states no host is in are left out."""
        ...


class Uploads(Protocol):
    """Which output files an object store holds (trawl.outputs.uploader)."""

    async def uploaded(self, bucket: str, keys: Collection[str]) -> set[str]:
        """Those of ``keys`` recorded as uploaded to ``bucket``."""
        ...

    async def record_upload(self, record: UploadRecord) -> None:
        """Record an object the store confirmed (a second record of it is ignored)."""
        ...


class Store(
    Leases, Frontier, Known, Commits, ContentIndex, HostRecords, Reports, Uploads, Protocol
):
    """Durable crawl state: every role, for the code that opens and runs a crawl."""
