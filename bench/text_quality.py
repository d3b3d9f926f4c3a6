"""Main-text extractors compared on hand-checked pages: word-level F1 and time per page.

    python -m bench.text_quality [--repeat 20] [--pages DIR] [--benchmark DIR]

Each page ``NAME.html`` in ``tests/data/text`` comes with ``NAME.txt``, its main text as a
reader would copy it by hand: headline, standfirst, body, in-article headings, lists,
tables and captions; no navigation, cookie notices, bylines, share buttons, adverts,
related links, comments or reviews (``tests/data/text/README.md`` has the rules).

Quality is the F1 of the bag of lower-case words (``\\w+``) of the extracted text
against that of the expected text: precision is the share of extracted words that belong
to the main text, recall the share of the main text that was extracted. Every extractor
gets the same decoded page (``trawl.content.text.decode_html``), so decoding is not measured.
Time is the median over ``--repeat`` runs of one extraction of one page, after a warm-up
run; the table gives the mean of those medians over the pages. Figures are reported,
never judged.

The candidates are trafilatura (default settings, ``fast``, ``favor_recall``, and both),
resiliparse (``main_content``), trawl's extractor (trawl.content.article) whole and without
its article container or its block filter, and, as the floor every extractor must beat,
all the visible text of the page.

A second table shows how far small edits of each expected text move its SimHash (mean
bits over ``--trials`` seeded random pairs, and the share of pairs more than 3 bits
apart): a first line "Updated <day> March 2024 at <hh>:<mm>" with two different times,
the same with numbers spelt as letters (what the hash would do without masking numbers),
and a different ten-word advert line in the middle of the text.

A third table scores every candidate, and trawl's own text stage on the raw bytes, on the
public article-extraction benchmark in ``--benchmark`` (by default the
``extraction-benchmark`` directory beside the project, when it exists): mean F1,
precision and recall over its pages and CPU milliseconds per page (``bench.text_benchmark``).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import trafilatura
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree
from selectolax.lexbor import LexborHTMLParser

from trawl.content import article
from trawl.content.text import NEAR_DUPLICATE_BITS, decode_html, extract_text, hamming, simhash

__all__ = ["EXTRACTORS", "Page", "all_text", "load_pages", "main", "word_f1"]

PAGES_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "text"

_WORD = re.compile(r"\w+")
_SPELL = str.maketrans("0123456789", "abcdefghij")
_ADVERTS = (
    ["great", "deals", "on", "garden", "furniture", "sale", "half", "price", "shop", "online"],
    ["new", "car", "insurance", "quotes", "cheap", "compare", "save", "money", "fast", "apply"],
)
_INVISIBLE = ["script", "style", "noscript", "template"]

Extractor = Callable[[str, str], str]
"""An extractor: the decoded page and its URL in, its main text out."""


@dataclass(frozen=True, slots=True)
class Page:
    """One hand-checked page: its bytes, its decoded text and its expected main text."""

    name: str
    url: str
    body: bytes
    html: str
    expected: str


def load_pages(directory: Path = PAGES_DIR) -> list[Page]:
    """Every ``NAME.html`` in ``directory``, by name, with the ``NAME.txt`` beside it."""
    pages = []
    for path in sorted(directory.glob("*.html")):
        expected = path.with_suffix(".txt").read_text(encoding="utf-8")
        body = path.read_bytes()
        url = f"https://{path.stem.replace('_', '-')}.example/"
        pages.append(Page(path.stem, url, body, decode_html(body, None), expected))
    return pages


def _bag(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


def word_f1(extracted: str, expected: str) -> float:
    """The F1 score of the lower-case words of ``extracted`` against ``expected``."""
    got, want = _bag(extracted), _bag(expected)
    overlap = sum((got & want).values())
    if overlap == 0:
        return 0.0
    precision = overlap / sum(got.values())
    recall = overlap / sum(want.values())
    return 2 * precision * recall / (precision + recall)


def all_text(html: str, url: str = "") -> str:
    """Every piece of visible text on the page: the floor any extractor must beat."""
    tree = LexborHTMLParser(html)
    tree.strip_tags(_INVISIBLE)
    body = tree.body
    return "" if body is None else body.text(separator=" ")


def _trafilatura(*, fast: bool = False, favor_recall: bool = False) -> Extractor:
    def run(html: str, url: str) -> str:
        found = trafilatura.extract(
            html, url=url, include_comments=False, fast=fast, favor_recall=favor_recall
        )
        return found or ""

    return run


def _resiliparse(html: str, url: str) -> str:
    return extract_plain_text(
        HTMLTree.parse(html), main_content=True, comments=False, alt_texts=False
    )


def _trawl_blocks(html: str, url: str) -> str:
    return article.to_text(article.article_blocks(article.parse(html)))


def _trawl_without_container(html: str, url: str) -> str:
    """trawl's extractor on the whole page, as if no page marked its article."""
    tree = article.parse(html)
    return article.to_text(article._kept(article._blocks(article._minimal(tree, None, True)))[0])


def _trawl_without_block_filter(html: str, url: str) -> str:
    """trawl's container and main-content pass, every block kept."""
    tree = article.parse(html)
    container = article._container(tree)
    minimal = article._minimal(tree if container is None else container, None, True)
    return article.to_text(article._blocks(minimal))


