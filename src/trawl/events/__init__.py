"""Where PageFetched events go: a JSONL file, NATS JetStream or RabbitMQ (``--events``).

``target`` reads the option's value, ``sink`` holds the interface the content stage
publishes through and the file sink, ``nats_sink`` and ``amqp_sink`` the broker sinks
(their clients come with the ``brokers`` extra).
"""
