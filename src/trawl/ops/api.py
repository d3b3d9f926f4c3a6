"""The REST API of ``trawl serve`` (FastAPI): start, watch, pause, resume and cancel
crawls, and page through their URLs. The OpenAPI document is at /openapi.json; the live
dashboard (dashboard.html, polling ``GET /crawls`` every second) at /.

With a token, every request that changes something must carry
``Authorization: Bearer TOKEN`` (401 otherwise); reading needs none. Bad input is a 422
with the reason; an unknown crawl a 404.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Annotated, Any, Literal

import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from trawl import __version__
from trawl.errors import StoreError, UsageError
from trawl.extract.urls import DEFAULT_RULES, Rejection, normalize
from trawl.ops.crawls import Crawls, CrawlView
from trawl.politeness.rules import HostRule, OperatorRules
from trawl.store.values import HostFigures, State

MAX_PAGE = 1000
DASHBOARD = (files("trawl.ops") / "dashboard.html").read_text(encoding="utf-8")
_BEARER = HTTPBearer(auto_error=False)


class NewCrawl(BaseModel):
    """What a crawl starts from."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[str] = Field(min_length=1, max_length=1000)
    scope: Literal["domain", "host", "prefix"] = "domain"
    maxPages: int | None = Field(default=None, ge=1)

    @field_validator("seeds")
    @classmethod
    def _crawlable(cls, seeds: list[str]) -> list[str]:
        for seed in seeds:
            if isinstance(normalize(seed, None, DEFAULT_RULES), Rejection):
                raise ValueError(f"not a crawlable http(s) URL: {seed}")
        return seeds


class Problem(BaseModel):
    """Why a request was refused."""

    detail: str


_UNKNOWN: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such crawl"}
}
_GUARDED: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "A valid bearer token is required"}
}


class CrawlId(BaseModel):
    crawlId: str


class CrawlState(BaseModel):
    crawlId: str
    state: str
    counts: dict[str, int]


class HostPolicy(BaseModel):
    """An operator's rule for one host: a least delay between requests, or a block."""

    model_config = ConfigDict(extra="forbid")

    delay: float | None = Field(default=None, ge=0, le=86400)
    blocked: bool = False


