"""robots.txt rules per RFC 9309: parse once, then answer ``allowed(url)`` fast.

This module is pure: the engine fetches ``robots_url(url)`` (following at most
``MAX_ROBOTS_REDIRECTS`` redirects), hands the final status and body to
``rules_for_response`` and caches the result for at most ``ROBOTS_TTL`` seconds.

Matching follows RFC 9309 section 2.2.2: the rule with the longest pattern (counted in
octets after percent-encoding normalisation) wins, Allow wins a tie, ``*`` matches any run
of characters and a final ``$`` anchors the end. Each pattern is compiled once into a
literal head and the literal pieces between wildcards, and the rules of a file of more
than ``SCANNED_RULES`` are indexed by head: checking a URL costs one dict lookup per
distinct head length plus a few ``str.find`` calls for the candidates, however long the
file, and no pattern can make it backtrack. Files share what they have in common: a rule
written alike is compiled once for all of them, and files that give the same rules hold one
tuple of them (and its index), through bounded caches of the most recently met.
Lines are read as leniently as Google reads them (typos in keys, a missing colon, a
cut-short byte order mark), since a rule that a site meant must not be lost to a typo.
The deliberate differences from Google's parser are listed in docs/ROBOTS.md.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

MAX_ROBOTS_BYTES = 500 * 1024
MAX_ROBOTS_REDIRECTS = 5
ROBOTS_TTL = 24 * 3600.0
SCANNED_RULES = 8
"""Rules a file may give and be matched rule by rule: an index of so few saves no time,
and costs a few hundred bytes a host held."""
RULES_KEPT = 4_096
"""Compiled rules kept for the next file that writes one alike ("Disallow: /wp-admin/"
on every WordPress site): a file holds a rule its hosts share for 8 bytes, not about 130."""
RULE_SETS_KEPT = 1_024
"""Rule sets kept for the next file that gives the same rules ("Disallow:" alone, a CMS's
default): its hosts hold one tuple of them and one index. Only the most recently met are
kept, so what a crawl of hosts whose rules are all their own keeps beside them is bounded."""

_ROBOTS_PATH = "/robots.txt"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SCHEME_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
_BOM = b"\xef\xbb\xbf"
_BLANKS = re.compile(r"[ \t]+")

# The records trawl reads, and every spelling of each key that Google's parser accepts
# (robots.cc: a key that starts with one of these, case ignored). ASCII-only matching,
# so that no Unicode case folding (U+017F, long s, for "s") makes a key.
_USER_AGENT = "user_agent"
_ALLOW = "allow"
_DISALLOW = "disallow"
_SITEMAP = "sitemap"
_CRAWL_DELAY = "crawl_delay"
_KEY_SPELLING = re.compile(
    rf"(?P<{_USER_AGENT}>user-agent|useragent|user agent)"
    rf"|(?P<{_ALLOW}>allow)"
    rf"|(?P<{_DISALLOW}>disallow|dissallow|dissalow|disalow|diasllow|disallaw)"
    rf"|(?P<{_SITEMAP}>sitemap|site-map)"
    rf"|(?P<{_CRAWL_DELAY}>crawl-delay)",
    re.ASCII | re.IGNORECASE,
)
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# What percent-encoding normalisation must rewrite: every %XX escape (to decode unreserved
# octets and upper-case the rest) and every character outside the set that may stay raw.
# In the path, the raw set is unreserved, sub-delims, ":", "@" and "/". In the query the
# gen-delims ":", "/", "?" and "@" carry no structure, so they are encoded, as in RFC 9309
# figure 4 ("?baz=https://foo.bar" -> "?baz=https%3A%2F%2Ffoo.bar"). "*" and "$" are
# always encoded in URLs, so "%2A" and "%24" in a pattern match them (RFC 9309 figure 6);
# a pattern keeps its raw "*" as the wildcard.
_ESCAPE = r"%[0-9A-Fa-f]{2}"
_URL_PATH = re.compile(_ESCAPE + r"|[^A-Za-z0-9\-._~!&'()+,;=:@/]")
_URL_QUERY = re.compile(_ESCAPE + r"|[^A-Za-z0-9\-._~!&'()+,;=]")
_PATTERN_PATH = re.compile(_ESCAPE + r"|[^A-Za-z0-9\-._~!&'()+,;=:@/*]")
_PATTERN_QUERY = re.compile(_ESCAPE + r"|[^A-Za-z0-9\-._~!&'()+,;=*]")


def _rewrite(match: re.Match[str]) -> str:
    """Normalise one escape or encode one character (UTF-8; raw undecodable bytes as is)."""
    text = match.group()
    if len(text) == 3:
        char = chr(int(text[1:], 16))
        return char if char in _UNRESERVED else text.upper()
    return "".join(f"%{octet:02X}" for octet in text.encode("utf-8", "surrogateescape"))


def _normalise(target: str, path_re: re.Pattern[str], query_re: re.Pattern[str]) -> str:
    """Percent-encoding normalisation of a path, with the query (after the first "?")."""
    path, mark, query = target.partition("?")
    path = path_re.sub(_rewrite, path)
    return path + mark + query_re.sub(_rewrite, query) if mark else path


@dataclass(frozen=True, slots=True)
class _Rule:
    """One compiled Allow/Disallow pattern.

    ``head`` is the literal text before the first ``*``, ``tail`` the literal pieces after
    each ``*`` (empty without wildcards), ``anchored`` whether the pattern ended in ``$``.
    ``length`` is the normalised pattern length in octets, used for longest match.
    """

    allow: bool
    length: int
    head: str
    tail: tuple[str, ...]
    anchored: bool

    def matches(self, path: str) -> bool:
        """Whether the normalised ``path`` (already known to start with ``head``) matches.

        Taking each piece at its earliest occurrence is always safe for literal pieces
        joined by ``*``, so one left-to-right pass of ``str.find`` decides the match and
        no pattern can make it backtrack.
        """
        if not self.tail:
            return not self.anchored or len(path) == len(self.head)
        position = len(self.head)
        middle = self.tail[:-1] if self.anchored else self.tail
        for piece in middle:
            found = path.find(piece, position)
            if found < 0:
                return False
            position = found + len(piece)
        if not self.anchored:
            return True
        last = self.tail[-1]
        return path.endswith(last) and len(path) - len(last) >= position


@functools.lru_cache(maxsize=RULES_KEPT)
def _compile_rule(allow: bool, pattern: str) -> _Rule:
    """Compile a non-empty Allow/Disallow value: the same object for the same value as long
    as it is among the ``RULES_KEPT`` most recently compiled.

    A pattern that starts with neither "/" nor "*" gets a leading "/": such a value can
    never match as written, and the site's intent ("Disallow: private/") is plain.
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    if not pattern.startswith(("/", "*")):
        pattern = "/" + pattern
    normalised = _normalise(pattern, _PATTERN_PATH, _PATTERN_QUERY)
    head, *tail = normalised.split("*")
    length = len(normalised) + (1 if anchored else 0)
    return _Rule(allow, length, head, tuple(tail), anchored)


