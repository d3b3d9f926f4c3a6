"""A deterministic multi-host site full of crawler traps, and its exact ground truth.

`generate_site` writes every page together with a model of what a crawler can learn
from it (a `Node`: the canonical targets of its followable links, or the target of its
redirect). `explore` then walks that model breadth-first with the crawler's rules, so the
ground truth comes from the generator's own intent and never from parsing its HTML.

The crawler's rules, as `explore` applies them: a URL is discovered when it is a seed,
the target of a followable link on a fetched 200 text/html page, or the in-scope
Location of a fetched redirect at most `max_redirects` hops from the URL that started
the chain. robots.txt is consulted only when a URL is about to be fetched, so a
disallowed URL is discovered but not fetched, and links on unfetched pages stay unseen.

Hosts, with ``D`` the domain: ``www.D`` (seed; robots disallows ``/private/`` but
allows ``/private/open.html``; the feature pages and redirects live here), ``h1.D``
(``Crawl-delay: 0.3``, at most four pages to keep crawls short), ``h2.D`` (second seed;
no robots.txt, so everything is allowed), further ``hN.D`` like www, and ``a.b.D`` whose
robots.txt answers 500, so nothing there is fetched. Off-scope hosts are linked but
have no routes.
"""

from __future__ import annotations

import html
import posixpath
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from urllib.parse import urlsplit

from trawl.demo.site import Response, Route, Site, canonical_target

__all__ = [
    "CRAWL_DELAY",
    "MAX_REDIRECTS",
    "Exploration",
    "Link",
    "Node",
    "RobotsPolicy",
    "explore",
    "generate_site",
]

MAX_REDIRECTS = 5
CRAWL_DELAY = 0.3
BOMB_SIZE = 100_000_000
BIG_SIZE = 20_000_000

_TRACKING: tuple[str, ...] = ("utm_source=news", "utm_medium=email", "gclid=Cj0KCQ")
_TRACKING += ("fbclid=IwAR2", "sid=9f86d081884c7d659a2feaa0c55ad015")
_TRACKING += ("jsessionid=A1B2", "PHPSESSID=abc")
_STYLES = ("absolute", "upper", "protocol", "escaped", "tracking", "reordered", "fragment", "dots")
_SAME_HOST_STYLES = (*_STYLES, "root", "relative", "dot_relative", "spaces")
_VOCABULARY = (
    "harbour tide net rope vessel catch deck hull keel mast sail anchor current shoal reef"
)


@dataclass(frozen=True, slots=True)
class Link:
    """A followable link as written (`href`) and what it means (`target`).

    `target` is the canonical URL of a valid in-scope link, None for an invalid or
    off-scope one that a crawler must reject.
    """

    href: str
    target: str | None
    tag: str = "a"


@dataclass(frozen=True, slots=True)
class Node:
    """What fetching one URL teaches a crawler: link targets, or a redirect target."""

    links: tuple[str, ...] = ()
    redirect: str | None = None


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """A host's robots.txt as the crawler must read it: longest matching prefix wins,
    a tie goes to Allow; `deny_all` stands for a robots.txt that fails with 5xx."""

    rules: tuple[tuple[bool, str], ...] = ()
    deny_all: bool = False

    def allows(self, target: str) -> bool:
        if self.deny_all:
            return False
        best_len, verdict = -1, True
        for allow, prefix in self.rules:
            if target.startswith(prefix) and (
                len(prefix) > best_len or (len(prefix) == best_len and allow)
            ):
                best_len, verdict = len(prefix), allow
        return verdict


@dataclass(frozen=True, slots=True)
class Exploration:
    """The outcome of a model crawl: every URL discovered, fetched, or held back by robots."""

    discovered: frozenset[str]
    fetched: frozenset[str]
    robots_blocked: frozenset[str]


