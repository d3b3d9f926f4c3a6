"""Items as JSON: what a handler yields, as the one JSON object text the store keeps."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["item_json"]


def item_json(item: object) -> str:
    """``item`` as one compact JSON object text, non-ASCII characters kept as they are.

    An item is a dict with string keys, a dataclass instance or a pydantic model
    (anything with ``model_dump(mode="json")``); its values may hold more of those.
    Anything else raises :class:`TypeError` with a one-line message naming the type, and
    a value JSON cannot hold (NaN, an unknown type) raises :class:`ValueError` or
    :class:`TypeError`.
    """
    fields = _fields(item)
    if fields is None:
        raise TypeError(
            f"an item must be a dict, a dataclass instance or a pydantic model, "
            f"not {type(item).__name__}"
        )
    return json.dumps(
        fields, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_nested
    )


def _fields(item: object) -> dict[str, Any] | None:
    """The item's fields as a dict with string keys; None when it is not an item."""
    if isinstance(item, dict):
        fields = item
    elif dataclasses.is_dataclass(item) and not isinstance(item, type):
        fields = dataclasses.asdict(item)
    elif callable(dump := getattr(item, "model_dump", None)):
        fields = dump(mode="json")
    else:
        return None
    if not isinstance(fields, dict):
        return None
    for key in fields:
        if not isinstance(key, str):
            raise TypeError(f"an item's keys must be strings, not {type(key).__name__}")
    return fields


def _nested(value: object) -> object:
    """A value inside an item that JSON does not know: a nested item as its fields."""
    fields = _fields(value)
    if fields is None:
        raise TypeError(f"an item value of type {type(value).__name__} is not JSON")
    return fields
