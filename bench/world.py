"""The world benchmark: trawl with its default politeness against a simulated web.

    python -m bench.world [--hosts 10000] [--pages 10] [--duration 0] [--seed 1]
        [--extra "trawl args"] [--local "trawl args"] [--json]
        [--store postgresql://127.0.0.1:5432/test --workers W [--keep-store]]

It starts the world's DNS server (bench.world_dns) and HTTP/HTTPS server processes
(bench.world_server, the world of bench.world_map), then ``trawl crawl`` from the world's
seeds with only what the world needs: its name server, no hosts file, loopback allowed,
the world's test CA, ``--max-depth 1000`` (scope: the world's shortest paths reach past
the default 15) and ``--data-dir``/``--fresh``/``--metrics-port``/``--json``. No
politeness or speed option is given: trawl runs with its defaults.

With ``--store DSN`` the crawl is kept in PostgreSQL (a fresh crawl, bench.world_pg,
dropped at the end) and worked by ``--workers`` processes: the first is ``trawl crawl
--store``, the others ``trawl worker --store`` started once the crawl's policy is stored;
each gets the world's resolver options, its own ``--worker-id``, data dir and metrics port
(``--extra`` goes to the first only, as the crawl's policy; ``--local`` to every process).
CPU, RSS and fds are summed over the workers, the store is read through PostgreSQL, and
the PostgreSQL server's CPU (every ``postgres`` process, bench.workers.PostgresCpu, less
the monitor's own queries) is reported per 1,000 pages.

Every ``--interval`` seconds (bench.world_monitor) and at the end it prints pages/s,
requests in flight and connections at the server, hosts in service, trawl's CPU ms per
page, RSS and open fds, and the server's CPU and event-loop lag. At the end (bench.
world_log): politeness violations, the most requests in flight on one shared address, the
server's lateness, DNS queries per host, RSS growth per held host and the RSS from when the
hosts held stopped growing to the end, and whether the store matches the ground truth (a
complete crawl) or the log (a stopped one).
Exit status 1 when a count is wrong or politeness was breached; speed is never judged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import psycopg

from bench.servers import free_port
from bench.workers import PostgresCpu
from bench.world_log import (
    Audit,
    Request,
    audit_store,
    max_inflight_by,
    parse,
    percentile,
    politeness,
    read_store,
)  # fmt: skip
from bench.world_map import SHARED_ADDRESSES, ZONES, GroundTruth, World, WorldParams, ground_truth
from bench.world_monitor import Monitor, Sample, rss_per_held_host, settled_rss
from bench.world_pg import HostsReader, SharedCrawl, SqliteHosts
from bench.world_server import ABANDONED, ServerConfig

__all__ = ["ANY", "WorldResult", "main", "make_certificates", "run_world"]

ANY = "0.0.0.0"
"""Where the world's server ports must be free: its hosts listen on many loopback
addresses."""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(where: Path) -> tuple[Path, Path, Path]:
    """A test CA and a wildcard certificate for every zone, ECDSA P-256 (cheap handshakes):
    the CA's file, the leaf's certificate and its key."""
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=trawl world CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign", cwd=where)  # fmt: skip
    _openssl("req", *curve, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj",
             f"/CN=*.{ZONES[0]}.test", cwd=where)  # fmt: skip
    names = ",".join(f"DNS:*.{zone}.test" for zone in ZONES)
    (where / "leaf.ext").write_text(f"subjectAltName={names}\nbasicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext",
             cwd=where)  # fmt: skip
    return where / "ca.pem", where / "leaf.pem", where / "leaf.key"


@dataclass(slots=True)
class WorldResult:
    """Every figure of one run."""

    hosts: int
    pages_per_host: int
    seeds: int
    truth_pages: int
    truth_discovered: int
    server_processes: int
    duration_limit: float
    stopped: bool
    trawl_exit: int
    wall_seconds: float
    pages: int
    pages_per_second: float
    peak_pages_per_second: float
    requests: int
    cpu_ms_per_page: float
    peak_rss_mb: float
    peak_trawl_fds: int
    peak_server_connections: int
    peak_server_inflight: int
    peak_hosts_in_service: int
    server_cpu_share: float
    """Server processes' CPU seconds per second of wall time (1.0: one core)."""
    server_lateness_ms_p50: float
    server_lateness_ms_p99: float
    server_loop_lag_ms_p99: float
    server_loop_lag_ms_max: float
    dns_queries: int
    dns_names: int
    dns_queries_per_host: float
    dns_answers: dict[str, int]
    violations: int
    violation_examples: list[str]
    max_inflight_per_host: int
    max_inflight_per_shared_address: dict[str, int]
    shared_requests_per_second: float
    """Requests to the shared addresses together, a second of the run."""
    connections_used: int
    """Connections that carried at least one logged request."""
    statuses: dict[str, int]
    rss_growth_per_held_host: float | None
    """(peak RSS - least RSS) / most hosts held: an upper bound per held host."""
    settled: tuple[float, int, int] | None
    """When the hosts held first reached 90% of their most, the RSS then and at the end
    (bench.world_monitor.settled_rss)."""
    audit: Audit
    series: list[Sample] = field(default_factory=list)
    workers: int = 1
    store: str = "sqlite"
    database_cpu_seconds: float | None = None
    """PostgreSQL's CPU seconds over the run (None on SQLite)."""
    leases_taken_per_second: float = -1.0
    leases_given_back_per_second: float = -1.0
    most_lease_owners: int = -1
    """The most workers seen holding leases at once."""

    @property
    def failures(self) -> list[str]:
        """What is wrong with the crawl; empty when it is right."""
        found = self.audit.problems(complete=not self.stopped)
        if not self.stopped and self.trawl_exit != 0:
            found.append(f"trawl exited with {self.trawl_exit}")
        if self.violations:
            found.append(f"{self.violations} politeness violations")
        if self.max_inflight_per_host > 1:
            found.append(f"{self.max_inflight_per_host} requests in flight on one host")
        return found

    @property
    def database_ms_per_1000_pages(self) -> float | None:
        if self.database_cpu_seconds is None:
            return None
        return round(self.database_cpu_seconds * 1e6 / max(1, self.pages), 1)

    def by_minute(self, figure: str = "pages_per_second") -> str:
        """The mean of a sample's ``figure`` over each minute of the run."""
        minutes: dict[int, list[float]] = {}
        for sample in self.series:
            value = getattr(sample, figure)
            if value >= 0:
                minutes.setdefault(int(max(0.0, sample.seconds - 0.01) // 60), []).append(value)
        return ", ".join(f"{sum(v) / len(v):.0f}" for _, v in sorted(minutes.items())) or "-"

    def table(self) -> str:
        a = self.audit
        growth = self.rss_growth_per_held_host
        fit = "no samples" if growth is None else f"RSS growth / most hosts held {growth:.0f} B"
        if self.settled is None:
            settled = "no samples"
        else:
            since, first, last = self.settled
            settled = (
                f"from {since:.0f} s (hosts held first at 90% of their most): "
                f"{first / 2**20:.0f} -> {last / 2**20:.0f} MB ({(last - first) / 2**20:+.0f} MB)"
            )
        rows = [
            ("world", f"{self.hosts} hosts x ~{self.pages_per_host} pages, {self.seeds} seeds; "
                      f"truth {self.truth_pages} pages, {self.truth_discovered} URLs"),
            ("run", f"{self.wall_seconds:.1f} s, "
                    + (f"stopped at {self.duration_limit:g} s" if self.stopped else "to the end")
                    + f", trawl exit {self.trawl_exit}"),
            ("pages/s", f"{self.pages_per_second:.1f} ({self.pages} pages, "
                        f"peak interval {self.peak_pages_per_second:.1f})"),
            ("pages/s by minute", self.by_minute()),
            ("requests", f"{self.requests}; statuses {self.statuses}"),
            ("store", f"{self.store}, {self.workers} worker(s), at most "
                      f"{self.most_lease_owners} holding leases at once"),
            ("leases/s", f"{self.leases_taken_per_second:.1f} taken, "
                         f"{self.leases_given_back_per_second:.1f} given back (to SIGINT); "
                         "taken by minute "
                         + self.by_minute("leases_taken_per_second")),
            ("PostgreSQL CPU", "-" if self.database_cpu_seconds is None else
                               f"{self.database_cpu_seconds:.1f} s, "
                               f"{self.database_ms_per_1000_pages:.0f} ms per 1,000 pages"),
            ("trawl CPU", f"{self.cpu_ms_per_page:.2f} ms/page (process trees)"),
            ("trawl RSS, fds", f"peak {self.peak_rss_mb:.0f} MB, peak {self.peak_trawl_fds} fds"),
            ("memory per host", fit),
            ("RSS settled", settled),
            ("server", f"{self.server_processes} process(es), CPU {self.server_cpu_share:.1%} "
                       f"of a core, lateness p50 {self.server_lateness_ms_p50:.1f} ms p99 "
                       f"{self.server_lateness_ms_p99:.1f} ms, loop lag p99 "
                       f"{self.server_loop_lag_ms_p99:.1f} ms max "
                       f"{self.server_loop_lag_ms_max:.1f} ms"),
            ("connections", f"{self.connections_used} used, "
                            f"{self.requests / max(1, self.connections_used):.2f} requests a "
                            "connection"),
            ("peaks", f"{self.peak_server_inflight} in flight, {self.peak_server_connections} "
                      f"connections, {self.peak_hosts_in_service} hosts in service"),
            ("DNS", f"{self.dns_queries} queries for {self.dns_names} names "
                    f"({self.dns_queries_per_host:.2f} a name), answers {self.dns_answers}"),
            ("politeness", f"{self.violations} violations, max {self.max_inflight_per_host} "
                           "in flight per host"),
            ("shared addresses", f"{self.shared_requests_per_second:.1f} requests/s in all, "
                                 "max in flight " + ", ".join(
                f"{k}: {v}" for k, v in sorted(self.max_inflight_per_shared_address.items()))),
            ("store vs truth", f"{a.missing} missing, {a.unexpected} unexpected, "
                               f"{a.discovered_diff} discovered differently"),
            ("store vs log", f"{a.duplicate_200s} duplicate 200s ({a.late_repeats} more "
                             "after an answer at the timeout), "
                             f"{a.unrecorded_200s} unrecorded 200s, "
                             f"{a.disallowed_requests} disallowed requests"),
            ("flaky DNS hosts", f"{a.flaky_recovered} of {a.flaky_reached} fetched"),
            ("verdict", "; ".join(self.failures) or "correct"),
        ]  # fmt: skip
        width = max(len(name) for name, _ in rows)
        lines = [f"{name:<{width}}  {value}" for name, value in rows]
        lines += [f"  {example}" for example in [*self.violation_examples, *a.examples]]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "failures": self.failures}, sort_keys=True)