def explore(
    seeds: Iterable[str],
    nodes: Mapping[str, Node],
    allowed: Callable[[str], bool],
    max_redirects: int = MAX_REDIRECTS,
) -> Exploration:
    """Breadth-first crawl of the model. URLs without a node are 404s and teach nothing."""
    hops: dict[str, int] = {}
    queue: deque[str] = deque()
    fetched: set[str] = set()
    blocked: set[str] = set()

    def discover(url: str, hop: int) -> None:
        if url not in hops:
            hops[url] = hop
            queue.append(url)

    for seed in seeds:
        discover(seed, 0)
    while queue:
        url = queue.popleft()
        if not allowed(url):
            blocked.add(url)
            continue
        fetched.add(url)
        node = nodes.get(url, Node())
        if node.redirect is not None and hops[url] < max_redirects:
            discover(node.redirect, hops[url] + 1)
        for target in node.links:
            discover(target, 0)
    return Exploration(frozenset(hops), frozenset(fetched), frozenset(blocked))


def _relative(source: str, target: str) -> str:
    """A relative reference from the document at `source` to path+query `target`."""
    path, sep, query = target.partition("?")
    base_dir = posixpath.dirname(source.partition("?")[0])
    rel = posixpath.relpath(path, base_dir)
    if path.endswith("/") and not rel.endswith("/"):
        rel += "/"
    return rel + sep + query


class _Builder:
    """Collects routes and model nodes, and writes the HTML of pages."""

    def __init__(self, port: int, rng: random.Random) -> None:
        self.port = port
        self.rng = rng
        self.routes: dict[tuple[str, str], Route] = {}
        self.nodes: dict[str, Node] = {}
        self.words = _VOCABULARY.split()

    def url(self, host: str, target: str) -> str:
        return f"http://{host}:{self.port}{target}"

    def add(self, host: str, target: str, route: Route, node: Node) -> None:
        if canonical_target(target) != target or (host, target) in self.routes:
            raise ValueError(f"bad or duplicate route {host}{target}")
        self.routes[(host, target)] = route
        self.nodes[self.url(host, target)] = node

    def text(self, words: int) -> str:
        return " ".join(self.rng.choices(self.words, k=words)).capitalize() + "."

    def page(
        self,
        host: str,
        target: str,
        title: str,
        links: Sequence[Link] = (),
        *,
        head: str = "",
        extra: str = "",
        meta_nofollow: bool = False,
        before: tuple[Response, ...] = (),
        delay: float = 0.0,
    ) -> None:
        """An HTML page; `before` are answers given before it (503 then 200)."""
        anchors = "".join(
            f'<li><a href="{html.escape(link.href)}">{html.escape(link.href[:40])}</a></li>'
            for link in links
            if link.tag == "a"
        )
        areas = "".join(
            f'<area shape="rect" coords="0,0,10,10" href="{html.escape(link.href)}" alt="map">'
            for link in links
            if link.tag == "area"
        )
        if areas:
            extra += f'<map name="m">{areas}</map>'
        if meta_nofollow:
            head += '<meta name="robots" content="noindex, nofollow">'
        body = (
            f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title>{head}</head>\n<body>"
            f"<header><p>trawl test site</p></header>\n<main><h1>{html.escape(title)}</h1>"
            f"<p>{self.text(30)}</p><p>{self.text(20)}</p>\n<ul>{anchors}</ul>{extra}</main>\n"
            f"<footer><p>{self.text(6)}</p></footer></body></html>\n"
        )
        response = Response(body=body.encode(), delay=delay)
        targets = () if meta_nofollow else tuple(link.target for link in links if link.target)
        self.add(host, target, Route((*before, response)), Node(links=targets))

    def redirect(
        self, host: str, target: str, status: int, location: str, dest: str | None
    ) -> None:
        """A redirect whose body holds a link no crawler may follow."""
        body = b'<!doctype html><title>Moved</title><a href="/r/body-link.html">moved</a>'
        response = Response(status=status, body=body, headers=(("Location", location),))
        self.add(host, target, Route((response,)), Node(redirect=dest))

    def spell(self, src_host: str, src_target: str, host: str, target: str) -> str:
        """One of many spellings of the link from `src` to `target` on `host`."""
        port, rng = self.port, self.rng
        same = host == src_host
        absolute = f"http://{host}:{port}{target}"
        prefix = "" if same else f"http://{host}:{port}"
        style = rng.choice(_SAME_HOST_STYLES if same else _STYLES)
        path, sep, query = target.partition("?")
        pieces = query.split("&") if query else []
        if style == "upper":
            return f"HTTP://{host.upper()}:{port}{target}"
        if style == "protocol":
            return f"//{host}:{port}{target}"
        if style == "root":
            return target
        if style == "relative":
            return _relative(src_target, target)
        if style == "dot_relative":
            rel = _relative(src_target, target)
            return rel if rel.startswith(".") else "./" + rel
        if style == "spaces":
            return f"  {target} "
        if style == "fragment":
            return rng.choice([absolute, prefix + target]) + rng.choice(["#top", "#", "#s-2"])
        if style == "dots":
            return prefix + rng.choice(["/a/..", "/.", "/x/y/../.."]) + target
        if style == "escaped":
            letters = [i for i, c in enumerate(path) if c.isalnum() or c == "~"]
            if letters:
                i = rng.choice(letters)
                escape = f"%{ord(path[i]):02X}"
                escape = escape.lower() if rng.random() < 0.5 else escape
                return prefix + path[:i] + escape + path[i + 1 :] + sep + query
        if style == "reordered" and len(pieces) > 1:
            return prefix + path + "?" + "&".join(reversed(pieces))
        if style in ("tracking", "reordered", "escaped"):
            for param in rng.sample(_TRACKING, 2):
                pieces.insert(rng.randint(0, len(pieces)), param)
            return prefix + path + "?" + "&".join(pieces)
        return absolute


