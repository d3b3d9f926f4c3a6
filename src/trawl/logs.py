"""trawl's log lines on stderr: plain text for people, or one JSON object a line
(``--log-format json``) for log collectors.

Everything trawl logs goes through the ``trawl`` logger: a line per fetch at debug level
(``fetch``: url, host, status, error, duration_ms, bytes), and warnings when a host backs
off (429/503, the circuit breaker) or is given up. Fields passed as ``extra`` become keys
of the JSON object. The database driver's own records join them at debug level
(`QUIET_LIBRARIES`).
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

FORMATS = ("text", "json")
QUIET_LIBRARIES = ("psycopg",)
"""Libraries whose records trawl shows only at debug level, errors apart: when a database
goes away the driver warns about each query it cancels and each connection it drops, and
trawl reports the loss itself in one line."""
LEVELS = ("debug", "info", "warning", "error")
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


def configure_logging(fmt: str = "text", level: str = "warning") -> None:
    """Send the ``trawl`` logger's records at ``level`` and above to stderr in ``fmt``, and
    those of `QUIET_LIBRARIES` at debug level, or errors only at any other level."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("trawl: %(levelname)s: %(message)s"))
    quiet = "DEBUG" if level == "debug" else "ERROR"
    for name, shown in (("trawl", level.upper()), *((lib, quiet) for lib in QUIET_LIBRARIES)):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(shown)
        logger.propagate = False
