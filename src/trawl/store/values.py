"""The values the store trades with the crawl: URLs and their states, claims, outcomes,
leases, the batches a commit writes and what it reports back.

URL states::

    QUEUED  -> CLAIMED (taken into the in-memory buffer or in flight)
    CLAIMED -> DONE | FAILED | BLOCKED        (committed with the fetch outcome)
    CLAIMED -> QUEUED                         (retry later, or released on stop/resume)
    QUEUED  -> PARKED  (its host used up its page budget; not fetched, not queued)
    PARKED  -> QUEUED  (on start, when the host's page budget has room again)

Every outcome a commit carries is for a URL the store handed out with ``claim``.

Per-host budgets (engines take them when they are opened): a host never has more than
its page budget of URLs fetched or handed out for fetching, and never more than its
discovery budget of URLs stored; both hold exactly, also across stops and resumes,
because the counts live in the host's row and change in the same transaction as the
URLs they count.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from trawl.extract.urls import url_hash

BLOCKS = 4
"""Blocks per SimHash in the store's near-duplicate index (trawl.content.neardup)."""
BLOCK_BITS = 16
"""Bits per block."""

Blocks = tuple[int, int, int, int]
"""The four 16-bit blocks of a SimHash, block 0 (the lowest bits) first: the keys the
store's ``simhash_blocks`` table indexes a page under."""

_BLOCK_MASK = (1 << BLOCK_BITS) - 1
_MASK64 = (1 << 64) - 1


def blocks(simhash: int) -> Blocks:
    """The four 16-bit blocks of a 64-bit hash, given signed or unsigned."""
    value = simhash & _MASK64
    return (
        value & _BLOCK_MASK,
        (value >> 16) & _BLOCK_MASK,
        (value >> 32) & _BLOCK_MASK,
        (value >> 48) & _BLOCK_MASK,
    )


@dataclass(frozen=True, slots=True)
class StorageKey:
    """Where a response record is: its file's final name (in the writer's directory),
    the offset of its gzip member and that member's length in bytes; with an object
    store output (``--output``), the ``bucket`` and ``key`` the file is uploaded to."""

    file: str
    offset: int
    length: int
    bucket: str | None = None
    key: str | None = None


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """An output file the object store confirmed: the object (``bucket``, ``key``), the
    local file it was (its name in its output's directory), its size and SHA-256 (hex),
    the worker that put it and when (Unix time)."""

    bucket: str
    key: str
    file: str
    size: int
    sha256: str
    worker: str
    uploaded_at: float


HostBudget = Callable[[str], int | None]
"""A host's own page budget by its name (its site's, trawl.sites), None: the store's."""


def least_budget(store: int | None, own: int | None) -> int | None:
    """A host's page budget: the store's or its own, the tighter; None: unbounded."""
    if own is None or store is None:
        return store if own is None else own
    return min(store, own)


def within_budget(fetched: int, budget: int | None) -> bool:
    """Whether a host that made ``fetched`` fetches may make more under ``budget``."""
    return budget is None or fetched < budget


PAGE_BUDGET_COUNTER = "over_host_page_budget"
"""Counter of URLs held back (PARKED) because their host used up its page budget."""
PAGE_BUDGET_ERROR = "host_page_budget"
"""The ``error`` of a PARKED URL."""
DISCOVERY_BUDGET_COUNTER = "over_host_discovery_budget"
"""Counter of new URLs not stored because their host used up its discovery budget."""


class State(enum.IntEnum):
    """Where a URL is in its life."""

    QUEUED = 0
    CLAIMED = 1
    DONE = 2
    FAILED = 3
    BLOCKED = 4
    PARKED = 5


class NewURL(NamedTuple):
    """A discovered URL that passed validation and scope, ready for the seen-set.

    A named tuple, not a dataclass: a crawl makes tens of these per page, and they cross
    the pipe from extract workers, where a tuple pickles and loads several times faster.
    """

    id: int
    url: str
    host: str
    depth: int
    redirect_hops: int = 0
    origin: str | None = None
    """For a redirect target: the first URL of the redirect chain that led to it. For a
    sitemap: the URL under whose directory it may list pages besides its own (the root of
    the host whose robots.txt named it, or what the index that listed it carries)."""
    label: str | None = None
    """The label a page handler gave the link (trawl.handlers): the handler that
    extracts the page once it is fetched. Stored with a new URL; a URL already known
    keeps the label it was stored with. Kept last: the extract pipe sends the fields
    as a plain tuple."""


class Kind(enum.IntEnum):
    """What a stored URL is fetched for."""

    PAGE = 0
    SITEMAP = 1


