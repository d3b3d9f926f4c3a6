"""The crawl benchmark: one command generates (or reuses) a site, serves it, crawls it, and
prints speed and correctness figures.

    python -m bench.crawl --hosts 20 --pages 500 [--server nginx|builtin] [--json]
        [--reference]

trawl runs as a child process (``trawl crawl ... --delay 0 --per-host 1 --fresh``) with
every host mapped to 127.0.0.1 through ``--resolve``. Its CPU time, its extract workers'
included, comes from ``os.wait4``; its peak RSS from sampling the whole process tree.
Speed is reported, never judged. The exit status is 1 when a correctness figure is
wrong: trawl failed, the unique count or the set of fetched URLs differs from the ground
truth, a URL was fetched twice, or a host had more requests in flight than
``--per-host`` allows.

With ``--reference`` the same site is then crawled by wget, one connection, on a fresh
server (bench.reference): the C tool the throughput target is set against, measured on
the same machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.accesslog import LogRecord, duplicate_gets, max_inflight_per_host, page_requests
from bench.reference import Reference, run_wget, wget_available
from bench.servers import free_port, host_addresses, nginx_available, port_is_free, serve
from bench.site import GroundTruth, SiteParams, ensure_site

__all__ = [
    "BenchResult", "Machine", "add_run_arguments", "default_work_dir", "main", "run_bench",
    "run_from",
]  # fmt: skip

DEFAULT_PORT = 18470
"""Port baked into a cached site's links; another free port is used (and a site generated
for it) when this one is taken."""


@dataclass(frozen=True, slots=True)
class Machine:
    """Where the figures were measured."""

    nproc: int
    cpu: str
    python: str
    server: str

    @classmethod
    def here(cls, server: str) -> Machine:
        cpu = "unknown"
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        return cls(os.cpu_count() or 1, cpu, platform.python_version(), server)


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Every figure of one benchmark run."""

    hosts: int
    pages_per_host: int
    per_host: int
    wall_seconds: float
    startup_seconds: float
    """From trawl's start to the start of the first request the server logged."""
    shutdown_seconds: float
    """From the end of the last request the server logged to trawl's exit."""
    pages_fetched: int
    pages_per_second: float
    crawl_pages_per_second: float
    links_checked: int
    links_per_second: float
    cpu_ms_per_page: float
    peak_rss_mb: float
    unique_discovered: int
    ground_truth_discovered: int
    ground_truth_fetched: int
    missing_fetches: int
    unexpected_fetches: int
    requests: int
    robots_requests: int
    duplicate_gets: int
    max_inflight_per_host: int
    trawl_exit: int
    machine: Machine
    reference: Reference | None = None
    """wget's figures on the same site and machine, when asked for."""

    @property
    def failures(self) -> list[str]:
        """What is wrong with the crawl; empty when it is correct."""
        problems = []
        if self.trawl_exit != 0:
            problems.append(f"trawl exited with {self.trawl_exit}")
        if self.unique_discovered != self.ground_truth_discovered:
            problems.append(
                f"unique {self.unique_discovered} != ground truth {self.ground_truth_discovered}"
            )
        if self.missing_fetches or self.unexpected_fetches:
            problems.append(
                f"fetched set differs: {self.missing_fetches} missing, "
                f"{self.unexpected_fetches} unexpected"
            )
        if self.duplicate_gets:
            problems.append(f"{self.duplicate_gets} duplicate GETs")
        if self.max_inflight_per_host > self.per_host:
            problems.append(f"{self.max_inflight_per_host} requests in flight on one host")
        return problems

    def table(self) -> str:
        """The figures as aligned text lines."""
        m = self.machine
        rows = [
            ("site", f"{self.hosts} hosts x {self.pages_per_host} pages"),
            ("machine", f"{m.nproc} CPUs, {m.cpu}, Python {m.python}"),
            ("server", m.server),
            ("wall time", f"{self.wall_seconds:.2f} s"),
            (
                "startup, shutdown",
                f"{self.startup_seconds:.2f} s to the first request, "
                f"{self.shutdown_seconds:.2f} s after the last",
            ),
            ("pages/s", f"{self.pages_per_second:.1f} ({self.pages_fetched} unique pages)"),
            ("pages/s (crawl loop)", f"{self.crawl_pages_per_second:.1f}"),
            ("links checked/s", f"{self.links_per_second:.0f} ({self.links_checked} links)"),
            ("CPU ms/page", f"{self.cpu_ms_per_page:.3f}"),
            ("peak RSS", f"{self.peak_rss_mb:.1f} MB (crawl and extract workers)"),
            (
                "unique URLs",
                f"{self.unique_discovered} (ground truth {self.ground_truth_discovered})",
            ),
            (
                "fetched vs truth",
                f"{self.missing_fetches} missing, {self.unexpected_fetches} unexpected "
                f"(ground truth {self.ground_truth_fetched})",
            ),
            ("requests", f"{self.requests} pages + {self.robots_requests} robots.txt"),
            ("duplicate GETs", str(self.duplicate_gets)),
            ("max in-flight/host", str(self.max_inflight_per_host)),
            ("verdict", "; ".join(self.failures) or "correct"),
        ]
        if self.reference is not None:
            rows.append(("reference (wget)", self.reference.line()))
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)

    def to_json(self) -> str:
        figures = {**asdict(self), "failures": self.failures}
        if self.reference is not None:
            figures["reference"]["pages_per_second"] = self.reference.pages_per_second
            figures["reference"]["cpu_ms_per_page"] = self.reference.cpu_ms_per_page
        return json.dumps(figures, sort_keys=True)


