from collections.abc import Iterable

def simhash(features: Iterable[str]) -> int:
    """The signed 64-bit SimHash of the strings ``features``, each counted as often as it
    comes (trawl.content.simhash.reference_simhash)."""

def shingle_simhash(text: str, size: int) -> int:
    """The signed 64-bit SimHash of the distinct runs of ``size`` consecutive ``\\w+``
    words of ``text`` as it is (lower-case it first), all-digit words written ``0``
    (trawl.content.text.simhash)."""