class Listed(NamedTuple):
    """What a sitemap said of a URL it listed: the URL's kind (a page, or a child sitemap
    of an index) and the ``<priority>`` it gave (None: none)."""

    kind: Kind
    priority: float | None


@dataclass(frozen=True, slots=True)
class QueuedURL:
    """A URL claimed from the frontier, to be fetched, with what its last fetch left
    (all None for a URL never fetched): the validators for a conditional request, the
    change hash and status to tell a change (trawl.freshness.recrawl), and the revisit interval."""

    id: int
    url: str
    host_id: int
    depth: int
    redirect_hops: int
    attempts: int
    origin: str | None = None
    kind: int = Kind.PAGE
    priority: float = 0.5
    fetched_at: float | None = None
    status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    change_hash: int | None = None
    revisit_interval: float | None = None
    label: str | None = None
    """The label the URL was stored with (:attr:`NewURL.label`)."""

    @property
    def refetch(self) -> bool:
        """Whether the URL was answered before (this fetch is a recrawl): only an answer
        gives it a revisit interval, a failure does not."""
        return self.revisit_interval is not None

    @property
    def conditional(self) -> bool:
        """Whether this fetch is a conditional GET: the URL's stored answer is a 200 with
        validators, so a 304 confirms that answer. After any other answer (an error, a
        redirect) the validators would confirm a page the row no longer describes, so
        the page is asked for in full."""
        return (
            self.refetch
            and self.status == 200
            and (self.etag is not None or self.last_modified is not None)
        )


class Revalidation(enum.Enum):
    """What a recrawl's answer found, kept per URL with its time (``revalidation``,
    ``revalidated_at``)."""

    NOT_MODIFIED = "not_modified"
    """A 304 to a conditional GET: the stored answer stands."""
    UNCHANGED = "unchanged"
    """A full answer that tells no change (trawl.freshness.recrawl.revisit)."""
    CHANGED = "changed"
    """A full answer that tells a change."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one claimed URL. ``state`` QUEUED means retry at ``next_fetch_at``."""

    url_id: int
    host_id: int
    state: State
    attempts: int
    status: int | None = None
    content_type: str | None = None
    length: int | None = None
    fetched_at: float | None = None
    redirect_to: str | None = None
    error: str | None = None
    truncated: bool = False
    next_fetch_at: float = 0.0
    canonical: str | None = None
    content_hash: str | None = None
    """SHA-256 (hex) of the page's main text, or of its body when it has no main text;
    set only when content is fingerprinted (``--text``, ``--events``)."""
    simhash: int | None = None
    """Signed 64-bit SimHash of the main text (trawl.content.text), when it has one."""
    storage: StorageKey | None = None
    """Where the fetch was archived (``--warc``)."""
    elapsed: float | None = None
    """Seconds the fetch took (None: no request was sent for this outcome)."""
    etag: str | None = None
    last_modified: str | None = None
    """The response's validators, sent back on the next fetch (None: keep the stored)."""
    revisit_interval: float | None = None
    due_at: float | None = None
    """The page's revisit interval and when it is due again (trawl.freshness.recrawl)."""
    change_hash: int | None = None
    """What tells a change at the next fetch (trawl.freshness.recrawl; None: keep the stored)."""
    revalidation: Revalidation | None = None
    """What a recrawl's answer found, stored with ``fetched_at`` as the URL's
    ``revalidated_at`` (None: a first fetch, a retry or a failure, which keep the stored
    ones). :attr:`Revalidation.NOT_MODIFIED` writes only the state, the schedule, the
    revalidation and any validators the 304 sent: the stored answer (status, type,
    length, fetch time, canonical, alias, redirect, error, fingerprints) stands."""

    @property
    def not_modified(self) -> bool:
        """Whether the outcome confirms the stored answer (a 304 to a conditional GET)."""
        return self.revalidation is Revalidation.NOT_MODIFIED

    @property
    def revalidated(self) -> tuple[str | None, float | None]:
        """The ``revalidation`` and ``revalidated_at`` columns it writes (None: keep)."""
        if self.revalidation is None:
            return None, None
        return self.revalidation.value, self.fetched_at

    def alias_of(self) -> int | None:
        """The id of the URL the page's canonical link names, unless it names the page."""
        if self.canonical is None:
            return None
        target = url_hash(self.canonical)
        return None if target == self.url_id else target


@dataclass(frozen=True, slots=True)
class Duplicates:
    """What the content stage decided about one fingerprinted page: the url_id of the
    first page with the same content hash, and of the earliest page within
    :data:`~trawl.content.text.NEAR_DUPLICATE_BITS` bits of its SimHash (None: no such page)."""

    url_id: int
    duplicate_of: int | None
    near_duplicate_of: int | None


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """A host's cached robots.txt response."""

    status: int | None
    body: bytes
    fetched_at: float