def default_work_dir() -> Path:
    """Where sites are cached: tmpfs when there is one (file creation on disk is slow)."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / f"trawl-bench-{os.getuid()}"


def _link_counters(data_dir: Path) -> dict[str, int]:
    """The crawl's counters, read from its store once trawl has exited."""
    with sqlite3.connect(f"file:{data_dir / 'crawl.db'}?mode=ro", uri=True) as db:
        return {name: int(value) for name, value in db.execute("SELECT name, value FROM counters")}


def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants (0 once it is gone)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as children:
                total += sum(tree_rss(int(child)) for child in children.read().split())
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


class RssSampler(threading.Thread):
    """Samples the resident size of a process tree until stopped; ``peak`` is the most
    seen at once (crawl process and its extract workers together)."""

    def __init__(self, pid: int, period: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.period, self.peak = pid, period, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.period):
            self.peak = max(self.peak, tree_rss(self.pid))


@dataclass(frozen=True, slots=True)
class TrawlRun:
    """One trawl process as the benchmark saw it."""

    code: int
    summary: dict[str, object]
    wall: float
    """Seconds from start to exit."""
    cpu: float
    """CPU seconds of it and its workers."""
    rss: float
    """Peak resident bytes of it and its workers together."""
    started: float
    """Start in seconds since the epoch: the server's log uses that clock."""

    @property
    def exited(self) -> float:
        """Exit in seconds since the epoch."""
        return self.started + self.wall


def _run_trawl(command: Sequence[str], errors: Path, env: dict[str, str] | None = None) -> TrawlRun:
    """Run trawl to its exit and measure it."""
    started = time.time()
    start = time.perf_counter()
    with errors.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, env=env)
    sampler = RssSampler(process.pid)
    sampler.start()
    assert process.stdout is not None
    out = process.stdout.read()
    process.stdout.close()
    sampler.done.set()
    sampler.join()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    try:
        summary = json.loads(out)
    except json.JSONDecodeError:
        summary = {}
    return TrawlRun(
        code=os.waitstatus_to_exitcode(status),
        summary=summary,
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        rss=float(max(sampler.peak, usage.ru_maxrss * 1024)),
        started=started,
    )


