"""``--events amqp://HOST:PORT/VHOST?exchange=...``: PageFetched events to RabbitMQ.

On connecting, the sink opens a channel in publisher-confirm mode and declares its
topology: a durable topic exchange (``exchange``), a durable queue (``queue``) and the
binding of the queue to the exchange with ``routing_key``. An exchange or queue that
exists with other settings (another exchange type, a quorum queue) is used as it is.
Each event is published to the exchange with the routing key, persistent
(``delivery_mode`` 2), ``mandatory`` (a message no queue takes comes back and counts as
failed, so it is published again once the binding is back, never silently lost), with
its idempotency key as ``message_id``, ``content_type`` ``application/json`` and
``type`` ``PageFetched``; the sink returns once the broker has confirmed every event
(trawl.events.sink).

RabbitMQ has no duplicate window: a repeat after a crash reaches the queue, and the
consumer drops it by its ``message_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    DeliveryMode,
)
from pamqp.commands import Basic

from trawl.content.events import PageFetched
from trawl.events.sink import CONTENT_TYPE, BrokerSink, event_body, idempotency_key
from trawl.events.target import AmqpTarget

CONNECT_TIMEOUT = 5.0
CONFIRM_TIMEOUT = 10.0
"""Seconds to wait for the broker's confirmation of one message before trying again."""


class NotConfirmed(Exception):
    """The broker answered a publication with something other than an ack."""


class AmqpSink(BrokerSink):
    """Publishes to a RabbitMQ exchange with publisher confirms (see the module doc)."""

    def __init__(self, target: AmqpTarget) -> None:
        super().__init__(target.shown, target.password)
        self.target = target
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._exchange: AbstractExchange | None = None

    async def _connect(self) -> None:
        target = self.target
        self._connection = await aio_pika.connect(
            host=target.host,
            port=target.port,
            login=target.user if target.user is not None else "guest",
            password=target.password if target.password is not None else "guest",
            virtualhost=target.vhost,
            timeout=CONNECT_TIMEOUT,
            client_properties={"connection_name": "trawl"},
        )
        await self._declare(
            lambda channel: channel.declare_exchange(
                target.exchange, aio_pika.ExchangeType.TOPIC, durable=True
            ),
            lambda channel: channel.get_exchange(target.exchange, ensure=True),
        )
        await self._declare(
            lambda channel: channel.declare_queue(target.queue, durable=True),
            lambda channel: channel.get_queue(target.queue, ensure=True),
        )
        # A refused declaration closed the channel it was made on: take both on the
        # channel that is open now, the one the events are published on.
        channel = await self._open_channel()
        queue = await channel.get_queue(target.queue, ensure=False)
        await queue.bind(target.exchange, target.routing_key)
        self._exchange = await channel.get_exchange(target.exchange, ensure=False)

    async def _declare(
        self,
        declare: Callable[[AbstractChannel], Awaitable[object]],
        existing: Callable[[AbstractChannel], Awaitable[object]],
    ) -> None:
        """Declare with trawl's settings; one that exists with others is used as it is
        (the refusal closed the channel, so a new one checks that it exists)."""
        try:
            await declare(await self._open_channel())
        except aiormq.exceptions.ChannelPreconditionFailed:
            await existing(await self._open_channel())

    async def _open_channel(self) -> AbstractChannel:
        if self._channel is None or self._channel.is_closed:
            assert self._connection is not None
            self._channel = await self._connection.channel(
                publisher_confirms=True, on_return_raises=True
            )
        return self._channel

    def _connected(self) -> bool:
        return (
            self._connection is not None
            and not self._connection.is_closed
            and self._channel is not None
            and not self._channel.is_closed
            and self._exchange is not None
        )

    async def _publish_one(self, event: PageFetched) -> None:
        assert self._exchange is not None
        message = aio_pika.Message(
            event_body(event),
            message_id=idempotency_key(event),
            content_type=CONTENT_TYPE,
            delivery_mode=DeliveryMode.PERSISTENT,
            type="PageFetched",
            app_id="trawl",
        )
        answer = await self._exchange.publish(
            message, self.target.routing_key, mandatory=True, timeout=CONFIRM_TIMEOUT
        )
        if not isinstance(answer, Basic.Ack):
            raise NotConfirmed(type(answer).__name__)

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        self._channel = self._exchange = None
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    await connection.close()
