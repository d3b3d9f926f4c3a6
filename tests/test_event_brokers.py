"""``--events`` to real brokers: NATS JetStream and RabbitMQ on loopback.

Every test crawls `events_site` (every page has a text of its own, so the ground truth
is one event per page) and then reads what the stream or queue holds:

- a crawl publishes exactly one message per page, its body the event's JSON and its
  id the idempotency key ``"<urlHash>:<contentHash>"``;
- ``kill -9`` of the crawler at random moments, then a resume to the end, loses no
  event; a repeat carries the key of the first (and NATS drops it: none at all);
- the broker taken away mid-crawl (a proxy closed, then opened again) stalls the crawl,
  which then finishes with every event, and says so in one line each way;
- three PostgreSQL workers publish into one stream without collisions or losses.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path

import aio_pika
import nats
import pytest
from bench.servers import free_port

from brokers import AMQP, NATS, Destination, Message, destination, events_site, proxy_to
from conftest import CrawlRunner, is_page
from pg import URL as PG_URL
from pg import connect, crawl_name
from test_events import event
from trawl.demo import SiteServer
from trawl.errors import TrawlError
from trawl.events.sink import open_sink
from trawl.events.target import AmqpTarget, NatsTarget, parse_events
from trawl.store.location import StoreLocation
from trawl.store.sqlite.store import DB_NAME

__all__ = ["crawl_name", "destination"]

CONCURRENCY = 8
POLICY = ["--delay", "0.02", "--response-factor", "0", "--max-depth", "100"]
"""The policy of a workers' crawl: the site's last pages are 15 links deep, and which
path reaches a page first depends on the workers' order, so no depth limit."""
FIELDS = {
    "type", "url", "urlHash", "fetchedAt", "httpStatus", "contentHash", "simhash",
    "storageKey", "outLinks", "changed",
}  # fmt: skip


def crawl_command(server: SiteServer, data_dir: Path, events: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
        "--data-dir", str(data_dir), "--delay", "0.02", "--response-factor", "0",
        "--concurrency", str(CONCURRENCY), "--parse-workers", "1", "--retry-base", "0.05",
        "--no-progress", "--json", "--events", events, *extra,
    ]  # fmt: skip


def stored_hashes(data_dir: Path) -> dict[str, str]:
    """``{url: content hash}`` of every fingerprinted page of the SQLite crawl."""
    with closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        rows = db.execute("SELECT url, content_hash FROM urls WHERE content_hash IS NOT NULL")
        return dict(rows.fetchall())


def by_url(messages: list[Message]) -> dict[str, list[Message]]:
    """The messages of each page, checked against the event contract on the way."""
    found: dict[str, list[Message]] = {}
    for message in messages:
        event = json.loads(message.body)
        assert set(event) == FIELDS
        assert event["type"] == "PageFetched"
        assert message.key == f"{event['urlHash']}:{event['contentHash']}"
        assert not message.body.endswith(b"\n")
        found.setdefault(event["url"], []).append(message)
    return found


def check_headers(dest: Destination, message: Message) -> None:
    if dest.kind == "nats":
        assert message.headers["Content-Type"] == "application/json"
        assert message.headers["Trawl-Event"] == "PageFetched"
    else:
        assert message.headers == {
            "content_type": "application/json", "delivery_mode": 2, "type": "PageFetched",
        }  # fmt: skip


def assert_every_page_once(
    dest: Destination,
    site_truth: frozenset[str],
    hashes: dict[str, str],
    repeats: int,
    messages: list[Message] | None = None,
) -> None:
    """The stream or queue holds an event for every page of the site, each under the key
    of the page's stored content hash; at most ``repeats`` messages beyond one a page."""
    if messages is None:
        messages = dest.messages()
    pages = by_url(messages)
    assert set(pages) == set(site_truth) == set(hashes)
    for url, found in pages.items():
        keys = {m.key for m in found}
        assert len(keys) == 1, f"{url}: {keys}"
        assert str(keys.pop()).endswith(":" + hashes[url]), url
        check_headers(dest, found[0])
    assert len(messages) - len(pages) <= repeats