def _page_target(i: int) -> str:
    """Path+query of the i-th ordinary page of a host: varied shapes and depths."""
    shapes = (
        f"/docs/p{i}/",
        f"/articles/{i}.html",
        f"/articles/{2000 + i % 7}/post-{i}.html",
        f"/list?cat={i}&page={i % 3 + 1}",
        f"/~team/p{i}.html",
    )
    return "/" if i == 0 else shapes[i % 5]


_DECOYS: tuple[str, ...] = (
    "nf-1",
    "nf-2",
    "nf-3",
    "commented",
    "scripted",
    "canonical",
    "mnf-target",
)
_DECOYS += ("from-text", "from-pdf")
"""Pages linked only in ways a crawler must not follow (nofollow, comments, text, PDF)."""
_HOME_EXTRAS = ["/private/p1.html", "/private/open.html", "/gone.html"]
_ROBOTS_RULES = ((True, "/private/open.html"), (False, "/private/"))


def _robots(builder: _Builder, host: str, role: str) -> RobotsPolicy:
    """Serve the host's robots.txt and return the policy it means."""
    if role == "no_robots":
        return RobotsPolicy()
    if role == "robots_500":
        route = Route(
            (Response(status=500, body=b"robots unavailable", content_type="text/plain"),)
        )
        builder.add(host, "/robots.txt", route, Node())
        return RobotsPolicy(deny_all=True)
    lines = ["User-agent: evilbot", "Disallow: /", "", "User-agent: *"]
    if role == "crawl_delay":
        lines.append(f"Crawl-delay: {CRAWL_DELAY}")
    lines += ["Allow: /private/open.html", "Disallow: /private/", ""]
    body = "\n".join(lines).encode()
    builder.add(
        host, "/robots.txt", Route((Response(body=body, content_type="text/plain"),)), Node()
    )
    return RobotsPolicy(rules=_ROBOTS_RULES)


