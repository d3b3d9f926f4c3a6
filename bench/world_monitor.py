"""The world benchmark's live figures: one `Sample` every interval while trawl crawls.

A thread reads, every interval: the new lines of the servers' access logs (pages/s and
hosts in service: distinct hosts with a request ending in the interval), the servers'
stats lines (requests in flight, open connections, event-loop lag), trawl's process trees
from /proc (CPU, RSS, open fds of the crawl process: one, or every worker of a shared
crawl, summed), trawl's Prometheus metrics (every unlabelled ``trawl_*`` gauge about
hosts or workers, among them the hosts it holds, summed over the workers) and the store
(bench.world_pg: hosts leased, hosts with URLs queued, leases taken and given back).
`settled_rss` reads from them whether the RSS stayed flat once the hosts held had grown.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from bench.procstat import TICKS, read_stat
from bench.world_pg import UNKNOWN, HostsReader

__all__ = ["Monitor", "Sample", "rss_per_held_host", "settled_rss", "tree_pids"]

HELD_GAUGE = "trawl_hosts_held"
SETTLED_SHARE = 0.9
"""Hosts held, as a share of the most held, from which the RSS is expected to be flat."""
_GAUGE_WORDS = (
    "host",
    "worker",
    "inflight",
    "in_flight",
    "held",
    "connection",
    "fd",
    "limit",
    "wait",
)


@dataclass(frozen=True, slots=True)
class Sample:
    """The crawl over one interval, or at its end."""

    seconds: float
    """Since trawl started."""
    pages_per_second: float
    requests_per_second: float
    inflight: int
    """Requests in flight at the server(s)."""
    connections: int
    """Connections open at the server(s)."""
    hosts_in_service: int
    cpu_ms_per_page: float
    rss: int
    trawl_fds: int
    server_cpu_share: float
    held_hosts: int
    """Hosts trawl holds: its `HELD_GAUGE` when it has one, else the hosts leased in the
    store; -1 unknown."""
    queued_hosts: int
    """Hosts with URLs queued in the store; -1 unknown."""
    gauges: dict[str, float] = field(default_factory=dict)
    stopping: bool = False
    """Taken after trawl was sent SIGINT: its shutdown, left out of the memory figures."""
    leases_taken_per_second: float = -1.0
    """Leases taken (the step of the hosts' summed lease generations); -1 unknown."""
    leases_given_back_per_second: float = -1.0
    """Leases taken less the growth of the hosts leased: given back, or taken over
    after they expired; -1 unknown."""
    lease_owners: int = -1
    """Workers holding at least one lease; -1 unknown."""

    def _leases(self) -> str:
        if self.leases_taken_per_second < 0:
            return "leases ?"
        return (
            f"leases +{self.leases_taken_per_second:.1f}/s "
            f"-{self.leases_given_back_per_second:.1f}/s, {self.lease_owners} owner(s)"
        )

    def line(self) -> str:
        gauges = " ".join(f"{k.removeprefix('trawl_')}={v:g}" for k, v in self.gauges.items())
        return (
            f"[{self.seconds:6.0f} s] {self.pages_per_second:7.1f} pages/s "
            f"{self.requests_per_second:7.1f} req/s | server: {self.inflight} in flight, "
            f"{self.connections} conns, CPU {self.server_cpu_share:.0%} | "
            f"{self.hosts_in_service} hosts in service, {self.held_hosts} held, "
            f"{self.queued_hosts} queued | trawl {self.cpu_ms_per_page:.1f} ms/page, "
            f"{self.rss / 2**20:.0f} MB, {self.trawl_fds} fds | {self._leases()} | {gauges}"
        )


def tree_pids(pid: int) -> list[int]:
    """``pid`` and all its descendants (none once it is gone)."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as children:
                    stack += [int(child) for child in children.read().split()]
    return found


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        stat = read_stat(f"/proc/{pid}/stat")
        if stat is not None:
            total += stat[1] + stat[2]
    return total


def _rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/statm", encoding="ascii") as f:
            total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def _gauges(port: int) -> dict[str, float]:
    """trawl's unlabelled gauges about hosts, workers and connections."""
    found: dict[str, float] = {}
    with contextlib.suppress(OSError, ValueError):
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if (
                name.startswith("trawl_") and "{" not in name and not name.endswith("_total")
                and not name.endswith("_created") and any(w in name for w in _GAUGE_WORDS)
            ):  # fmt: skip
                found[name] = float(value)
    return found


class Monitor(threading.Thread):
    """Samples the crawl every ``interval`` seconds until stopped; prints each sample."""

    def __init__(
        self,
        trawl: list[int],
        servers: list[subprocess.Popen[str]],
        logs: list[Path],
        metrics_ports: list[int],
        store: HostsReader,
        interval: float,
        out: TextIO | None,
    ) -> None:
        super().__init__(daemon=True)
        self.trawl, self.servers, self.metrics_ports = trawl, servers, metrics_ports
        self.store = store
        self.interval, self.out = interval, out
        self.logs = [log.open("r", encoding="utf-8") for log in logs]
        self.samples: list[Sample] = []
        self.lag_samples: list[float] = []
        self.server_cpu = 0.0
        self.stopping = False
        """Set once trawl is sent SIGINT; later samples are marked."""
        self._stats: dict[int, dict[str, int]] = {}
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._partial = [""] * len(logs)
        self._server_ticks = self._trawl_ticks = 0
        self._leases = UNKNOWN
        self._readers = [
            threading.Thread(target=self._read_stats, args=(n, s), daemon=True)
            for n, s in enumerate(servers)
        ]
        for reader in self._readers:
            reader.start()

    def _read_stats(self, n: int, server: subprocess.Popen[str]) -> None:
        assert server.stdout is not None
        for line in server.stdout:
            stats = json.loads(line)
            with self._lock:
                self.lag_samples += stats.pop("lags")
                self._stats[n] = stats

    def _new_lines(self) -> list[list[str]]:
        lines = []
        for n, log in enumerate(self.logs):
            text = self._partial[n] + log.read()
            complete, _, self._partial[n] = text.rpartition("\n")
            lines.append(complete.split("\n") if complete else [])
        return lines

    def run(self) -> None:
        started = last = time.perf_counter()
        self._leases = self.store.read()
        self._server_ticks = _cpu_ticks([s.pid for s in self.servers])
        while not self._done.wait(self.interval):
            now = time.perf_counter()
            self.samples.append(self._sample(now - started, now - last))
            last = now
            if self.out is not None:
                self.out.write(self.samples[-1].line() + "\n")
                self.out.flush()

    def _sample(self, seconds: float, elapsed: float) -> Sample:
        pages = requests = 0
        hosts = set()
        for lines in self._new_lines():
            for line in lines:
                host, target, status = line.split(" ", 3)[:3]
                requests += 1
                hosts.add(host)
                if status == "200" and target != "/robots.txt":
                    pages += 1
        pids = [pid for worker in self.trawl for pid in tree_pids(worker)]
        ticks = _cpu_ticks(pids)
        # An exiting worker takes its ticks with it: a negative step is no CPU.
        cpu = max(0, ticks - self._trawl_ticks) / TICKS
        self._trawl_ticks = ticks
        server_ticks = _cpu_ticks([s.pid for s in self.servers])
        server_cpu = (server_ticks - self._server_ticks) / TICKS
        self.server_cpu += server_cpu
        self._server_ticks = server_ticks
        with self._lock:
            stats = list(self._stats.values())
        fds = 0
        for worker in self.trawl:
            with contextlib.suppress(OSError):
                fds += len(os.listdir(f"/proc/{worker}/fd"))
        leases, before = self.store.read(), self._leases
        self._leases = leases
        known = min(leases.generations, before.generations) >= 0
        taken = leases.generations - before.generations
        given_back = taken - (leases.held - before.held)
        gauges: dict[str, float] = {}
        for port in self.metrics_ports:
            for name, value in _gauges(port).items():
                gauges[name] = gauges.get(name, 0.0) + value
        return Sample(
            seconds=round(seconds, 1),
            pages_per_second=round(pages / elapsed, 1),
            requests_per_second=round(requests / elapsed, 1),
            inflight=sum(s["inflight"] for s in stats),
            connections=sum(s["connections"] for s in stats),
            hosts_in_service=len(hosts),
            cpu_ms_per_page=round(cpu * 1000 / pages, 2) if pages else 0.0,
            rss=_rss(pids),
            trawl_fds=fds,
            server_cpu_share=round(server_cpu / elapsed, 3),
            held_hosts=int(gauges.get(HELD_GAUGE, leases.held)),
            queued_hosts=leases.queued,
            gauges=gauges,
            stopping=self.stopping,
            leases_taken_per_second=round(taken / elapsed, 2) if known else -1.0,
            leases_given_back_per_second=round(given_back / elapsed, 2) if known else -1.0,
            lease_owners=leases.owners,
        )

    def stop(self) -> None:
        """Stop sampling (the servers must still run: their CPU is read last)."""
        self._done.set()
        self.join()
        ticks = _cpu_ticks([s.pid for s in self.servers])
        self.server_cpu += (ticks - self._server_ticks) / TICKS
        for log in self.logs:
            log.close()


def rss_per_held_host(samples: list[Sample]) -> float | None:
    """(peak RSS - least RSS) / most hosts held: an upper bound of the bytes a held host
    costs, since everything else that grew (URLs, caches) is charged to the hosts too."""
    held = [s.held_hosts for s in samples if s.held_hosts > 0 and not s.stopping]
    if not held:
        return None
    rss = [s.rss for s in samples if s.rss > 0 and not s.stopping]
    return (max(rss) - min(rss)) / max(held)


def settled_rss(samples: list[Sample]) -> tuple[float, int, int] | None:
    """When the hosts held first reached `SETTLED_SHARE` of their most, the RSS then and
    the RSS at the last sample before trawl was stopped: RSS is a high-water mark (freed
    memory mostly stays with the process), so it follows the hosts held up as they grow
    and should stay flat from there. None without samples of both."""
    running = [s for s in samples if s.held_hosts >= 0 and s.rss > 0 and not s.stopping]
    if not running:
        return None
    most = max(s.held_hosts for s in running)
    first = next(s for s in running if s.held_hosts >= SETTLED_SHARE * most)
    return first.seconds, first.rss, running[-1].rss
