"""The Store seam: what the engine needs from durable state, and the values it trades.

One schema, two engines (SQLite embedded now, PostgreSQL for many workers). The engine
only ever talks to this protocol. Every method is async so a networked engine fits; the
SQLite engine runs its blocking calls on one dedicated thread.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from trawl.content.neardup import Blocks
from trawl.extract.urls import url_hash

if TYPE_CHECKING:
    from trawl.content.stage import FetchedContent


@dataclass(frozen=True, slots=True)
class StorageKey:
    """Where a response record is: its file's final name (in the writer's directory),
    the offset of its gzip member and that member's length in bytes."""

    file: str
    offset: int
    length: int


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


CLAIM_COLUMNS = (
    "id, url, host_id, depth, redirect_hops, attempts, origin, kind, priority, fetched_at, "
    "status, etag, last_modified, change_hash, revisit_interval"
)
"""The ``urls`` columns a claim returns, in :class:`QueuedURL` field order."""


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
    at that generation (:func:`settle_fences`). Its links always go in: they are real
    links whatever became of the lease, and inserting them is idempotent.
    """

    outcomes: list[Outcome] = field(default_factory=list)
    new_urls: list[NewURL] = field(default_factory=list)
    hosts: list[HostUpdate] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    content: list[FetchedContent] = field(default_factory=list)
    """Fingerprinted pages, for the content stage (trawl.content.stage) before the commit."""
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

    def count(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name`` in this batch."""
        self.counters[name] = self.counters.get(name, 0) + amount

    def fence_hosts(self) -> list[int]:
        """The hosts whose lease generation the fenced parts must be checked against."""
        return sorted({part.fence.host_id for part in self.fenced if part.fence is not None})

    def __len__(self) -> int:
        return (
            len(self.outcomes) + len(self.new_urls) + len(self.hosts) + len(self.fenced)
            + len(self.lastmods) + len(self.inlinks) + len(self.shallower)
        )  # fmt: skip


def settle_fences(batch: CommitBatch, generations: Mapping[int, int]) -> int:
    """Move the fenced parts whose lease still holds (``generations``: each fenced host's
    current lease generation, read in the committing transaction) into the batch's own
    lists; drop the others and count them. Returns how many outcomes were refused."""
    refused = 0
    for part in batch.fenced:
        assert part.fence is not None
        if generations.get(part.fence.host_id) != part.fence.generation:
            refused += len(part.outcomes)
            continue
        batch.outcomes.extend(part.outcomes)
        batch.hosts.extend(part.hosts)
        for name, value in part.counters.items():
            batch.count(name, value)
    batch.fenced = []
    if refused:
        batch.count(STALE_COUNTER, refused)
    return refused


class ContentRows(NamedTuple):
    """The outcomes of a batch that the content tables record (schema migration 3)."""

    fingerprinted: list[Outcome]
    """Outcomes with a content hash: hash owners and the SimHash block index."""
    versions: list[Outcome]
    """Fetches to add to ``versions``: fingerprinted or archived, with a fetch time."""
    exact: set[int]
    """Pages the content stage found to duplicate another exactly: not block-indexed."""
    owners: list[tuple[str, int]]
    """Content hashes handed to a new owner, (content hash, url id), whose fetch with
    that hash the batch commits (an outcome refused with its lease hands nothing)."""


class HostTally(NamedTuple):
    """What a batch's outcomes change in one host's row."""

    requeued: int
    """URLs queued again (retries)."""
    answered: int
    """URLs DONE or FAILED: they count against the page budget."""
    returned: int
    """URLs no longer handed out."""
    blocked: int
    """URLs robots.txt kept from being fetched."""
    responses: int
    """Requests answered, and ``seconds`` they took together."""
    seconds: float


def host_tallies(outcomes: Sequence[Outcome]) -> dict[int, HostTally]:
    """Per host id, what ``outcomes`` change in its row."""
    tallies: dict[int, list[float]] = {}
    for o in outcomes:
        t = tallies.setdefault(o.host_id, [0, 0, 0, 0, 0, 0.0])
        t[0] += o.state == State.QUEUED
        t[1] += o.state in (State.DONE, State.FAILED)
        t[2] += 1
        t[3] += o.state == State.BLOCKED
        if o.elapsed is not None:
            t[4] += 1
            t[5] += o.elapsed
    return {
        host: HostTally(int(t[0]), int(t[1]), int(t[2]), int(t[3]), int(t[4]), t[5])
        for host, t in tallies.items()
    }


