"""The SimHash in C (trawl.content._simhash) gives the values of its Python reference.

Stored SimHashes of a resumed crawl and soft-404 fingerprints are compared with new ones,
so the C functions must give exactly what trawl.content.simhash.reference_simhash and
trawl.content.text's shingles give, on any text. The C module is built only where trawl
is compiled; these tests skip in a ``TRAWL_PURE`` run.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from bench.text_benchmark import BENCHMARK_DIR, load_benchmark
from bench.text_quality import load_pages
from hypothesis import given, settings
from hypothesis import strategies as st

from trawl.content import simhash as simhash_module
from trawl.content import text as text_module
from trawl.content.simhash import reference_simhash

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("TRAWL_PURE")), reason="TRAWL_PURE builds no C SimHash"
)

SAMPLE = Path(__file__).parent / "data" / "extraction-benchmark"

WORDS = ["a", "b", "ab", "the", "12", "0", "2024", "é", "Straße", "İ", "ΣΑΣ", "x_y", "²", "٣"]
"""Words of the hypothesis texts: repeated, all digits (ASCII or not), case changes that
lengthen a word, a final sigma, the underscore."""

SEPARATORS = [" ", "\n", ", ", "-", "\u0301", "\ud800", "\udfff", "😀", "\u00a0", "'"]
"""What comes between them: spaces, punctuation, a combining accent (not a word
character), lone surrogates, an emoji."""


def c_simhash() -> Callable[[Iterable[str]], int]:
    from trawl.content._simhash import simhash

    return simhash


def c_text_simhash(text: str) -> int:
    from trawl.content._simhash import shingle_simhash

    return shingle_simhash(text.lower(), text_module.SHINGLE_WORDS)


def reference_text_simhash(text: str) -> int:
    return reference_simhash(text_module._features(text))


def signed(digest: bytes) -> int:
    return int.from_bytes(digest, "little", signed=True)


def test_the_compiled_build_uses_the_c_functions() -> None:
    assert simhash_module.simhash is c_simhash()
    assert simhash_module.shingle_simhash is not None


def random_feature(rng: random.Random, length: int) -> str:
    """A string of ``length`` bytes of UTF-8, ASCII and other characters mixed."""
    chars: list[str] = []
    size = 0
    while size < length:
        char = chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x110000)]))
        width = len(char.encode("utf-8", "surrogatepass"))
        if size + width > length:
            char, width = chr(rng.randrange(32, 127)), 1
        chars.append(char)
        size += width
    return "".join(chars)


def test_blake2b_gives_hashlibs_digests_at_every_length() -> None:
    """Features are hashed four at a time where the processor can: in four features of
    which three are one string, every bit of the SimHash is that string's, so its digest
    is checked in each position of a group of four (and alone), at each length of UTF-8
    from 0 to 300 bytes: one block, exactly one, one and a byte, two."""
    rng = random.Random(7)
    simhash = c_simhash()
    for length in [*range(301), 127, 128, 129, 255, 256, 257]:
        feature = random_feature(rng, length)
        data = feature.encode("utf-8", "surrogatepass")
        assert len(data) == length
        digest = signed(hashlib.blake2b(data, digest_size=8).digest())
        assert simhash([feature]) == digest, length
        for odd in range(4):
            features = [feature] * 4
            features[odd] = random_feature(rng, rng.randrange(140))
            assert simhash(features) == digest == reference_simhash(features), (length, odd)


@settings(max_examples=300, deadline=None)
@given(st.sets(st.text(st.characters(exclude_categories=()), max_size=40), max_size=20))
def test_features_hash_as_the_reference_does(features: set[str]) -> None:
    assert c_simhash()(features) == reference_simhash(features)


pieces = st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS))
texts = st.lists(pieces, max_size=12).map(lambda pairs: "".join(w + s for w, s in pairs))


@settings(max_examples=500, deadline=None)
@given(texts | st.text(st.characters(exclude_categories=()), max_size=60))
def test_texts_hash_as_the_reference_does(text: str) -> None:
    assert c_text_simhash(text) == reference_text_simhash(text)


@pytest.mark.parametrize("words", [0, 1, 2, 3, 4])
def test_short_texts_are_one_feature_up_to_three_words(words: int) -> None:
    text = " ".join(["Word", "7", "zwei", "drei"][:words])
    assert c_text_simhash(text) == reference_text_simhash(text)
    assert c_text_simhash(f"!? {text} \ud800") == c_text_simhash(text)


def test_every_character_is_a_word_character_or_a_digit_as_in_python() -> None:
    """``\\w`` and ``str.isdigit`` over all of Unicode, 4,096 characters at a time: with
    shingles longer than the text, its one feature is all its words, each character
    once after ``q`` and once alone (a digit alone is ``0``)."""
    from trawl.content._simhash import shingle_simhash

    for first in range(0, 0x110000, 4096):
        chars = [chr(code) for code in range(first, min(first + 4096, 0x110000))]
        text = " ".join(f"q{char}" for char in chars) + " " + " ".join(chars)
        words = re.findall(r"\w+", text.lower())
        feature = " ".join("0" if word.isdigit() else word for word in words)
        digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8)
        assert shingle_simhash(text.lower(), len(text)) == signed(digest.digest()), hex(first)


def benchmark_texts() -> list[str]:
    """The benchmark's article texts (all of them where the shared set is beside the
    checkout, else the sample kept here) and the hand-checked pages' texts."""
    directory = BENCHMARK_DIR if BENCHMARK_DIR.is_dir() else SAMPLE
    return [page.truth for page in load_benchmark(directory)] + [
        page.expected for page in load_pages()
    ]


def test_benchmark_texts_hash_as_the_reference_does() -> None:
    for text in benchmark_texts():
        assert c_text_simhash(text) == reference_text_simhash(text)
        assert text_module.simhash(text) == reference_text_simhash(text)


def test_repeated_shingles_count_once() -> None:
    text = "one two three " * 50 + "four five six seven"
    assert c_text_simhash(text) == reference_text_simhash(text)
    assert len(text_module._features(text)) == 7


def test_bad_arguments_are_one_line_errors() -> None:
    from trawl.content._simhash import shingle_simhash

    with pytest.raises(TypeError, match="a feature is a str, not int"):
        c_simhash()(["a", 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one word"):
        shingle_simhash("a b c", 0)