def _features(b: _Builder, www: str, other: str, off: tuple[str, ...], domain: str) -> None:
    """The fixed trap pages under /features/ and /r/ on the www host."""
    port, url = b.port, b.url
    hub = url(www, "/features/")
    target = "/features/target.html?a=1&b=2"
    t = url(www, target)
    tilde = url(www, "/features/~tilde/page.html")
    spellings = [
        Link(t, t),
        Link(f"HTTP://WWW.{domain.upper()}:{port}{target}", t),
        Link(f"//{www}:{port}{target}", t),
        Link("/features/target.html?b=2&a=1", t),
        Link("target.html?a=1&b=2", t),
        Link("./target.html?a=1&b=2#top", t),
        Link("../features/target.html?a=1&b=2", t),
        Link("/features/x/../target.html?a=1&b=2", t),
        Link("/features/./target.html?a=1&b=2#", t),
        Link("/features/%74arget.html?a=%31&b=2", t),
        Link("/features/target.html?utm_source=news&a=1&gclid=xyz&b=2", t),
        Link(
            "/features/target.html?a=1&sessionid=s1&b=2&jsessionid=j"
            "&sid=a3f5c2e1b7d9480f6e2c1a9b8d7e6f50&phpsessid=p",
            t,
        ),
        Link("  /features/target.html?a=1&b=2  ", t),
        Link(f"http://{www}.:{port}{target}", t),
        Link("/features/%7Etilde/page.html", tilde),
        Link("/features/%7etilde/page.html", tilde),
        Link("mailto:crew@" + domain, None),
        Link("javascript:void(0)", None),
        Link("tel:+15550100", None),
        Link("data:text/html,<a href=/features/data.html>d</a>", None),
        Link(f"ftp://{www}/features/file.txt", None),
        Link(f"http://user:pw@{www}:{port}/features/userinfo.html", None),
        Link(f"http://{www}:99999/features/bad-port.html", None),
        Link(f"http://exa mple.{domain}:{port}/features/bad-host.html", None),
        Link(f"http://{www}:{port}/features/long/{'x' * 2100}.html", None),
        Link(hub, hub),
        *(Link(f"http://{host}:{port}/features/", None) for host in off),
    ]
    b.page(www, "/features/spellings.html", "Spellings", spellings)
    b.page(
        www,
        "/features/target.html?a=1&b=2",
        "Target",
        [Link("spellings.html", url(www, "/features/spellings.html"))],
    )
    b.page(www, "/features/~tilde/page.html", "Tilde", [Link("../", hub)])

    for name in _DECOYS:
        b.page(www, f"/features/{name}.html", name, [Link("/features/", hub)])
    nofollow = url(www, "/features/nofollow.html")
    b.page(
        www,
        "/features/nofollow.html",
        "Not followed",
        [Link("/features/", hub), Link("#part", nofollow), Link("", nofollow)],
        head='<link rel="canonical" href="/features/canonical.html">',
        extra=(
            '<a rel="nofollow" href="/features/nf-1.html">nf</a>'
            '<a rel="NoFollow noopener" href="/features/nf-2.html">nf</a>'
            '<map name="n"><area rel="nofollow" href="/features/nf-3.html" alt="nf"></map>'
            '<!-- <a href="/features/commented.html">old</a> -->'
            "<script>const s = '<a href=\"/features/scripted.html\">';</script><a>no href</a>"
        ),
    )
    b.page(
        www,
        "/features/meta-nofollow.html",
        "Meta nofollow",
        [Link("/features/mnf-target.html", url(www, "/features/mnf-target.html"))],
        meta_nofollow=True,
    )
    based = [
        Link("one.html", url(www, "/features/based/one.html")),
        Link("../two.html", url(www, "/features/two.html")),
        Link("./three.html", url(www, "/features/based/three.html")),
    ]
    b.page(www, "/features/base/index.html", "Base", based, head='<base href="/features/based/">')
    leaves = ("/features/based/one.html", "/features/two.html", "/features/based/three.html")
    for path in (*leaves, "/features/area-target.html", "/r/body-link.html"):
        b.page(www, path, "Leaf", [Link("/features/", hub)])

    text = Response(
        body=b'see <a href="/features/from-text.html">this</a>\n',
        content_type="text/plain; charset=utf-8",
    )
    pdf = Response(
        body=b'%PDF-1.4\n<a href="/features/from-pdf.html">x</a>\n%%EOF\n',
        content_type="application/pdf",
    )
    b.add(www, "/features/doc.txt", Route((text,)), Node())
    b.add(www, "/features/doc.pdf", Route((pdf,)), Node())
    big = Response(content_type="application/octet-stream", body_size=BIG_SIZE)
    b.add(www, "/features/big.bin", Route((big,)), Node())
    b.add(www, "/features/bomb.html", Route((Response(body_size=BOMB_SIZE, gzip=True),)), Node())
    busy = Response(
        status=503, body=b"busy", content_type="text/plain", headers=(("Retry-After", "1"),)
    )
    b.page(www, "/features/flaky.html", "Flaky", [Link("/features/", hub)], before=(busy,))
    b.page(www, "/features/slow.html", "Slow", [Link("/features/", hub)], delay=0.2)

    redirects = _redirects(b, www, other, off[0])
    pages: tuple[str, ...] = (
        "spellings.html",
        "nofollow.html",
        "meta-nofollow.html",
        "base/index.html",
    )
    pages += ("doc.txt", "doc.pdf", "missing.html", "flaky.html", "slow.html", "big.bin")
    paths = [f"/features/{name}" for name in (*pages, "bomb.html")] + redirects
    hub_links = [Link(path, url(www, path)) for path in paths]
    hub_links += [
        Link("/features/area-target.html", url(www, "/features/area-target.html"), "area"),
        Link("/", url(www, "/")),
    ]
    b.page(www, "/features/", "Features", hub_links)


