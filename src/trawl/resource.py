"""The shape every trawl resource shares: a context manager (async or not) whose exit is
``close()``, and ``close()`` is safe to call more than once (STYLE.md, rule 8)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class AsyncResource(ABC):
    """Base for resources opened with ``async with`` and closed by :meth:`close`; a
    subclass whose opening does work puts it in :meth:`_acquire`."""

    @abstractmethod
    async def close(self) -> None:
        """Release the resource; idempotent."""

    async def _acquire(self) -> None:  # noqa: B027 - most resources open nothing here
        """Open what the resource holds (nothing by default)."""

    async def __aenter__(self) -> Self:
        """Acquire; a resource that fails to acquire is closed again, so that what it had
        opened by then (a connection, a thread) does not outlive the error."""
        try:
            await self._acquire()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Resource(ABC):
    """Base for resources used with ``with`` and closed by :meth:`close`; a subclass whose
    opening does work defines ``__enter__`` for it."""

    @abstractmethod
    def close(self) -> None:
        """Release the resource; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
