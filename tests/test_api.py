"""The REST API of ``trawl serve``: real crawls started, watched, paged through, paused,
resumed and cancelled over HTTP; bad input and missing tokens refused with 4xx."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx
import pytest
from bench.servers import free_port

from pg import URL as PG_URL
from pg import connect as pg_connect
from pg import drop_schema
from trawl.demo import Site, SiteServer, generate_site
from trawl.demo.site import Route
from trawl.ops.api import create_app
from trawl.ops.api_guard import BODY_LIMIT
from trawl.ops.crawls import Crawls
from trawl.policy import POLICY_KEY
from trawl.store.location import SCHEMA_PREFIX, StoreLocation

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
            await crawls.aclose()


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


def settled(state: dict[str, Any]) -> bool:
    """Whether a crawl has stopped: done, failed, paused or cancelled."""
    return str(state["state"]) not in ("running", "starting")


def begun(state: dict[str, Any]) -> bool:
    """Whether a crawl's process has started."""
    return str(state["state"]) != "starting"


async def crawl_until(
    client: httpx.AsyncClient, body: dict[str, Any], done: Any
) -> tuple[str, dict[str, Any]]:
    """Start a crawl of ``body`` and wait until its state satisfies ``done``."""
    started = await client.post("/crawls", json=body, headers=AUTH)
    assert started.status_code == 201, started.text
    crawl_id: str = started.json()["crawlId"]
    return crawl_id, await wait_for(client, crawl_id, done)


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
    crawl_id, _ = await crawl_until(client, body, lambda s: s["counts"]["fetched"] >= 2)
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
    crawl_id, _ = await crawl_until(client, body, lambda s: s["counts"]["fetched"] >= 3)
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


