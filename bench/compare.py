"""Two versions of trawl on one site, run by turns: is a change faster, and by how much?

    python -m bench.compare --against ../base/src [--runs 3] [--hosts 20 --pages 500]

Runs on one machine vary by 15-30 %, and a machine's speed drifts over minutes, so a
before/after figure means something only when both sides are measured the same way, at
the same time, more than once. This runs the crawl benchmark (bench.crawl) with this
checkout's trawl and with the trawl of another checkout's ``src`` directory (``git
worktree add ../base <commit>``), alternating, ``--runs`` times each, and prints every run,
the medians and their ratios. The exit status is 1 when any run is incorrect.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.crawl import BenchResult, add_run_arguments, run_from

__all__ = ["Comparison", "compare", "main"]

SIDES = ("this", "against")


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every run of both sides, in the order they ran."""

    runs: list[tuple[str, BenchResult]]

    def of(self, side: str) -> list[BenchResult]:
        return [result for name, result in self.runs if name == side]

    def median(self, side: str, figure: Callable[[BenchResult], float]) -> float:
        return statistics.median(figure(result) for result in self.of(side))

    @property
    def failures(self) -> list[str]:
        return [f"{side}: {problem}" for side, r in self.runs for problem in r.failures]

    def table(self) -> str:
        """Every run, the medians of each side and this side's over the other's."""
        lines = [f"{'run':<16} {'pages/s':>9} {'crawl loop':>11} {'CPU ms/page':>12}  verdict"]
        for side, r in self.runs:
            lines.append(
                f"{side:<16} {r.pages_per_second:>9.1f} {r.crawl_pages_per_second:>11.1f} "
                f"{r.cpu_ms_per_page:>12.3f}  {'; '.join(r.failures) or 'correct'}"
            )
        rates: dict[str, tuple[float, float, float]] = {}
        for side in SIDES:
            rates[side] = (
                self.median(side, lambda r: r.pages_per_second),
                self.median(side, lambda r: r.crawl_pages_per_second),
                self.median(side, lambda r: r.cpu_ms_per_page),
            )
            pages, loop, cpu = rates[side]
            lines.append(f"{'median ' + side:<16} {pages:>9.1f} {loop:>11.1f} {cpu:>12.3f}")
        ratios = [a / b if b else 0.0 for a, b in zip(rates["this"], rates["against"], strict=True)]
        lines.append(
            f"this/against: pages/s {ratios[0]:.3f}x, crawl loop {ratios[1]:.3f}x, "
            f"CPU ms/page {ratios[2]:.3f}x"
        )
        return "\n".join(lines)


def compare(against: Path, runs: int, bench: Callable[[Path | None], BenchResult]) -> Comparison:
    """``bench`` (a bench.crawl run given the source to crawl with, None for this
    checkout's) ``runs`` times for each side, alternating, this side first."""
    results: list[tuple[str, BenchResult]] = []
    for _ in range(runs):
        for side in SIDES:
            results.append((side, bench(against if side == "against" else None)))
    return Comparison(results)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--against", type=Path, required=True, help="another checkout's src")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    if not (args.against / "trawl" / "__init__.py").is_file():
        parser.error(f"--against {args.against}: not a src directory holding trawl")
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    def bench(source: Path | None) -> BenchResult:
        return run_from(args, source=source)

    comparison = compare(args.against, args.runs, bench)
    print(comparison.table())
    return 1 if comparison.failures else 0


if __name__ == "__main__":
    sys.exit(main())