@dataclass(frozen=True, slots=True)
class Soft404Record:
    """A host's answer to the soft-404 probe: the fingerprint of the page it serves for a
    path that cannot exist, or None when it answers such paths properly."""

    fingerprint: int | None
    checked_at: float


@dataclass(frozen=True, slots=True)
class HostUpdate:
    """Host state written with a commit: the robots.txt cache, the soft-404 probe's answer."""

    host_id: int
    robots: RobotsRecord | None = None
    soft404: Soft404Record | None = None


class Fence(NamedTuple):
    """The lease a write was made under: a host and the generation of its lease."""

    host_id: int
    generation: int


@dataclass(frozen=True, slots=True)
class Lease:
    """A host leased to one worker: nobody else fetches from it until the lease expires
    or is released. ``generation`` grows at every lease of the host; ``next_eligible_at``
    (wall clock) is when the host may be asked again, as the last owner left it."""

    host_id: int
    name: str
    generation: int
    next_eligible_at: float


@dataclass(frozen=True, slots=True)
class Release:
    """A worker gives a leased host back: the URLs it still holds return to the queue,
    and the next owner waits until ``next_eligible_at`` (wall clock)."""

    host_id: int
    generation: int
    next_eligible_at: float


class PageItems(NamedTuple):
    """The items a page handler yielded for one fetched URL: JSON object texts, in
    yield order, stored with the fetch time. Committed, they replace every item the URL
    had (a page fetched again, after a crash or in a recrawl, never adds duplicates)."""

    url_id: int
    fetched_at: float
    items: tuple[str, ...]
    url: str = ""
    """The page's URL, for the items files (trawl.handlers.item_files); the store keys
    the items by ``url_id`` alone."""


STALE_COUNTER = "stale_completions"
"""Counter of fenced writes (a page's result, a host's state) the store refused because
the host's lease had passed to a newer generation."""