def _trawl_commands(
    world: World,
    run: _Run,
    ca: Path,
    extra: Sequence[str],
    local: Sequence[str],
    shared: SharedCrawl | None,
) -> list[list[str]]:
    """The crawl process's command and, on a shared crawl, every other worker's."""
    resolver = ["--nameserver", f"127.0.0.1:{run.dns_port}", "--hosts-file", "",
                "--allow-network", "127.0.0.0/8", "--ca-file", str(ca)]  # fmt: skip
    crawl = ["crawl", *world.seeds(), "--max-depth", "1000", *extra]
    if shared is None:
        return [[sys.executable, "-m", "trawl", *crawl, *resolver, "--data-dir", str(run.data[0]),
                 "--fresh", "--metrics-port", str(run.metrics_ports[0]), "--json",
                 "--no-progress", *local]]  # fmt: skip
    return [
        [sys.executable, "-m", "trawl", *(crawl if n == 0 else ["worker"]), *resolver,
         "--store", shared.dsn, "--crawl", shared.crawl, "--worker-id", f"w{n}",
         "--data-dir", str(data), "--metrics-port", str(port), "--json", "--no-progress",
         *local]
        for n, (data, port) in enumerate(zip(run.data, run.metrics_ports, strict=True))
    ]  # fmt: skip


