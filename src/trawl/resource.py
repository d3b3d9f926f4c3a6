"""The shape every trawl resource shares: an async context manager whose exit is
``close()``, and ``close()`` is safe to call more than once (STYLE.md, rule 8)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType


class AsyncResource(ABC):
    """Base for resources opened with ``async with`` and closed by :meth:`close`."""

    @abstractmethod
    async def close(self) -> None:
        """Release the resource; idempotent."""

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