@dataclass(slots=True)
class CommitBatch:
    """One transaction: outcomes, the links they discovered, host state and counters.

    The links of a page are in the same batch as the page's outcome, so a crash either
    keeps both or neither (the page is then fetched again and rediscovers them).

    A batch made under a host's lease carries its ``fence``. Merged into a larger batch
    (trawl.crawl.commit.merge), a fenced part keeps its outcomes, host updates and counters
    apart in ``fenced``; the store applies them only if the host's lease is still
    at that generation (trawl.store.rows.settle_fences). Its links always go in: they are real
    links whatever became of the lease, and inserting them is idempotent.

    Once committed, ``outcomes`` and ``items`` hold what the store applied: the fenced
    parts it accepted are in them, the refused ones dropped.
    """

    outcomes: list[Outcome] = field(default_factory=list)
    new_urls: list[NewURL] = field(default_factory=list)
    hosts: list[HostUpdate] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    duplicates: list[Duplicates] = field(default_factory=list)
    """The content stage's decisions, written with the outcomes."""
    owners: list[tuple[str, int]] = field(default_factory=list)
    """Content hashes handed to a new owner, (content hash, url id): the page an earlier
    owner names as its canonical (trawl.content.stage)."""
    releases: list[Release] = field(default_factory=list)
    """Leased hosts given back, after the rest of the batch; each release holds only if
    the host's lease is still at the release's generation."""
    fence: Fence | None = None
    fenced: list[CommitBatch] = field(default_factory=list)
    listed: dict[int, Listed] = field(default_factory=dict)
    """Sitemap entries among ``new_urls``, by URL id: inserted with their kind and the
    sitemap's priority (a plain link is a page of the default priority)."""
    inlinks: list[tuple[int, int]] = field(default_factory=list)
    """In-link levels reached, (url id, level) (trawl.frontier.inlinks): a URL below its level
    gains priority, and rank if it is queued."""
    lastmods: list[tuple[int, float]] = field(default_factory=list)
    """Sitemap change hints, (url id, lastmod): a page fetched before its lastmod is due
    at once."""
    shallower: list[tuple[int, int]] = field(default_factory=list)
    """Known URLs found again, (url id, depth), that may be stored deeper (the seen-set's
    depth sketch, trawl.frontier.seen): one not fetched yet (QUEUED, PARKED, or CLAIMED: handed
    out to a worker's buffer) and stored deeper takes the smaller depth, with the
    priority of that depth and, while queued, its queue rank, after the batch's new URLs
    are inserted. A URL already answered keeps its depth: its links were followed from
    there."""
    at: float = field(default_factory=time.time)
    """When the batch was made: new URLs are queued at this time (their queue rank)."""
    items: list[PageItems] = field(default_factory=list)
    """The items page handlers yielded, per fetched URL, written with the outcomes: each
    replaces the URL's stored items (the last of a URL in the batch wins)."""

    def count(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name`` in this batch."""
        self.counters[name] = self.counters.get(name, 0) + amount

    def fence_hosts(self) -> list[int]:
        """The hosts whose lease generation the fenced parts must be checked against."""
        return sorted({part.fence.host_id for part in self.fenced if part.fence is not None})

    def __len__(self) -> int:
        return (
            len(self.outcomes) + len(self.new_urls) + len(self.hosts) + len(self.fenced)
            + len(self.lastmods) + len(self.inlinks) + len(self.shallower) + len(self.items)
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class HostFigures:
    """A host as the dashboard ranks it: its mean response time and blocked URLs."""

    name: str
    responses: int
    mean_seconds: float
    blocked: int


HOST_STATES = ("broken", "backing off", "robots-blocked", "leased", "resting", "waiting", "idle")
"""A host's state as the console shows it, first match wins (trawl.store.host_table):
its URLs were given up (the circuit breaker, or an address not allowed); some of its
URLs wait for a retry after a failed answer; robots.txt blocked URLs and none was
answered; a worker holds its lease; it rests until its next turn; it has work and no
worker; it has none."""
HOST_ORDERS = ("name", "state", "queued", "fetched", "errors", "responseTime", "blocked")
"""What the host table may be sorted by."""


@dataclass(frozen=True, slots=True)
class HostRow:
    """One host of the console's host table."""

    name: str
    state: str
    """One of `HOST_STATES`."""
    queued: int
    """URLs queued or handed out."""
    fetched: int
    responses: int
    mean_seconds: float
    errors: int
    """URLs that failed."""
    blocked: int
    """URLs robots.txt blocked."""


@dataclass(frozen=True, slots=True)
class UrlFilter:
    """Which URLs a page of URLs holds (None: any)."""

    state: State | None = None
    host: str | None = None
    """A host as the crawl names it (``name`` or ``name:port``)."""
    status: int | None = None
    error: str | None = None


ANY_URL = UrlFilter()


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a commit changed: new URLs, hosts that got work, and every counter written.

    ``counters`` is the batch's counters plus ``discovered`` (rows really inserted),
    ``duplicates`` (candidates the store already had) and ``over_host_discovery_budget``
    (candidates left out by their host's discovery budget), exactly as stored.
    """

    inserted: int
    hosts_with_new_work: frozenset[int]
    counters: Mapping[str, int]
    released: frozenset[int] = frozenset()
    """Hosts whose release the batch carried (held or stale, the release is settled)."""
    handed_out: tuple[tuple[int, int, int], ...] = ()
    """(host id, url id, depth) of the batch's shallower URLs (:attr:`CommitBatch.shallower`)
    that are handed out (CLAIMED): the worker holding one lowers the depth of its copy
    before it fetches it."""


@dataclass(frozen=True, slots=True)
class ExportRow:
    """One URL as ``trawl export`` writes it."""

    url: str
    status: int | None
    content_type: str | None
    length: int | None
    fetched_at: float | None
    depth: int
    redirect_to: str | None
    error: str | None
    state: State
    revalidated_at: float | None = None
    revalidation: str | None = None
    """When a recrawl last answered and what it found (a :class:`Revalidation` value);
    None for a URL fetched once."""
    duplicate_of: str | None = None
    """The URL of the first page with the same content hash (None: none, or content not
    fingerprinted)."""
    near_duplicate_of: str | None = None
    """The URL of the earliest page within a few bits of its SimHash (trawl.content.neardup)."""
    alias_of: str | None = None
    """The known URL its ``<link rel=canonical>`` names, when that is another URL."""
    canonical: str | None = None
    """The URL its ``<link rel=canonical>`` names, known to the crawl or not."""
    content_hash: str | None = None
    """SHA-256 (hex) of its latest fingerprinted content (``--text``, ``--events``)."""


@dataclass(frozen=True, slots=True)
class ItemRow:
    """One stored item, as ``Reports.items`` reads it back: the URL whose page yielded
    it, the URL's id, its place among that page's items (0 first), when the page was
    fetched, and the item's JSON object text."""

    url: str
    url_id: int
    seq: int
    fetched_at: float
    data: str

    @property
    def key(self) -> str:
        """The item's stable key: the URL's hash as 16 hex digits (unsigned), a colon,
        and its sequence number, e.g. ``0af3...9c:2``. A page fetched again gives its
        items the same keys, in yield order."""
        return f"{self.url_id & _MASK64:016x}:{self.seq}"
