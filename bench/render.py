"""The rendering tier's cost: rendered pages/s, CPU and peak RSS per rendered page.

``python -m bench.render --hosts 4 --items 20`` serves the single-page application of
trawl.demo.spa (each host a home page and ``--items`` item pages that only their
scripts fill, and as many plain reviews pages) from this process, and crawls it with
``python -m trawl crawl --render auto`` in a child process. The child's CPU is read when
it is reaped (``os.wait4``): the crawl process, the Playwright driver and Chromium's
processes, all reaped below it. Its resident memory is sampled every 0.1 s as the sum
over the child's whole process tree, each process by its proportional set size
(trawl.render.memory). The crawl must find every
page of the site (its ground truth) and render exactly the script-built ones.

The figures are printed as one JSON line; ``--baseline`` crawls the same site without
rendering too, for what rendering adds. ``--rule-on DIR`` instead reads every page of the
extraction benchmark in DIR (``html/*.html.gz``, static article pages) and prints how
many of them ``--render auto`` would render (trawl.render.rule), its false positives.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from trawl.demo import SiteServer
from trawl.demo.spa import spa_site
from trawl.extract.parser import parse_html
from trawl.render.memory import proportional, tree_memory
from trawl.render.rule import script_built


def _tree_memory(pid: int) -> int:
    """Bytes ``pid`` and every process below it hold (PSS, trawl.render.memory)."""
    return proportional(pid, 0) + tree_memory(pid)


def crawl(server: SiteServer, render: str, extra: Sequence[str]) -> dict[str, float]:
    """One crawl of the served site in a child process; its figures."""
    with tempfile.TemporaryDirectory(prefix="trawl-bench-render-") as tmp:
        args = [
            sys.executable, "-m", "trawl", "crawl", *server.site.seeds, *server.resolve_args(),
            "--data-dir", str(Path(tmp) / "data"), "--no-progress", "--json",
            "--delay", "0", "--response-factor", "0", "--render", render, *extra,
        ]  # fmt: skip
        started = time.monotonic()
        errors = (Path(tmp) / "stderr").open("w+b")
        child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors)
        peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.1):
                peak = max(peak, _tree_memory(child.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        errors.seek(0)
        err = errors.read()
        errors.close()
        wall = time.monotonic() - started
        done.set()
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"the crawl failed ({child.returncode}): {err.decode()[-2000:]}")
    summary = json.loads(out)
    cpu = usage.ru_utime + usage.ru_stime
    rendered = summary.get("render", {}).get("rendered", 0)
    pages = summary["fetched"]
    return {
        "pages": pages,
        "rendered": rendered,
        "wall_s": round(wall, 2),
        "pages_per_s": round(pages / wall, 2),
        "rendered_per_s": round(rendered / wall, 2),
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_rendered": round(1000 * cpu / rendered, 1) if rendered else 0.0,
        "peak_pss_mib": round(peak / 2**20, 1),
        "render_requests": summary.get("render", {}).get("render_requests", 0),
        "restarts": summary.get("render", {}).get("render_restarts", 0),
    }


def _parse_ms(bodies: list[bytes], signals: bool) -> float:
    """CPU milliseconds a page of ``bodies`` takes to parse, the least of three rounds."""
    rounds = []
    for _ in range(3):
        started = time.process_time()
        for body in bodies:
            parse_html(body, script_signals=signals)
        rounds.append((time.process_time() - started) * 1000 / len(bodies))
    return round(min(rounds), 3)


def rule_on(directory: Path) -> dict[str, object]:
    """How many of the pages in ``directory`` the ``auto`` rule would render, the margins
    the others clear it by, and what reading the signals adds to a page's parse."""
    pages = sorted((directory / "html").glob("*.html.gz"))
    bodies = [gzip.decompress(path.read_bytes()) for path in pages]
    rendered: list[str] = []
    least_text, fewest_links = None, None
    for path, body in zip(pages, bodies, strict=True):
        page = parse_html(body, script_signals=True)
        assert page.signals is not None
        if script_built(page.signals, len(page.links)):
            rendered.append(path.name)
        text, links = page.signals.text_chars, len(page.links)
        least_text = text if least_text is None else min(least_text, text)
        fewest_links = links if fewest_links is None else min(fewest_links, links)
    return {
        "pages": len(pages), "rendered": len(rendered), "rendered_pages": rendered,
        "least_text_chars": least_text, "fewest_links": fewest_links,
        "parse_ms": _parse_ms(bodies, False), "parse_with_signals_ms": _parse_ms(bodies, True),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.render", description=__doc__)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--render", default="auto", choices=("auto", "always"))
    parser.add_argument("--baseline", action="store_true", help="also crawl without rendering")
    parser.add_argument("--extra", default="", help="more trawl crawl options, one string")
    parser.add_argument("--rule-on", type=Path, help="an extraction benchmark directory")
    args = parser.parse_args(argv)
    if args.rule_on is not None:
        print(json.dumps(rule_on(args.rule_on)))
        return 0
    extra = args.extra.split()
    factory = lambda port: spa_site(port, hosts=args.hosts, items=args.items)  # noqa: E731
    with SiteServer(factory) as server:
        truth = len(server.site.ground_truth)
        figures = crawl(server, args.render, extra)
        if figures["pages"] != truth:
            raise SystemExit(f"the crawl fetched {figures['pages']} pages of {truth}")
        expected = args.hosts * (1 + args.items) if args.render == "auto" else truth
        if figures["rendered"] != expected:
            raise SystemExit(f"{figures['rendered']} pages rendered, {expected} expected")
        print(json.dumps({"render": args.render, **figures}))
        if args.baseline:
            print(json.dumps({"render": "never", **crawl(server, "never", extra)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
