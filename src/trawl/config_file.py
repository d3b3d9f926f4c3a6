"""The ``--config`` TOML file: its keys are the options of the option table, and
``[sites."HOST"]`` tables of per-site settings (trawl.sites.rules).

Each value must have its option's kind (a boolean only from a TOML boolean, an integer
only from a TOML integer); anything else is one line naming the file, the key and what
the key takes. The values then go through the same checks as command-line values.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from trawl.errors import UsageError
from trawl.options import BY_NAME, CONFIG_KEYS, WrongType, toml_text
from trawl.sites.rules import SiteError, parse_sites

SITES_KEY = "sites"
"""The config file's table of per-site settings (trawl.sites, docs/SITES.md)."""


def load_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML config file into values by option name; a bad key or value is a
    usage error."""
    try:
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from exc
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name == SITES_KEY:
            try:
                values[SITES_KEY] = parse_sites(value)
            except SiteError as exc:
                raise UsageError(f"config file {path}: {exc}") from exc
            continue
        if name not in CONFIG_KEYS:
            raise UsageError(f"config file {path}: unknown key {key!r}{_suggestion(name)}")
        if name in values:
            raise UsageError(f"config file {path}: {name} is given twice")
        option = BY_NAME[name]
        try:
            values[name] = option.from_config(value)
        except WrongType as exc:
            raise UsageError(
                f"config file {path}: {key} must be {exc}, got {toml_text(value)}"
            ) from exc
    return values


def _suggestion(name: str) -> str:
    """`` (did you mean 'KEY'?)`` for the config key closest to ``name``, if one is close."""
    close = difflib.get_close_matches(name, sorted(CONFIG_KEYS | {SITES_KEY}), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
