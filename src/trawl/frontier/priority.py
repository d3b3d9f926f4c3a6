"""URL priority and the frontier's order: high priority first, nothing starves.

A URL's priority is a number in [0, 1] made of what is known when it is queued:

- its depth: ``1 / (1 + depth)`` (a seed is 1, a page one hop away 0.5, ...);
- its sitemap ``<priority>`` when a sitemap listed it (0.5, the protocol's default,
  otherwise);
- its in-link level: ``LEVEL_STEP`` more at 8 and at 64 pages linking to it
  (trawl.frontier.inlinks), added later, when the level is reached.

Each host's queue in the store is ordered by a *rank*, smaller first::

    rank = queued_at - priority x horizon

where ``queued_at`` is when the URL joined the queue (for a recrawl, when it became due,
so the longer a page is overdue, the earlier it comes: staleness). A URL of priority p is
served before every URL queued more than ``(1 - p) x horizon`` seconds after it, however
high their priority, so a low-priority URL waits at most ``horizon`` seconds behind
later arrivals: the choice is biased towards high priority but never starves the rest.
The per-host politeness (which host may be asked next) is not touched: the rank only
orders the URLs of one host.
"""

from __future__ import annotations

DEFAULT_HORIZON = 3600.0
"""Seconds of queueing time that the whole priority range is worth (``--priority-horizon``)."""
SITEMAP_DEFAULT = 0.5
"""A URL's sitemap priority when no sitemap gave one (the protocol's default)."""
DEPTH_WEIGHT = 0.5
"""Share of the depth term in a URL's priority; the sitemap term has the rest."""
LEVEL_STEP = 0.15
"""Priority a URL gains per in-link level (trawl.frontier.inlinks)."""
MAX_LEVEL = 2
"""The highest in-link level: 64 in-links or more."""


def priority(depth: int, sitemap: float | None = None) -> float:
    """The priority of a URL found at ``depth`` hops (``sitemap``: a sitemap's priority)."""
    hint = SITEMAP_DEFAULT if sitemap is None else min(1.0, max(0.0, sitemap))
    return DEPTH_WEIGHT / (1 + depth) + (1 - DEPTH_WEIGHT) * hint


def rank(queued_at: float, value: float, horizon: float) -> float:
    """The queue rank of a URL of priority ``value`` queued at ``queued_at``."""
    return queued_at - value * horizon
