"""The REST API of ``trawl serve``: real crawls started, watched, paged through, paused,
resumed and cancelled over HTTP; bad input and missing tokens refused with 4xx."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx
import pytest
from bench.servers import free_port

from pg import URL as PG_URL
from pg import drop_schema
from trawl.demo import Site, SiteServer, generate_site
from trawl.demo.site import Route
from trawl.ops.api import create_app
from trawl.ops.crawls import Crawls
from trawl.store.location import SCHEMA_PREFIX

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FAST = ["--delay", "0", "--response-factor", "0", "--retry-base", "0.05", "--retry-cap", "0.2"]
FAST += ["--parse-workers", "0"]


def slow_site(port: int) -> Site:
    """A small site whose answers take 0.1 s each, so a crawl can be paused mid-way."""
    site = generate_site(port, hosts=4, pages_per_host=12, seed=2)
    routes = {
        key: Route(tuple(dataclasses.replace(r, delay=0.1) for r in route.responses))
        for key, route in site.routes.items()
    }
    return dataclasses.replace(site, routes=MappingProxyType(routes))


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, SiteServer]]:
    """A client of the API over a data dir root, its crawls aimed at a local site."""
    with SiteServer(slow_site) as server:
        crawls = Crawls(tmp_path / "crawls", crawl_options=[*server.resolve_args(), *FAST])
        app = create_app(crawls, TOKEN)
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                yield client, server
        finally:
            crawls.close()


async def wait_for(
    client: httpx.AsyncClient, crawl_id: str, done: Any, seconds: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        state: dict[str, Any] = (await client.get(f"/crawls/{crawl_id}")).json()
        if done(state):
            return state
        assert time.monotonic() < deadline, state
        await asyncio.sleep(0.05)


async def test_a_crawl_started_over_the_api_runs_to_the_ground_truth(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, server = api
    started = await client.post("/crawls", json={"seeds": list(server.site.seeds)}, headers=AUTH)
    assert started.status_code == 201, started.text
    crawl_id = started.json()["crawlId"]
    final = await wait_for(client, crawl_id, lambda s: s["state"] == "done")
    assert final["counts"]["discovered"] == len(server.site.ground_truth)
    assert final["counts"]["queued"] == 0
    listed = (await client.get("/crawls")).json()
    assert [c["crawlId"] for c in listed] == [crawl_id]

    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 7} | ({"after": after} if after is not None else {})
        page = (await client.get(f"/crawls/{crawl_id}/urls", params=params)).json()
        seen += [row["url"] for row in page["urls"]]
        after = page["next"]
        if after is None:
            break
    assert len(seen) == len(set(seen))
    assert set(seen) == server.site.ground_truth
    ranks = (await client.get(f"/crawls/{crawl_id}/hosts")).json()
    means = [h["meanMs"] for h in ranks["slowest"]]
    assert means == sorted(means, reverse=True)
    assert min(means) > 50  # the site takes 0.1 s a page (unknown pages answer at once)
    blocked = (await client.get(f"/crawls/{crawl_id}/urls", params={"state": "blocked"})).json()
    per_host: dict[str, int] = {}
    for row in blocked["urls"]:
        host = httpx.URL(row["url"]).host
        per_host[host] = per_host.get(host, 0) + 1
    assert {h["host"].rpartition(":")[0]: h["blocked"] for h in ranks["mostBlocked"]} == per_host
    done = (await client.get(f"/crawls/{crawl_id}/urls", params={"state": "done"})).json()
    assert done["urls"]
    assert all(row["state"] == "done" for row in done["urls"])


async def test_a_paused_crawl_resumes_with_its_own_scope(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, server = api
    seed = server.site.seeds[0]
    body = {"seeds": [seed], "scope": "host", "maxPages": 1000}
    crawl_id = (await client.post("/crawls", json=body, headers=AUTH)).json()["crawlId"]
    await wait_for(client, crawl_id, lambda s: s["counts"]["fetched"] >= 2)
    await client.post(f"/crawls/{crawl_id}/pause", headers=AUTH)
    await client.post(f"/crawls/{crawl_id}/resume", headers=AUTH)
    final = await wait_for(client, crawl_id, lambda s: s["state"] != "running")
    assert final["state"] == "done"
    host = httpx.URL(seed).host
    urls = (await client.get(f"/crawls/{crawl_id}/urls", params={"state": "done"})).json()
    assert {httpx.URL(row["url"]).host for row in urls["urls"]} == {host}


async def test_pause_resume_and_cancel(api: tuple[httpx.AsyncClient, SiteServer]) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds), "maxPages": 1000}
    crawl_id = (await client.post("/crawls", json=body, headers=AUTH)).json()["crawlId"]
    await wait_for(client, crawl_id, lambda s: s["counts"]["fetched"] >= 3)
    paused = (await client.post(f"/crawls/{crawl_id}/pause", headers=AUTH)).json()
    assert paused["state"] == "paused"
    assert 0 < paused["counts"]["fetched"] < len(server.site.expected_fetches)
    await asyncio.sleep(0.3)
    still = (await client.get(f"/crawls/{crawl_id}")).json()
    assert still["counts"]["fetched"] == paused["counts"]["fetched"]

    resumed = (await client.post(f"/crawls/{crawl_id}/resume", headers=AUTH)).json()
    assert resumed["state"] == "running"
    final = await wait_for(client, crawl_id, lambda s: s["state"] == "done")
    assert final["counts"]["discovered"] == len(server.site.ground_truth)

    other = (await client.post("/crawls", json=body, headers=AUTH)).json()["crawlId"]
    await wait_for(client, other, lambda s: s["counts"]["fetched"] >= 1)
    cancelled = (await client.post(f"/crawls/{other}/cancel", headers=AUTH)).json()
    assert cancelled["state"] == "cancelled"
    refused = await client.post(f"/crawls/{other}/resume", headers=AUTH)
    assert refused.status_code == 409


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"seeds": []},
        {"seeds": ["ftp://example.com/"]},
        {"seeds": ["not a url"]},
        {"seeds": ["http://example.com/"], "scope": "planet"},
        {"seeds": ["http://example.com/"], "maxPages": 0},
        {"seeds": ["http://example.com/"], "colour": "blue"},
    ],
)
async def test_bad_input_is_a_422_and_starts_nothing(
    api: tuple[httpx.AsyncClient, SiteServer], body: dict[str, Any]
) -> None:
    client, _ = api
    answer = await client.post("/crawls", json=body, headers=AUTH)
    assert answer.status_code == 422
    assert answer.json()["detail"]
    assert (await client.get("/crawls")).json() == []


async def test_changes_need_the_token_and_unknown_crawls_are_404(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds)}
    assert (await client.post("/crawls", json=body)).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert (await client.post("/crawls", json=body, headers=wrong)).status_code == 401
    for action in ("pause", "resume", "cancel"):
        assert (await client.post(f"/crawls/c1/{action}")).status_code == 401
        assert (await client.post(f"/crawls/c1/{action}", headers=AUTH)).status_code == 404
    assert (await client.get("/crawls/c1")).status_code == 404
    assert (await client.get("/crawls/c1/urls")).status_code == 404
    assert (await client.get("/crawls")).json() == []
    spec = (await client.get("/openapi.json")).json()
    assert {"/crawls", "/crawls/{crawl_id}", "/crawls/{crawl_id}/urls"} <= set(spec["paths"])
    assert {"/crawls/{crawl_id}/pause", "/crawls/{crawl_id}/resume"} <= set(spec["paths"])


def test_trawl_serve_listens_on_loopback_and_stops_on_sigint(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "trawl", "serve", "--port", str(port), "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "trawl serve did not start"
                time.sleep(0.1)
        assert answer.status_code == 200
        assert answer.json()["info"]["title"] == "trawl"
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 0


async def test_operator_rules_reach_a_running_crawl_within_a_second(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds)}
    crawl_id = (await client.post("/crawls", json=body, headers=AUTH)).json()["crawlId"]
    await wait_for(client, crawl_id, lambda s: s["counts"]["fetched"] >= 3)
    rules = [
        ("put", "/hosts/h2.trawl.test", {"blocked": True}),
        ("put", "/hosts/www.trawl.test", {"delay": 0.2}),
        ("post", "/blocks", {"pattern": "/features/"}),
    ]
    for method, path, rule in rules:
        answer = await client.request(method, f"/crawls/{crawl_id}{path}", json=rule, headers=AUTH)
        assert answer.status_code == 200, answer.text
    applied = time.monotonic() + 1.0  # picked up within 0.5 s, in-flight answers end by then
    policy = (await client.get(f"/crawls/{crawl_id}/policy")).json()
    assert policy == {
        "hosts": {
            "h2.trawl.test": {"delay": None, "blocked": True},
            "www.trawl.test": {"delay": 0.2, "blocked": False},
        },
        "patterns": ["/features/"],
    }
    await wait_for(client, crawl_id, lambda s: s["state"] == "done")
    later = [r for r in server.requests if r.start > applied and r.path != "/robots.txt"]
    assert not [r for r in later if r.host == "h2.trawl.test"]
    assert not [r for r in later if r.path.startswith("/features/")]
    www = sorted((r for r in later if r.host == "www.trawl.test"), key=lambda r: r.start)
    assert len(www) >= 3
    # The host rests 0.2 s after each answer before it is asked again.
    assert min(b.start - a.end for a, b in itertools.pairwise(www)) >= 0.2 - 0.02
    failed = (await client.get(f"/crawls/{crawl_id}/urls", params={"state": "failed"})).json()
    assert {row["error"] for row in failed["urls"]} == {"operator_blocked"}


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/hosts/a.test", {"delay": -1}),
        ("/hosts/a.test", {"blocked": "perhaps"}),
        ("/hosts/a.test", {"rate": 3}),
        ("/blocks", {"pattern": "("}),
        ("/blocks", {"pattern": ""}),
    ],
)
async def test_bad_rules_are_refused(
    api: tuple[httpx.AsyncClient, SiteServer], path: str, rule: dict[str, Any]
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds), "maxPages": 1}
    crawl_id = (await client.post("/crawls", json=body, headers=AUTH)).json()["crawlId"]
    await wait_for(client, crawl_id, lambda s: s["state"] != "starting")
    method = "put" if path.startswith("/hosts") else "post"
    url = f"/crawls/{crawl_id}{path}"
    assert (await client.request(method, url, json=rule, headers=AUTH)).status_code == 422
    assert (await client.request(method, url, json={"blocked": True})).status_code == 401


async def test_crawls_kept_in_postgresql(tmp_path: Path) -> None:
    with SiteServer(slow_site) as server:
        crawls = Crawls(tmp_path, PG_URL, crawl_options=[*server.resolve_args(), *FAST])
        transport = httpx.ASGITransport(app=create_app(crawls))
        crawl_id = ""
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                body = {"seeds": list(server.site.seeds)}
                crawl_id = (await client.post("/crawls", json=body)).json()["crawlId"]
                final = await wait_for(client, crawl_id, lambda s: s["state"] == "done")
                listed = {c["crawlId"] for c in (await client.get("/crawls")).json()}
                page = await client.get(f"/crawls/{crawl_id}/urls", params={"limit": 1000})
        finally:
            crawls.close()
            if crawl_id:
                drop_schema(SCHEMA_PREFIX + crawl_id)
    assert final["counts"]["discovered"] == len(server.site.ground_truth)
    assert crawl_id in listed
    assert {row["url"] for row in page.json()["urls"]} == server.site.ground_truth