@contextlib.contextmanager
def _helper(command: list[str], stderr: Path) -> Iterator[subprocess.Popen[str]]:
    """A helper process, once it has printed ``ready``; stopped with SIGTERM (killed after
    30 s) on the way out, whatever happened."""
    with stderr.open("w") as errors:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True,
            cwd=Path(__file__).parents[1],
        )  # fmt: skip
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{command[2]} did not start: {stderr.read_text()[-2000:]}")
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _delay_of(extra: Sequence[str]) -> float:
    """The --delay the extra arguments set, else trawl's default (1 s)."""
    for n, arg in enumerate(extra):
        if arg == "--delay" and n + 1 < len(extra):
            return float(extra[n + 1])
        if arg.startswith("--delay="):
            return float(arg.split("=", 1)[1])
    return 1.0


def run_world(
    params: WorldParams,
    *,
    duration: float = 0.0,
    extra: Sequence[str] = (),
    interval: float = 10.0,
    processes: int = 1,
    latency_scale: float = 1.0,
    idle_timeout: float = 5.0,
    run_dir: Path | None = None,
    out: TextIO | None = None,
    store: str | None = None,
    workers: int = 1,
    local: Sequence[str] = (),
    keep_store: bool = False,
) -> WorldResult:
    """Run the world benchmark once. ``run_dir`` (an empty directory) keeps the access
    logs (access-N.log), trawl's data dirs (trawl-data, or trawl-data-N for worker N), its
    summaries and stderr (trawl-N.json, trawl-N.err); without it they go in a temporary
    directory. ``out`` gets the progress lines (None: quiet). ``store`` (a PostgreSQL
    URL) keeps the crawl there, worked by ``workers`` processes; ``local`` goes to every
    trawl process; ``keep_store`` leaves the crawl's schema in the database."""
    world = World(params)
    truth = ground_truth(world)
    shared = None if store is None else SharedCrawl(store)
    with contextlib.ExitStack() as stack:
        if run_dir is None:
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trawl-world-")))
        run_dir.mkdir(parents=True, exist_ok=True)
        run = _Run(run_dir, processes, workers if shared else 1)
        ca, cert, key = make_certificates(run_dir)
        p = params
        world_args = [str(v) for v in (p.hosts, p.pages, p.seed, p.http_port, p.https_port)]
        with contextlib.ExitStack() as helpers:
            helpers.enter_context(_helper(
                [sys.executable, "-m", "bench.world_dns", *world_args, str(run.dns_port),
                 str(run.counts)], run_dir / "dns.err"))  # fmt: skip
            servers = []
            for n, log in enumerate(run.logs):
                config = ServerConfig(
                    p.hosts, p.pages, p.seed, p.http_port, p.https_port, str(cert), str(key),
                    str(log), n, min(1.0, interval), latency_scale, idle_timeout,
                )  # fmt: skip
                command = [sys.executable, "-m", "bench.world_server", json.dumps(asdict(config))]
                servers.append(helpers.enter_context(_helper(command, run_dir / f"server-{n}.err")))
            commands = _trawl_commands(world, run, ca, extra, local, shared)
            if shared is None:
                crawl = run.crawl(commands, servers, SqliteHosts(run.data[0]), interval, duration,
                                  out)  # fmt: skip
            else:
                if not keep_store:
                    stack.callback(shared.drop)
                database = PostgresCpu(period=1.0)
                database.start()
                crawl = run.crawl(commands, servers, shared, interval, duration, out)
                crawl.database_cpu = max(0.0, database.stop() - shared.sampler_cpu())
        requests = parse(line for log in run.logs for line in log.read_text().splitlines())
        if shared is not None:
            urls = shared.urls()
        else:
            urls = read_store(run.data[0]) if (run.data[0] / "crawl.db").is_file() else {}
        audit = audit_store(world, truth, requests, urls, crawl.stopped_ns)
        dns = json.loads(run.counts.read_text())
    if crawl.code not in (0, 130) and out is not None:
        out.write(crawl.errors)
    result = _result(world, truth, requests, audit, dns, crawl, processes, _delay_of(extra))
    result.workers, result.store = run.workers, "sqlite" if store is None else store
    return result