EXTRACTORS: dict[str, Extractor] = {
    "trafilatura": _trafilatura(),
    "trafilatura fast": _trafilatura(fast=True),
    "trafilatura recall": _trafilatura(favor_recall=True),
    "trafilatura recall fast": _trafilatura(favor_recall=True, fast=True),
    "resiliparse": _resiliparse,
    "trawl": _trawl_blocks,
    "trawl, no container": _trawl_without_container,
    "trawl, no block filter": _trawl_without_block_filter,
    "all text": all_text,
}


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _extractor_ms(run: Extractor, page: Page, repeat: int) -> float:
    return _median_ms(lambda: run(page.html, page.url), repeat)


def _trawl_ms(page: Page, repeat: int) -> float:
    return _median_ms(lambda: extract_text(page.body, page.url, None), repeat)


def _timestamp(rng: random.Random) -> str:
    day, hour, minute = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)
    return f"Updated {day} March 2024 at {hour:02d}:{minute:02d}"


def _advert(text: str, words: list[str], rng: random.Random) -> str:
    lines = text.split("\n")
    middle = len(lines) // 2
    line = "Advertisement: " + " ".join(rng.choice(words) for _ in range(10))
    return "\n".join([*lines[:middle], line, *lines[middle:]])


def _drift(pairs: list[tuple[str, str]]) -> str:
    bits = [hamming(simhash(a), simhash(b)) for a, b in pairs]
    far = sum(b > NEAR_DUPLICATE_BITS for b in bits) / len(bits)
    return f"{statistics.fmean(bits):.2f} ({far:.0%})"


def _simhash_table(pages: list[Page], trials: int) -> None:
    rng = random.Random(1)
    columns = ["timestamp changed", "not masked", "advert line changed"]
    width = max(len(page.name) for page in pages) + 2
    print(f"| {'page'.ljust(width - 1)}| " + " | ".join(columns) + " |")
    print("|" + "---|" * (len(columns) + 1))
    for page in pages:
        text = page.expected
        dated = [
            (f"{_timestamp(rng)}\n{text}", f"{_timestamp(rng)}\n{text}") for _ in range(trials)
        ]
        spelt = [(a.translate(_SPELL), b.translate(_SPELL)) for a, b in dated]
        adverts = [
            (_advert(text, _ADVERTS[0], rng), _advert(text, _ADVERTS[1], rng))
            for _ in range(trials)
        ]
        cells = [_drift(dated), _drift(spelt), _drift(adverts)]
        row = " | ".join(cell.rjust(len(name)) for cell, name in zip(cells, columns, strict=True))
        print(f"| {page.name.ljust(width - 1)}| {row} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.text_quality", description=__doc__)
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per page")
    parser.add_argument("--pages", type=Path, default=PAGES_DIR, help="directory of pages")
    parser.add_argument("--trials", type=int, default=200, help="edited pairs per page")
    parser.add_argument(
        "--benchmark",
        type=Path,
        default=None,
        help="article-extraction benchmark (default: extraction-benchmark beside the project)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.trials < 1:
        parser.error("--repeat and --trials must be at least 1")
    if not args.pages.is_dir():
        parser.error(f"no such directory: {args.pages}")
    if args.benchmark is not None and not args.benchmark.is_dir():
        parser.error(f"no such directory: {args.benchmark}")
    try:
        pages = load_pages(args.pages)
    except OSError as exc:
        parser.error(f"cannot read pages: {exc}")
    if not pages:
        parser.error(f"no NAME.html with NAME.txt in {args.pages}")

    names = list(EXTRACTORS)
    scores = {
        name: [word_f1(run(page.html, page.url), page.expected) for page in pages]
        for name, run in EXTRACTORS.items()
    }
    times = {
        name: [_extractor_ms(run, page, args.repeat) for page in pages]
        for name, run in EXTRACTORS.items()
    }

    width = max(len(page.name) for page in pages) + 2
    print(f"| {'page'.ljust(width - 1)}| words | " + " | ".join(names) + " |")
    print("|" + "---|" * (len(names) + 2))
    for i, page in enumerate(pages):
        cells = " | ".join(f"{scores[name][i]:.3f}".rjust(len(name)) for name in names)
        words = sum(_bag(page.expected).values())
        print(f"| {page.name.ljust(width - 1)}| {words:5d} | {cells} |")
    mean = " | ".join(f"{statistics.fmean(scores[n]):.3f}".rjust(len(n)) for n in names)
    worst = " | ".join(f"{min(scores[n]):.3f}".rjust(len(n)) for n in names)
    speed = " | ".join(f"{statistics.fmean(times[n]):.2f}".rjust(len(n)) for n in names)
    print(f"| {'mean F1'.ljust(width - 1)}|       | {mean} |")
    print(f"| {'lowest F1'.ljust(width - 1)}|       | {worst} |")
    print(f"| {'ms per page'.ljust(width - 1)}|       | {speed} |")
    chosen = statistics.fmean(_trawl_ms(page, args.repeat) for page in pages)
    print(
        f"\ntrawl.text.extract_text (decoding, extraction, hashes): {chosen:.2f} ms per page; "
        f"median of {args.repeat} runs per page, mean over {len(pages)} pages.\n"
    )
    _simhash_table(pages, args.trials)
    _benchmark_table(args.benchmark, args.repeat)
    return 0


def _benchmark_table(directory: Path | None, repeat: int) -> None:
    from bench import text_benchmark  # imported here: it imports this module's candidates

    if directory is None:
        directory = text_benchmark.BENCHMARK_DIR
        if not directory.is_dir():
            print(f"\nNo article-extraction benchmark at {directory}: its table is left out.")
            return
    benchmark = text_benchmark.load_benchmark(directory)
    print()
    results = text_benchmark.evaluate(benchmark, repeat)
    text_benchmark.print_table(results, len(benchmark), repeat)


if __name__ == "__main__":
    sys.exit(main())