class BlockPattern(BaseModel):
    """URLs matching ``pattern`` (a regular expression) are no longer fetched."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1, max_length=1000)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return pattern


class HostRank(BaseModel):
    host: str
    responses: int
    meanMs: float
    blocked: int


class HostRanks(BaseModel):
    slowest: list[HostRank]
    mostBlocked: list[HostRank]


class Policy(BaseModel):
    hosts: dict[str, HostPolicy]
    patterns: list[str]


class UrlRow(BaseModel):
    id: int
    url: str
    state: str
    status: int | None
    contentType: str | None
    length: int | None
    fetchedAt: float | None
    depth: int
    error: str | None


class UrlPage(BaseModel):
    urls: list[UrlRow]
    next: int | None
    """Pass as ``after`` for the next page; null on the last one."""


def _state_of(view: CrawlView) -> CrawlState:
    s = view.summary
    counts = {
        "discovered": s.discovered, "fetched": s.fetched, "queued": s.queued,
        "failed": s.failed, "robotsBlocked": s.robots_blocked, "requests": s.requests,
        **{f"status{k}": v for k, v in s.status.items()},
    }  # fmt: skip
    return CrawlState(crawlId=view.crawl_id, state=view.state, counts=counts)


def create_app(crawls: Crawls, token: str | None = None) -> FastAPI:
    """The API over ``crawls``; ``token`` protects every endpoint that changes state."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        crawls.close()

    app = FastAPI(
        title="trawl",
        version=__version__,
        lifespan=lifespan,
        responses={400: {"model": Problem, "description": "The request body is not JSON"}},
    )

    def authorised(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
    ) -> None:
        if token is None:
            return
        given = credentials.credentials if credentials else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "a valid bearer token is required")

    write = [Depends(authorised)]

    async def found(crawl_id: str) -> CrawlView:
        try:
            return await crawls.view(crawl_id)
        except (UsageError, StoreError) as exc:
            raise HTTPException(404, f"no crawl {crawl_id!r}") from exc

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def dashboard() -> str:
        """The live dashboard: every crawl's state and counts, pages/s over time."""
        return DASHBOARD

    async def acted(crawl_id: str, action: Callable[[str], Awaitable[None]]) -> CrawlState:
        """Apply ``action`` to an existing crawl; its state afterwards."""
        await found(crawl_id)
        await action(crawl_id)
        return _state_of(await found(crawl_id))

    @app.post("/crawls", status_code=201, dependencies=write, responses=_GUARDED)
    async def start(new: NewCrawl) -> CrawlId:
        options = ["--scope", new.scope]
        if new.maxPages is not None:
            options += ["--max-pages", str(new.maxPages)]
        return CrawlId(crawlId=crawls.create(new.seeds, options))

    @app.get("/crawls")
    async def every() -> list[CrawlState]:
        return [_state_of(await found(crawl_id)) for crawl_id in await crawls.ids()]

    @app.get("/crawls/{crawl_id}", responses=_UNKNOWN)
    async def one(crawl_id: str) -> CrawlState:
        return _state_of(await found(crawl_id))

    @app.post("/crawls/{crawl_id}/pause", dependencies=write, responses=_GUARDED | _UNKNOWN)
    async def pause(crawl_id: str) -> CrawlState:
        return await acted(crawl_id, crawls.pause)

    @app.post(
        "/crawls/{crawl_id}/resume",
        dependencies=write,
        responses=_GUARDED | _UNKNOWN | {409: {"model": Problem, "description": "Cancelled"}},
    )
    async def resume(crawl_id: str) -> CrawlState:
        try:
            return await acted(crawl_id, crawls.resume)
        except UsageError as exc:
            raise HTTPException(409, str(exc)) from exc

    @app.post("/crawls/{crawl_id}/cancel", dependencies=write, responses=_GUARDED | _UNKNOWN)
    async def cancel(crawl_id: str) -> CrawlState:
        return await acted(crawl_id, crawls.cancel)

    @app.get("/crawls/{crawl_id}/hosts", responses=_UNKNOWN)
    async def hosts(crawl_id: str, limit: Annotated[int, Query(ge=1, le=100)] = 10) -> HostRanks:
        await found(crawl_id)
        slowest, blocked = await crawls.hosts(crawl_id, limit)

        def rank(h: HostFigures) -> HostRank:
            return HostRank(
                host=h.name, responses=h.responses, meanMs=round(h.mean_seconds * 1000, 1),
                blocked=h.blocked,
            )  # fmt: skip

        return HostRanks(slowest=[rank(h) for h in slowest], mostBlocked=[rank(h) for h in blocked])

    @app.get("/crawls/{crawl_id}/policy", responses=_UNKNOWN)
    async def policy(crawl_id: str) -> Policy:
        await found(crawl_id)
        return Policy.model_validate((await crawls.rules(crawl_id)).as_dict())

    @app.put("/crawls/{crawl_id}/hosts/{host}", dependencies=write, responses=_GUARDED | _UNKNOWN)
    async def host_policy(crawl_id: str, host: str, rule: HostPolicy) -> Policy:
        await found(crawl_id)
        current = await crawls.rules(crawl_id)
        hosts = {**current.hosts, host.lower(): HostRule(rule.delay, rule.blocked)}
        updated = OperatorRules(hosts, current.patterns)
        await crawls.set_rules(crawl_id, updated)
        return Policy.model_validate(updated.as_dict())

    @app.post("/crawls/{crawl_id}/blocks", dependencies=write, responses=_GUARDED | _UNKNOWN)
    async def block(crawl_id: str, block: BlockPattern) -> Policy:
        await found(crawl_id)
        current = await crawls.rules(crawl_id)
        patterns = tuple(dict.fromkeys((*current.patterns, block.pattern)))
        updated = OperatorRules(current.hosts, patterns)
        await crawls.set_rules(crawl_id, updated)
        return Policy.model_validate(updated.as_dict())

    @app.get("/crawls/{crawl_id}/urls", responses=_UNKNOWN)
    async def urls(
        crawl_id: str,
        after: int | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        state: Literal["queued", "claimed", "done", "failed", "blocked", "parked"] | None = None,
    ) -> UrlPage:
        await found(crawl_id)
        wanted = None if state is None else State[state.upper()]
        rows = await crawls.urls(crawl_id, after, limit, wanted)
        page = [
            UrlRow(
                id=url_id, url=row.url, state=row.state.name.lower(), status=row.status,
                contentType=row.content_type, length=row.length, fetchedAt=row.fetched_at,
                depth=row.depth, error=row.error,
            )
            for url_id, row in rows
        ]  # fmt: skip
        return UrlPage(urls=page, next=rows[-1][0] if len(rows) == limit else None)

    return app


def serve(crawls: Crawls, host: str, port: int, token: str | None) -> None:
    """Run the API until interrupted; the crawls it started are stopped, resumable."""
    uvicorn.run(create_app(crawls, token), host=host, port=port, log_level="warning")
