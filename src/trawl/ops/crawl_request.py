"""What ``POST /crawls`` takes: a crawl's policy, named and checked as the option table
(trawl.options) names and checks it for the command line and a ``--config`` file.

The JSON keys are the config file's keys with ``_`` (``max_pages``, ``delay``,
``include``, ``sitemaps`` ...; ``maxPages`` is kept as the older name of ``max_pages``).
Each value is checked as a config file's is (`Option.from_config`: a boolean only from a
boolean, an integer only from an integer, a number finite), then the whole as
``trawl crawl`` checks it (`build_config`: ranges, the seeds under the crawl's URL
rules), so the API refuses what the command line would, with the same words.

Taken: every option stored with the crawl (scope, politeness, budgets, caps, timeouts,
freshness: ``Kept.STORED``), and of the machine-local ones those that only shape the
crawl's own output files in its data dir (`OUTPUTS`; ``events`` is then a file name in
that data dir, not a path, or a broker URL without credentials). Refused: the rest of
the machine-local options (data dir, store, resolver, networks a crawl may reach,
concurrency, metrics port ...) and the ``start`` ones; they belong to the machine, and
``trawl serve`` passes them to every crawl (its options after ``--``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, create_model
from pydantic import model_validator as pydantic_model_validator

from trawl.cli.seeds import check_seeds
from trawl.config_file import SITES_KEY
from trawl.errors import UsageError
from trawl.events.target import PASSWORD_ENV, USER_ENV, has_credentials, is_url
from trawl.options import BY_NAME, INT_RANGE, OPTIONS, Kept, Kind, Option, WrongType, toml_text
from trawl.settings import build_config

OUTPUTS = ("warc", "warc_max_size", "text", "text_skip_near_duplicates", "text_format", "events")
"""Machine-local options a request may set: they only shape the files the crawl writes in
its own data dir."""
MAX_SEEDS = 1000
MAX_ITEMS = 1000
"""Values of a repeatable option (``include``, ``exclude``) at most."""
MAX_TEXT = 2000
"""Characters of one string value at most."""
OLD_NAMES = {"maxPages": "max_pages"}
"""Keys of the first version of the API, still taken."""
_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")

TAKEN = tuple(
    option
    for option in OPTIONS
    if option.in_config and (option.kept is Kept.STORED or option.name in OUTPUTS)
)
"""The options a request may set, in table order."""
_TAKEN_NAMES = frozenset(option.name for option in TAKEN)


def _refusal(key: str) -> str:
    """Why ``key`` is not taken, with a guess at what was meant."""
    name = key.replace("-", "_")
    option = BY_NAME.get(name)
    if name == SITES_KEY:
        return (
            "sites are not taken in a request (they may name the server's environment "
            "variables): give trawl serve a --config file with [sites] tables, after --"
        )
    if option is not None and name in _TAKEN_NAMES:
        return f"unknown key {key!r} (the keys are written with _: {name!r})"
    if option is not None and option.in_config:
        return (
            f"{key} belongs to the machine that runs the crawl, not to the request: "
            "give it to trawl serve (its options after --)"
        )
    close = difflib.get_close_matches(name, sorted(_TAKEN_NAMES | set(OLD_NAMES)), n=1)
    return f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def _checked(option: Option) -> Any:
    """The value check of ``option``: its config file check, and for ``events`` a file
    name; the message names the key and what it takes, as a config file's does."""

    def check(value: object) -> Any:
        try:
            fitting = option.from_config(value)
        except WrongType as exc:
            raise ValueError(f"{option.name} must be {exc}, got {_shown(value)}") from exc
        if option.name == "events":
            _check_events(fitting)
        texts = fitting if isinstance(fitting, tuple) else (fitting,)
        if any(isinstance(text, str) and "\x00" in text for text in texts):
            raise ValueError(f"{option.name} must not hold a NUL character")
        if any(isinstance(text, str) and len(text) > MAX_TEXT for text in texts):
            raise ValueError(f"{option.name} holds a value longer than {MAX_TEXT} characters")
        if isinstance(fitting, tuple) and len(fitting) > MAX_ITEMS:
            raise ValueError(f"{option.name} has more than {MAX_ITEMS} values")
        return fitting

    return check


def _check_events(value: str) -> None:
    """``events`` of a request: a file name (kept in the crawl's data dir), or a broker
    URL without credentials (they would be written into the crawl's request file: the
    server's environment gives them, trawl.events.target)."""
    if is_url(value):
        if has_credentials(value):
            raise ValueError(
                f"events must not hold credentials: give them to trawl serve as "
                f"{USER_ENV} and {PASSWORD_ENV}"
            )
        return
    if not _FILE_NAME.fullmatch(value):
        raise ValueError(
            "events must be a file name (letters, digits, . _ -): the file is kept in "
            "the crawl's data dir; or a nats:// or amqp:// URL"
        )


