"""The shared-store benchmark: one crawl of the generated site kept in PostgreSQL, worked
by 1, 2 and 4 trawl processes at once, each its own fresh crawl.

    python -m bench.workers --hosts 20 --pages 200 [--workers 1 2 4] [--dsn URL]

The first process is ``trawl crawl --store``; the others are ``trawl worker`` started as
soon as the crawl's policy is stored. Each holds at most hosts / workers leases
(``--max-hosts``), so the hosts spread over the workers. Figures per run: pages/s over
the whole run, the workers' CPU time (``os.wait4``) and the PostgreSQL server's CPU time
over the same span (every ``postgres`` process in /proc), whose share of the two is the
database's share of the work. Correctness is checked as in bench.crawl: unique URLs equal
the ground truth, no duplicate GETs, at most one request in flight per host.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.accesslog import duplicate_gets, max_inflight_per_host, page_requests
from bench.crawl import DEFAULT_PORT, default_work_dir
from bench.procstat import TICKS, read_stat
from bench.servers import free_port, host_addresses, port_is_free, serve
from bench.site import SiteParams, ensure_site
from trawl.errors import StoreError
from trawl.policy import POLICY_KEY
from trawl.store.location import StoreLocation

DSN = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True, slots=True)
class WorkersResult:
    """What one run with ``workers`` processes measured."""

    workers: int
    wall_seconds: float
    pages: int
    pages_per_second: float
    worker_cpu_seconds: float
    database_cpu_seconds: float
    unique_discovered: int
    ground_truth: int
    duplicate_gets: int
    max_inflight_per_host: int

    @property
    def database_share(self) -> float:
        """The database's part of the CPU time the run took (workers plus server)."""
        total = self.worker_cpu_seconds + self.database_cpu_seconds
        return self.database_cpu_seconds / total if total else 0.0

    @property
    def correct(self) -> bool:
        return (
            self.unique_discovered == self.ground_truth
            and self.duplicate_gets == 0
            and self.max_inflight_per_host <= 1
        )


def _postgres_ticks() -> dict[int, int]:
    """CPU clock ticks used so far by each live process named ``postgres``."""
    ticks = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_stat(f"/proc/{entry}/stat")
        if stat is not None and stat[0] == "postgres":
            ticks[int(entry)] = stat[1] + stat[2]
    return ticks


class PostgresCpu(threading.Thread):
    """Samples the PostgreSQL server's processes until stopped: a backend's CPU time is
    gone from /proc once its connection closes, so each is read while it lives."""

    def __init__(self, period: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.done = threading.Event()
        self._start = _postgres_ticks()
        self._last = dict(self._start)

    def run(self) -> None:
        while not self.done.wait(self.period):
            self._last.update(_postgres_ticks())

    def stop(self) -> float:
        """Stop sampling; the server's CPU seconds since the sampler was made."""
        self.done.set()
        self.join()
        self._last.update(_postgres_ticks())
        used = sum(ticks - self._start.get(pid, 0) for pid, ticks in self._last.items())
        return used / TICKS


async def _read(location: StoreLocation, key: str) -> str | None:
    async with location.open(readonly=True) as store:
        return await store.get_meta(key)


async def _discovered(location: StoreLocation) -> int:
    async with location.open(readonly=True) as store:
        return int((await store.counters()).get("discovered", 0))


def _wait_for_policy(location: StoreLocation, first: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if asyncio.run(_read(location, POLICY_KEY)) is not None:
                return
        except StoreError:  # the crawl's schema is not there yet
            pass
        if first.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the first trawl process never stored the crawl's policy")
        time.sleep(0.05)


def run_workers(
    workers: int,
    *,
    hosts: int,
    pages: int,
    dsn: str,
    work_dir: Path,
    concurrency: int,
    server: str = "auto",
    port: int = DEFAULT_PORT,
) -> WorkersResult:
    """Crawl the site with ``workers`` processes sharing one fresh PostgreSQL crawl."""
    if not port_is_free(port):
        port = free_port()
    site, truth = ensure_site(SiteParams(hosts, pages, port, 1), work_dir)
    crawl = f"bench_{uuid.uuid4().hex[:10]}"
    location = StoreLocation(work_dir, dsn, crawl)
    trawl = str(Path(sys.executable).parent / "trawl")
    common = ["--store", dsn, "--crawl", crawl, "--concurrency", str(concurrency)]
    common += ["--max-hosts", str(math.ceil(len(truth.hosts) / workers)), "--no-progress"]
    common += ["--json", "--parse-workers", "0", "--allow-network", "127.0.0.0/8"]
    for host, address in host_addresses(truth.hosts).items():
        common += ["--resolve", f"{host}={address}"]
    with tempfile.TemporaryDirectory(prefix="workers-", dir=work_dir) as tmp:
        run = Path(tmp)
        with serve(site, truth.hosts, port, run / "server", server) as served:
            database = PostgresCpu()
            database.start()
            started = time.perf_counter()
            procs = []
            for n in range(workers):
                role = ["crawl", *truth.seeds, "--delay", "0"] if n == 0 else ["worker"]
                command = [trawl, *role, *common, "--data-dir", str(run / f"w{n}")]
                command += ["--worker-id", f"w{n}"]
                with (run / f"w{n}.err").open("wb") as errors:
                    procs.append(
                        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
                    )
                if n == 0:
                    _wait_for_policy(location, procs[0])
            cpu = 0.0
            for n, proc in enumerate(procs):
                _, status, usage = os.wait4(proc.pid, 0)
                cpu += usage.ru_utime + usage.ru_stime
                if os.waitstatus_to_exitcode(status) != 0:
                    sys.stderr.write((run / f"w{n}.err").read_text(errors="replace")[-2000:])
            wall = time.perf_counter() - started
            database_seconds = database.stop()
        discovered = asyncio.run(_discovered(location))
        asyncio.run(location.remove())
    requests = page_requests(served.records, port)
    return WorkersResult(
        workers=workers,
        wall_seconds=round(wall, 2),
        pages=len(requests),
        pages_per_second=round(len(requests) / wall, 1),
        worker_cpu_seconds=round(cpu, 2),
        database_cpu_seconds=round(database_seconds, 2),
        unique_discovered=discovered,
        ground_truth=len(truth.discovered),
        duplicate_gets=duplicate_gets(requests),
        max_inflight_per_host=max(max_inflight_per_host(served.records).values(), default=0),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workers", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=200, help="pages per host")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--concurrency", type=int, default=64, help="per worker")
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--work-dir", type=Path, default=None, help="where sites are cached")
    args = parser.parse_args(argv)
    work_dir = args.work_dir or default_work_dir()
    print("workers  pages/s  pages  wall s  worker CPU s  database CPU s  database share  ok")
    wrong = False
    for count in args.workers:
        r = run_workers(
            count,
            hosts=args.hosts,
            pages=args.pages,
            dsn=args.dsn,
            work_dir=work_dir,
            concurrency=args.concurrency,
        )
        wrong |= not r.correct
        print(
            f"{r.workers:>7}  {r.pages_per_second:>7,.0f}  {r.pages:>5}  {r.wall_seconds:>6.1f}"
            f"  {r.worker_cpu_seconds:>12.1f}  {r.database_cpu_seconds:>14.1f}"
            f"  {r.database_share:>13.0%}  {'yes' if r.correct else 'NO'}",
            flush=True,
        )
        if not r.correct:
            print(
                f"         unique {r.unique_discovered} (truth {r.ground_truth}), duplicate "
                f"GETs {r.duplicate_gets}, max in flight per host {r.max_inflight_per_host}"
            )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