def seeded(options: str) -> str:
    """A crawl request of ``options`` (JSON members) and a seed on a closed loopback port:
    should a request that ought to be refused start a crawl, it reaches nothing."""
    return '{"seeds": ["http://127.0.0.1:9/"], ' + options + "}"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{}", "Field required"),
        ('{"seeds": []}', "at least 1 item"),
        ('{"seeds": ["ftp://example.com/"]}', "is not an http(s) URL"),
        ('{"seeds": ["not a url"]}', "holds whitespace"),
        ('{"seeds": ["example.com"]}', "did you mean https://example.com/?"),
        (seeded('"scope": "planet"'), 'scope must be one of "domain", "host"'),
        (seeded('"maxPages": 0'), "--max-pages must be at least 1"),
        (seeded('"maxPages": 1e400'), "max_pages must be an integer, got inf"),
        (seeded('"max_pages": 1e400'), "max_pages must be an integer, got inf"),
        (seeded('"max_pages": 1e30'), "max_pages must be an integer"),
        (seeded(f'"max_pages": {10**30}'), "max_pages must be an integer"),
        (seeded('"max_pages": "5"'), 'max_pages must be an integer, got "5"'),
        (seeded('"max_pages": 2, "maxPages": 2'), "are one option"),
        (seeded('"delay": NaN'), "delay must be a number, got nan"),
        (seeded('"delay": Infinity'), "delay must be a number, got inf"),
        (seeded('"delay": "1"'), 'delay must be a number, got "1"'),
        (seeded('"delay": -1'), "--delay must not be negative"),
        (seeded('"per_host": 0'), "--per-host must be at least 1"),
        (seeded('"warc": "yes"'), 'warc must be a boolean (true or false), got "yes"'),
        (seeded('"sitemaps": 1'), "sitemaps must be a boolean (true or false), got 1"),
        (seeded('"exclude": ["/a/", 1]'), "exclude must be a string or a list"),
        (seeded('"events": "../x"'), "events must be a file name"),
        (seeded('"contact": "\\u0000"'), "contact must not hold a NUL character"),
        ('{"seeds": ["http://127.0.0.1:9/\\u0000"]}', "a seed must not hold a NUL character"),
        (seeded('"exclude": ["/a/", "\\u0000"]'), "exclude must not hold a NUL character"),
        (seeded(f'"exclude": ["/a/", "{"x" * 2001}"]'), "exclude holds a value longer than"),
        (seeded(f'"contact": "{"x" * 2001}"'), "contact holds a value longer than 2000"),
        (seeded('"colour": "blue"'), "unknown key 'colour'"),
        (seeded('"max-pages": 3'), "the keys are written with _: 'max_pages'"),
        (seeded('"data_dir": "/tmp"'), "data_dir belongs to the machine"),
        (seeded('"allow_network": "0.0.0.0/0"'), "allow_network belongs to the"),
        (seeded('"store": "postgresql://x/y"'), "store belongs to the machine"),
        (seeded('"fresh": true'), "fresh belongs to the machine"),
        (seeded('"config": "x.toml"'), "unknown key 'config'"),
    ],
)
async def test_bad_input_is_a_422_saying_why_and_starts_nothing(
    api: tuple[httpx.AsyncClient, SiteServer], body: str, reason: str
) -> None:
    client, _ = api
    headers = AUTH | {"Content-Type": "application/json"}
    answer = await client.post("/crawls", content=body, headers=headers)
    assert answer.status_code == 422, answer.text
    problems = answer.json()["detail"]
    assert any(reason in problem["msg"] for problem in problems), problems
    assert all(set(problem) == {"loc", "msg", "type"} for problem in problems)
    assert (await client.get("/crawls")).json() == []


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b"", "application/json"), (b"not json", "application/json"), (b'{"seeds": [', None),
     (b'{"seeds": ["http://127.0.0.1:9/"]}', "text/plain")],
)  # fmt: skip
async def test_a_body_that_is_not_json_is_a_400_as_the_document_says(
    api: tuple[httpx.AsyncClient, SiteServer], body: bytes, content_type: str | None
) -> None:
    client, _ = api
    headers = AUTH | ({"Content-Type": content_type} if content_type else {})
    answer = await client.post("/crawls", content=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"].startswith("the request")
    spec = (await client.get("/openapi.json")).json()
    declared = spec["paths"]["/crawls"]["post"]["responses"]
    assert {"201", "400", "401", "413", "422"} <= set(declared)


async def test_errors_are_short_and_never_echo_the_input(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, _ = api
    bad = [f"gopher://{'x' * 40}{i}.test/" for i in range(800)]
    answer = await client.post("/crawls", json={"seeds": bad, "colour": "y" * 5000}, headers=AUTH)
    assert answer.status_code == 422
    assert len(answer.content) < 2000
    assert "x" * 40 not in answer.text
    assert "y" * 400 not in answer.text
    long_id = "c" * 5000
    missing = await client.get(f"/crawls/{long_id}/urls", params={"after": "1" * 5000})
    assert missing.status_code == 422
    assert len(missing.content) < 2000
    assert long_id not in missing.text


async def test_the_token_is_checked_before_the_body_is_read_and_the_body_is_limited(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, _ = api
    sent = 0

    async def stream() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(200):
            sent += 1
            yield b"x" * 32768

    refused = await client.post("/crawls", content=stream())
    assert refused.status_code == 401
    assert refused.headers["connection"] == "close"
    assert sent <= 1  # what the transport took before the app answered
    sent = 0
    too_big = await client.post("/crawls", content=stream(), headers=AUTH)
    assert too_big.status_code == 413
    assert sent == BODY_LIMIT // 32768 + 1
    declared = await client.post(
        "/crawls", content=b"{}", headers=AUTH | {"Content-Length": str(BODY_LIMIT + 1)}
    )
    assert declared.status_code == 413
    body = {"seeds": ["http://127.0.0.1:9/"], "exclude": ["x" * 1000] * (BODY_LIMIT // 1000 + 1)}
    assert (await client.post("/crawls", json=body, headers=AUTH)).status_code == 413
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


def _answer_to(port: int, head: bytes, body: bytes = b"") -> bytes:
    """What ``trawl serve`` answers to a request of which only ``head`` and ``body`` are
    sent (the rest never is), read until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head + body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_trawl_serve_answers_before_reading_a_body_it_refuses(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "trawl", "serve", "--port", str(port), "--token", TOKEN,
         "--data-dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/crawls", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "trawl serve did not start"
                time.sleep(0.1)
        post = b"POST /crawls HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
        huge = b"Content-Length: 100000000\r\n\r\n"
        token = f"Authorization: Bearer {TOKEN}\r\n".encode()
        chunked = b"Transfer-Encoding: chunked\r\n\r\n"
        chunks = b"".join(b"4000\r\n" + b"[" * 0x4000 + b"\r\n" for _ in range(5))

        # 100 MB announced, not a byte of it sent: each answer comes all the same.
        no_token = _answer_to(port, post + huge)
        assert no_token.startswith(b"HTTP/1.1 401 "), no_token
        assert b"connection: close" in no_token.lower()
        assert _answer_to(port, post + token + huge).startswith(b"HTTP/1.1 413 ")
        # A chunked body is counted as it comes: 80 KiB sent and never ended.
        assert _answer_to(port, post + chunked, chunks).startswith(b"HTTP/1.1 401 ")
        streamed = _answer_to(port, post + token + chunked, chunks)
        assert streamed.startswith(b"HTTP/1.1 413 "), streamed
        assert streamed.endswith(b'{"detail": "the request body is over 65536 bytes"}')
        # A body within the limit is read and answered as usual.
        small = b"Content-Length: 8\r\nConnection: close\r\n\r\n"
        assert _answer_to(port, post + token + small, b"not json").startswith(b"HTTP/1.1 400 ")
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


async def test_operator_rules_reach_a_running_crawl_within_a_second(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds)}
    crawl_id, _ = await crawl_until(client, body, lambda s: s["counts"]["fetched"] >= 3)
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
    crawl_id, _ = await crawl_until(client, body, begun)
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
            await crawls.aclose()
            if crawl_id:
                drop_schema(SCHEMA_PREFIX + crawl_id)
    assert final["counts"]["discovered"] == len(server.site.ground_truth)
    assert crawl_id in listed
    assert {row["url"] for row in page.json()["urls"]} == server.site.ground_truth


async def test_a_request_sets_the_whole_policy_and_a_resume_keeps_it(
    api: tuple[httpx.AsyncClient, SiteServer], tmp_path: Path
) -> None:
    client, server = api
    seed = server.site.seeds[0]
    body = {
        "seeds": [seed], "scope": "host", "max_pages": 8, "delay": 0.25, "max_depth": 2,
        "exclude": ["/features/"], "warc": True, "text": True, "events": "pages.jsonl",
        "user_agent": "api-test-bot/1.0", "retry_attempts": 2,
    }  # fmt: skip
    started = await client.post("/crawls", json=body, headers=AUTH)
    assert started.status_code == 201, started.text
    crawl_id = started.json()["crawlId"]
    await wait_for(client, crawl_id, lambda s: s["counts"]["fetched"] >= 3)
    assert (await client.post(f"/crawls/{crawl_id}/pause", headers=AUTH)).status_code == 200
    assert (await client.post(f"/crawls/{crawl_id}/resume", headers=AUTH)).status_code == 200
    final = await wait_for(client, crawl_id, settled)
    assert final["counts"]["fetched"] == 8  # the budget held across the resume
    data_dir = tmp_path / "crawls" / crawl_id
    async with StoreLocation(data_dir).open(readonly=True) as store:
        policy = json.loads(await store.get_meta(POLICY_KEY) or "{}")
    assert policy["politeness"]["delay"] == 0.25  # the request's, over the server's 0
    assert policy["limits"]["max_depth"] == 2
    assert policy["limits"]["max_pages"] == 8
    assert policy["scope"] == {"mode": "host", "include": [], "exclude": ["/features/"]}
    assert (await client.get(f"/crawls/{crawl_id}/settings")).json() == policy
    assert list((data_dir / "warc").glob("*.warc.gz"))
    assert list((data_dir / "text").iterdir())
    assert len((data_dir / "pages.jsonl").read_text().splitlines()) >= 1
    host = httpx.URL(seed).host
    pages = sorted(
        (r for r in server.requests if r.host == host and r.path != "/robots.txt"),
        key=lambda r: r.start,
    )
    assert not [r for r in pages if r.path.startswith("/features/")]
    assert {r.headers.get("user-agent") for r in pages} == {"api-test-bot/1.0"}
    gaps = [b.start - a.end for a, b in itertools.pairwise(pages)]
    assert sorted(gaps)[1] >= 0.25 - 0.02  # one gap may span the pause and resume


async def test_an_unreadable_crawl_is_listed_as_such_and_its_endpoints_answer_409(
    api: tuple[httpx.AsyncClient, SiteServer], tmp_path: Path
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds), "max_pages": 3}
    crawl_id, _ = await crawl_until(client, body, settled)
    broken = tmp_path / "crawls" / "cbroken"
    broken.mkdir()
    (broken / "crawl.db").write_bytes(b"garbage\n" * 512)
    listed = (await client.get("/crawls")).json()
    assert [c["crawlId"] for c in listed] == sorted([crawl_id, "cbroken"])
    by_id = {c["crawlId"]: c for c in listed}
    assert by_id[crawl_id]["state"] == "page budget reached"
    assert by_id[crawl_id]["error"] is None
    assert by_id["cbroken"]["state"] == "unreadable"
    assert "not a SQLite database" in by_id["cbroken"]["error"]
    assert "\n" not in by_id["cbroken"]["error"]
    assert (await client.get("/crawls/cbroken")).json() == by_id["cbroken"]
    for method, path, rule in [
        ("get", "/urls", None), ("get", "/hosts", None), ("get", "/policy", None),
        ("put", "/hosts/a.test", {"delay": 1}), ("post", "/blocks", {"pattern": "x"}),
        ("post", "/pause", None), ("post", "/resume", None), ("post", "/cancel", None),
    ]:  # fmt: skip
        answer = await client.request(method, f"/crawls/cbroken{path}", json=rule, headers=AUTH)
        assert answer.status_code == 409, (path, answer.text)
        assert answer.json()["detail"].startswith("crawl 'cbroken' cannot be read")
    assert not (broken / "crawl.log").exists()  # nothing was started on it


async def test_url_ids_and_cursors_are_strings_and_every_cursor_is_answered(
    api: tuple[httpx.AsyncClient, SiteServer], tmp_path: Path
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds), "max_pages": 6}
    crawl_id, _ = await crawl_until(client, body, settled)
    urls = f"/crawls/{crawl_id}/urls"
    page = (await client.get(urls, params={"limit": 2})).json()
    assert all(isinstance(row["id"], str) for row in page["urls"])
    assert isinstance(page["next"], str)
    ids = [int(row["id"]) for row in (await client.get(urls)).json()["urls"]]
    assert ids == sorted(ids)
    after = (await client.get(urls, params={"after": page["next"]})).json()
    assert [int(row["id"]) for row in after["urls"]] == ids[2:]
    assert (await client.get(urls, params={"after": str(2**63 - 1)})).json() == {
        "urls": [], "next": None
    }  # fmt: skip
    first = (await client.get(urls, params={"after": str(-(2**63)), "limit": 1})).json()
    assert [int(row["id"]) for row in first["urls"]] == ids[:1]
    for bad in (str(2**63), str(10**30), str(-(2**63) - 1), "1.5", "abc", ""):
        answer = await client.get(urls, params={"after": bad})
        assert answer.status_code == 422, (bad, answer.text)

    with sqlite3.connect(tmp_path / "crawls" / crawl_id / "crawl.db") as db:
        db.execute("UPDATE urls SET state = 99 WHERE id = ?", (ids[-1],))
    damaged = await client.get(urls)
    assert damaged.status_code == 409, damaged.text
    assert "damaged" in damaged.json()["detail"]


@pytest.mark.parametrize(
    ("host", "key"),
    [("a.test", "a.test"), ("A.Test", "a.test"), ("a.test:80", "a.test"),
     ("a.test:8080", "a.test:8080"), ("bücher.test", "xn--bcher-kva.test"),
     ("127.0.0.1", "127.0.0.1"), ("[::1]:8080", "[::1]:8080"), ("a.test.", "a.test")],
)  # fmt: skip
async def test_host_names_are_taken_as_the_crawl_names_hosts(
    api: tuple[httpx.AsyncClient, SiteServer], host: str, key: str
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds), "max_pages": 1}
    crawl_id, _ = await crawl_until(client, body, begun)
    answer = await client.put(f"/crawls/{crawl_id}/hosts/{host}", json={"delay": 1}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.json()["hosts"] == {key: {"delay": 1.0, "blocked": False}}


@pytest.mark.parametrize(
    ("host", "body"),
    [
        ("a" * 5000 + ".test", '{"blocked": true}'),
        ("a" * 64 + ".test", '{"blocked": true}'),
        ("<b>x<b>", '{"blocked": true}'),
        ("a%20b.test", '{"blocked": true}'),
        ("a..b", '{"blocked": true}'),
        ("user@a.test", '{"blocked": true}'),
        ("a.test:0", '{"blocked": true}'),
        ("a.test:99999", '{"blocked": true}'),
        ("a.test", '{"blocked": "yes"}'),
        ("a.test", '{"blocked": 1}'),
        ("a.test", '{"delay": "1"}'),
        ("a.test", '{"delay": NaN}'),
        ("a.test", '{"delay": Infinity}'),
        ("a.test", '{"delay": 1e400}'),
        ("a.test", '{"delay": -1}'),
    ],
)
async def test_bad_host_rules_are_refused_and_nothing_is_stored(
    api: tuple[httpx.AsyncClient, SiteServer], host: str, body: str
) -> None:
    client, server = api
    start = {"seeds": list(server.site.seeds), "max_pages": 1}
    crawl_id, _ = await crawl_until(client, start, begun)
    headers = AUTH | {"Content-Type": "application/json"}
    answer = await client.put(f"/crawls/{crawl_id}/hosts/{host}", content=body, headers=headers)
    assert answer.status_code == 422, answer.text
    assert len(answer.content) < 1000
    policy = (await client.get(f"/crawls/{crawl_id}/policy")).json()
    assert policy == {"hosts": {}, "patterns": []}


async def test_a_postgresql_crawl_whose_schema_cannot_be_read_is_listed_unreadable(
    tmp_path: Path,
) -> None:
    names = [f"capi{uuid.uuid4().hex[:10]}", f"capi{uuid.uuid4().hex[:10]}"]
    with pg_connect() as conn:
        for name, meta in zip(names, ("(x integer)", "(key text, value text)"), strict=True):
            conn.execute(f'CREATE SCHEMA "{SCHEMA_PREFIX}{name}"')
            conn.execute(f'CREATE TABLE "{SCHEMA_PREFIX}{name}".meta {meta}')
    crawls = Crawls(tmp_path, PG_URL)
    transport = httpx.ASGITransport(app=create_app(crawls))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            listed = await client.get("/crawls")
            assert listed.status_code == 200, listed.text
            by_id = {c["crawlId"]: c for c in listed.json()}
            for name in names:
                assert by_id[name]["state"] == "unreadable"
                assert by_id[name]["error"]
                answer = await client.get(f"/crawls/{name}/urls")
                assert answer.status_code == 409, answer.text
    finally:
        await crawls.aclose()
        for name in names:
            drop_schema(SCHEMA_PREFIX + name)


async def test_charts_hosts_and_filtered_urls_of_a_crawl(
    api: tuple[httpx.AsyncClient, SiteServer],
) -> None:
    client, server = api
    body = {"seeds": list(server.site.seeds)}
    crawl_id, running = await crawl_until(client, body, lambda s: s["counts"]["fetched"] >= 3)
    assert running["state"] == "running"
    table = (await client.get(f"/crawls/{crawl_id}/host-table")).json()
    assert table["total"] >= 1
    assert {h["state"] for h in table["hosts"]} <= {"leased", "resting", "waiting", "idle",
                                                    "backing off", "robots-blocked"}  # fmt: skip
    final = await wait_for(client, crawl_id, lambda s: s["state"] == "done")
    await asyncio.sleep(1.5)  # the sample taken after the crawl stopped

    charts = (await client.get(f"/crawls/{crawl_id}/charts")).json()
    assert charts["period"] == 1.0
    points = charts["points"]
    assert len(points) >= 2
    times = [p["at"] for p in points]
    assert times == sorted(times)
    assert set(points[0]["pagesPerSecond"]) == {"1xx", "2xx", "3xx", "4xx", "5xx"}
    assert max(p["pagesPerSecond"]["2xx"] for p in points) > 0
    assert max(p["queued"] for p in points) > 0
    assert points[-1]["queued"] == 0
    # The rates add up to the pages the samples saw, no more than the crawl fetched.
    spans = [b - a for a, b in itertools.pairwise([times[0] - 1.0, *times])]
    seen = sum(p["pagesPerSecond"]["2xx"] * span for p, span in zip(points, spans, strict=True))
    assert 0 < seen <= final["counts"]["status2xx"] + 0.5

    by_name = {"sort": "name", "order": "asc"}
    table = (await client.get(f"/crawls/{crawl_id}/host-table", params=by_name)).json()
    names = [h["host"] for h in table["hosts"]]
    assert names == sorted(names)
    assert table["total"] == len(names) >= 4
    assert sum(h["fetched"] for h in table["hosts"]) == final["counts"]["fetched"]
    assert sum(h["errors"] for h in table["hosts"]) == final["counts"]["failed"]
    assert all(h["queued"] == 0 for h in table["hosts"])
    slow: dict[str, str | int] = {"sort": "responseTime", "limit": 2, "offset": 1}
    by_time = (await client.get(f"/crawls/{crawl_id}/host-table", params=slow)).json()
    means = sorted((h["meanMs"] for h in table["hosts"]), reverse=True)
    assert [h["meanMs"] for h in by_time["hosts"]] == means[1:3]
    for bad in ({"sort": "colour"}, {"order": "up"}, {"limit": 0}, {"offset": -1}):
        answer = await client.get(f"/crawls/{crawl_id}/host-table", params=bad)
        assert answer.status_code == 422, bad

    urls = f"/crawls/{crawl_id}/urls"
    host = names[0]
    of_host = (await client.get(urls, params={"host": host, "limit": 1000})).json()["urls"]
    assert of_host
    assert {httpx.URL(row["url"]).netloc.decode() for row in of_host} == {host}
    everything = (await client.get(urls, params={"limit": 1000})).json()["urls"]
    statuses = {row["status"] for row in everything if row["status"] is not None}
    for status in statuses:
        rows = (await client.get(urls, params={"status": status, "limit": 1000})).json()["urls"]
        assert rows == [row for row in everything if row["status"] == status]
    errors = {row["error"] for row in everything if row["error"] is not None}
    failed = {row["error"] for row in everything if row["state"] == "failed"}
    assert set(final["errors"]) == failed, final["errors"]
    for error in errors:
        rows = (await client.get(urls, params={"error": error, "limit": 1000})).json()["urls"]
        assert rows == [row for row in everything if row["error"] == error]
    both = {"host": host, "state": "done", "limit": 1000}
    rows = (await client.get(urls, params=both)).json()["urls"]
    assert rows == [r for r in of_host if r["state"] == "done"]
    for bad in ({"host": "<b>"}, {"status": 99}, {"status": 600}, {"error": ""}):
        assert (await client.get(urls, params=bad)).status_code == 422, bad
    assert (await client.get("/crawls/c1/charts")).status_code == 404
    assert (await client.get("/crawls/c1/host-table")).status_code == 404