def _redirects(b: _Builder, www: str, other: str, off: str) -> list[str]:
    """Redirect routes on www; returns the heads, the only redirect URLs linked anywhere."""
    port, url = b.port, b.url
    simple = {
        301: ("/r/dest-301.html", "/r/dest-301.html"),
        302: ("dest-302.html", "/r/dest-302.html"),
        303: (url(www, "/r/dest-303.html"), "/r/dest-303.html"),
        308: ("./dest-308.html?utm_source=redirect", "/r/dest-308.html"),
    }
    for status, (location, dest) in simple.items():
        b.redirect(www, f"/r/{status}", status, location, url(www, dest))
        b.page(www, dest, f"Landed {status}", [Link("/features/", url(www, "/features/"))])
    b.redirect(
        www,
        "/r/307",
        307,
        f"HTTP://{other.upper()}:{port}/r/dest-307.html",
        url(other, "/r/dest-307.html"),
    )
    b.page(other, "/r/dest-307.html", "Landed 307", [Link("/", url(other, "/"))])
    for n in range(3):
        b.redirect(
            www,
            f"/r/chain-{n}",
            302,
            f"/r/chain-{n + 1}" if n < 2 else "chain-end.html",
            url(www, f"/r/chain-{n + 1}" if n < 2 else "/r/chain-end.html"),
        )
    b.page(www, "/r/chain-end.html", "Chain end", [Link("/", url(www, "/"))])
    b.redirect(www, "/r/loop-1", 302, "/r/loop-2", url(www, "/r/loop-2"))
    b.redirect(www, "/r/loop-2", 302, "/r/loop-1", url(www, "/r/loop-1"))
    b.redirect(www, "/r/away", 302, f"http://{off}:{port}/landing.html", None)
    for n in range(7):
        b.redirect(www, f"/r/long-{n}", 301, f"/r/long-{n + 1}", url(www, f"/r/long-{n + 1}"))
    b.page(www, "/r/long-7", "Too far", [Link("/", url(www, "/"))])
    b.redirect(
        www, "/r/to-private", 302, "/private/redirected.html", url(www, "/private/redirected.html")
    )
    heads = [f"/r/{status}" for status in (301, 302, 303, 307, 308)]
    return [*heads, "/r/chain-0", "/r/loop-1", "/r/away", "/r/long-0", "/r/to-private"]


