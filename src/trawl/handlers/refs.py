"""Naming a handler so that another process can load it.

Handlers run in the extract workers, which are processes of their own: a worker gets
each handler as a :data:`HandlerRef` and imports the handler's module to find it. A ref
is ``"module:qualname"`` for a function of an importable module, or
``"/abs/path/script.py:qualname"`` for a function of a script run as ``python
script.py`` (its ``__main__``). Such a script is loaded by path under the module name
``trawl_user_script``, never as ``__main__``, with its directory first on ``sys.path``
as ``python`` puts it; in the process that runs the script itself, its ``__main__`` is
used as it is.

Loading a module runs its top level, where a script usually starts its crawl. While a
handler's module loads, :func:`is_loading` is true, and ``Crawler.run()`` returns at once
without crawling when it is. A script whose top level ends with ``sys.exit()`` is loaded
up to there.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType

from trawl.errors import UsageError
from trawl.handlers.run import Handler

__all__ = ["SCRIPT_MODULE", "HandlerRef", "is_loading", "load", "loading", "ref_of"]

HandlerRef = str
"""``"module:qualname"`` or ``"/abs/path/script.py:qualname"``."""

SCRIPT_MODULE = "trawl_user_script"
"""The module name a script's handlers are loaded under."""

_loading = 0
_scripts: dict[str, ModuleType] = {}


def is_loading() -> bool:
    """Whether a handler's module is being loaded (its top level is running)."""
    return _loading > 0


@contextmanager
def loading() -> Iterator[None]:
    """Mark the block as the loading of a handler's module (see :func:`is_loading`)."""
    global _loading
    _loading += 1
    try:
        yield
    finally:
        _loading -= 1


def ref_of(fn: Callable[..., object]) -> HandlerRef:
    """The ref of the function ``fn``; a function of ``__main__`` (or of a script loaded
    by :func:`load`) is named by its script's absolute path.

    :class:`~trawl.errors.UsageError` when another process could not find ``fn``: it is
    defined inside a function, or in an interactive session.
    """
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname:
        raise UsageError(f"a page handler must be a function, not {type(fn).__name__}")
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise UsageError(f"page handler {qualname} must be defined at the top level of its module")
    if module in ("__main__", SCRIPT_MODULE):
        path = getattr(fn, "__globals__", {}).get("__file__")
        if not path:
            raise UsageError(
                f"page handler {qualname} must be defined in a module or a script file, "
                "not in an interactive session"
            )
        return f"{os.path.abspath(path)}:{qualname}"
    return f"{module}:{qualname}"


def load(ref: HandlerRef) -> Handler:
    """The handler ``ref`` names, its module imported (or its script loaded) if need be.

    :class:`~trawl.errors.UsageError` with one line when there is no such module, file or
    function, or loading the module fails.
    """
    where, _, qualname = ref.rpartition(":")
    if not where or not qualname:
        raise UsageError(f"handler {ref!r} must be module:function or /path/script.py:function")
    module = _script(where, ref) if where.endswith(".py") else _module(where, ref)
    found: object = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise UsageError(f"handler {ref!r}: {where} has no {qualname}")
    if not callable(found):
        raise UsageError(f"handler {ref!r}: {qualname} is not a function")
    handler: Handler = found
    return handler


def load_all(handlers: Iterable[tuple[str | None, HandlerRef]]) -> None:
    """Load every handler of ``handlers`` (label, ref) here, so that one that cannot be
    loaded is a :class:`UsageError` before a crawl starts, not an extract worker's
    failure once it has."""
    for _, ref in handlers:
        load(ref)


def _module(name: str, ref: HandlerRef) -> ModuleType:
    try:
        with loading():
            return importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"handler {ref!r}: cannot import {name}: {_first_line(exc)}") from exc
    except Exception as exc:
        raise UsageError(f"handler {ref!r}: importing {name} failed: {_failure(exc)}") from exc


def _script(path: str, ref: HandlerRef) -> ModuleType:
    """The script at ``path``: ``__main__`` when it is the script this process runs, else
    loaded once under :data:`SCRIPT_MODULE`."""
    path = os.path.abspath(path)
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if main is not None and main_file and os.path.abspath(main_file) == path:
        return main
    if path in _scripts:
        return _scripts[path]
    spec = importlib.util.spec_from_file_location(SCRIPT_MODULE, path)
    if spec is None or spec.loader is None or not Path(path).is_file():
        raise UsageError(f"handler {ref!r}: no script file {path}")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    previous = sys.modules.get(SCRIPT_MODULE)
    sys.modules[SCRIPT_MODULE] = module
    try:
        # A top level that exits early keeps what it defined before it exited.
        with loading(), suppress(SystemExit):
            spec.loader.exec_module(module)
    except Exception as exc:
        if previous is None:
            del sys.modules[SCRIPT_MODULE]
        else:
            sys.modules[SCRIPT_MODULE] = previous
        raise UsageError(f"handler {ref!r}: loading {path} failed: {_failure(exc)}") from exc
    _scripts[path] = module
    return module


def _failure(exc: Exception) -> str:
    return f"{type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
