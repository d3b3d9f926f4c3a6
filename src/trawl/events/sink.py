"""The event sink interface, the file sink, and what every broker sink shares.

The content stage (trawl.content.stage) hands each batch's PageFetched events to an
:class:`EventSink` and awaits :meth:`EventSink.publish` before the store commits the
batch: once it returns, every event is safe (flushed to the file, or acknowledged by the
broker as stored), so a kill -9 after it loses nothing, and one before it leaves the
pages uncommitted, fetched again on resume and published again under the same
idempotency key (:func:`idempotency_key`).

A broker sink (:class:`BrokerSink`) publishes a batch's events concurrently and awaits
every acknowledgement. What is not acknowledged (the broker is down, refuses, times
out) is published again after a back-off that doubles from `FIRST_BACKOFF` to
`MAX_BACKOFF`, reconnecting first when the connection is gone, for as long as it takes:
the committer waits, the crawl slows (back-pressure), and no event is dropped. An
outage is logged once when it begins and once when it ends, and counted in
:class:`SinkStats` (the metrics read it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trawl.content.events import EventWriter, PageFetched, event_json
from trawl.content.text_files import hex64, json_line
from trawl.errors import TrawlError, UsageError
from trawl.events.target import EventsTarget, NatsTarget
from trawl.resource import AsyncResource

FIRST_BACKOFF = 0.1
MAX_BACKOFF = 5.0
CONTENT_TYPE = "application/json"
EXTRA = "brokers"
"""The package extra that installs the broker clients."""

log = logging.getLogger("trawl.events")


@dataclass(slots=True)
class SinkStats:
    """What a sink has done so far (trawl.ops.metrics reads it)."""

    published: int = 0
    """Events acknowledged (a repeat after a crash counts again)."""
    failures: int = 0
    """Event publications that failed and were tried again."""
    up: bool = True
    """Whether the last attempt reached the sink."""


class EventSink(Protocol):
    """Where a crawl's events go."""

    stats: SinkStats

    @property
    def shown(self) -> str:
        """The sink as logs show it (no credentials)."""
        ...

    async def publish(self, events: Sequence[PageFetched]) -> None:
        """Deliver ``events``; return once every one of them is safe (see the module doc)."""
        ...

    async def close(self) -> None:
        """Release the sink; idempotent."""
        ...


def idempotency_key(event: PageFetched) -> str:
    """``"<urlHash>:<contentHash>"``: the same page with the same content gives the same
    key, so a consumer (or the broker's duplicate window) can drop a repeat."""
    return f"{hex64(event.url_id)}:{event.content_hash}"


def event_body(event: PageFetched) -> bytes:
    """A message's body: the event's JSON, the file's line without its newline."""
    return json_line(event_json(event))[:-1]


class FileSink(AsyncResource):
    """``--events FILE``: appends a line per event and flushes it to the operating system."""

    def __init__(self, path: Path) -> None:
        self.stats = SinkStats()
        self._writer = EventWriter(path)
        self.shown = str(path)

    async def publish(self, events: Sequence[PageFetched]) -> None:
        for event in events:
            self._writer.write(event)
        self._writer.flush()
        self.stats.published += len(events)

    async def close(self) -> None:
        self._writer.close()


class BrokerSink(AsyncResource):
    """A sink that publishes to a broker, with back-pressure (see the module doc).

    A subclass connects in :meth:`_connect` (one attempt; raise on failure), says whether
    its connection is still usable in :meth:`_connected`, publishes one event and awaits
    its acknowledgement in :meth:`_publish_one`, and drops its connection in
    :meth:`_disconnect`. The first connection is made when the sink opens: a broker that
    cannot be reached then is a one-line error, before the crawl starts.
    """

    def __init__(self, shown: str, password: str | None) -> None:
        """``shown`` names the sink in logs; ``password`` is kept out of them even where
        a client's error message would quote it."""
        self.stats = SinkStats()
        self.shown = shown
        self._password = password
        self._down_since: float | None = None

    async def _acquire(self) -> None:
        try:
            await self._connect()
        except Exception as exc:
            raise TrawlError(f"--events: cannot reach {self.shown}: {self._reason(exc)}") from exc

    async def publish(self, events: Sequence[PageFetched]) -> None:
        pending = list(events)
        delay = FIRST_BACKOFF
        while pending:
            failed, reason = await self._attempt(pending)
            self.stats.published += len(pending) - len(failed)
            if not failed:
                self._recovered()
                return
            self.stats.failures += len(failed)
            self._failing(reason)
            pending = failed
            await asyncio.sleep(delay)
            delay = min(MAX_BACKOFF, delay * 2)

    async def _attempt(self, events: list[PageFetched]) -> tuple[list[PageFetched], str]:
        """Publish ``events`` at once; those not acknowledged, and why the first failed."""
        try:
            if not self._connected():
                await self._disconnect()
                await self._connect()
        except Exception as exc:  # any failure to connect is retried
            return events, self._reason(exc)
        results = await asyncio.gather(
            *(self._publish_one(event) for event in events), return_exceptions=True
        )
        outcomes = zip(events, results, strict=True)
        failed = [event for event, result in outcomes if result is not None]
        reasons = [result for result in results if isinstance(result, BaseException)]
        for result in reasons:
            if not isinstance(result, Exception):
                raise result
        if reasons and self._connected():
            # Connected but refused (a stream or queue gone, a timeout): set it up again.
            await self._disconnect()
        return failed, self._reason(reasons[0]) if reasons else ""

    def _failing(self, reason: str) -> None:
        self.stats.up = False
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning(
                "events: cannot publish to %s (%s); the crawl waits and retries",
                self.shown, reason, extra={"events_sink": self.shown},
            )  # fmt: skip

    def _recovered(self) -> None:
        self.stats.up = True
        if self._down_since is not None:
            waited = time.monotonic() - self._down_since
            self._down_since = None
            log.warning(
                "events: publishing to %s again after %.1f s", self.shown, waited,
                extra={"events_sink": self.shown, "waited": round(waited, 3)},
            )  # fmt: skip

    async def close(self) -> None:
        await self._disconnect()

    def _reason(self, exc: BaseException) -> str:
        """``exc`` in a few words for a log line, never with the password."""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if self._password:
            text = text.replace(self._password, "***")
        name = type(exc).__name__
        return f"{name}: {text}" if text else name

    @abstractmethod
    async def _connect(self) -> None:
        """Connect and set up the stream or queue; raise if that fails."""

    @abstractmethod
    def _connected(self) -> bool:
        """Whether the connection is there and usable."""

    @abstractmethod
    async def _publish_one(self, event: PageFetched) -> None:
        """Publish ``event`` and await the broker's acknowledgement; raise if it fails."""

    @abstractmethod
    async def _disconnect(self) -> None:
        """Drop the connection, if any; idempotent."""


def open_sink(target: EventsTarget) -> FileSink | BrokerSink:
    """The sink of ``target``, to be opened with ``async with``; a broker client that is
    not installed is a one-line :class:`~trawl.errors.UsageError`."""
    if isinstance(target, Path):
        return FileSink(target)
    try:
        if isinstance(target, NatsTarget):
            from trawl.events.nats_sink import NatsSink

            return NatsSink(target)
        from trawl.events.amqp_sink import AmqpSink

        return AmqpSink(target)
    except ImportError as exc:
        raise UsageError(
            f"--events {target.shown}: the {exc.name} package is missing; "
            f"pip install 'trawl[{EXTRA}]'"
        ) from exc