def _host_pages(
    b: _Builder,
    host: str,
    names: Sequence[str],
    pages: Mapping[str, Sequence[str]],
    links_per_page: int,
    off_scope: Sequence[str],
) -> None:
    """One host's ordinary pages, its private pages and an orphan nobody links.

    Every page links home and to its neighbours (so all pages are reachable and links
    run in circles), then to random pages: mostly its own host, some other in-scope
    hosts, a few off-scope ones, each in a randomly chosen spelling. Home pages also
    link the private pages, a 404 and every other host's home; www's links /features/.
    """
    rng, own = b.rng, pages[host]
    for i, target in enumerate(own):
        chosen: list[tuple[str, str | None]] = [
            (host, t) for t in (own[0], own[(i + 1) % len(own)], own[i - 1])
        ]
        for _ in range(links_per_page):
            roll = rng.random()
            if roll < 0.05:
                chosen.append((rng.choice(off_scope), None))
            elif roll < 0.25:
                other = rng.choice([h for h in names if h != host])
                chosen.append((other, rng.choice(pages[other])))
            else:
                chosen.append((host, rng.choice(own)))
        links = [
            Link(b.spell(host, target, h, t), b.url(h, t))
            if t is not None
            else Link(f"http://{h}:{b.port}/{rng.choice(b.words)}.html", None)
            for h, t in chosen
        ]
        if i == 0:
            extras = ["/private/p1.html"] if host == names[1] else _HOME_EXTRAS
            links += [Link(p, b.url(host, p)) for p in extras]
            links += [Link(b.url(h, "/"), b.url(h, "/")) for h in names if h != host]
            if host == names[0]:
                links.append(Link("/features/", b.url(host, "/features/")))
        b.page(host, target, f"{host} page {i}", links)
    private = [
        Link("/private/deep.html", b.url(host, "/private/deep.html")),
        Link("/", b.url(host, "/")),
    ]
    for path in ("/private/p1.html", "/private/open.html", "/private/deep.html"):
        b.page(host, path, "Private", private)
    b.page(host, "/orphan.html", "Orphan", [Link("/", b.url(host, "/"))])


def generate_site(
    port: int,
    *,
    hosts: int = 4,
    pages_per_host: int = 30,
    seed: int = 1,
    domain: str = "trawl.test",
    links_per_page: int = 12,
) -> Site:
    """Build the site for `port`; the same arguments always give the same site."""
    if hosts < 4 or pages_per_host < 2 or links_per_page < 0:
        raise ValueError("need hosts >= 4, pages_per_host >= 2, links_per_page >= 0")
    rng = random.Random(seed)
    b = _Builder(port, rng)
    names = [f"www.{domain}"] + [f"h{k}.{domain}" for k in range(1, hosts - 1)] + [f"a.b.{domain}"]
    roles = {
        names[0]: "rules",
        names[1]: "crawl_delay",
        names[2]: "no_robots",
        names[-1]: "robots_500",
    }
    off_scope = ("www.elsewhere.test", f"not{domain}", f"www.{domain}.elsewhere.test")
    small = {names[1]: 4, names[-1]: 6}
    pages = {
        h: [_page_target(i) for i in range(min(pages_per_host, small.get(h, pages_per_host)))]
        for h in names
    }
    policies = {h: _robots(b, h, roles.get(h, "rules")) for h in names}

    for host in names:
        _host_pages(b, host, names, pages, links_per_page, off_scope)
    b.page(names[0], "/private/redirected.html", "Private", [])
    _features(b, names[0], names[2], off_scope, domain)

    seeds = (b.url(names[0], "/"), b.url(names[2], "/"))

    def allowed(url: str) -> bool:
        parts = urlsplit(url)
        return policies[parts.hostname or ""].allows(
            parts.path + ("?" + parts.query if parts.query else "")
        )

    result = explore(seeds, b.nodes, allowed)
    return Site(
        port=port,
        routes=MappingProxyType(b.routes),
        seeds=seeds,
        hosts=tuple(names),
        ground_truth=result.discovered,
        expected_fetches=result.fetched,
        robots_blocked=result.robots_blocked,
        off_scope_hosts=off_scope,
    )
