"""What each ``--events`` sink costs a crawl: the crawl benchmark (bench.crawl) metadata
only, then with ``--events FILE``, ``--events nats://...`` and ``--events amqp://...``,
by turns, for some rounds.

    python -m bench.event_sinks --hosts 20 --pages 500 --rounds 3
    python -m bench.event_sinks --publish 20000 [--batch 256]

The brokers are the local ones (NATS JetStream on 127.0.0.1:4222, RabbitMQ on
127.0.0.1:5672 guest/guest); each run publishes to a stream or queue of its own, counted
and deleted after it. Besides trawl's pages/s and CPU a page (its extract workers
included), the broker's own CPU a page is read from ``/proc`` (``nats-server``,
``beam.smp``: the broker's whole process, whatever else it serves meanwhile).

``--publish N`` leaves the crawl out: each sink publishes N events, ``--batch`` at a
time as the content stage hands them over, and the figures are events/s and this
process's CPU (``time.process_time``) and the broker's an event.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aio_pika
import nats
from nats.js.errors import NotFoundError

from bench.crawl import add_run_arguments, run_bench
from bench.procstat import TICKS, read_stat
from trawl.content.events import PageFetched
from trawl.events.sink import open_sink
from trawl.events.target import parse_events
from trawl.extract.urls import url_hash
from trawl.store.values import StorageKey

SINKS = ("metadata", "file", "nats", "amqp")
SOURCE = Path(__file__).resolve().parent.parent / "src"
"""This checkout's trawl is the one measured (``python -m trawl`` with it on the path)."""
BROKER_PROCESS = {"nats": "nats-server", "amqp": "beam.smp"}


@dataclass(frozen=True, slots=True)
class SinkRun:
    """One crawl's figures."""

    sink: str
    pages: int
    pages_per_second: float
    cpu_ms_per_page: float
    broker_cpu_ms_per_page: float | None
    events: int | None
    correct: bool


def broker_ticks(name: str) -> int | None:
    """CPU clock ticks the process called ``name`` has used, or None if none runs."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            stat = read_stat(f"/proc/{pid}/stat")
            if stat is not None and stat[0] == name:
                return stat[1] + stat[2]
    return None


async def held(sink: str, name: str) -> int:
    """Messages the run's stream or queue holds; the stream or queue is deleted."""
    if sink == "nats":
        client = await nats.connect("nats://127.0.0.1:4222")
        try:
            js = client.jetstream()
            count = int((await js.stream_info(name.upper())).state.messages)
            with contextlib.suppress(NotFoundError):
                await js.delete_stream(name.upper())
            return count
        finally:
            await client.close()
    connection = await aio_pika.connect(host="127.0.0.1", port=5672)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(name, durable=True, passive=True)
        count = int(queue.declaration_result.message_count or 0)
        await channel.queue_delete(name)
        await channel.exchange_delete(name)
        return count


def run_sink(sink: str, args: argparse.Namespace, tmp: Path) -> SinkRun:
    name = f"bench{uuid.uuid4().hex[:8]}"
    extra: list[str] = []
    events_file = tmp / f"{name}.jsonl"
    if sink == "file":
        extra = ["--events", str(events_file)]
    elif sink == "nats":
        extra = ["--events", f"nats://127.0.0.1:4222/{name}"]
    elif sink == "amqp":
        extra = ["--events", f"amqp://guest:guest@127.0.0.1:5672/?exchange={name}&queue={name}"]
    process = BROKER_PROCESS.get(sink)
    before = broker_ticks(process) if process else None
    result = run_bench(
        hosts=args.hosts, pages=args.pages, server=args.server, concurrency=args.concurrency,
        per_host=args.per_host, extra=extra, work_dir=args.work_dir, port=args.port,
        seed=args.seed, source=SOURCE,
    )  # fmt: skip
    after = broker_ticks(process) if process else None
    pages = max(1, result.pages_fetched)
    broker = None
    if before is not None and after is not None:
        broker = (after - before) / TICKS * 1000 / pages
    events = None
    if sink == "file":
        with events_file.open("rb") as lines:
            events = sum(1 for _ in lines)
    elif sink in BROKER_PROCESS:
        events = asyncio.run(held(sink, name))
    return SinkRun(
        sink, result.pages_fetched, result.pages_per_second, result.cpu_ms_per_page,
        None if broker is None else round(broker, 3), events, not result.failures,
    )  # fmt: skip