@dataclass(slots=True)
class _Crawl:
    """The trawl processes as the driver saw them."""

    code: int
    """The first non-zero exit status of a worker, else 0."""
    wall: float
    cpu: float
    """CPU seconds of the workers and their children (os.wait4)."""
    stopped_ns: int | None
    """When they were sent SIGINT (CLOCK_MONOTONIC), if they were."""
    duration: float
    monitor: Monitor
    errors: str
    database_cpu: float | None = None


class _Run:
    """The ports and files of one run."""

    def __init__(self, where: Path, processes: int, workers: int) -> None:
        self.where, self.workers = where, workers
        self.dns_port = free_port(socket.SOCK_DGRAM)
        self.metrics_ports = [free_port() for _ in range(workers)]
        self.counts = where / "dns.json"
        self.logs = [where / f"access-{n}.log" for n in range(processes)]
        for log in self.logs:
            log.touch()
        names = ["trawl-data"] if workers == 1 else [f"trawl-data-{n}" for n in range(workers)]
        self.data = [where / name for name in names]

    def crawl(
        self,
        commands: list[list[str]],
        servers: list[subprocess.Popen[str]],
        store: HostsReader,
        interval: float,
        duration: float,
        out: TextIO | None,
    ) -> _Crawl:
        """Run the workers to their exit, or SIGINT them after ``duration`` seconds (0:
        never). The second and later start once the first stored the crawl's policy."""
        started = time.perf_counter()
        workers: list[subprocess.Popen[bytes]] = []
        monitor = Monitor([], servers, self.logs, self.metrics_ports, store, interval, out)
        codes, cpu, stopped_ns = [], 0.0, None
        try:
            for n, command in enumerate(commands):
                if n == 1 and isinstance(store, SharedCrawl):
                    store.wait_for_policy(lambda: workers[0].poll() is None)
                with (
                    (self.where / f"trawl-{n}.json").open("w") as summary,
                    (self.where / f"trawl-{n}.err").open("w") as errors,
                ):
                    worker = subprocess.Popen(
                        command, stdout=summary, stderr=errors, start_new_session=True
                    )
                workers.append(worker)
                monitor.trawl.append(workers[-1].pid)
                if n == 0:
                    monitor.start()
            for worker in workers:
                while not (exited := os.wait4(worker.pid, os.WNOHANG))[0]:
                    if duration and time.perf_counter() - started >= duration and not stopped_ns:
                        stopped_ns = time.monotonic_ns()
                        monitor.stopping = True
                        for each in workers:
                            each.send_signal(signal.SIGINT)
                    time.sleep(0.1)
                _, status, usage = exited
                worker.returncode = os.waitstatus_to_exitcode(status)
                codes.append(worker.returncode)
                cpu += usage.ru_utime + usage.ru_stime
        finally:
            for worker in workers:
                if worker.returncode is None:
                    worker.kill()
                    worker.wait()
            if monitor.is_alive():
                monitor.stop()
        wall = time.perf_counter() - started
        text = "".join((self.where / f"trawl-{n}.err").read_text(errors="replace")[-3000:]
                       for n in range(len(workers)))  # fmt: skip
        code = next((c for c in codes if c != 0), 0)
        return _Crawl(code, wall, cpu, stopped_ns, duration, monitor, text)