async def test_a_crawl_publishes_one_event_per_page(
    destination: Destination, crawl: CrawlRunner
) -> None:
    with SiteServer(events_site) as server:
        result = await crawl(
            server, events=parse_events(destination.url()), concurrency=CONCURRENCY
        )
    assert result.summary.content["events"] == len(server.site.ground_truth)
    hashes = stored_hashes(result.data_dir)
    messages = await destination.read()
    assert_every_page_once(destination, server.site.ground_truth, hashes, 0, messages)


def start_and_wait(command: list[str], server: SiteServer, pages: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while sum(is_page(r.path) for r in server.requests) < pages:
        assert proc.poll() is None, f"the crawl ended early: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.005)
    return proc


def run_to_end(command: list[str]) -> tuple[dict[str, object], str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    summary: dict[str, object] = json.loads(done.stdout)
    assert summary["state"] == "done"
    return summary, done.stderr


def test_kill_9_at_random_moments_loses_no_event(destination: Destination, tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"kill moments from random seed {seed}")  # shown with a failure
    rng = random.Random(seed)
    data_dir = tmp_path / "crawl"
    with SiteServer(events_site) as server:
        # guest:guest is RabbitMQ's login; NATS here takes no credentials.
        credentials = "guest:guest@" if destination.kind == "amqp" else ""
        command = crawl_command(server, data_dir, destination.url(credentials=credentials))
        kills = 0
        for share in sorted(rng.uniform(0.1, 0.8) for _ in range(2)):
            pages = int(share * len(server.site.ground_truth))
            proc = start_and_wait(command, server, pages)
            time.sleep(rng.uniform(0, 0.05))
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate()
            assert proc.returncode == -signal.SIGKILL, err
            kills += 1
        _, err = run_to_end(command)
        truth = server.site.ground_truth
    hashes = stored_hashes(data_dir)
    # A page fetched but not committed at a kill is published again, with its key; NATS
    # drops the repeat within its duplicate window.
    repeats = 0 if destination.kind == "nats" else kills * CONCURRENCY
    assert_every_page_once(destination, truth, hashes, repeats=repeats)
    stored = b"".join(p.read_bytes() for p in data_dir.iterdir() if p.name.startswith(DB_NAME))
    assert b"guest" not in stored
    assert "guest" not in err


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found, name
    return float(found.group(1))


def test_a_broker_gone_mid_crawl_stalls_the_crawl_and_loses_nothing(
    destination: Destination, tmp_path: Path
) -> None:
    data_dir = tmp_path / "crawl"
    port = free_port()
    with (
        SiteServer(events_site) as server,
        proxy_to(NATS if destination.kind == "nats" else AMQP) as proxy,
    ):
        command = crawl_command(
            server, data_dir, destination.url(port=proxy.port), "--metrics-port", str(port)
        )
        proc = start_and_wait(command, server, pages=30)
        proxy.stop()
        deadline = time.monotonic() + 20
        while metric(port, "trawl_event_sink_up") != 0:
            assert time.monotonic() < deadline, "the sink was never seen down"
            time.sleep(0.05)
        assert metric(port, "trawl_event_publish_failures_total") > 0
        time.sleep(0.5)  # the requests in flight when the broker went come back
        before = sum(is_page(r.path) for r in server.requests)
        time.sleep(1.5)
        assert sum(is_page(r.path) for r in server.requests) == before, "the crawl went on"
        assert proc.poll() is None
        proxy.start()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out)["state"] == "done"
        assert before < len(server.site.ground_truth)
        truth = server.site.ground_truth
    lines = err.splitlines()
    assert sum("cannot publish to" in line for line in lines) == 1, err
    assert sum(bool(re.search(r"publishing to .* again after", line)) for line in lines) == 1, err
    assert "Traceback" not in err
    # What was in flight when the connection went is published again: JetStream drops
    # the repeats, RabbitMQ keeps them under the same key.
    repeats = 0 if destination.kind == "nats" else CONCURRENCY
    assert_every_page_once(destination, truth, stored_hashes(data_dir), repeats=repeats)


def test_three_postgres_workers_share_one_stream(
    destination: Destination, crawl_name: str, tmp_path: Path
) -> None:
    with SiteServer(events_site) as server:
        common = [
            "--store", PG_URL, "--crawl", crawl_name, "--concurrency", "4",
            "--parse-workers", "0", "--no-progress", "--json", "--events", destination.url(),
            *server.resolve_args(),
        ]  # fmt: skip
        procs = []
        for index in range(3):
            command = ["worker"] if index else ["crawl", *server.site.seeds, *POLICY]
            argv = [
                sys.executable, "-m", "trawl", *command, *common,
                "--data-dir", str(tmp_path / f"w{index}"), "--worker-id", f"w{index}",
            ]  # fmt: skip
            procs.append(
                subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
            if not index:
                start_and_wait_requests(server, procs[0])
        summaries = []
        for proc in procs:
            out, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, err
            summaries.append(json.loads(out))
        truth = server.site.ground_truth
    published = [summary["content"].get("events", 0) for summary in summaries]
    assert sum(1 for count in published if count) >= 2, published
    schema = StoreLocation(Path("."), PG_URL, crawl_name).schema
    with connect(schema) as db:
        rows = db.execute("SELECT url, content_hash FROM urls WHERE content_hash IS NOT NULL")
        hashes = dict(rows.fetchall())
    assert_every_page_once(destination, truth, hashes, repeats=0)


def start_and_wait_requests(server: SiteServer, proc: subprocess.Popen[str]) -> None:
    """Wait for the first request: the crawl's policy is stored, workers may join."""
    deadline = time.monotonic() + 30
    while not server.requests:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.01)


async def test_a_stream_or_binding_gone_mid_crawl_is_made_again_not_skipped(
    destination: Destination,
) -> None:
    """A NATS stream deleted, or a RabbitMQ queue unbound (a message no queue takes
    comes back: ``mandatory``), fails the publication; the sink sets its stream or
    binding up again and the event is stored, never dropped."""
    target = parse_events(destination.url())
    assert isinstance(target, NatsTarget | AmqpTarget)
    sink = open_sink(target)
    async with sink:
        await sink.publish([event(1)])
        await take_away(destination)
        await sink.publish([event(2), event(3)])
        assert sink.stats.failures >= 1
        assert sink.stats.published == 3
        assert sink.stats.up
    held = by_url(await destination.read())
    expected = {event(i).url for i in (2, 3)}
    assert expected <= set(held)
    for url in expected:
        assert len(held[url]) == 1


async def take_away(dest: Destination) -> None:
    """Delete the test's stream, or unbind its queue from its exchange."""
    if dest.kind == "nats":
        client = await nats.connect(f"nats://{NATS[0]}:{NATS[1]}")
        try:
            await client.jetstream().delete_stream(dest.stream)
        finally:
            await client.close()
        return
    connection = await aio_pika.connect(host=AMQP[0], port=AMQP[1])
    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(f"{dest.name}.q")
        await queue.unbind(dest.name, "pages")


async def test_a_stream_or_exchange_that_exists_is_used_as_it_is(
    destination: Destination,
) -> None:
    """A JetStream stream of the name with other settings, or an exchange of another
    type and a quorum queue, are used as they are; a stream that does not take the
    subject is one line when the sink opens."""
    target = parse_events(destination.url())
    assert isinstance(target, NatsTarget | AmqpTarget)
    if isinstance(target, NatsTarget):
        client = await nats.connect(f"nats://{NATS[0]}:{NATS[1]}")
        try:
            js = client.jetstream()
            await js.add_stream(
                name=target.stream, subjects=[f"{destination.name}.>"], duplicate_window=5
            )
            async with open_sink(target) as sink:
                await sink.publish([event(1), event(1)])
            info = await js.stream_info(target.stream)
            assert info.config.duplicate_window == 5
            assert info.config.subjects == [f"{destination.name}.>"]
            assert info.state.messages == 1
            other = dataclasses.replace(target, subject="elsewhere.pages")
            with pytest.raises(TrawlError, match=r"does not take subject elsewhere\.pages"):
                async with open_sink(other):
                    pass
        finally:
            await client.close()
        return
    connection = await aio_pika.connect(host=AMQP[0], port=AMQP[1])
    async with connection:
        channel = await connection.channel()
        await channel.declare_exchange(destination.name, aio_pika.ExchangeType.DIRECT, durable=True)
        await channel.declare_queue(
            f"{destination.name}.q", durable=True, arguments={"x-queue-type": "quorum"}
        )
        async with open_sink(target) as sink:
            await sink.publish([event(1), event(2)])
    assert len(await destination.read()) == 2