def sample_event(index: int) -> PageFetched:
    url = f"https://www{index % 97}.example.test/section/{index}/story.html"
    return PageFetched(
        url=url, url_id=url_hash(url), fetched_at=1796065629.123 + index, http_status=200,
        content_hash=f"{index:064x}", simhash=index, out_links=40, changed=True,
        storage_key=StorageKey(f"trawl-{index // 1000:05d}.warc.gz", 5120 * index, 5120),
    )  # fmt: skip


async def publish_only(
    sink: str, count: int, batch: int, tmp: Path
) -> tuple[float, float, float | None]:
    """Events/s, this process's CPU and the broker's (ms an event) for ``count`` events."""
    name = f"bench{uuid.uuid4().hex[:8]}"
    target = {
        "file": str(tmp / f"{name}.jsonl"),
        "nats": f"nats://127.0.0.1:4222/{name}",
        "amqp": f"amqp://guest:guest@127.0.0.1:5672/?exchange={name}&queue={name}",
    }[sink]
    events = [sample_event(i) for i in range(count)]
    process = BROKER_PROCESS.get(sink)
    async with open_sink(parse_events(target)) as opened:
        before = broker_ticks(process) if process else None
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, count, batch):
            await opened.publish(events[start : start + batch])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        after = broker_ticks(process) if process else None
    if sink in BROKER_PROCESS:
        assert await held(sink, name) == count
    broker = None
    if before is not None and after is not None:
        broker = (after - before) / TICKS * 1000 / count
    return count / wall, cpu * 1000 / count, broker


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.event_sinks", description=__doc__.split("\n")[0]
    )
    add_run_arguments(parser)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sinks", default=",".join(SINKS), help="comma-separated, in turn")
    parser.add_argument("--publish", type=int, default=0, help="publish N events, no crawl")
    parser.add_argument("--batch", type=int, default=256, help="events a publish, --publish")
    args = parser.parse_args(argv)
    if args.publish:
        print("round | sink | events/s | CPU ms/event | broker CPU ms/event")
        with tempfile.TemporaryDirectory(prefix="event-sinks-") as tmp:
            for round_ in range(1, args.rounds + 1):
                for sink in ("file", "nats", "amqp"):
                    rate, cpu, broker = asyncio.run(
                        publish_only(sink, args.publish, args.batch, Path(tmp))
                    )
                    shown = "" if broker is None else f"{broker:.4f}"
                    print(f"{round_} | {sink} | {rate:.0f} | {cpu:.4f} | {shown}", flush=True)
        return 0
    sinks = [s for s in args.sinks.split(",") if s]
    unknown = sorted(set(sinks) - set(SINKS))
    if unknown:
        parser.error(f"unknown sink {unknown[0]} (one of {', '.join(SINKS)})")
    print("round | sink | pages | pages/s | CPU ms/page | broker CPU ms/page | events | correct")
    failed = False
    with tempfile.TemporaryDirectory(prefix="event-sinks-") as tmp:
        for round_ in range(1, args.rounds + 1):
            for sink in sinks:
                run = run_sink(sink, args, Path(tmp))
                failed |= not run.correct
                cost = run.broker_cpu_ms_per_page
                events = "" if run.events is None else run.events
                print(
                    f"{round_} | {run.sink} | {run.pages} | {run.pages_per_second:.1f} | "
                    f"{run.cpu_ms_per_page:.3f} | {'' if cost is None else cost} | {events} | "
                    f"{run.correct}",
                    flush=True,
                )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
