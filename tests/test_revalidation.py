"""A recrawl answered 304 keeps what the last full answer said and records the
revalidation; a changed 200 replaces everything. Whole crawls through the CLI (``trawl
crawl``, ``trawl recrawl --all``, ``trawl export``) on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pg import URL as PG_URL
from pg import connect as pg_connect
from pg import crawl_name
from test_cli import trawl
from test_store import sqlite_query
from trawl.demo import Response, Site, SiteServer
from trawl.store.location import StoreLocation
from trawl.store.sqlite.store import DB_NAME

__all__ = ["crawl_name"]

HOST = "www.revalidate.test"
PDF = "application/pdf"


@dataclass
class Revisions:
    """One URL's answers: the current one of ``versions``, with its own ETag, or a 304
    without a body to a request whose If-None-Match names that ETag. The test moves
    ``current`` on between crawls (the server answers from this process)."""

    versions: tuple[Response, ...]
    current: int = 0

    def __call__(self, headers: Any) -> Response:
        etag = f'"r{self.current}"'
        if etag in headers.get("If-None-Match", ""):
            return Response(status=304, content_type=None, headers=(("ETag", etag),))
        answer = self.versions[self.current]
        return replace(answer, headers=(*answer.headers, ("ETag", etag)))


def html(body: str) -> Response:
    return Response(body=f"<!doctype html><title>t</title>{body}".encode())


PAGES = {
    "/doc.pdf": Revisions(
        (
            Response(body=b"%PDF-1.4\n" + b"0" * 3000, content_type=PDF),
            Response(body=b"%PDF-1.7\n" + b"1" * 5000, content_type=PDF),
        )
    ),
    "/story": Revisions((html("<p>The story.</p>"), html("<p>The story, updated.</p>"))),
    "/story/print": Revisions(
        (
            html('<link rel="canonical" href="/story"><p>The story, to print.</p>'),
            html("<p>The story, to print, with no canonical any more.</p>"),
        )
    ),
}
"""Pages that answer conditional requests, each with two versions."""


def revalidated_site(port: int) -> Site:
    """An index without validators linking to a PDF, a page, and its printable copy
    whose canonical link names the page; all three send an ETag and answer 304."""
    for page in PAGES.values():
        page.current = 0
    links = "".join(f'<a href="{path}">{path}</a> ' for path in PAGES)
    routes: dict[str, Any] = {f"http://{HOST}/": html(links)}
    routes.update({f"http://{HOST}{path}": page for path, page in PAGES.items()})
    return Site.build(port, routes, seeds=[f"http://{HOST}/"])


def stored(engine: str, where: Path | str, statement: str) -> list[tuple[Any, ...]]:
    """Rows of ``statement`` read straight from the crawl's store."""
    if engine == "sqlite":
        assert isinstance(where, Path)
        return sqlite_query(where, statement)
    assert isinstance(where, str)
    with pg_connect(where) as conn:
        return conn.execute(statement).fetchall()


def run_json(*args: str) -> dict[str, Any]:
    run = trawl(*args)
    assert run.code == 0, run.err
    parsed: dict[str, Any] = json.loads(run.out)
    return parsed


def exported(*where: str) -> dict[str, dict[str, Any]]:
    """``trawl export --format jsonl``, by URL path."""
    run = trawl("export", "--format", "jsonl", *where)
    assert run.code == 0, run.err
    rows = [json.loads(line) for line in run.out.splitlines()]
    return {row["url"].split(HOST, 1)[1].split("/", 1)[1]: row for row in rows}