_Index = tuple[tuple[int, dict[str, tuple[_Rule, ...]]], ...]


def _index_rules(rules: tuple[_Rule, ...]) -> _Index:
    """Rules keyed by their literal head, one table per head length, shortest first.

    A path then needs one dict lookup per distinct head length to find every rule whose
    head it starts with, however many rules the file has.
    """
    tables: dict[int, dict[str, list[_Rule]]] = {}
    for rule in rules:
        tables.setdefault(len(rule.head), {}).setdefault(rule.head, []).append(rule)
    return tuple(
        (size, {head: tuple(found) for head, found in table.items()})
        for size, table in sorted(tables.items())
    )


def _candidates(rules: tuple[_Rule, ...], index: _Index | None, path: str) -> list[_Rule]:
    """The rules whose literal head ``path`` starts with."""
    if index is None:
        return [rule for rule in rules if path.startswith(rule.head)]
    found: list[_Rule] = []
    for size, table in index:
        if size > len(path):
            break
        found.extend(table.get(path[:size], ()))
    return found


@functools.lru_cache(maxsize=RULE_SETS_KEPT)
def _rule_set(rules: tuple[_Rule, ...]) -> tuple[tuple[_Rule, ...], _Index | None]:
    """``rules`` and their index (None for a file of at most ``SCANNED_RULES``): the same
    objects for the same rules as long as they are among the ``RULE_SETS_KEPT`` most
    recently met."""
    return rules, _index_rules(rules) if len(rules) > SCANNED_RULES else None