@dataclass(frozen=True, slots=True)
class HostFigures:
    """A host as the dashboard ranks it: its mean response time and blocked URLs."""

    name: str
    responses: int
    mean_seconds: float
    blocked: int


def content_rows(batch: CommitBatch) -> ContentRows:
    """Select what a batch adds to the content tables."""
    fingerprinted = [o for o in batch.outcomes if o.content_hash is not None]
    committed = {(o.content_hash, o.url_id) for o in fingerprinted}
    return ContentRows(
        fingerprinted=fingerprinted,
        versions=[
            o
            for o in batch.outcomes
            if o.fetched_at is not None and (o.storage is not None or o.content_hash is not None)
        ],
        exact={d.url_id for d in batch.duplicates if d.duplicate_of is not None},
        owners=[owner for owner in batch.owners if owner in committed],
    )


def version_row(o: Outcome) -> tuple[object, ...]:
    """The ``versions`` row of a fetch: url_id, fetched_at, status, content_hash, simhash,
    warc_file, warc_offset, warc_length."""
    key = o.storage
    return (
        o.url_id, o.fetched_at, o.status, o.content_hash, o.simhash,
        key.file if key else None, key.offset if key else None, key.length if key else None,
    )  # fmt: skip


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


def shallowest(found: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(id, depth) pairs with each id once, at its smallest depth, in id order."""
    best: dict[int, int] = {}
    for uid, depth in found:
        if best.get(uid, depth + 1) > depth:
            best[uid] = depth
    return sorted(best.items())


MIN_ID, MAX_ID = -(2**63), 2**63 - 1
"""The range of URL ids (signed 64-bit hashes)."""

_LINKED = ("duplicate_of", "near_duplicate_of", "alias_of")
"""The ``urls`` columns that hold another URL's id, exported as that URL."""


def export_columns(first: str, url_of: str) -> str:
    """The columns an export row is read from, in :func:`export_row`'s order, of
    ``urls`` as ``u``: ``first`` is the URL id's column, and ``url_of`` the engine's
    expression for the URL whose id is in a column (``{}``: that column)."""
    linked = ", ".join(url_of.format(f"u.{column}") for column in _LINKED)
    return (
        f"{first}, u.url, u.status, u.content_type, u.length, u.fetched_at, u.depth, "
        f"u.redirect_to, u.error, u.state, u.revalidated_at, u.revalidation, {linked}, "
        "u.canonical, u.content_hash"
    )


Row = tuple[Any, ...]


async def pages_by_id(
    fetch: Callable[[int], Awaitable[Sequence[Row]]],
) -> AsyncIterator[Sequence[Row]]:
    """Every row of a table keyed by URL id, a page at a time, in id order.

    ``fetch(start)`` returns the next page: rows whose first column is an id of at least
    ``start``, in id order; an empty page ends the walk.
    """
    start = MIN_ID
    while True:
        rows = await fetch(start)
        if not rows:
            return
        yield rows
        if rows[-1][0] == MAX_ID:
            return
        start = rows[-1][0] + 1


def export_row(row: Row) -> ExportRow:
    """An :class:`ExportRow` from the columns of :func:`export_columns`."""
    return ExportRow(
        url=row[1], status=row[2], content_type=row[3], length=row[4], fetched_at=row[5],
        depth=row[6], redirect_to=row[7], error=row[8], state=State(row[9]),
        revalidated_at=row[10], revalidation=row[11], duplicate_of=row[12],
        near_duplicate_of=row[13], alias_of=row[14], canonical=row[15], content_hash=row[16],
    )  # fmt: skip


class Store(Protocol):
    """Durable crawl state. Both engines pass tests/test_store_contract.py."""

    async def recover(self, worker: str | None = None) -> int:
        """Return CLAIMED URLs to QUEUED after a crash or stop, and end their hosts'
        leases; return how many. A shared store does so for the hosts leased to
        ``worker`` (all hosts when None); an exclusive one for every host."""
        ...

    async def lease_hosts(
        self, worker: str, limit: int, ttl: float, holding: Collection[int] = ()
    ) -> Sequence[Lease]:
        """Lease up to ``limit`` hosts with work to ``worker`` for ``ttl`` seconds, soonest
        eligible first, in one transaction that skips hosts other leasers hold locked.

        A host is free when it has no lease, its lease expired, or it is leased to
        ``worker`` but not among the hosts it is ``holding``, and no other worker holds
        a live lease on a host at the same address (its release is not
        committed yet; the new generation makes that release stale). Each lease raises
        the host's generation. A host taken over from an earlier lease gets its CLAIMED
        URLs back in the queue (nobody answers them any more).
        """
        ...

    async def claim_address(self, worker: str, host_id: int, generation: int, address: str) -> bool:
        """Record the address a leased host resolved to; False when another worker holds
        a live lease on a host at that address (the caller then gives the host back, and
        :meth:`lease_hosts` leaves hosts on an address held by another worker alone, so
        one server address is served by one worker at a time)."""
        ...

    async def renew_leases(
        self, worker: str, leases: Mapping[int, int], ttl: float
    ) -> frozenset[int]:
        """Extend ``{host_id: generation}`` leases of ``worker`` to ``ttl`` seconds from
        now; return the hosts still held (a lease lost to a newer generation is not)."""
        ...

    async def work_left(self) -> int:
        """URLs queued or handed out over all hosts: 0 when the crawl is finished."""
        ...

    async def iter_ids(self, batch: int = 100_000) -> AsyncIterator[Sequence[int]]:
        """Yield the ids of every known URL, in batches (to rebuild the Bloom filter)."""
        yield ()

    def queued_depths(self, batch: int = 100_000) -> AsyncIterator[Sequence[tuple[int, int]]]:
        """Yield (id, depth) of every URL waiting to be fetched (QUEUED or PARKED), in
        batches (to fill the seen-set's depth sketch)."""
        ...

    async def existing(self, ids: Sequence[int]) -> Mapping[int, str]:
        """Return ``{id: url}`` for the given ids that are already known."""
        ...

    async def host_ids(self, names: Sequence[str]) -> Mapping[str, int]:
        """Return ids for host names, creating hosts that are new."""
        ...

    async def claim(
        self, wanted: Mapping[int, int], now: float, worker: str | None = None
    ) -> Sequence[QueuedURL]:
        """For each ``{host_id: n}``, move up to n due QUEUED URLs to CLAIMED, lowest
        queue rank first (trawl.frontier.priority).

        With ``worker``, only hosts leased to that worker and not expired get any.

        Never more than the host's page budget leaves room for; once the host has used
        it all, its QUEUED URLs become PARKED (counted as ``over_host_page_budget``).
        """
        ...

    async def commit(self, batch: CommitBatch) -> CommitResult:
        """Apply a batch in one transaction; new URLs are inserted only if absent.

        Fenced parts are applied only if their host's lease is still at their
        generation; the others are refused and counted (:func:`settle_fences`).
        Releases come last.

        New URLs beyond their host's discovery budget are not inserted; they are counted
        as ``over_host_discovery_budget``.
        """
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

    async def robots(self, host_id: int) -> RobotsRecord | None:
        """The cached robots.txt of a host, if any."""
        ...

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

    async def soft404(self, host_id: int) -> Soft404Record | None:
        """The host's stored answer to the soft-404 probe, if it was probed."""
        ...

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

    async def host_figures(self, limit: int) -> tuple[list[HostFigures], list[HostFigures]]:
        """The ``limit`` slowest hosts (highest mean response time, with at least one
        response) and the ``limit`` hosts with the most robots-blocked URLs (at least one)."""
        ...

    async def url_page(
        self, start: int, limit: int, state: State | None = None
    ) -> list[tuple[int, ExportRow]]:
        """Up to ``limit`` URLs (in ``state``, if given) with ids from ``start`` on, in id
        order, each with its id (the next page starts after the last one)."""
        ...