def _result(
    world: World,
    truth: GroundTruth,
    requests: list[Request],
    audit: Audit,
    dns: dict[str, dict[str, int]],
    crawl: _Crawl,
    processes: int,
    delay: float,
) -> WorldResult:
    params, wall, samples = world.params, crawl.wall, crawl.monitor.samples
    pages = sum(1 for r in requests if r.status == 200 and world_page(world, r.host, r.path))
    violations = politeness(requests, world, delay)
    per_host = max_inflight_by(requests, lambda r: r.host)
    shared = set(SHARED_ADDRESSES)
    to_shared = [r for r in requests if r.local in shared]
    per_address = max_inflight_by(to_shared, lambda r: r.local)
    lags = crawl.monitor.lag_samples
    queries = dns.get("queries", {})
    statuses = dict(Counter(str(r.status) for r in requests))
    lateness = [r.lateness_ms for r in requests if r.status != ABANDONED]
    return WorldResult(
        hosts=params.hosts, pages_per_host=params.pages, seeds=params.seed_count,
        truth_pages=len(truth.fetched), truth_discovered=len(truth.discovered),
        server_processes=processes, duration_limit=crawl.duration,
        stopped=crawl.stopped_ns is not None, trawl_exit=crawl.code,
        wall_seconds=round(wall, 2), pages=pages, pages_per_second=round(pages / wall, 1),
        peak_pages_per_second=max((s.pages_per_second for s in samples), default=0.0),
        requests=len(requests), cpu_ms_per_page=round(crawl.cpu * 1000 / max(1, pages), 2),
        peak_rss_mb=round(max((s.rss for s in samples), default=0) / 2**20, 1),
        peak_trawl_fds=max((s.trawl_fds for s in samples), default=0),
        peak_server_connections=max((s.connections for s in samples), default=0),
        peak_server_inflight=max((s.inflight for s in samples), default=0),
        peak_hosts_in_service=max((s.hosts_in_service for s in samples), default=0),
        server_cpu_share=round(crawl.monitor.server_cpu / wall, 4),
        server_lateness_ms_p50=round(percentile(lateness, 0.5), 2),
        server_lateness_ms_p99=round(percentile(lateness, 0.99), 2),
        server_loop_lag_ms_p99=round(percentile(lags, 0.99), 2),
        server_loop_lag_ms_max=max(lags, default=0.0),
        dns_queries=sum(queries.values()), dns_names=len(queries),
        dns_queries_per_host=round(sum(queries.values()) / max(1, len(queries)), 2),
        dns_answers=dns.get("answers", {}), violations=len(violations),
        violation_examples=[v.line() for v in violations[:10]],
        max_inflight_per_host=max(per_host.values(), default=0),
        max_inflight_per_shared_address=per_address,
        shared_requests_per_second=round(len(to_shared) / wall, 1), statuses=statuses,
        connections_used=len({r.connection for r in requests}),
        rss_growth_per_held_host=_rounded(rss_per_held_host(samples)),
        settled=settled_rss(samples),
        audit=audit, series=samples, database_cpu_seconds=_rounded(crawl.database_cpu),
        leases_taken_per_second=_mean(samples, "leases_taken_per_second"),
        leases_given_back_per_second=_mean(samples, "leases_given_back_per_second"),
        most_lease_owners=max((s.lease_owners for s in samples), default=-1),
    )  # fmt: skip


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _mean(samples: list[Sample], figure: str) -> float:
    """The mean of ``figure`` over the samples that know it, taken before trawl was sent
    SIGINT (its shutdown gives every lease back); -1 when none does."""
    known = [float(getattr(s, figure)) for s in samples
             if getattr(s, figure) >= 0 and not s.stopping]  # fmt: skip
    return round(sum(known) / len(known), 2) if known else -1.0


