"""Per-site settings: what one rule holds, read from a TOML table (or a Python dict) and
written to and read back from the crawl's stored policy.

A value of a header or a cookie is given as text (kept with the crawl), as
``{env = "NAME"}`` (read from each process's environment when it starts; only the
variable's name is kept) or as ``{value = "TEXT", secret = true}`` (used by the run
that was given it, never kept: a worker joining the crawl refuses to start without it).
Basic auth is ``{user_env = "NAME", password_env = "NAME"}``, always from the
environment. The stored form (:meth:`Site.to_json`) holds no secret, so it is also what
the API shows.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trawl.errors import UsageError
from trawl.sites.match import BadPattern, HostPatterns, check_pattern

RENDER_MODES = ("never", "auto", "always")
KEYS = ("delay", "per_host", "headers", "cookies", "auth", "render", "proxy", "max_pages",
        "max_depth")  # fmt: skip
"""The keys of one site's table (``-`` may stand for ``_``)."""
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_HEADERS = frozenset(
    {"host", "user-agent", "accept", "accept-encoding", "connection", "content-length",
     "transfer-encoding", "te", "upgrade", "if-none-match", "if-modified-since", "cookie",
     "proxy-authorization"}
)  # fmt: skip
"""Headers trawl writes itself (or, for Cookie, from ``cookies``): not a site's to set."""


class SiteError(UsageError, ValueError):
    """A site setting that cannot be used; the message names the site and the key."""


@dataclass(frozen=True, slots=True, repr=False)
class Value:
    """A header's or a cookie's value: ``text`` as given, or the environment variable
    ``env``; ``secret`` values are never stored, logged or archived (nor shown by
    ``repr``, so that a configuration printed whole holds none)."""

    text: str | None = None
    env: str | None = None
    secret: bool = False

    def __repr__(self) -> str:
        return f"Value({self.to_json()!r})"

    def to_json(self) -> dict[str, Any]:
        """The stored (and shown) form: the text only when it is not secret."""
        if self.env is not None:
            return {"env": self.env}
        if self.secret:
            return {"secret": True}
        return {"text": self.text}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Value:
        if "env" in data:
            return cls(env=str(data["env"]), secret=True)
        if data.get("secret"):
            return cls(secret=True)
        return cls(text=str(data["text"]))


@dataclass(frozen=True, slots=True)
class Auth:
    """Basic auth, its user name and password read from these environment variables."""

    user_env: str
    password_env: str


