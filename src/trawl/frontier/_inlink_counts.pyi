from collections.abc import Sequence

from trawl.store.values import NewURL

class InlinkCounts:
    """In-link counts per URL id, forgotten once they cover ``capacity`` ids."""

    def __init__(self, capacity: int, max_level: int) -> None: ...
    def observe(self, candidates: Sequence[NewURL]) -> list[tuple[int, int]]: ...
