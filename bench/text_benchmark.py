"""Main-text extractors on the public article-extraction benchmark: F1, precision, recall.

The benchmark directory holds ``html/<id>.html.gz`` (181 real news and blog pages) and
``ground-truth.json`` (``{id: {"articleBody": ..., "url": ...}}``). A page's text and
its article body are each split into lower-case word tokens (``\\w+``); precision is the
share of extracted tokens found in the truth, recall the share of truth tokens found in
the extraction, both over token multisets, and F1 their harmonic mean. Each figure is
computed per page and averaged over the pages.

An empty extraction of a non-empty truth scores precision 0, recall 0 and F1 0; an
empty extraction of an empty truth scores 1 on all three.

Every candidate of ``bench.text_quality`` gets the page decoded once
(``trawl.content.text.decode_html``, no HTTP charset); trawl's own text stage gets the
raw bytes, as in a crawl (``extract_text(body, url, None)``), so its time includes
decoding. Time is the CPU time (``time.process_time``) of ``repeat`` passes over the
pages, given as milliseconds per page.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.text_quality import EXTRACTORS, Extractor
from trawl.content.text import decode_html, extract_text

__all__ = [
    "BENCHMARK_DIR",
    "TRAWL",
    "TRAWL_MARKDOWN",
    "BenchmarkPage",
    "Score",
    "Summary",
    "evaluate",
    "load_benchmark",
    "print_table",
    "score",
    "tokens",
]

BENCHMARK_DIR = Path(__file__).resolve().parents[2] / "shared" / "extraction-benchmark"
TRAWL = "trawl extract_text"
"""The row of trawl's own text stage, run on the raw bytes."""
TRAWL_MARKDOWN = "trawl extract_text, Markdown"
"""The same with ``--text-format markdown``: the words of its Markdown are scored."""

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class BenchmarkPage:
    """One benchmark page: its bytes, its decoded text and its article body."""

    name: str
    url: str
    body: bytes
    html: str
    truth: str


@dataclass(frozen=True, slots=True)
class Score:
    """Precision, recall and F1 of one extraction against its truth."""

    precision: float
    recall: float
    f1: float


@dataclass(frozen=True, slots=True)
class Summary:
    """One extractor's means over the pages, and its CPU milliseconds per page."""

    f1: float
    precision: float
    recall: float
    cpu_ms: float


def tokens(text: str) -> Counter[str]:
    """The multiset of lower-case word tokens of ``text``."""
    return Counter(_WORD.findall(text.lower()))


def score(extracted: str, truth: str) -> Score:
    """Multiset precision, recall and F1 of the tokens of ``extracted`` against ``truth``."""
    got, want = tokens(extracted), tokens(truth)
    n_got, n_want = sum(got.values()), sum(want.values())
    if n_got == 0 or n_want == 0:
        same = float(n_got == n_want)
        return Score(same, same, same)
    overlap = sum((got & want).values())
    if overlap == 0:
        return Score(0.0, 0.0, 0.0)
    precision, recall = overlap / n_got, overlap / n_want
    return Score(precision, recall, 2 * precision * recall / (precision + recall))


def load_benchmark(
    directory: Path = BENCHMARK_DIR, names: Sequence[str] | None = None
) -> list[BenchmarkPage]:
    """The pages of the benchmark in ``directory`` by id, or those of ``names`` in order."""
    truth = json.loads((directory / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for name in sorted(truth) if names is None else names:
        body = gzip.decompress((directory / "html" / f"{name}.html.gz").read_bytes())
        entry = truth[name]
        url = entry.get("url") or f"https://{name}.example/"
        pages.append(
            BenchmarkPage(name, url, body, decode_html(body, None), entry["articleBody"] or "")
        )
    return pages


def _summarise(
    run: Callable[[BenchmarkPage], str], pages: Sequence[BenchmarkPage], repeat: int
) -> Summary:
    scores = [score(run(page), page.truth) for page in pages]
    start = time.process_time()
    for _ in range(repeat):
        for page in pages:
            run(page)
    cpu_ms = (time.process_time() - start) * 1000 / (repeat * len(pages))
    return Summary(
        f1=statistics.fmean(s.f1 for s in scores),
        precision=statistics.fmean(s.precision for s in scores),
        recall=statistics.fmean(s.recall for s in scores),
        cpu_ms=cpu_ms,
    )


def _decoded(run: Extractor) -> Callable[[BenchmarkPage], str]:
    return lambda page: run(page.html, page.url)


def _trawl(page: BenchmarkPage) -> str:
    found = extract_text(page.body, page.url, None)
    return "" if found is None else found.text


def _trawl_markdown(page: BenchmarkPage) -> str:
    found = extract_text(page.body, page.url, None, "markdown")
    return "" if found is None else found.text


def evaluate(pages: Sequence[BenchmarkPage], repeat: int = 1) -> dict[str, Summary]:
    """Every candidate of ``bench.text_quality``, then trawl's text stage, on ``pages``."""
    results = {name: _summarise(_decoded(run), pages, repeat) for name, run in EXTRACTORS.items()}
    results[TRAWL] = _summarise(_trawl, pages, repeat)
    results[TRAWL_MARKDOWN] = _summarise(_trawl_markdown, pages, repeat)
    return results


def print_table(results: dict[str, Summary], pages: int, repeat: int) -> None:
    """The results as a Markdown table, one row per extractor."""
    width = max(len(name) for name in results) + 2
    print(f"| {'extractor'.ljust(width - 1)}| F1 | precision | recall | CPU ms/page |")
    print("|---|---|---|---|---|")
    for name, row in results.items():
        print(
            f"| {name.ljust(width - 1)}| {row.f1:.3f} | {row.precision:9.3f} | "
            f"{row.recall:6.3f} | {row.cpu_ms:11.2f} |"
        )
    print(
        f"\nMeans over {pages} pages; CPU time of {repeat} pass(es) over the pages, "
        "per page; empty extractions score 0.\n"
    )