def world_page(world: World, name: str, path: str) -> bool:
    """Whether ``path`` is a page of the world host ``name``."""
    index = world.index_of(name)
    return index is not None and world.host(index).page_of(path) is not None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.world", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=10, help="pages per host (mean)")
    parser.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help="stop trawl with SIGINT after this many seconds (0: until done)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extra", default="", help="more trawl crawl arguments, one string")
    parser.add_argument(
        "--local", default="", help="machine-local trawl arguments for every worker, one string"
    )
    parser.add_argument(
        "--store", default=None, help="a PostgreSQL URL to keep the crawl in (default: SQLite)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="trawl processes sharing the --store crawl"
    )
    parser.add_argument(
        "--keep-store", action="store_true", help="leave the --store crawl's schema in place"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between lines")
    parser.add_argument("--processes", type=int, default=1, help="server processes")
    parser.add_argument(
        "--latency-scale", type=float, default=1.0, help="multiplies every drawn server latency"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=5.0,
        help="seconds the server keeps an idle connection open",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="an empty directory to keep the logs and trawl's data in",
    )
    args = parser.parse_args(argv)  # fmt: skip
    if args.hosts < 1 or args.pages < 1 or args.processes < 1 or args.workers < 1:
        parser.error("--hosts, --pages, --processes and --workers must be at least 1")
    if args.workers > 1 and args.store is None:
        parser.error("--workers above 1 needs --store postgresql://...")
    try:
        extra, local = shlex.split(args.extra), shlex.split(args.local)
        _delay_of(extra)
    except ValueError as error:
        parser.error(f"--extra or --local: {error}")
    if args.store is not None:
        try:
            SharedCrawl(args.store).check()
        except psycopg.Error as error:
            parser.error(f"--store: {str(error).strip().splitlines()[0]}")
    # SIGTERM unwinds like an exception, so trawl and the helpers are stopped too.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    http_port = free_port(address=ANY)
    params = WorldParams(args.hosts, args.pages, args.seed, http_port, free_port(address=ANY))
    result = run_world(
        params, duration=args.duration, extra=extra, interval=args.interval,
        processes=args.processes, latency_scale=args.latency_scale,
        idle_timeout=args.idle_timeout, run_dir=args.run_dir, out=sys.stderr,
        store=args.store, workers=args.workers, local=local, keep_store=args.keep_store,
    )  # fmt: skip
    print(result.to_json() if args.json else result.table())
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
