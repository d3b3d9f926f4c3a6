"""``--events nats://HOST:PORT/SUBJECT``: PageFetched events to NATS JetStream.

On connecting, the sink makes sure a stream takes the subject: a stream of the target's
name that exists is used as it is (its subjects must cover the subject); one that does
not is created with the subject, limits retention (``max_age``, ``max_bytes``), file
storage, one replica and the target's duplicate window. Each event is published with
its idempotency key as ``Nats-Msg-Id`` (JetStream drops a repeat within the window and
acknowledges it as a duplicate), ``Content-Type: application/json`` and
``Trawl-Event: PageFetched``, with the stream named as the expected one; the sink
returns once JetStream has acknowledged every event as stored (trawl.events.sink).

The client's own reconnection is off: a lost connection fails the publications in
flight, and the sink's back-off loop reconnects (and creates the stream again if it
went missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from trawl.content.events import PageFetched
from trawl.errors import TrawlError
from trawl.events.sink import CONTENT_TYPE, BrokerSink, event_body, idempotency_key
from trawl.events.target import NatsTarget

CONNECT_TIMEOUT = 2.0
ACK_TIMEOUT = 5.0
"""Seconds to wait for JetStream's acknowledgement of one message before trying again."""

log = logging.getLogger("trawl.events")


class NatsSink(BrokerSink):
    """Publishes to a NATS JetStream subject (see the module doc)."""

    def __init__(self, target: NatsTarget) -> None:
        super().__init__(target.shown, target.password or target.user)
        self.target = target
        self._client: Client | None = None
        self._js: JetStreamContext | None = None

    async def _connect(self) -> None:
        self._client = await nats.connect(
            servers=[self.target.server],
            name="trawl",
            allow_reconnect=False,
            connect_timeout=CONNECT_TIMEOUT,
            max_reconnect_attempts=1,
            reconnect_time_wait=0.1,
            error_cb=_quiet,
        )
        self._js = self._client.jetstream(timeout=ACK_TIMEOUT)
        await self._ensure_stream(self._js)

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        target = self.target
        try:
            info = await js.stream_info(target.stream)
        except NotFoundError:
            config = StreamConfig(
                name=target.stream,
                subjects=[target.subject],
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.FILE,
                discard=DiscardPolicy.OLD,
                max_age=target.max_age,
                max_bytes=target.max_bytes,
                duplicate_window=target.duplicate_window,
                num_replicas=1,
            )
            try:
                await js.add_stream(config)
            except nats.js.errors.BadRequestError as exc:
                raise TrawlError(
                    f"cannot create stream {target.stream} for {target.subject}: "
                    f"{exc.description} (name another with ?stream=NAME)"
                ) from exc
            log.info(
                "events: created JetStream stream %s for %s", target.stream, target.subject,
                extra={"stream": target.stream},
            )  # fmt: skip
            return
        subjects = info.config.subjects or []
        if not any(subject_matches(pattern, target.subject) for pattern in subjects):
            raise TrawlError(
                f"stream {target.stream} exists but does not take subject {target.subject} "
                f"(its subjects: {', '.join(subjects) or 'none'})"
            )

    def _connected(self) -> bool:
        return self._client is not None and self._client.is_connected

    async def _publish_one(self, event: PageFetched) -> None:
        assert self._js is not None
        headers = {
            "Nats-Msg-Id": idempotency_key(event),
            "Content-Type": CONTENT_TYPE,
            "Trawl-Event": "PageFetched",
        }
        await self._js.publish(
            self.target.subject, event_body(event), headers=headers, stream=self.target.stream
        )

    async def _disconnect(self) -> None:
        client, self._client, self._js = self._client, None, None
        if client is not None and not client.is_closed:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    await client.close()


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether the NATS subject ``pattern`` (``*`` one token, ``>`` the rest) takes
    ``subject``."""
    wanted = subject.split(".")
    for index, token in enumerate(pattern.split(".")):
        if token == ">":
            return len(wanted) > index
        if index >= len(wanted) or (token != "*" and token != wanted[index]):
            return False
    return len(pattern.split(".")) == len(wanted)


async def _quiet(exc: Exception) -> None:
    """The client's error callback: the sink reports failures itself, in one line."""
    log.debug("events: NATS client: %s", exc)
