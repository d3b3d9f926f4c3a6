"""A whole crawl obeys robots.txt files written the way real ones are: with typos in the
keys, a colon left out and a byte order mark cut short (docs/ROBOTS.md, "Read as Google
reads them"). Each disallowed page must be stored as blocked and never requested."""

from __future__ import annotations

from conftest import CrawlRunner, page_requests
from trawl.demo import Response, Site, SiteServer
from trawl.store.values import State


def html(*hrefs: str) -> Response:
    """An HTML page linking ``hrefs``."""
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in hrefs)
    return Response(body=f"<!doctype html><title>p</title><body>{anchors}".encode())


def robots(body: bytes) -> Response:
    """A robots.txt response with exactly ``body``."""
    return Response(body=body, content_type="text/plain")


BLOCKED = {
    "typos.test": ["/Account-PasswordReset", "/cart/checkout", "/search?q=boots", "/old/"],
    "nocolon.test": ["/private/a.html", "/drafts/b.html"],
}
ALLOWED = {
    "typos.test": ["/about.html", "/Account"],
    "nocolon.test": ["/private/open.html", "/public.html"],
}


def lenient_site(port: int) -> Site:
    """Two hosts whose robots.txt only a lenient reader understands.

    typos.test starts with the first two bytes of a byte order mark and spells its keys
    as real files do; nocolon.test starts with one byte of it and leaves out colons.
    """
    routes: dict[str, Response] = {
        "http://typos.test/robots.txt": robots(
            b"\xef\xbbUser Agent: *\r\n"
            b"Disalow: /Account-\r\n"
            b"Dissallow: /cart/\r\n"
            b"DISALLOW: /search\r\n"
            b"Diasllow: /old/\r\n"
        ),
        "http://nocolon.test/robots.txt": robots(
            b"\xefuseragent trawl\n"
            b"Disallow /private/\n"
            b"Allow /private/open.html\n"
            b"Disallaw /drafts/  # comment\n"
            b"\n"
            b"User-agent: *\n"
            b"Disallow: /\n"
        ),
    }
    for host in BLOCKED:
        paths = BLOCKED[host] + ALLOWED[host]
        routes[f"http://{host}/"] = html(*paths)
        routes |= {f"http://{host}{path}": html() for path in paths}
    return Site.build(port, routes, [f"http://{host}/" for host in BLOCKED])


async def test_lenient_robots_txt_blocks_what_it_means_to(crawl: CrawlRunner) -> None:
    with SiteServer(lenient_site) as server:
        result = await crawl(server)
        site = server.site
        requests = page_requests(server)

    blocked = {site.url(host, path) for host, paths in BLOCKED.items() for path in paths}
    allowed = {site.url(host, path) for host, paths in ALLOWED.items() for path in paths}
    assert not blocked & set(requests)
    assert result.in_state(State.BLOCKED) == blocked
    assert all(result.rows[url].error is None for url in blocked)
    assert {url: requests[url] for url in allowed} == dict.fromkeys(allowed, 1)
    assert allowed <= result.in_state(State.DONE)
    assert result.summary.robots_blocked == len(blocked)
