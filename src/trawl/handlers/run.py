"""Running a handler on a page: its items as JSON and its follows, or one error line."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from trawl.handlers.follow import Follow
from trawl.handlers.items import item_json
from trawl.handlers.page import Page

__all__ = ["ERROR_LENGTH", "Handler", "HandlerResult", "run_handler"]

Handler = Callable[[Page], object]
"""A page handler: yields (or returns a list of, or returns None) items and follows."""

ERROR_LENGTH = 200
"""The longest error line a failed handler gives."""


class HandlerResult(NamedTuple):
    """What a handler gave for one page: its items as JSON object texts and its follows,
    both in yield order; or, when it failed, the error line and neither."""

    items: list[str]
    follows: list[Follow]
    error: str | None = None


def run_handler(fn: Handler, page: Page) -> HandlerResult:
    """Run ``fn`` on ``page`` to its end.

    A :class:`Follow` goes to the follows, anything else to the items through
    :func:`~trawl.handlers.items.item_json`. An exception, in the handler or in turning an
    item into JSON, fails the whole page: no item or follow of it is kept, and the error
    is ``"handler_failed: ExcType: first line of its message"``, at most
    :data:`ERROR_LENGTH` characters.
    """
    items: list[str] = []
    follows: list[Follow] = []
    try:
        for value in _values(fn(page)):
            if isinstance(value, Follow):
                follows.append(value)
            else:
                items.append(item_json(value))
    except Exception as exc:
        return HandlerResult([], [], _error_line(exc))
    return HandlerResult(items, follows)


def _values(result: object) -> Iterable[object]:
    """What a handler gave, as values: a generator's or list's, or one returned value."""
    if result is None:
        return ()
    if inspect.iscoroutine(result):
        result.close()
    if inspect.isawaitable(result) or hasattr(result, "__aiter__"):
        raise TypeError("a page handler must be a plain function or generator, not async")
    if isinstance(result, str | bytes | Mapping | Follow) or hasattr(result, "model_dump"):
        return (result,)
    if isinstance(result, Iterable):
        return result
    return (result,)


def _error_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    message = f"handler_failed: {type(exc).__name__}"
    if lines:
        message += f": {lines[0]}"
    return message[:ERROR_LENGTH]
