"""URL normalisation and validation: the identity of every URL trawl sees.

Two URLs that normalise to the same string are the same page for trawl: the seen-set,
the store and the frontier key on the normalised form (and on `url_hash` of it).

`normalize` resolves first, per the WHATWG URL Standard (trawl.extract.resolution), and
then applies these rules, in this order:

1. Resolution (WHATWG): ASCII tab/newline removed anywhere, leading/trailing C0 controls
   and spaces trimmed, backslashes read as slashes, scheme and host lower-cased, hosts
   converted to IDNA (punycode), IPv4 number forms (``0x7f.1``) rewritten as dotted
   decimal, default ports (80 for http, 443 for https) dropped, dot segments removed.
   A link that fails to parse is rejected with the closest reason: ``bad_port``,
   ``no_host`` or ``bad_host`` when the authority shows it, else ``unparsable``.
2. Only ``http`` and ``https`` are accepted (``scheme`` otherwise: mailto:, javascript:,
   tel:, data:, ftp:, file:, ws:, ...).
3. A user name or password is rejected (``credentials``); a crawler never sends them.
4. Port 0 is rejected (``bad_port``); ports above 65535 already fail to parse.
5. The host must be an IPv4 address, a bracketed IPv6 address, or a DNS name: labels of
   ``a-z 0-9 - _``, each 1-63 characters, 253 in total (``bad_host`` otherwise, for
   example ``http://a..b/`` or ``http://a{b}/``, which no resolver can look up).
   One trailing dot is removed (``example.com.`` is ``example.com``).
6. The fragment is dropped.
7. Percent-encoding in path and query: hex digits upper-cased (``%2f`` -> ``%2F``) and
   escapes of unreserved characters (``A-Z a-z 0-9 - . _ ~``) decoded (``%7E`` -> ``~``).
   Escapes of reserved characters are never decoded, so ``%2F`` and ``/`` stay distinct.
8. Query: empty ``&``-separated pieces are dropped; parameters whose name (compared
   case-insensitively) is in `NormalizeRules.strip_params` or starts with one of
   `NormalizeRules.strip_prefixes` are dropped (a name in `TOKEN_ONLY_PARAMS`, ``sid``,
   only when its value is a `session_token`); the rest are sorted by name with a
   stable sort, so repeated names keep their relative order. Values are kept verbatim, a
   parameter without ``=`` stays without it, and a query left empty (``?`` alone) is
   removed. Path parameters of the form ``;name=value`` that these rules drop
   (``/cart;jsessionid=A1``) are removed too.
9. The path keeps its case and its trailing slash (``/a`` and ``/a/`` are different URLs);
   an empty path is ``/``.
10. A result longer than `NormalizeRules.max_length` characters is rejected (``too_long``).
11. Crawler traps in the path are rejected: more than `NormalizeRules.max_path_depth`
    segments (``deep_path``; a trailing slash adds none), or a run of one or more
    segments that comes three times in a row (``repeated_path``: ``/a/b/a/b/a/b``,
    ``/x/x/x/``), the shape of a relative link that points back into its own page.

Normalisation is idempotent: ``normalize(normalize(x)) == normalize(x)`` for every
accepted ``x``. `normalize` never raises on any string; it returns a `Rejection` instead.
"""

from __future__ import annotations

import enum
import hashlib
import re
import string
from dataclasses import dataclass
from operator import itemgetter

from ada_url import idna_to_ascii

from trawl.extract.resolution import (
    PLAIN_PATH_ABSOLUTE,
    own_serialization,
    plain_parts,
    resolve,
)

__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_STRIP_PARAMS",
    "TOKEN_ONLY_PARAMS",
    "NormalizeRules",
    "Rejection",
    "host_key",
    "hostname",
    "key_hostname",
    "normalize",
    "session_token",
    "url_hash",
]


class Rejection(enum.StrEnum):
    """Why a link was not accepted; the values double as metric label names."""

    UNPARSABLE = "unparsable"
    SCHEME = "scheme"
    NO_HOST = "no_host"
    TOO_LONG = "too_long"
    CREDENTIALS = "credentials"
    BAD_PORT = "bad_port"
    BAD_HOST = "bad_host"
    DEEP_PATH = "deep_path"
    REPEATED_PATH = "repeated_path"


