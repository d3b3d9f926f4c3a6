"""The reference the crawl target is set against: wget, one connection, on the same site.

The throughput target of the crawl benchmark is "the C tool's speed": wget fetching the
site one request at a time over one connection, parsing nothing but links. Machines of
the same kind differ by two to three times in speed, so the reference is measured on the
machine and the site of the run it is compared with (``python -m bench.crawl
--reference``), after trawl's crawl, with a fresh server of its own.

wget asks for each host's address directly with the host's name in the Host header (the
name resolution trawl does through ``--resolve``; wget has no such option), so it follows
each host's relative links and stays on that host; the hosts are crawled one after the
other. It obeys robots.txt and follows no redirect (``--max-redirect=0``): the site's
redirects name other hosts, which wget would look up in the system's DNS, off loopback.
Its figures are the pages it requested (robots.txt left out), the wall time and its CPU
time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.accesslog import page_requests
from bench.servers import host_addresses, serve
from bench.site import GroundTruth

__all__ = ["Reference", "run_wget", "wget_available"]


@dataclass(frozen=True, slots=True)
class Reference:
    """wget's figures on a site: pages requested, wall seconds, CPU seconds."""

    pages: int
    requests: int
    wall_seconds: float
    cpu_seconds: float
    outside_truth: int
    """Pages it requested that the ground truth does not fetch (0 on a correct site)."""

    @property
    def pages_per_second(self) -> float:
        return round(self.pages / self.wall_seconds, 1) if self.wall_seconds else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return round(self.cpu_seconds * 1000 / max(1, self.pages), 3)

    def line(self) -> str:
        """The figures as one line of the benchmark's table."""
        return (
            f"{self.pages_per_second:.1f} pages/s ({self.pages} pages, one connection, "
            f"{self.cpu_ms_per_page:.3f} CPU ms/page)"
        )


def wget_available() -> bool:
    """Whether wget is on the PATH."""
    return shutil.which("wget") is not None


def _wget(host: str, address: str, port: int, scratch: Path) -> float:
    """Crawl one host with wget; its CPU seconds."""
    command = [
        "wget", "--recursive", "--level=inf", "--max-redirect=0", "--no-verbose", "--delete-after",
        f"--directory-prefix={scratch}", f"--header=Host: {host}:{port}",
        f"http://{address}:{port}/",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    return usage.ru_utime + usage.ru_stime


def run_wget(site: Path, truth: GroundTruth, port: int, kind: str, run: Path) -> Reference:
    """Serve ``site`` afresh (in ``run``) and crawl every host with wget, one at a time."""
    if not wget_available():
        raise RuntimeError("the reference needs wget, which is not installed")
    addresses = host_addresses(truth.hosts)
    cpu = 0.0
    with serve(site, truth.hosts, port, run / "server", kind) as served:
        start = time.perf_counter()
        for host in truth.hosts:
            cpu += _wget(host, addresses[host], port, run / "wget")
        wall = time.perf_counter() - start
    requests = page_requests(served.records, port)
    return Reference(
        pages=len(requests),
        requests=sum(requests.values()),
        wall_seconds=round(wall, 3),
        cpu_seconds=round(cpu, 3),
        outside_truth=len(set(requests) - truth.fetched),
    )
