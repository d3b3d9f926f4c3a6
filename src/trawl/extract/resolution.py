"""URL resolution per the WHATWG URL Standard, and the plain shape that needs no parser.

`resolve` follows the standard exactly (the ada parser), as browsers do; what resolution
changes is rule 1 of trawl.extract.urls, which normalises what it returns.

Most links have a plain shape whose resolution is string work: a relative href of plain
characters joins its base, and an absolute URL of the `plain_parts` shape is its own
WHATWG serialization. `resolve_against_serialized` takes those shortcuts, and
trawl.extract.urls normalises a plain URL with fewer steps; tests/test_url_fast_paths.py
holds each shortcut to the parser's answer.
"""

from __future__ import annotations

import re

from ada_url import join_url, parse_url

__all__ = [
    "PLAIN_PATH_ABSOLUTE",
    "own_serialization",
    "plain_parts",
    "resolve",
    "resolve_against_serialized",
]


def resolve(href: str, base: str | None) -> str | None:
    """Resolve `href` against `base` per the WHATWG URL Standard; None when it fails.

    With no base, `href` must be absolute. No normalisation beyond the standard's own:
    credentials and fragment are kept.
    """
    try:
        if base is None:
            return parse_url(href, ("href",))["href"]
        return join_url(base, href)
    except ValueError:
        return None


def resolve_against_serialized(href: str, base: str | None) -> str | None:
    """:func:`resolve` for a `base` that is already a WHATWG serialisation (a normalised
    page URL, or :func:`resolve`'s own output).

    Plain relative hrefs, most links of most pages, are then joined as strings, which
    gives the standard's result without a parse, and a plain absolute href (`plain_parts`,
    without dot segments) is its own serialization; anything else goes to :func:`resolve`.
    """
    if href.startswith(("http://", "https://")):
        if own_serialization(href) is not None:
            return href
    elif base is not None:
        joined = _simple_join(href, base)
        if joined is not None:
            return joined
    return resolve(href, base)


_PLAIN_RELATIVE = re.compile(
    r"(?P<path>[A-Za-z0-9_~%./-]+)(?P<rest>(?:\?[A-Za-z0-9_~%.=&+-]*)?(?:#[A-Za-z0-9_~.-]*)?)"
)
"""A relative href whose resolution needs no parsing: a path of plain characters (dot
segments are resolved by :func:`_join_segments`), a plain query and fragment."""


_PLAIN_TAIL = (
    r"(?P<path>/[A-Za-z0-9._~!$&'()*+,=:@/-]*)"
    r"(?:\?(?P<query>[A-Za-z0-9._~!$&()*+,;=:@/?-]*))?"
    r"(?:#[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?"
)
"""Path, query and fragment of the plain shape."""

_PLAIN_URL = re.compile(
    r"(?P<scheme>https?://)(?P<host>(?:[a-z0-9-]{1,63}\.)*[a-z][a-z0-9-]{0,62})"
    r"(?P<port>:[1-9][0-9]{0,4})?" + _PLAIN_TAIL
)
"""An absolute URL of the shape most links have: lower-case scheme and DNS name (the
last label starting with a letter, so never an IPv4 number), a port without leading
zeros if any, no credentials or percent-escapes, no ``;`` in the path, and only
characters that no component of the WHATWG serialization escapes."""

PLAIN_PATH_ABSOLUTE = re.compile(_PLAIN_TAIL)
"""The path, query and fragment of `_PLAIN_URL`, alone: a path-absolute href that a page
on a plain origin resolves to a plain URL by joining strings."""

_DEFAULT_PORTS = {"http://": ":80", "https://": ":443"}


def plain_parts(url: str) -> re.Match[str] | None:
    """`url`'s parts when it has the `_PLAIN_URL` shape, a host of at most 253 characters
    and no punycode label, and a port, if any, up to 65535 and not the scheme's default
    (which the standard drops); None otherwise."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None or len(match["host"]) > 253 or "xn--" in match["host"]:
        return None
    port = match["port"]
    if port is not None and (int(port[1:]) > 65535 or port == _DEFAULT_PORTS[match["scheme"]]):
        return None
    return match


def own_serialization(href: str) -> re.Match[str] | None:
    """`href`'s parts when it is its own WHATWG serialization: `plain_parts` and without dot
    segments, which the parser would resolve; None otherwise."""
    plain = plain_parts(href)
    return None if plain is None or "/." in plain["path"] else plain


def _join_segments(base_path: list[str], path: str) -> str:
    """The standard's path state for a plain `path` against a base path's segments:
    ``.`` and ``..`` segments resolved, a trailing one leaving an empty segment."""
    out = [] if path.startswith("/") else base_path[:-1]
    segments = path[1:].split("/") if path.startswith("/") else path.split("/")
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment == "..":
            if out:
                out.pop()
            if index == last:
                out.append("")
        elif segment == ".":
            if index == last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


def _simple_join(href: str, base: str) -> str | None:
    """The standard's resolution of a plain relative `href`, by string joining; None when
    `href` or `base` is not plain enough for that (the caller then asks ada)."""
    if not base.startswith(("http://", "https://")) or href.startswith("//"):
        return None
    match = _PLAIN_RELATIVE.fullmatch(href)
    # Percent-encoded dots still make dot segments; leave those to ada.
    if match is None or "%2e" in href or "%2E" in href:
        return None
    authority = base.find("/", base.find("//") + 2)
    if authority < 0:
        return None
    path = match["path"]
    dotted = path.startswith(".") or "/." in path
    if path.startswith("/") and not dotted:
        return base[:authority] + href
    end = len(base)
    for mark in "?#":
        found = base.find(mark, authority)
        if 0 <= found < end:
            end = found
    if not dotted:
        return base[: base.rfind("/", authority, end) + 1] + href
    base_path = base[authority + 1 : end].split("/")
    return base[:authority] + _join_segments(base_path, path) + match["rest"]