DEFAULT_STRIP_PARAMS: frozenset[str] = frozenset(
    {
        # Ad-click identifiers (Google, Microsoft, Facebook, Yandex, X, Instagram).
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "fbclid",
        "yclid",
        "twclid",
        "igshid",
        # Mail and analytics campaign tags (Mailchimp, Google Analytics, HubSpot, Marketo).
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        # Session identifiers carried in URLs (Java, PHP, ASP.NET, ColdFusion, Perl
        # CGI::Session, osCommerce, Zen Cart, xt:Commerce, BroadVision, generic). Classic
        # ASP names its session ASPSESSIONID plus eight letters: a prefix, below. "sid"
        # also names content, so it goes only with a token for a value (TOKEN_ONLY_PARAMS).
        "sessionid",
        "session_id",
        "sessid",
        "jsessionid",
        "sid",
        "phpsessid",
        "asp.net_sessionid",
        "cfid",
        "cftoken",
        "cgisessid",
        "oscsid",
        "zenid",
        "xtcsid",
        "bv_sessionid",
    }
)


TOKEN_ONLY_PARAMS: frozenset[str] = frozenset({"sid"})
"""Names that sites use both for sessions (phpBB's ``sid=`` and 32 hex digits) and for
content (Slashcode's ``story.pl?sid=05/10/14/1234``): stripped, when a strip rule names
them, only if the value looks like a session token (`session_token`)."""

_SESSION_TOKEN_RE = re.compile(r"(?=[A-Za-z_-]*[0-9])(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{16,}={0,2}")


def session_token(value: str) -> bool:
    """True when a parameter value looks like a session token: 16 or more characters of
    ``A-Z a-z 0-9 - _`` (hex, base64url), at least one a digit and one a letter, and up
    to two ``=`` of base64 padding at the end. No ``/``, ``.``, ``%`` or other character:
    ``05/10/14/1234``, ``12345``, ``introduction`` and ``page.html`` are not tokens."""
    return _SESSION_TOKEN_RE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class NormalizeRules:
    """What `normalize` strips, how long a URL may be and how many path segments it may have.

    Parameter names and prefixes are matched case-insensitively; they are stored
    lower-cased whatever case they are given in.
    """

    strip_params: frozenset[str] = DEFAULT_STRIP_PARAMS
    strip_prefixes: tuple[str, ...] = ("utm_", "aspsessionid")
    max_length: int = 2048
    max_path_depth: int = 32

    def __post_init__(self) -> None:
        if self.max_length < 1:
            raise ValueError(f"max_length must be positive, got {self.max_length}")
        if self.max_path_depth < 1:
            raise ValueError(f"max_path_depth must be positive, got {self.max_path_depth}")
        object.__setattr__(self, "strip_params", frozenset(p.lower() for p in self.strip_params))
        object.__setattr__(self, "strip_prefixes", tuple(p.lower() for p in self.strip_prefixes))

    def __reduce__(self) -> tuple[type[NormalizeRules], tuple[object, ...]]:
        # Compiled, the class has no instance dict for pickle to fill behind the frozen
        # __setattr__: extract workers are sent their rules this way.
        fields = (self.strip_params, self.strip_prefixes, self.max_length, self.max_path_depth)
        return (NormalizeRules, fields)

    def strips(self, name: str, value: str) -> bool:
        """True when a query or path parameter `name` with `value` is dropped: its name is
        stripped, and a name in `TOKEN_ONLY_PARAMS` has a `session_token` for a value."""
        lowered = name.lower()
        if lowered not in self.strip_params and not lowered.startswith(self.strip_prefixes):
            return False
        return lowered not in TOKEN_ONLY_PARAMS or session_token(value)


DEFAULT_RULES = NormalizeRules()

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _escape_table() -> dict[str, str]:
    """Map every spelling of every ``%XX`` escape to its normal form."""
    table: dict[str, str] = {}
    for byte in range(256):
        upper = f"%{byte:02X}"
        normal = chr(byte) if chr(byte) in _UNRESERVED else upper
        for hi in {upper[1], upper[1].lower()}:
            for lo in {upper[2], upper[2].lower()}:
                table[f"%{hi}{lo}"] = normal
    return table


