"""The one exception tree of trawl.

Every error a user can meet is a ``TrawlError``; each class carries the process exit code
the CLI uses, so the top level prints one line and exits without a traceback::

    TrawlError (exit 1)
    +-- UsageError (exit 2)        bad option, bad seed URL, bad config file
    +-- StoreError (exit 1)        the store cannot be opened or written
    +-- CrawlInterrupted (exit 130) stopped by SIGINT/SIGTERM after state was committed

Lower-layer errors (sqlite3, OSError, tomllib) are translated at the module boundary with
``raise ... from``.
"""

from __future__ import annotations


class TrawlError(Exception):
    """Base of every error trawl reports to a user."""

    exit_code = 1


class UsageError(TrawlError):
    """Bad usage or configuration: the user must change the command or config."""

    exit_code = 2


class StoreError(TrawlError):
    """The crawl store cannot be opened, read or written."""


class CrawlInterrupted(TrawlError):
    """The crawl stopped on a signal; its state is committed and it can be resumed."""

    exit_code = 130
