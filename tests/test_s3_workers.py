"""Three PostgreSQL workers with one ``--output`` write to one bucket: every file under
its own worker's tag, no key written twice, and the bucket holds every page's record."""

from __future__ import annotations

import io
from collections.abc import Callable

from warcio.archiveiterator import ArchiveIterator

from pg import crawl_name
from s3_server import MotoServer, moto_s3, objects
from test_workers import Workers, slowed, workers
from trawl.demo import SiteServer
from trawl.outputs.target import worker_tag

__all__ = ["crawl_name", "moto_s3", "workers"]


def test_three_workers_share_one_bucket_without_collisions(
    workers: Callable[[SiteServer], Workers], moto_s3: MotoServer, crawl_name: str
) -> None:
    bucket = moto_s3.new_bucket()
    with SiteServer(slowed(0.02)) as server:
        group = workers(server)
        group.extra = [
            "--warc", "--text", "--warc-max-size", "20000",
            "--output", f"s3://{bucket}/fleet", "--s3-endpoint", moto_s3.endpoint,
        ]  # fmt: skip
        first = group.begin(max_hosts=3)
        others = [group.start(max_hosts=3), group.start(max_hosts=3)]
        summaries = group.finish(first, *others)
    held = objects(moto_s3, bucket)
    tags = {name: worker_tag(name) for name in summaries}
    by_worker = dict.fromkeys(summaries, 0)
    uris: set[str] = set()
    for key, found in held.items():
        assert found["versions"] == 1, f"{key} was written twice"
        assert key.startswith(f"fleet/{crawl_name}/")
        name = key.rsplit("/", 1)[1]
        owner = [worker for worker, tag in tags.items() if f"-{tag}-" in name]
        assert len(owner) == 1, key
        by_worker[owner[0]] += 1
        if name.endswith(".warc.gz"):
            uris.update(
                record.rec_headers.get_header("WARC-Target-URI")
                for record in ArchiveIterator(io.BytesIO(found["body"]))
                if record.rec_type == "response"
            )
    for name, summary in summaries.items():
        assert summary["uploads"]["files"] == by_worker[name] > 0, name  # type: ignore[index]
        assert not list((group.root / name / "warc").glob("*.warc.gz"))
    assert uris >= server.site.expected_fetches
