"""A single-page-application test site: pages whose links and text only scripts make.

Each host serves the same shell for ``/`` and ``/item/N``: an empty ``<div
id="root">``, a font in its style sheet and ``/static/app.js``. The script loads JSON
with ``fetch()`` (``/api/items.json`` on the home page, ``/api/item/N.json`` on an item)
and builds the page from it: the home page links every item, an item page shows its
text, an image and a link to its reviews. A reviews page (``/reviews/N``) is plain HTML
with no script. A crawl that does not run the scripts finds the home pages only; one
that does finds every page (``Site.ground_truth``), and never needs the image or font.
"""

from __future__ import annotations

import json

from trawl.demo.site import Response, Site

APP_JS = b"""
(async () => {
  const root = document.getElementById('root');
  const path = location.pathname;
  if (path === '/') {
    const items = await (await fetch('/api/items.json')).json();
    const list = document.createElement('ul');
    for (const item of items) {
      const entry = document.createElement('li');
      const link = document.createElement('a');
      link.href = '/item/' + item.id;
      link.textContent = item.name;
      entry.appendChild(link);
      list.appendChild(entry);
    }
    root.appendChild(list);
  } else {
    const id = path.split('/').pop();
    const item = await (await fetch('/api/item/' + id + '.json')).json();
    const logo = document.createElement('img');
    logo.src = '/img/item-' + id + '.png';
    root.appendChild(logo);
    const text = document.createElement('p');
    text.textContent = item.text;
    root.appendChild(text);
    const link = document.createElement('a');
    link.href = item.reviews;
    link.textContent = 'Reviews';
    root.appendChild(link);
  }
})();
"""

SHELL = (
    b"<!doctype html><html><head><title>Shop</title><style>"
    b"@font-face{font-family:shop;src:url(/fonts/shop.woff2)}body{font-family:shop}"
    b'</style></head><body><div id="root"></div><script src="/static/app.js"></script>'
    b"</body></html>"
)
"""Every page of the application before its script runs."""

WORDS = "the review of this item says that it does what it should and lasts for years "


def _json(value: object) -> Response:
    return Response(body=json.dumps(value).encode(), content_type="application/json")


def _reviews(number: int) -> bytes:
    text = f"Reviews of item {number}: " + WORDS * 8
    return f"<!doctype html><html><body><p>{text}</p><a href='/'>Home</a></body></html>".encode()


def spa_routes(host: str, items: int) -> dict[str, Response]:
    """The routes of one application host with ``items`` items (as ``Site.build`` takes
    them: absolute URLs without a port)."""
    base = f"http://{host}"
    routes: dict[str, Response] = {
        f"{base}/": Response(body=SHELL),
        f"{base}/static/app.js": Response(body=APP_JS, content_type="text/javascript"),
        f"{base}/api/items.json": _json(
            [{"id": n, "name": f"Item {n}"} for n in range(1, items + 1)]
        ),
        f"{base}/fonts/shop.woff2": Response(body=b"wOF2", content_type="font/woff2"),
    }
    for n in range(1, items + 1):
        routes[f"{base}/item/{n}"] = Response(body=SHELL)
        routes[f"{base}/api/item/{n}.json"] = _json(
            {"text": f"Item {n} is " + WORDS * 4, "reviews": f"/reviews/{n}"}
        )
        routes[f"{base}/img/item-{n}.png"] = Response(body=b"\x89PNG", content_type="image/png")
        routes[f"{base}/reviews/{n}"] = Response(body=_reviews(n))
    return routes


def page_urls(host: str, items: int) -> list[str]:
    """The pages of one host (no subresources): its home, items and reviews."""
    base = f"http://{host}"
    return [
        f"{base}/",
        *(f"{base}/item/{n}" for n in range(1, items + 1)),
        *(f"{base}/reviews/{n}" for n in range(1, items + 1)),
    ]


def spa_site(port: int, hosts: int = 1, items: int = 3) -> Site:
    """``hosts`` application hosts (``app-0.spa.test``, ...) of ``items`` items each."""
    names = [f"app-{index}.spa.test" for index in range(hosts)]
    routes: dict[str, Response] = {}
    truth: list[str] = []
    for name in names:
        routes.update(spa_routes(name, items))
        truth += page_urls(name, items)
    seeds = [f"http://{name}/" for name in names]
    return Site.build(port, routes, seeds, hosts=names, ground_truth=truth)