def _shown(value: object) -> str:
    """``value`` as an error message shows it: TOML's spelling (JSON's null), cut short."""
    text = "null" if value is None else toml_text(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_schema(option: Option) -> dict[str, Any]:
    """The OpenAPI schema of ``option``'s JSON value."""
    schema: dict[str, Any]
    if option.kind is Kind.FLAG:
        schema = {"type": "boolean"}
    elif option.kind is Kind.INT:
        schema = {"type": "integer", "minimum": INT_RANGE[0], "maximum": INT_RANGE[1]}
    elif option.kind is Kind.FLOAT:
        schema = {"type": "number"}
    elif option.kind is Kind.CHOICE:
        schema = {"type": "string", "enum": list(option.choices)}
    elif option.kind is Kind.LIST:
        text = {"type": "string", "maxLength": MAX_TEXT}
        array = {"type": "array", "items": text, "maxItems": MAX_ITEMS}
        schema = {"anyOf": [text, array]}
    elif option.name == "events":
        schema = {
            "type": "string",
            "maxLength": MAX_TEXT,
            "pattern": f"^({_FILE_NAME.pattern}|(nats|amqp)://[^@]*)$",
        }
    else:
        schema = {"type": "string", "maxLength": MAX_TEXT}
    shown = option.default_text
    help_text = option.help if shown is None else f"{option.help} Default: {shown}."
    return schema | {"description": help_text}


def _field(option: Option) -> Any:
    annotated = Annotated[
        Any, BeforeValidator(_checked(option)), WithJsonSchema(_json_schema(option))
    ]
    return (annotated, None)


class _Request(BaseModel):
    """The fields every request has besides the options."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(
        min_length=1, max_length=MAX_SEEDS, description="Where the crawl starts: http(s) URLs."
    )
    maxPages: int | None = Field(
        default=None, description="The older name of max_pages.", deprecated=True
    )

    @pydantic_model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """Refuse a key that is not an option a request takes (one line saying why);
        take the older names under their option's."""
        if not isinstance(data, dict):
            return data
        for key in data:
            if key != "seeds" and key not in _TAKEN_NAMES and key not in OLD_NAMES:
                raise ValueError(_refusal(str(key)))
        renamed = dict(data)
        for old, name in OLD_NAMES.items():
            if old in renamed:
                if name in renamed:
                    raise ValueError(f"{old} and {name} are one option: give one of them")
                renamed[name] = renamed.pop(old)
        return renamed

    @pydantic_model_validator(mode="after")
    def _a_whole_config(self) -> _Request:
        """Check the request as ``trawl crawl`` checks its options."""
        if any("\x00" in seed for seed in self.seeds):
            raise ValueError("a seed must not hold a NUL character")
        values = {option.name: option.default for option in OPTIONS} | self.options()
        try:
            config = build_config(tuple(self.seeds), values)
            check_seeds(self.seeds, config.url_rules)
        except UsageError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def options(self) -> dict[str, Any]:
        """The options the request gives, by name (the seeds apart)."""
        return {
            option.name: getattr(self, option.name)
            for option in TAKEN
            if option.name != "seeds" and getattr(self, option.name) is not None
        }


if TYPE_CHECKING:
    NewCrawl = _Request
else:
    NewCrawl = create_model(
        "NewCrawl",
        __base__=_Request,
        __doc__=(
            "A crawl to start: its seeds and any of the options of the option table stored "
            "with a crawl, by their config file keys (docs/OPTIONS.md), and its output "
            "files."
        ),
        **{option.name: _field(option) for option in TAKEN if option.name != "seeds"},
    )
    """The body of ``POST /crawls``: `_Request` with a field for each option taken."""


def crawl_arguments(seeds: list[str], values: Mapping[str, Any], data_dir: str) -> list[str]:
    """The ``trawl crawl`` arguments of a request's options and seeds (the seeds last,
    after ``--``); ``events`` becomes a file in ``data_dir``."""
    arguments: list[str] = []
    for name, value in values.items():
        option = BY_NAME[name]
        if option.kind is Kind.FLAG:
            arguments += [option.flag] if value else []
        elif option.kind is Kind.LIST:
            arguments += [f"{option.flag}={item}" for item in value]
        elif name == "events" and not is_url(value):
            arguments.append(f"{option.flag}={data_dir}/{value}")
        else:
            arguments.append(f"{option.flag}={value}")
    return [*arguments, "--", *seeds]
