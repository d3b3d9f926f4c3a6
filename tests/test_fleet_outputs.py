"""Three PostgreSQL workers with the same ``--output`` and ``--events``: one bucket and
one stream (or queue) between them, no key written twice, one event a page, and every
event's storageKey range-GETs to its page's WARC record in the bucket."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from brokers import Destination, destination, events_site
from pg import URL as PG_URL
from pg import connect, crawl_name
from s3_server import MotoServer, moto_s3, objects
from test_event_brokers import assert_every_page_once
from test_s3_output import check_events
from test_workers import Workers, workers
from trawl.demo import SiteServer
from trawl.outputs.target import worker_tag
from trawl.store.location import StoreLocation

__all__ = ["crawl_name", "destination", "moto_s3", "workers"]


def test_three_workers_share_one_bucket_and_one_stream(
    workers: Callable[[SiteServer], Workers],
    moto_s3: MotoServer,
    destination: Destination,
    crawl_name: str,
) -> None:
    bucket = moto_s3.new_bucket()
    with SiteServer(events_site) as server:
        group = workers(server)
        group.extra = [
            "--warc", "--warc-max-size", "20000", "--output", f"s3://{bucket}/fleet",
            "--s3-endpoint", moto_s3.endpoint, "--events", destination.url(),
        ]  # fmt: skip
        # The site's last pages are 15 links deep; which path reaches a page first
        # depends on the workers' order, so the depth limit is lifted.
        group.policy += ["--max-depth", "100"]
        # Each host's 30 pages take the first worker 6 s, so the others, started after
        # its first request, join before it could crawl all four hosts alone (on a
        # loaded machine a process takes seconds to start).
        group.policy[group.policy.index("--delay") + 1] = "0.2"
        first = group.begin(max_hosts=2)
        summaries = group.finish(first, group.start(max_hosts=2), group.start(max_hosts=2))
        truth = server.site.ground_truth
    schema = StoreLocation(Path("."), PG_URL, crawl_name).schema
    with connect(schema) as db:
        rows = db.execute("SELECT url, content_hash FROM urls WHERE content_hash IS NOT NULL")
        hashes = dict(rows.fetchall())
    messages = destination.messages()
    assert_every_page_once(destination, truth, hashes, repeats=0, messages=messages)
    check_events(moto_s3, bucket, [json.loads(message.body) for message in messages])
    held = objects(moto_s3, bucket)
    assert all(found["versions"] == 1 for found in held.values())
    writers = {name for name in summaries if any(f"-{worker_tag(name)}-" in key for key in held)}
    assert len(writers) >= 2, writers