ANSWER = ("status", "content_type", "length", "fetched_at", "depth", "redirect_to", "error")
"""The export columns of the last full answer."""


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_304_keeps_the_last_answer_and_records_the_revalidation(
    engine: str, crawl_name: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    where = ["--data-dir", str(data_dir)]
    place: Path | str = data_dir
    if engine == "postgresql":
        where += ["--store", PG_URL, "--crawl", crawl_name]
        place = StoreLocation(data_dir, PG_URL, crawl_name).schema
    aliases = (
        "SELECT u.url, u.canonical, a.url FROM urls AS u LEFT JOIN urls AS a "
        "ON a.id = u.alias_of ORDER BY u.url"
    )
    with SiteServer(revalidated_site) as server:
        local = [*where, *server.resolve_args(), "--no-progress", "--json"]
        first = run_json("crawl", *server.site.seeds, "--delay", "0", "--no-soft-404", *local)
        assert first["fetched"] == 4
        before = exported(*where)
        canonicals = stored(engine, place, aliases)
        assert before["doc.pdf"]["content_type"] == PDF
        assert before["doc.pdf"]["length"] == 3009
        assert [row[1:] for row in canonicals if row[0].endswith("/print")] == [
            (server.site.url(HOST, "/story"), server.site.url(HOST, "/story"))
        ]
        assert all(row["revalidation"] is None for row in before.values())

        again = run_json("recrawl", "--all", *local)
        assert again["freshness"]["not_modified"] == 3
        assert run_json("status", *where, "--json")["freshness"]["not_modified"] == 3
        after = exported(*where)
        assert stored(engine, place, aliases) == canonicals
        for path in PAGES:
            path = path.lstrip("/")
            assert {c: after[path][c] for c in ANSWER} == {c: before[path][c] for c in ANSWER}
            assert after[path]["status"] == 200
            assert after[path]["revalidation"] == "not_modified"
            assert after[path]["revalidated_at"] >= before[path]["fetched_at"]
        # The index sends no validators: it is fetched in full, and found unchanged.
        assert after[""]["revalidation"] == "unchanged"
        # The 304s are sent again with the stored ETag: it was kept too. (The summary's
        # counters are the crawl's, over every run.)
        third = run_json("recrawl", "--all", *local)
        assert third["freshness"]["not_modified"] == 6

        for page in PAGES.values():
            page.current = 1
        changed = run_json("recrawl", "--all", *local)
        assert changed["freshness"]["not_modified"] == 6
        latest = exported(*where)
        canonicals = stored(engine, place, aliases)
    assert latest["doc.pdf"]["content_type"] == PDF
    assert latest["doc.pdf"]["length"] == 5009
    assert [row[1:] for row in canonicals if row[0].endswith("/print")] == [(None, None)]
    # The pages' text changed. (A body trawl does not read, the PDF's, tells no change.)
    assert latest["story"]["revalidation"] == latest["story/print"]["revalidation"] == "changed"
    for path in PAGES:
        path = path.lstrip("/")
        assert latest[path]["status"] == 200
        assert latest[path]["fetched_at"] == latest[path]["revalidated_at"]
        assert latest[path]["fetched_at"] >= after[path]["revalidated_at"]


def test_a_row_an_older_trawl_left_at_304_is_fetched_in_full_and_mended(
    tmp_path: Path,
) -> None:
    where = ["--data-dir", str(tmp_path)]
    with SiteServer(revalidated_site) as server:
        local = [*where, *server.resolve_args(), "--no-progress", "--json"]
        run_json("crawl", *server.site.seeds, "--delay", "0", "--no-soft-404", *local)
        with contextlib.closing(sqlite3.connect(tmp_path / DB_NAME)) as db, db:
            db.execute(
                "UPDATE urls SET status = 304, content_type = NULL, length = NULL "
                "WHERE url LIKE '%/doc.pdf'"
            )
        before = len(server.requests)
        run_json("recrawl", "--all", *local)
        asked = [r for r in server.requests[before:] if r.path == "/doc.pdf"]
    # Its validators would confirm an answer the row no longer holds: no If-None-Match.
    assert [(r.status, r.headers.get("If-None-Match")) for r in asked] == [(200, None)]
    pdf = exported(*where)["doc.pdf"]
    assert (pdf["status"], pdf["content_type"], pdf["length"]) == (200, PDF, 3009)
