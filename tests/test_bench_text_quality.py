"""The evaluator of bench.text_benchmark, on hand cases and on three benchmark pages
(tests/data/extraction-benchmark)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from bench.text_benchmark import (
    TRAWL,
    Score,
    evaluate,
    load_benchmark,
    score,
    tokens,
)

SAMPLE = Path(__file__).parent / "data" / "extraction-benchmark"
"""Three pages of the benchmark, kept with the tests (its README says where from)."""

# Three small pages on which trafilatura misses part of the article body.
PAGES = (
    "06ee193de4bd611f7fafbab0c59b0f6fe3495093516720632cd093b24c7a0e98",
    "11ea381ad92b5448cf66eae62f52ac565361a244c8881615fc6a7bb523cc0c32",
    "20b2b64916b00b25203c9f1bf14248922f4d522f18328e9f876cce116df0083e",
)


def _exact(precision: Fraction, recall: Fraction) -> tuple[float, float, float]:
    f1 = 2 * precision * recall / (precision + recall)
    return float(precision), float(recall), float(f1)


def _figures(found: Score) -> tuple[float, float, float]:
    return found.precision, found.recall, found.f1


def test_tokens_are_lower_case_words_counted() -> None:
    assert tokens("The cat, the HAT; the-end 42.") == Counter(
        {"the": 3, "cat": 1, "hat": 1, "end": 1, "42": 1}
    )


def test_score_counts_tokens_as_multisets() -> None:
    # Extracted: a a b c (4 tokens); truth: a b b d e (5 tokens); overlap a, b = 2.
    assert _figures(score("a a b c", "a b b d e")) == pytest.approx(
        _exact(Fraction(2, 4), Fraction(2, 5))
    )
    assert score("x y z", "x y z") == Score(1.0, 1.0, 1.0)
    assert score("x y", "z") == Score(0.0, 0.0, 0.0)
    # Extra words cost precision only; missing words cost recall only.
    assert _figures(score("a b c d", "a b")) == pytest.approx(_exact(Fraction(1, 2), Fraction(1)))
    assert _figures(score("a", "a b c")) == pytest.approx(_exact(Fraction(1), Fraction(1, 3)))


def test_empty_extraction_scores_zero() -> None:
    assert score("", "some words") == Score(0.0, 0.0, 0.0)
    assert score(" ,. ", "some words") == Score(0.0, 0.0, 0.0)
    assert score("", "") == Score(1.0, 1.0, 1.0)


def test_benchmark_pages_score_between_zero_and_one() -> None:
    pages = load_benchmark(SAMPLE, PAGES)
    assert [page.name for page in pages] == list(PAGES)
    assert all(page.truth and page.body for page in pages)
    results = evaluate(pages, repeat=1)
    assert TRAWL in results
    for summary in results.values():
        assert 0.0 <= summary.f1 <= 1.0
        assert 0.0 <= summary.precision <= 1.0
        assert 0.0 <= summary.recall <= 1.0
        assert summary.cpu_ms >= 0.0
    visible, trafilatura = results["all text"], results["trafilatura"]
    assert visible.recall > trafilatura.recall
    assert visible.precision < trafilatura.precision