def _target(url: str) -> str:
    """Path and query of an absolute URL (fragment dropped), "/" when the path is empty."""
    authority = _SCHEME_AUTHORITY.match(url)
    rest = url[authority.end() :] if authority else url
    rest = rest.partition("#")[0]
    return rest if rest.startswith("/") else "/" + rest


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """The rules of one robots.txt for one agent: a value, safe to cache and share.

    ``crawl_delay`` is the Crawl-delay of the chosen group (seconds, or None when absent)
    and ``sitemaps`` every Sitemap line of the file, in order, without repeats.
    """

    crawl_delay: float | None = None
    sitemaps: tuple[str, ...] = ()
    _rules: tuple[_Rule, ...] = ()
    _index: _Index | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rules, index = _rule_set(self._rules)
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_index", index)

    def allowed(self, url: str) -> bool:
        """Whether the agent may fetch ``url`` (absolute, normalised, http or https).

        Matching uses the path and query; "/robots.txt" itself is always allowed.
        """
        if not self._rules:
            return True
        target = _target(url)
        if target.partition("?")[0] == _ROBOTS_PATH:
            return True
        path = _normalise(target, _URL_PATH, _URL_QUERY)
        best: _Rule | None = None
        for rule in _candidates(self._rules, self._index, path):
            if (
                best is None
                or rule.length > best.length
                or (rule.length == best.length and rule.allow and not best.allow)
            ) and rule.matches(path):
                best = rule
        return best is None or best.allow


ALLOW_ALL = RobotsRules()
DISALLOW_ALL = RobotsRules(_rules=(_compile_rule(False, "/"),))


class _Group:
    """Mutable collector for one group while parsing."""

    __slots__ = ("agents", "crawl_delay", "rules")

    def __init__(self) -> None:
        self.agents: list[str] = []
        self.rules: list[tuple[bool, str]] = []
        self.crawl_delay: float | None = None


def _group_agent(value: str) -> str:
    """The product token a User-agent line names, lower-cased ("*" for the global group).

    Like Google, the leading run of token characters is kept, so "FooBot/1.2" and
    "FooBot extra" both name "foobot".
    """
    if value[:1] == "*" and value[1:2] in ("", " ", "\t"):
        return "*"
    token = _PRODUCT_TOKEN.match(value)
    return token.group().lower() if token else ""


def _crawl_delay(value: str) -> float | None:
    """A Crawl-delay value in seconds, or None when it is not a finite number >= 0."""
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


def _truncate(body: bytes) -> bytes:
    """The first MAX_ROBOTS_BYTES of ``body``, cut back to the last complete line.

    A line cut in half could turn "Allow: /public-page" into a broader "Allow: /p".
    """
    if len(body) <= MAX_ROBOTS_BYTES:
        return body
    head = body[:MAX_ROBOTS_BYTES]
    end = max(head.rfind(b"\n"), head.rfind(b"\r"))
    return head[: end + 1]


def _strip_bom(body: bytes) -> bytes:
    """``body`` without a leading UTF-8 byte order mark, whole or cut short.

    Files are seen that start with only ``EF BB`` or ``EF``; Google skips those too.
    """
    size = next(n for n in (3, 2, 1, 0) if body.startswith(_BOM[:n]))
    return body[size:]


def _key(name: str) -> str | None:
    """The record a key names (``_USER_AGENT`` ...), or None for a key trawl ignores.

    Case is ignored, and a key is known when it starts with one of Google's spellings,
    typos included (``useragent``, ``Disalow``, ``Sitemaps``), and has no blank after it,
    so that "Disallow /a" is never read as a key by itself. ``Crawl-delay``, which Google
    ignores, must be spelt exactly.
    """
    match = _KEY_SPELLING.match(name)
    if match is None:
        return None
    rest = name[match.end() :]
    if rest and (match.lastgroup == _CRAWL_DELAY or _BLANKS.search(rest)):
        return None
    return match.lastgroup


def _record(line: str) -> tuple[str, str] | None:
    """The (key, value) of one line, or None when the line holds no record trawl uses.

    A comment is cut off first. ``key: value`` is the RFC 9309 form; when the text before
    the first colon is no known key, a line of exactly two words whose first is a known
    key is read as a key and value with the colon left out (``Disallow /private``), as
    Google reads it.
    """
    text = line.partition("#")[0].strip()
    name, colon, value = text.partition(":")
    if colon:
        key = _key(name.strip())
        if key is not None:
            return key, value.strip()
    words = _BLANKS.split(text)
    if len(words) == 2:
        key = _key(words[0])
        if key is not None:
            return key, words[1]
    return None