_ESCAPES = _escape_table()
_ESCAPE_RE = re.compile(r"%[0-9A-Fa-f]{2}")
# Dotted-decimal IPv4 (the only IPv4 form ada serialises) matches this as well.
_DNS_NAME_RE = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")
_PATH_PARAM_RE = re.compile(r";([^;/=]*)=([^;/]*)")
_TAB_NEWLINE_RE = re.compile(r"[\t\n\r]")
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_C0_SPACE = "".join(chr(c) for c in range(0x21))
_HTTP_SCHEMES = ("http", "https")
_AUTHORITY_END = "/\\?#"


def _fix_escapes(part: str) -> str:
    """Upper-case percent-escape hex and decode escapes of unreserved characters.

    An escape right after a literal ``%`` (or ``%`` and one hex digit) is only
    upper-cased: decoding it would make a new escape out of that ``%`` (``%%41b`` would
    become ``%Ab``, the byte 0xAB), which changes the URL and a second pass.
    """
    if "%" not in part:
        return part
    return _ESCAPE_RE.sub(_fixed_escape, part)


def _fixed_escape(match: re.Match[str]) -> str:
    escape, start, text = match.group(), match.start(), match.string
    if text[start - 1 : start] == "%" or (
        start >= 2 and text[start - 2] == "%" and text[start - 1] in string.hexdigits
    ):
        return escape.upper()
    return _ESCAPES[escape]


def _normalize_query(query: str, rules: NormalizeRules) -> str:
    """Drop empty pieces and stripped parameters, then stable-sort the rest by name."""
    strip_params, strip_prefixes = rules.strip_params, rules.strip_prefixes
    kept: list[tuple[str, str]] = []
    for piece in query.split("&"):
        if piece:
            name = piece.partition("=")[0]
            lowered = name.lower()
            if (lowered in strip_params or lowered.startswith(strip_prefixes)) and (
                lowered not in TOKEN_ONLY_PARAMS or session_token(piece[len(name) + 1 :])
            ):
                continue
            kept.append((name, piece))
    if not kept:
        return ""
    if len(kept) == 1:
        return "?" + kept[0][1]
    kept.sort(key=_NAME)
    return "?" + "&".join([piece for _, piece in kept])


_NAME = itemgetter(0)
"""Sort key of a (name, piece) query parameter: its name."""


def _normalize_path(path: str, rules: NormalizeRules) -> str:
    """Remove the ``;name=value`` path parameters that `NormalizeRules.strips` drops."""
    if ";" not in path:
        return path
    return _PATH_PARAM_RE.sub(
        lambda m: "" if rules.strips(m.group(1), m.group(2)) else m.group(), path
    )


