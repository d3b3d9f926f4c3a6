"""``--text`` and ``--events`` in whole crawls: duplicates, noindex, aliases, redirects.

The site serves real pages (the hand-checked news page of tests/data/text and stories on
its template): pairs that differ only by a date, a visit counter or an advert (near
duplicates), a copy under other boilerplate (an exact duplicate), really different
stories, and pages that ask not to be indexed or followed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from conftest import CrawlRunner, page_requests
from pg import URL as PG_URL
from pg import crawl_name
from test_text import PAGES, edit, news_html, story_page
from trawl.content.text import extract_text
from trawl.crawl.runner import TEXT_DIR, WARC_DIR
from trawl.demo import Response, Site, SiteServer
from trawl.extract.urls import url_hash
from trawl.store.location import StoreLocation
from trawl.store.sqlite.store import DB_NAME

__all__ = ["crawl_name"]

ROOT = "http://www.news.test"


def story(name: str, *, after: str = "") -> str:
    """One of the hand-checked texts on the news page's template, with a paragraph added
    after it if given (one before it would be the lead-in the extractor leaves out)."""
    lines = PAGES[name].expected.split("\n")
    paragraphs = [p for p in (*lines[1:], after) if p]
    return story_page(lines[0], paragraphs)


def copy_of_news() -> str:
    """The news page under other boilerplate: navigation, cookie notice and footer."""
    return edit(
        news_html(),
        ("Winter ferry timetable extended to March", "Lifeboat crew called out twice in one night"),
        ('<li><a href="/property">Property</a></li>', ""),
        ("© 2024 The Westmouth Courier Ltd.", "© 2025 Westmouth Courier Media Ltd."),
    )


TOP_AD = '<span class="ad-label">Advertisement</span></div>\n<div class="layout">'


def with_advert(html: str, text: str) -> str:
    """``html`` with ``text`` as the advert above the page."""
    label = '<span class="ad-label">Advertisement</span>'
    return edit(html, (TOP_AD, TOP_AD.replace(label, f'{label}<a href="/ad">{text}</a>')))


EMPTY = b"<!doctype html><title></title><body><img src=a.png></body>"

TEMPLATE_CANONICAL = "https://courier.example/news/local/harbour-wall-repairs"
"""The page the template's ``<link rel=canonical>`` names: unknown to the crawl."""


def with_head(html: str, extra: str) -> str:
    return html.replace("</head>", extra + "</head>", 1)


def with_link(html: str, target: str) -> str:
    return html.replace("</body>", f'<a href="{target}">more</a></body>', 1)


def pages() -> dict[str, str | Response]:
    """Every page but the index, by path."""
    return {
        # Exact duplicates: the same main text under other boilerplate, or another advert.
        "/news": news_html(),
        "/copy": copy_of_news(),
        "/advert-1": with_advert(story("docs_page"), "Cheap flights to the sun this Easter"),
        "/advert-2": with_advert(story("docs_page"), "Compare car insurance quotes in minutes"),
        # Near duplicates: the main text differs only by a date or a visit counter.
        "/date-1": story("blog_post", after="Updated 14 February 2024 at 11:20"),
        "/date-2": story("blog_post", after="Updated 15 February 2024 at 16:45"),
        "/counter-1": story("recipe", after="This recipe has been read 1,204 times."),
        "/counter-2": story("recipe", after="This recipe has been read 31,877 times."),
        # Pages that really differ, one named by another's canonical link.
        "/alias": edit(story("product"), (TEMPLATE_CANONICAL, "/news")),
        "/nofollow": with_link(
            with_head(story("short_notice"), '<meta name="robots" content="nofollow">'),
            "/hidden-1",
        ),
        "/old": Response(status=301, headers=(("Location", "/moved"),), body=b""),
        # A page without main text: events carry its body's hash.
        "/empty": EMPTY.decode(),
        "/moved": story("german_news"),
        # Pages that may not be indexed.
        "/noindex": with_link(
            with_head(story("listing"), '<meta name="robots" content="noindex">'), "/after-noindex"
        ),
        "/after-noindex": story("listing"),
        "/none": with_link(
            with_head(story("docs_page"), '<meta name="robots" content="none">'), "/hidden-2"
        ),
        "/header-noindex": Response(
            body=story("blog_post").encode(), headers=(("X-Robots-Tag", "noindex"),)
        ),
        "/hidden-1": story("recipe"),
        "/hidden-2": story("recipe"),
    }