def _parse_groups(text: str) -> tuple[list[_Group], list[str]]:
    """Split robots.txt text into groups and collect the Sitemap lines."""
    groups: list[_Group] = []
    sitemaps: list[str] = []
    current: _Group | None = None
    in_agent_lines = False
    for line in _LINE_BREAK.split(text):
        record = _record(line)
        if record is None:
            continue
        key, value = record
        if key == _USER_AGENT:
            if current is None or not in_agent_lines:
                current = _Group()
                groups.append(current)
                in_agent_lines = True
            current.agents.append(_group_agent(value))
        elif key == _SITEMAP:
            if value:
                sitemaps.append(value)
        elif current is None:
            continue
        elif key in (_ALLOW, _DISALLOW):
            in_agent_lines = False
            if value:
                current.rules.append((key == _ALLOW, value))
        elif key == _CRAWL_DELAY:
            in_agent_lines = False
            delay = _crawl_delay(value)
            if delay is not None and (current.crawl_delay is None or delay > current.crawl_delay):
                current.crawl_delay = delay
    return groups, sitemaps


def parse_robots(body: bytes, agent_token: str) -> RobotsRules:
    """Parse a robots.txt body (only its first MAX_ROBOTS_BYTES) for ``agent_token``.

    Every group naming the token (case-insensitively) is merged into one; without such a
    group, every "*" group is merged; without either, nothing is restricted. When merged
    groups give several Crawl-delay values the largest is kept. Keys are read as Google
    reads them (`_record`: its typos, a missing colon, a byte order mark cut short);
    other lines, unknown keys and rules before the first User-agent line are ignored.
    """
    text = _strip_bom(_truncate(body)).decode("utf-8", "surrogateescape")
    groups, sitemaps = _parse_groups(text)
    token = agent_token.lower()
    chosen = [g for g in groups if token in g.agents]
    if not chosen:
        chosen = [g for g in groups if "*" in g.agents]
    rules = tuple(_compile_rule(allow, value) for g in chosen for allow, value in g.rules)
    delays = [g.crawl_delay for g in chosen if g.crawl_delay is not None]
    return RobotsRules(
        crawl_delay=max(delays) if delays else None,
        sitemaps=tuple(dict.fromkeys(sitemaps)),
        _rules=rules,
    )


def rules_for_response(status: int, body: bytes, agent_token: str) -> RobotsRules | None:
    """The rules implied by the final response to a robots.txt fetch.

    2xx: the parsed body. A redirect status (the engine passes one on only when more than
    MAX_ROBOTS_REDIRECTS redirects were needed): unavailable, so ALLOW_ALL (RFC 9309
    2.3.1.2). 4xx: ALLOW_ALL (2.3.1.3), except 429, which says the server is overloaded
    and is treated like 5xx. 5xx and anything else (including 304, which only means
    something next to a cached copy): None, meaning unreachable: disallow everything for
    now and fetch robots.txt again later (2.3.1.4).
    """
    if 200 <= status <= 299:
        return parse_robots(body, agent_token)
    if status in _REDIRECTS or (400 <= status <= 499 and status != 429):
        return ALLOW_ALL
    return None


def robots_url(url: str) -> str:
    """The robots.txt URL for the authority of an absolute http(s) ``url``.

    Userinfo is dropped; scheme, host and any explicit port are kept as given.
    """
    parts = urlsplit(url)
    authority = parts.netloc.rpartition("@")[2]
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not authority:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    return f"{scheme}://{authority}{_ROBOTS_PATH}"


def agent_token(user_agent: str) -> str:
    """The product token that starts a User-Agent string ("trawl/0.1 (+https://x)" -> "trawl").

    RFC 9309 2.2.1 allows only letters, "_" and "-" in it; a string that does not start
    with one raises ValueError, since no robots.txt group could ever name it.
    """
    match = _PRODUCT_TOKEN.match(user_agent.strip())
    token = match.group() if match else ""
    if not token:
        raise ValueError(f"user agent {user_agent!r} does not start with a product token")
    return token
