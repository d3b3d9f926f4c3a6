"""trawl's log lines on stderr: plain text for people, or one JSON object a line
(``--log-format json``) for log collectors.

Everything trawl logs goes through the ``trawl`` logger: a line per fetch at debug level
(``fetch``: url, host, status, error, duration_ms, bytes), and warnings when a host backs
off (429/503, the circuit breaker) or is given up. Fields passed as ``extra`` become keys
of the JSON object. The database driver's own records join them at debug level
(`QUIET_LIBRARIES`).

The periodic stats line of a crawl without a terminal (trawl.ops.progress) is the crawl's
progress rather than a message: its logger, `STATS_LOGGER`, shows it at every log level
(``--stats-interval 0`` turns it off), as ``trawl: HH:MM:SS fetched ...`` in text.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import time
from typing import Any, TextIO

FORMATS = ("text", "json")
QUIET_LIBRARIES = ("psycopg",)
"""Libraries whose records trawl shows only at debug level, errors apart: when a database
goes away the driver warns about each query it cancels and each connection it drops, and
trawl reports the loss itself in one line."""
SILENT_LIBRARIES = ("nats", "aio_pika", "aiormq")
"""Libraries whose records trawl shows only at debug level: the broker clients log each
failed connection as an error, and trawl.events reports an outage itself in one line."""
LEVELS = ("debug", "info", "warning", "error")
STATS_LOGGER = "trawl.stats"
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message"}


class JsonFormatter(logging.Formatter):
    """One JSON object a record: time (RFC 3339, UTC), level, logger, message, and the
    record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        return json.dumps(data, default=str)


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to ``sys.stderr`` as it is when a record comes: the live progress line
    (trawl.ops.progress) stands in for it meanwhile, to print log lines above itself."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """Ignored: the stream is always the current ``sys.stderr``."""


class TextFormatter(logging.Formatter):
    """``trawl: level: message``; a stats line as ``trawl: HH:MM:SS message`` (local time)."""

    def __init__(self) -> None:
        super().__init__("trawl: %(levelname)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if record.name == STATS_LOGGER:
            clock = time.strftime("%H:%M:%S", time.localtime(record.created))
            return f"trawl: {clock} {record.getMessage()}"
        return super().format(record)


def configure_logging(fmt: str = "text", level: str = "warning") -> None:
    """Send the ``trawl`` logger's records at ``level`` and above to stderr in ``fmt``,
    the stats lines at any level, and the records of `QUIET_LIBRARIES` at debug level, or
    errors only at any other level (`SILENT_LIBRARIES`: nothing at any other level)."""
    handler = StderrHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    quiet = "DEBUG" if level == "debug" else "ERROR"
    silent = "DEBUG" if level == "debug" else "CRITICAL"
    for name, shown in (
        ("trawl", level.upper()),
        *((lib, quiet) for lib in QUIET_LIBRARIES),
        *((lib, silent) for lib in SILENT_LIBRARIES),
    ):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(shown)
        logger.propagate = False
    # Its records reach the ``trawl`` logger's handler whatever that logger's level.
    logging.getLogger(STATS_LOGGER).setLevel(logging.INFO)
