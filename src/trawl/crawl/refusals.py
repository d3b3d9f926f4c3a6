"""How a URL that is not fetched is recorded: blocked (robots.txt disallows it, or is
unavailable) or refused (failed without a request: an operator's rule, an address
trawl must not connect to, a host that is unreachable or kept failing)."""

from __future__ import annotations

from trawl.politeness.scheduler import HostScheduler
from trawl.politeness.slots import HostSlot
from trawl.store.values import CommitBatch, Outcome, QueuedURL, State


def block(batch: CommitBatch, url: QueuedURL, reason: str | None = None) -> None:
    """Record ``url`` as blocked by robots.txt (``reason``: why, when not by a rule)."""
    batch.outcomes.append(Outcome(url.id, url.host_id, State.BLOCKED, url.attempts, error=reason))
    batch.count("robots_blocked")
    if reason is not None:
        batch.count(f"blocked:{reason}")


def refuse(batch: CommitBatch, url: QueuedURL, reason: str) -> None:
    """Record ``url`` as failed with the error ``reason``, without a request."""
    batch.outcomes.append(Outcome(url.id, url.host_id, State.FAILED, url.attempts, error=reason))
    batch.count("failed")
    batch.count(f"error:{reason}")


def block_queued(scheduler: HostScheduler, slot: HostSlot, batch: CommitBatch, reason: str) -> None:
    """Block every URL the host has buffered, for ``reason``."""
    for url in scheduler.drain(slot):
        block(batch, url, reason)


def refuse_queued(scheduler: HostScheduler, slot: HostSlot, batch: CommitBatch) -> None:
    """Refuse every URL the host has buffered, with the reason the host is refused for."""
    reason = slot.refused
    assert reason is not None
    for url in scheduler.drain(slot):
        refuse(batch, url, reason)


def give_up(
    scheduler: HostScheduler, slot: HostSlot, reason: str, batch: CommitBatch, *, count: str
) -> None:
    """Fail the host's buffered URLs, and every later one this run, with ``reason``."""
    slot.give_up(reason)
    batch.count(count)
    refuse_queued(scheduler, slot, batch)