@dataclass(frozen=True, slots=True)
class Site:
    """The settings of the hosts ``pattern`` matches; None: the crawl's own."""

    pattern: str
    delay: float | None = None
    per_host: int | None = None
    headers: tuple[tuple[str, Value], ...] = ()
    cookies: tuple[tuple[str, Value], ...] = ()
    auth: Auth | None = None
    render: str | None = None
    proxy: str | None = None
    max_pages: int | None = None
    """Fetches per host of the site (a tighter ``--max-pages-per-host``)."""
    max_depth: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form: no secret in it, only where each comes from."""
        data: dict[str, Any] = {}
        for name in ("delay", "per_host", "render", "proxy", "max_pages", "max_depth"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.headers:
            data["headers"] = {name: value.to_json() for name, value in self.headers}
        if self.cookies:
            data["cookies"] = {name: value.to_json() for name, value in self.cookies}
        if self.auth is not None:
            data["auth"] = {"user_env": self.auth.user_env, "password_env": self.auth.password_env}
        return data

    @classmethod
    def from_json(cls, pattern: str, data: Mapping[str, Any]) -> Site:
        auth = data.get("auth")
        return cls(
            pattern=pattern,
            delay=data.get("delay"),
            per_host=data.get("per_host"),
            headers=tuple((n, Value.from_json(v)) for n, v in data.get("headers", {}).items()),
            cookies=tuple((n, Value.from_json(v)) for n, v in data.get("cookies", {}).items()),
            auth=None if auth is None else Auth(str(auth["user_env"]), str(auth["password_env"])),
            render=data.get("render"),
            proxy=data.get("proxy"),
            max_pages=data.get("max_pages"),
            max_depth=data.get("max_depth"),
        )


class Sites:
    """Every site rule of a crawl, looked up by host: the most specific rule a host
    matches applies, whole (trawl.sites.match)."""

    __slots__ = ("_match", "rules")

    def __init__(self, rules: Iterable[Site] = ()) -> None:
        self.rules = tuple(rules)
        self._match = HostPatterns((site.pattern, site) for site in self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sites) and other.rules == self.rules

    def __hash__(self) -> int:
        return hash(self.rules)

    def __repr__(self) -> str:
        return f"Sites({[site.pattern for site in self.rules]!r})"

    def __reduce__(self) -> tuple[type[Sites], tuple[tuple[Site, ...]]]:
        return (Sites, (self.rules,))

    def for_host(self, host: str) -> Site | None:
        """The rule of ``host`` (a name or a host key, its port ignored); None: none."""
        return self._match.find(host) if self.rules else None

    def render_mode_for(self, host: str) -> str | None:
        """The site's ``render`` mode for ``host`` (never, auto, always); None: the crawl's."""
        site = self.for_host(host)
        return None if site is None else site.render

    @property
    def renders(self) -> bool:
        """Whether a site renders its pages (``render`` auto or always)."""
        return any(site.render not in (None, "never") for site in self.rules)

    def proxy_for(self, host: str) -> str | None:
        """The site's proxy URL for ``host``; None: the crawl's (or none)."""
        site = self.for_host(host)
        return None if site is None else site.proxy

    def page_budget_for(self, host: str) -> int | None:
        """The site's fetches per host for ``host``; None: the crawl's own."""
        site = self.for_host(host)
        return None if site is None else site.max_pages

    @property
    def budgets(self) -> bool:
        """Whether a site sets its own page budget."""
        return any(site.max_pages is not None for site in self.rules)

    def depths(self) -> tuple[tuple[str, int], ...]:
        """(pattern, max_depth) of the rules that set one, for the extract workers."""
        return tuple(
            (site.pattern, site.max_depth) for site in self.rules if site.max_depth is not None
        )

    def to_json(self) -> dict[str, Any]:
        """The stored form, by pattern."""
        return {site.pattern: site.to_json() for site in self.rules}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Sites:
        return cls(Site.from_json(pattern, rule) for pattern, rule in (data or {}).items())


def parse_sites(table: object) -> Sites:
    """The ``sites`` table of a config file (or the ``sites`` argument of the library):
    ``{PATTERN: {KEY: VALUE}}``; SiteError naming the site and key for anything else."""
    if isinstance(table, Sites):
        return table
    if not isinstance(table, Mapping):
        raise SiteError("sites must be a table of host patterns, each a table of settings")
    rules: dict[str, Site] = {}
    for pattern, settings in table.items():
        try:
            key = check_pattern(str(pattern))
        except BadPattern as exc:
            raise SiteError(f"site {exc}") from exc
        if key in rules:
            raise SiteError(f"site {pattern!r} is given twice")
        if not isinstance(settings, Mapping):
            raise SiteError(f"site {pattern!r} must be a table of settings")
        rules[key] = _site(key, settings)
    return Sites(rules.values())


def _site(pattern: str, settings: Mapping[str, Any]) -> Site:
    given: dict[str, Any] = {}
    for raw, value in settings.items():
        name = str(raw).replace("-", "_")
        if name not in KEYS:
            close = difflib.get_close_matches(name, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SiteError(f"site {pattern!r}: unknown key {raw!r}{hint}")
        given[name] = value
    where = f"site {pattern!r}"
    headers = _values(where, "headers", given.get("headers", {}), header=True)
    auth = _auth(where, given.get("auth"))
    names = {name.lower() for name, _ in headers}
    if auth is not None and "authorization" in names:
        raise SiteError(f"{where}: give either auth or an Authorization header, not both")
    return Site(
        pattern=pattern,
        delay=_number(where, "delay", given.get("delay")),
        per_host=_integer(where, "per_host", given.get("per_host"), 1),
        headers=headers,
        cookies=_values(where, "cookies", given.get("cookies", {}), header=False),
        auth=auth,
        render=_render(where, given.get("render")),
        proxy=_proxy(where, given.get("proxy")),
        max_pages=_integer(where, "max_pages", given.get("max_pages"), 1),
        max_depth=_integer(where, "max_depth", given.get("max_depth"), 0),
    )


def _number(where: str, key: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise SiteError(f"{where}: {key} must be a number of seconds")
    if value < 0 or value == float("inf"):
        raise SiteError(f"{where}: {key} must not be negative")
    return float(value)


def _integer(where: str, key: str, value: object, least: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SiteError(f"{where}: {key} must be an integer")
    if value < least:
        raise SiteError(f"{where}: {key} must be at least {least}")
    return value


def _render(where: str, value: object) -> str | None:
    if value is None:
        return None
    if value not in RENDER_MODES:
        raise SiteError(f"{where}: render must be one of {', '.join(RENDER_MODES)}")
    return str(value)


def _proxy(where: str, value: object) -> str | None:
    """A proxy URL: http, a host, an optional port, no path and no credentials (those
    come from the environment, so that the stored crawl never holds them), as
    ``--proxy`` takes it (trawl.fetch.proxy)."""
    if value is None:
        return None
    bad = f"{where}: proxy must be a URL http://HOST[:PORT]"
    if not isinstance(value, str) or _has_break(value):
        raise SiteError(bad)
    try:
        parts = urllib.parse.urlsplit(value.strip())
        port = parts.port
    except ValueError as exc:
        raise SiteError(bad) from exc
    if parts.username is not None or parts.password is not None:
        raise SiteError(f"{where}: proxy credentials come from the environment, not the URL")
    if (
        parts.scheme != "http"
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or not _proxy_host(parts.hostname)
        or port == 0
    ):
        raise SiteError(bad)
    return value.strip()


def _proxy_host(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        check_pattern(name)
    except BadPattern:
        return False
    return not name.startswith("*")


def _auth(where: str, value: object) -> Auth | None:
    if value is None:
        return None
    bad = f'{where}: auth must be {{user_env = "NAME", password_env = "NAME"}}'
    if not isinstance(value, Mapping) or set(value) != {"user_env", "password_env"}:
        raise SiteError(bad)
    user, password = value["user_env"], value["password_env"]
    if not all(isinstance(v, str) and _ENV.fullmatch(v) for v in (user, password)):
        raise SiteError(bad)
    return Auth(user, password)


def _values(where: str, key: str, table: object, *, header: bool) -> tuple[tuple[str, Value], ...]:
    """A ``headers`` or ``cookies`` table's entries, each name and value checked."""
    if not isinstance(table, Mapping):
        raise SiteError(f"{where}: {key} must be a table of names and values")
    found: list[tuple[str, Value]] = []
    seen: set[str] = set()
    for name, given in table.items():
        name = str(name)
        what = f"{where}: {'header' if header else 'cookie'} {name!r}"
        if not _TOKEN.fullmatch(name):
            raise SiteError(f"{what} is not a valid {'header' if header else 'cookie'} name")
        if header and name.lower() in RESERVED_HEADERS:
            which = "give cookies in cookies" if name.lower() == "cookie" else "trawl sets it"
            raise SiteError(f"{what} cannot be set per site ({which})")
        if name.lower() in seen:
            raise SiteError(f"{what} is given twice")
        seen.add(name.lower())
        value = _value(what, given)
        if value.text is not None:
            check_text(what, value.text, header=header)
        found.append((name, value))
    return tuple(found)


def _value(what: str, given: object) -> Value:
    if isinstance(given, str):
        return Value(text=given)
    if isinstance(given, Mapping):
        if set(given) == {"env"} and isinstance(given["env"], str) and _ENV.fullmatch(given["env"]):
            return Value(env=given["env"], secret=True)
        if (
            set(given) == {"value", "secret"}
            and isinstance(given["value"], str)
            and isinstance(given["secret"], bool)
        ):
            return Value(text=given["value"], secret=given["secret"])
    raise SiteError(
        f'{what} must be a string, {{env = "NAME"}} or {{value = "TEXT", secret = true}}'
    )


def check_text(what: str, text: str, *, header: bool) -> None:
    """SiteError when ``text`` cannot go in a request: a line break or NUL anywhere, or
    (a cookie's) a ``;`` that would start another cookie."""
    if _has_break(text):
        raise SiteError(f"{what}: a line break or NUL in the value")
    if not header and (";" in text or "," in text):
        raise SiteError(f"{what}: a ';' or ',' in the value")


def _has_break(text: str) -> bool:
    return "\r" in text or "\n" in text or "\0" in text