def run_bench(
    *,
    hosts: int,
    pages: int,
    server: str = "auto",
    concurrency: int = 64,
    per_host: int = 1,
    extra: Sequence[str] = (),
    work_dir: Path | None = None,
    port: int = DEFAULT_PORT,
    seed: int = 1,
    trawl: Path | None = None,
    reference: bool = False,
    source: Path | None = None,
) -> BenchResult:
    """Generate or reuse the site, serve it, crawl it with trawl and measure; then, with
    ``reference``, crawl it with wget on a fresh server (bench.reference).

    With ``source`` (the ``src`` directory of another checkout) that checkout's trawl
    crawls, run by this Python with its dependencies (``python -m trawl``)."""
    work_dir = work_dir or default_work_dir()
    if not port_is_free(port):
        port = free_port()
    site, truth = ensure_site(SiteParams(hosts, pages, port, seed), work_dir)
    trawl = trawl or Path(sys.executable).parent / "trawl"
    program, env = [str(trawl)], None
    if source is not None:
        program = [sys.executable, "-m", "trawl"]
        env = {**os.environ, "PYTHONPATH": str(source.resolve())}
    kind = server if server != "auto" else ("nginx" if nginx_available() else "builtin")
    with tempfile.TemporaryDirectory(prefix="run-", dir=work_dir) as tmp:
        run = Path(tmp)
        data = run / "trawl-data"
        command = [*program, "crawl", *truth.seeds]
        for host, address in host_addresses(truth.hosts).items():
            command += ["--resolve", f"{host}={address}"]
        command += ["--allow-network", "127.0.0.0/8"]
        command += ["--delay", "0", "--per-host", str(per_host), "--concurrency", str(concurrency)]
        command += ["--no-progress", "--json", "--fresh", "--data-dir", str(data), *extra]
        with serve(site, truth.hosts, port, run / "server", kind) as served:
            trawl_run = _run_trawl(command, run / "trawl.err", env)
        if trawl_run.code != 0:
            sys.stderr.write((run / "trawl.err").read_text(errors="replace")[-4000:])
        counters = _link_counters(data) if (data / "crawl.db").is_file() else {}
        wget = run_wget(site, truth, port, kind, run / "reference") if reference else None
    result = _result(
        truth, served.records, served.kind, served.version, port, per_host, trawl_run, counters
    )
    return result if wget is None else dataclasses.replace(result, reference=wget)


def _result(
    truth: GroundTruth,
    records: Sequence[LogRecord],
    kind: str,
    version: str,
    port: int,
    per_host: int,
    run: TrawlRun,
    counters: dict[str, int],
) -> BenchResult:
    requests = page_requests(records, port)
    fetched = set(requests)
    links = counters.get("links", 0)
    peaks = max_inflight_per_host(records)
    crawl_rate = run.summary.get("pages_per_second", 0.0)
    first = min((r.start for r in records), default=run.exited)
    last = max((r.end for r in records), default=run.started)
    wall = run.wall
    return BenchResult(
        hosts=truth.params.hosts,
        pages_per_host=truth.params.pages,
        per_host=per_host,
        wall_seconds=round(wall, 3),
        startup_seconds=round(max(0.0, first - run.started), 3),
        shutdown_seconds=round(max(0.0, run.exited - last), 3),
        pages_fetched=len(fetched),
        pages_per_second=round(len(fetched) / wall, 1),
        crawl_pages_per_second=float(crawl_rate) if isinstance(crawl_rate, int | float) else 0.0,
        links_checked=links,
        links_per_second=round(links / wall, 1),
        cpu_ms_per_page=round(run.cpu * 1000 / max(1, len(fetched)), 3),
        peak_rss_mb=round(run.rss / 2**20, 1),
        unique_discovered=int(counters.get("discovered", -1)),
        ground_truth_discovered=len(truth.discovered),
        ground_truth_fetched=len(truth.fetched),
        missing_fetches=len(truth.fetched - fetched),
        unexpected_fetches=len(fetched - truth.fetched),
        requests=sum(requests.values()),
        robots_requests=sum(1 for r in records if urlsplit(r.uri).path == "/robots.txt"),
        duplicate_gets=duplicate_gets(requests),
        max_inflight_per_host=max(peaks.values(), default=0),
        trawl_exit=run.code,
        machine=Machine.here(f"{kind} {version}"),
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of one benchmark run (site, server, crawl), for `run_from`."""
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=500, help="pages per host")
    parser.add_argument("--server", choices=("auto", "nginx", "builtin"), default="auto")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--per-host", type=int, default=1)
    parser.add_argument("--extra", default="", help="more trawl crawl arguments, one string")
    parser.add_argument("--work-dir", type=Path, default=None, help="where sites are cached")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--seed", type=int, default=1)


def run_from(
    args: argparse.Namespace, *, reference: bool = False, source: Path | None = None
) -> BenchResult:
    """`run_bench` with the options `add_run_arguments` parsed."""
    return run_bench(
        hosts=args.hosts,
        pages=args.pages,
        server=args.server,
        concurrency=args.concurrency,
        per_host=args.per_host,
        extra=shlex.split(args.extra),
        work_dir=args.work_dir,
        port=args.port,
        seed=args.seed,
        reference=reference,
        source=source,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.crawl", description=__doc__.split("\n")[0]
    )
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--reference", action="store_true", help="then crawl the site with wget, one connection"
    )
    args = parser.parse_args(argv)
    if args.reference and not wget_available():
        parser.error("--reference needs wget, which is not installed (apt-get install wget)")
    result = run_from(args, reference=args.reference)
    print(result.to_json() if args.json else result.table())
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