def index(paths: list[str]) -> bytes:
    links = "".join(f'<li><a href="{path}">{path}</a></li>' for path in paths)
    return f"<!doctype html><title>Index</title><ul>{links}</ul>".encode()


LINKED = [
    "/news", "/copy", "/advert-1", "/advert-2", "/date-1", "/date-2", "/counter-1",
    "/counter-2", "/alias", "/nofollow", "/old", "/noindex", "/none", "/header-noindex",
    "/empty",
]  # fmt: skip


def make_site(port: int) -> Site:
    routes: dict[str, Any] = {f"{ROOT}/": Response(body=index(LINKED))}
    for path, page in pages().items():
        routes[f"{ROOT}{path}"] = (
            page if isinstance(page, Response) else Response(body=page.encode())
        )
    truth = [f"{ROOT}/", *(f"{ROOT}{p}" for p in LINKED), f"{ROOT}/after-noindex", f"{ROOT}/moved"]
    return Site.build(port, routes, [f"{ROOT}/"], ground_truth=truth)


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site) as s:
        yield s


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def read_text_output(data_dir: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    files = sorted((data_dir / TEXT_DIR).iterdir())
    assert files
    assert all(f.name.endswith(".jsonl.gz") for f in files)
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as stream:
            records.extend(json.loads(line) for line in stream)
    return records


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def store_links(data_dir: Path) -> dict[str, tuple[str | None, str | None, str | None]]:
    """Per URL path: the paths it duplicates exactly, nearly, and is an alias of."""
    with closing(sqlite3.connect(data_dir / DB_NAME)) as db:
        urls = dict(db.execute("SELECT id, url FROM urls").fetchall())
        rows = db.execute(
            "SELECT url, duplicate_of, near_duplicate_of, alias_of FROM urls"
        ).fetchall()

    def name(url_id: int | None) -> str | None:
        return None if url_id is None else path_of(urls[url_id])

    return {path_of(u): (name(d), name(n), name(a)) for u, d, n, a in rows}


EXCLUDED = {"/noindex", "/none", "/header-noindex"}
"""Pages that ask not to be indexed: fetched, never in the outputs."""
EXACT_PAIRS = [("/news", "/copy"), ("/advert-1", "/advert-2")]
NEAR_PAIRS = [("/date-1", "/date-2"), ("/counter-1", "/counter-2")]
DISTINCT = ["/alias", "/nofollow", "/moved", "/after-noindex"]


def later_of(
    pair: tuple[str, str], column: int, links: Mapping[str, tuple[str | None, ...]]
) -> str:
    """The page of ``pair`` recorded as (exactly or nearly) duplicating the other."""
    first, second = pair
    found = {links[first][column], links[second][column]}
    assert found in ({None, first}, {None, second}), (pair, found)
    return first if links[first][column] else second


@pytest.mark.parametrize("parse_workers", [0, 1])
async def test_text_and_events_follow_the_duplicate_and_robots_rules(
    crawl: CrawlRunner, server: SiteServer, tmp_path: Path, parse_workers: int
) -> None:
    events_file = tmp_path / "out" / "events.jsonl"
    result = await crawl(server, text=True, events=events_file, parse_workers=parse_workers)
    fetched = {path_of(url) for url in page_requests(server)}

    # noindex pages are fetched and their links followed; nofollow and none stop links.
    assert "/after-noindex" in fetched
    assert not {"/hidden-1", "/hidden-2"} & fetched
    content = result.summary.content
    assert content["noindex_pages"] == 3
    assert content["nofollow_pages"] == 2

    links = store_links(result.data_dir)
    exact = {later_of(pair, 0, links) for pair in EXACT_PAIRS}
    near = {later_of(pair, 1, links) for pair in NEAR_PAIRS}
    for pair in NEAR_PAIRS:
        assert (links[pair[0]][0], links[pair[1]][0]) == (None, None)
    for path in DISTINCT:
        assert links[path][:2] == (None, None), path
    assert links["/alias"][2] == "/news"
    assert content["exact_duplicates"] == 2
    assert content["near_duplicates"] == 2

    records = read_text_output(result.data_dir)
    by_path = {path_of(r["final_url"]): r for r in records}
    assert len(by_path) == len(records), "a page was written twice"
    # The template's own links (/about, /subscribe...) are answered 404: not content.
    indexable = (set(pages()) & fetched) - EXCLUDED - {"/old"}
    assert set(by_path) - {"/"} == indexable - exact - {"/empty"}
    for path in near:
        assert path_of(by_path[path]["near_duplicate_of"]) == links[path][1]
    news = by_path["/news" if "/copy" in exact else "/copy"]
    assert news["title"]
    assert news["language"] == "en"
    assert "harbour wall" in news["text"].lower()
    assert news["content_hash"] != by_path["/moved"]["content_hash"]
    assert len(news["simhash"]) == 16
    # A page reached through a redirect keeps the URL that led to it.
    assert path_of(by_path["/moved"]["url"]) == "/old"

    events = read_events(events_file)
    by_event = {path_of(e["url"]): e for e in events}
    assert len(by_event) == len(events)
    assert set(by_event) == indexable | {"/"}
    for first, second in EXACT_PAIRS:
        assert by_event[first]["contentHash"] == by_event[second]["contentHash"]
    for event in events:
        assert event["type"] == "PageFetched"
        assert event["httpStatus"] == 200
        assert event["changed"] is True
        assert event["storageKey"] is None
        unsigned = url_hash(event["url"]) & ((1 << 64) - 1)
        assert event["urlHash"] == f"{unsigned:016x}"
    assert by_event["/"]["outLinks"] == len(LINKED)
    assert by_event["/empty"]["simhash"] is None
    assert by_event["/empty"]["contentHash"] == hashlib.sha256(EMPTY).hexdigest()


async def test_near_duplicates_can_be_left_out_of_the_text(
    crawl: CrawlRunner, server: SiteServer
) -> None:
    result = await crawl(server, text=True, text_near_duplicates=False)
    records = read_text_output(result.data_dir)
    written = {path_of(r["final_url"]) for r in records}
    for pair in NEAR_PAIRS:
        assert len(set(pair) & written) == 1
    assert all("near_duplicate_of" not in r for r in records)


async def test_markdown_text_keeps_the_structure_and_the_plain_text_s_fingerprints(
    crawl: CrawlRunner, server: SiteServer
) -> None:
    result = await crawl(server, text=True, text_format="markdown", parse_workers=1)
    links = store_links(result.data_dir)
    exact = {later_of(pair, 0, links) for pair in EXACT_PAIRS}
    assert len(exact) == len(EXACT_PAIRS)
    assert result.summary.content["near_duplicates"] == 2
    by_path = {path_of(r["final_url"]): r for r in read_text_output(result.data_dir)}
    news = by_path["/news" if "/copy" in exact else "/copy"]
    lines = news["text"].splitlines()
    assert lines[0] == "# Harbour wall repairs to start in spring after winter storms"
    assert lines[1] == ""
    assert "## What the work involves" in lines
    assert any(line.startswith("- Phase one:") for line in lines)
    plain = extract_text(news_html().encode(), f"{ROOT}/news", "utf-8")
    assert plain is not None
    assert news["content_hash"] == plain.content_hash
    assert int(news["simhash"], 16) == plain.simhash & ((1 << 64) - 1)


async def test_events_name_the_warc_record_of_the_page(
    crawl: CrawlRunner, server: SiteServer, tmp_path: Path
) -> None:
    events_file = tmp_path / "events.jsonl"
    result = await crawl(server, warc=True, events=events_file)
    for event in read_events(events_file):
        key = event["storageKey"]
        path = result.data_dir / WARC_DIR / key["file"]
        with path.open("rb") as stream:
            stream.seek(key["offset"])
            record = next(iter(ArchiveIterator(io.BytesIO(stream.read(key["length"])))))
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Target-URI") == event["url"]


async def test_a_resumed_crawl_finds_duplicates_of_earlier_runs(
    crawl: CrawlRunner, server: SiteServer
) -> None:
    """The hash owners and the block index live in the store: a second crawl into the
    same data dir, with new pages, matches them against the first crawl's pages."""
    first = await crawl(server, text=True)
    owners = store_links(first.data_dir)
    extra = {
        f"{ROOT}/late-index": index(["/late-copy", "/late-near"]),
        f"{ROOT}/late-copy": news_html().encode(),
        f"{ROOT}/late-near": story("recipe", after="This recipe has been read 7 times.").encode(),
    }
    routes = {url: Response(body=body) for url, body in extra.items()}
    with SiteServer(lambda port: Site.build(port, routes, [f"{ROOT}/late-index"])) as later:
        second = await crawl(later, text=True, data_dir=first.data_dir)
    links = store_links(second.data_dir)
    assert links["/late-copy"][0] == ("/news" if owners["/news"][0] is None else "/copy")
    assert links["/late-near"][1] in ("/counter-1", "/counter-2")


def canonical_site(port: int) -> Site:
    """A seed page naming the page it links to as its canonical, with the same text, and
    a third copy reached only from the canonical page."""
    text = story("recipe")
    routes = {
        f"{ROOT}/print": with_link(edit(text, (TEMPLATE_CANONICAL, "/recipe")), "/recipe"),
        f"{ROOT}/recipe": with_link(edit(text, (TEMPLATE_CANONICAL, "/recipe")), "/copy"),
        f"{ROOT}/copy": with_link(text, "/print"),
    }
    return Site.build(port, {url: Response(body=page.encode()) for url, page in routes.items()},
                      [f"{ROOT}/print"])  # fmt: skip


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_the_canonical_page_owns_its_text_though_fetched_second(
    crawl: CrawlRunner, tmp_path: Path, crawl_name: str, engine: str
) -> None:
    """The seed names the page it links to as canonical: fetched first, it is still the
    duplicate, and a later copy is a duplicate of the canonical page."""
    location = StoreLocation(tmp_path / "store", PG_URL if engine == "postgresql" else None,
                             crawl_name)  # fmt: skip
    with SiteServer(canonical_site) as server:
        result = await crawl(server, text=True, store=location, data_dir=location.data_dir)
        order = [path_of(url) for url in page_requests(server)]
    pages = ["/print", "/recipe", "/copy"]
    assert [path for path in order if path in pages] == pages
    async with location.open() as store:
        exported = {path_of(row.url): row async for row in store.export()}
    duplicate_of = {
        path: row.duplicate_of and path_of(row.duplicate_of) for path, row in exported.items()
    }
    assert {path: duplicate_of[path] for path in pages} == {
        "/print": "/recipe",
        "/recipe": None,
        "/copy": "/recipe",
    }
    assert all(row.near_duplicate_of is None for row in exported.values())
    assert result.summary.content["exact_duplicates"] == 2
    # The seed's record was written before the canonical page was fetched.
    written = sorted(path_of(r["final_url"]) for r in read_text_output(result.data_dir))
    assert written == ["/print", "/recipe"]