def _path_rejection(path: str, max_depth: int) -> Rejection | None:
    """DEEP_PATH or REPEATED_PATH for a path that looks like a crawler trap (rule 11).

    A bounded scan, never a regular expression: the segments are counted first, so the
    search for repeats sees at most `max_depth` of them and makes fewer than
    ``max_depth ** 2 / 3`` comparisons. A run of ``period`` segments comes three times
    in a row exactly when ``2 * period`` consecutive segments each equal the one
    ``period`` places further on.
    """
    depth = path.count("/") - path.endswith("/")
    if depth > max_depth:
        return Rejection.DEEP_PATH
    if depth < 3:
        return None
    segments = path[1:].split("/", depth - 1)
    segments[-1] = segments[-1].removesuffix("/")
    if len(set(segments)) == depth:
        return None  # a run that repeats needs a segment that does
    for period in range(1, depth // 3 + 1):
        run = 0
        for index in range(depth - period):
            if segments[index] == segments[index + period]:
                run += 1
                if run == 2 * period:
                    return Rejection.REPEATED_PATH
            else:
                run = 0
    return None


def _port_rejection(port: str) -> Rejection | None:
    """BAD_PORT for a port that is not a number in 1..65535."""
    if port.isascii() and port.isdigit() and 0 < int(port) <= 65535:
        return None
    return Rejection.BAD_PORT


def _valid_punycode(label: str) -> bool:
    """True when an ``xn--`` label is the IDNA encoding of a valid Unicode label.

    The URL Standard rejects such labels; ada accepts some of them (for example
    ``xn--pokxncvks``, whose decoded form IDNA maps to other characters).
    """
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
        return bool(decoded) and bytes(idna_to_ascii(decoded)) == label.encode("ascii")
    except ValueError:  # UnicodeError included: not punycode, or not encodable
        return False


def _host_rejection(host: str) -> Rejection | None:
    """BAD_HOST unless `host` (ada's serialisation) is an IP literal or a DNS name."""
    if host.startswith("["):
        return None
    if len(host) > 253 or _DNS_NAME_RE.fullmatch(host) is None:
        return Rejection.BAD_HOST
    if "xn--" in host and not all(
        _valid_punycode(label) for label in host.split(".") if label.startswith("xn--")
    ):
        return Rejection.BAD_HOST
    return None


def _failure_reason(href: str, base: str | None) -> Rejection:
    """The closest reason why ada could not parse `href` against `base`."""
    text = _TAB_NEWLINE_RE.sub("", href).strip(_C0_SPACE)
    match = _SCHEME_RE.match(text)
    if match is not None:
        if match.group(1).lower() not in _HTTP_SCHEMES:
            return Rejection.SCHEME
        rest = text[match.end() :]
    elif text.startswith(("//", "\\\\", "/\\", "\\/")):
        base_href = None if base is None else resolve(base, None)
        if base_href is None:
            return Rejection.UNPARSABLE
        if not base_href.startswith(("http:", "https:")):
            return Rejection.SCHEME
        rest = text
    else:
        return Rejection.UNPARSABLE
    rest = rest.lstrip("/\\")
    end = min([i for i in [rest.find(c) for c in _AUTHORITY_END] if i >= 0], default=len(rest))
    authority = rest[:end].rpartition("@")[2]
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return Rejection.BAD_HOST
        host, after = authority[: close + 1], authority[close + 1 :]
        port = after[1:] if after.startswith(":") else ""
    else:
        host, colon, port = authority.partition(":")
        after = colon + port
    if after and _port_rejection(port) is not None:
        return Rejection.BAD_PORT
    return Rejection.BAD_HOST if host else Rejection.NO_HOST


def normalize(
    href: str, base: str | None = None, rules: NormalizeRules = DEFAULT_RULES
) -> str | Rejection:
    """Resolve `href` against `base` and normalise it (rules in the module docstring).

    Returns the normalised URL, or the `Rejection` that says why the link is unusable.
    """
    url = resolve(href, base)
    if url is None:
        return _failure_reason(href, base)
    return normalize_resolved(url, rules)


def normalize_resolved(url: str, rules: NormalizeRules = DEFAULT_RULES) -> str | Rejection:
    """Normalise `url`, which must already be a WHATWG serialisation (``resolve``'s output).

    ``normalize(href, base) == normalize_resolved(resolve(href, base))`` whenever the
    resolution succeeds; callers that cache by resolved URL use this half alone.
    """
    plain = plain_parts(url)
    if plain is not None:
        return _normalize_plain(plain, rules)
    return _normalize_serialized(url, rules)


def is_plain_origin(origin: str) -> bool:
    """Whether ``scheme://host[:port]`` (a serialized URL up to its path) has the plain
    shape's scheme, host and port (`plain_parts`), as :func:`normalize_on_plain_origin`
    needs."""
    return plain_parts(origin + "/") is not None


def normalize_on_plain_origin(
    origin: str, href: str, rules: NormalizeRules
) -> str | Rejection | None:
    """``normalize(href, base)`` for a path-absolute `href` of the plain shape, without
    dot segments, on a page whose origin is `origin` (`is_plain_origin`): the resolved
    URL is the two joined, so one match of the href alone does; None for other hrefs."""
    if href.startswith("//"):
        return None
    parts = PLAIN_PATH_ABSOLUTE.fullmatch(href)
    if parts is None or "/." in parts["path"]:
        return None
    return _normalize_parts(origin, parts["path"], parts["query"], rules)


def normalize_own_serialization(href: str, rules: NormalizeRules) -> str | Rejection | None:
    """``normalize(href)`` for a plain absolute `href` (`plain_parts`, no dot segments),
    which is its own WHATWG serialization, with one match of the plain shape where resolving and
    then normalising take two; None for any other href, which must be resolved first."""
    plain = own_serialization(href)
    return None if plain is None else _normalize_plain(plain, rules)


def _normalize_serialized(url: str, rules: NormalizeRules) -> str | Rejection:
    """The rules of the module docstring applied to any WHATWG serialization, one by one."""
    if url.startswith("https://"):
        scheme_end = 8
    elif url.startswith("http://"):
        scheme_end = 7
    else:
        return Rejection.SCHEME
    fragment = url.find("#", scheme_end)
    if fragment >= 0:
        url = url[:fragment]
    path_start = url.find("/", scheme_end)
    authority = url[scheme_end:path_start]
    if "@" in authority:
        return Rejection.CREDENTIALS
    if authority.endswith("]"):
        host, port = authority, ""
    else:
        host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "")
    if port and _port_rejection(port) is not None:
        return Rejection.BAD_PORT
    if host.endswith("."):
        host = host[:-1]
    if _host_rejection(host) is not None:
        return Rejection.BAD_HOST
    query_start = url.find("?", path_start)
    if query_start < 0:
        path, query = url[path_start:], ""
    else:
        path = url[path_start:query_start]
        query = _normalize_query(_fix_escapes(url[query_start + 1 :]), rules)
    escaped = _fix_escapes(path)
    path = _normalize_path(escaped, rules)
    netloc = f"{host}:{port}" if port else host
    result = f"{url[:scheme_end]}{netloc}{path}{query}"
    if path != escaped and "/." in path:
        # Dropping a path parameter can leave a dot segment ("/a/.;jsessionid=1"):
        # resolve it as the standard would, so normalising twice changes nothing.
        reparsed = resolve(result, None)
        if reparsed is not None:
            return normalize_resolved(reparsed, rules)
    if len(result) > rules.max_length:
        return Rejection.TOO_LONG
    return _path_rejection(path, rules.max_path_depth) or result


