"""The request headers of each site, secrets read from this process's environment.

Made once when a crawl starts (:func:`site_requests`), so that a missing variable is one
line before anything is fetched. The fetcher adds a site's headers to every request for
a host of that site (its pages, its robots.txt, its soft-404 probe, its sitemaps) and to
no other: a redirect to another host is queued as a URL of that host and goes out with
that host's headers, or none.

An archived request (``--warc``) keeps every header's name, but the value of an
Authorization header, of a secret header and of each secret cookie is ``[redacted]``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trawl.fetch.proxy import Proxy, ProxyFor, always, parse_proxy
from trawl.sites.match import HostPatterns
from trawl.sites.rules import Site, SiteError, Sites, Value, check_text

REDACTED = "[redacted]"


@dataclass(frozen=True, slots=True)
class SiteRequest:
    """What a site's requests carry: ``headers`` as sent, and ``archived``, the value
    the archive keeps of each header whose sent value it must not."""

    headers: dict[str, str] = field(default_factory=dict)
    archived: dict[str, str] = field(default_factory=dict)

    def redact(self, sent: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """``sent`` (a request's headers as sent) as the archive keeps them."""
        if not self.archived:
            return list(sent)
        hidden = {name.lower(): value for name, value in self.archived.items()}
        return [(name, hidden.get(name.lower(), value)) for name, value in sent]


def site_requests(
    sites: Sites, environ: Mapping[str, str] | None = None
) -> HostPatterns[SiteRequest]:
    """Each site's request headers, by pattern; SiteError naming the site for a variable
    not set, a value unusable in a request, or a secret not kept with the crawl."""
    env = os.environ if environ is None else environ
    return HostPatterns(
        (site.pattern, request) for site in sites.rules if (request := _request(site, env)).headers
    )


def _request(site: Site, env: Mapping[str, str]) -> SiteRequest:
    where = f"site {site.pattern!r}"
    headers: dict[str, str] = {}
    archived: dict[str, str] = {}
    for name, value in site.headers:
        text = _text(f"{where}: header {name!r}", value, env, header=True)
        headers[name] = text
        if value.secret or name.lower() == "authorization":
            archived[name] = REDACTED
    if site.cookies:
        sent, kept = [], []
        for name, value in site.cookies:
            text = _text(f"{where}: cookie {name!r}", value, env, header=False)
            sent.append(f"{name}={text}")
            kept.append(f"{name}={REDACTED if value.secret else text}")
        headers["Cookie"] = "; ".join(sent)
        if any(value.secret for _, value in site.cookies):
            archived["Cookie"] = "; ".join(kept)
    if site.auth is not None:
        user = _env(f"{where}: auth user", site.auth.user_env, env)
        password = _env(f"{where}: auth password", site.auth.password_env, env)
        if ":" in user:
            raise SiteError(f"{where}: the auth user name ({site.auth.user_env}) has a ':'")
        for what, text in (("user name", user), ("password", password)):
            if "\r" in text or "\n" in text or "\0" in text:
                raise SiteError(f"{where}: a line break or NUL in the auth {what}")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        archived["Authorization"] = REDACTED
    return SiteRequest(headers, archived)


def _text(what: str, value: Value, env: Mapping[str, str], *, header: bool) -> str:
    if value.env is not None:
        text = _env(what, value.env, env)
        check_text(f"{what} (from {value.env})", text, header=header)
        return text
    if value.text is None:
        raise SiteError(
            f"{what} is a secret given to the run that started the crawl and not kept "
            'with it: give it as {env = "NAME"} for other runs to read'
        )
    return value.text


def _env(what: str, name: str, env: Mapping[str, str]) -> str:
    text = env.get(name)
    if text is None:
        raise SiteError(f"{what}: environment variable {name} is not set")
    return text


def site_proxies(sites: Sites, default: Proxy | None) -> ProxyFor | None:
    """The proxy each host's requests go through: its site's ``proxy``, else ``default``
    (``--proxy``); None when no host has one. Each site's proxy is read once, its
    credentials from the environment as ``--proxy``'s are."""
    chosen = {site.pattern: parse_proxy(site.proxy) for site in sites.rules if site.proxy}
    if not chosen:
        return None if default is None else always(default)

    def proxy_for(host: str) -> Proxy | None:
        site = sites.for_host(host)
        if site is not None and site.proxy:
            return chosen[site.pattern]
        return default

    return proxy_for