def _normalize_plain(parts: re.Match[str], rules: NormalizeRules) -> str | Rejection:
    """`_normalize_serialized` of a `plain_parts` URL, which has no escapes, path parameters
    or credentials and a valid host and port: only the fragment and query rules change it,
    and only the length and path rules reject it. Most links have this shape, and this
    takes about half the time (tests/test_url_fast_paths.py holds the two equal)."""
    scheme, host, port, path, query = parts.group("scheme", "host", "port", "path", "query")
    return _normalize_parts(scheme + host + (port or ""), path, query, rules)


def _normalize_parts(
    origin: str, path: str, query: str | None, rules: NormalizeRules
) -> str | Rejection:
    """`_normalize_plain` of a plain URL given as its origin, path and query (None: it
    has no ``?``)."""
    result = origin + path
    if query is not None:
        result += _normalize_query(query, rules)
    if len(result) > rules.max_length:
        return Rejection.TOO_LONG
    return _path_rejection(path, rules.max_path_depth) or result


def url_hash(url: str) -> int:
    """A stable signed 64-bit hash of `url` (fits SQLite INTEGER and PostgreSQL bigint)."""
    digest = hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def host_key(url: str) -> str:
    """``host`` or ``host:port`` of a normalised URL (the port only when non-default).

    IPv6 hosts keep their brackets: ``[::1]:8080``.
    """
    start = url.find("://") + 3
    end = url.find("/", start)
    return url[start:] if end < 0 else url[start:end]


def hostname(url: str) -> str:
    """The host of a normalised URL without its port (IPv6 hosts keep their brackets)."""
    return key_hostname(host_key(url))


def key_hostname(key: str) -> str:
    """The host of a `host_key` without its port (IPv6 hosts keep their brackets)."""
    if key.endswith("]") or ":" not in key:
        return key
    return key.rpartition(":")[0]
