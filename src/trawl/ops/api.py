"""The REST API of ``trawl serve`` (FastAPI): start, watch, pause, resume and cancel
crawls, and page through their URLs. The OpenAPI document is at /openapi.json; the
operator's console (console.html, polling the API) at /.

Every request first passes the guard (trawl.ops.api_guard): with a token, a request that
changes something must carry ``Authorization: Bearer TOKEN`` (401 before its body is
read; reading needs none), and a body may have at most 64 KiB (413). Then: a body that
is not JSON is a 400; JSON that does not fit is a 422 listing where and why (never the
input, each message cut short); an unknown crawl is a 404; a crawl whose store cannot be
read is listed with state ``unreadable`` and its error, and any other operation on it is
a 409, as is resuming a cancelled crawl; a PostgreSQL database that cannot be reached is
a 503. URL ids and cursors are strings (signed 64-bit integers in decimal), which
JavaScript cannot hold as numbers. The OpenAPI document declares every one of these
answers.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib.resources import files
from typing import Annotated, Any, Literal

import uvicorn
from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator
from starlette.exceptions import HTTPException

from trawl import __version__
from trawl.errors import StoreError, UsageError
from trawl.extract.urls import DEFAULT_RULES, Rejection, host_key, normalize
from trawl.ops.api_guard import BODY_LIMIT, Guard
from trawl.ops.crawl_request import NewCrawl
from trawl.ops.crawls import LAST_ID, UNREADABLE, Crawls, CrawlView
from trawl.ops.samples import PERIOD, Point
from trawl.politeness.rules import HostRule, OperatorRules
from trawl.store.values import HOST_ORDERS, HOST_STATES, HostFigures, HostRow, State, UrlFilter

MAX_PAGE = 1000
MAX_DETAIL = 300
"""Characters of an error message at most."""
MAX_PROBLEMS = 20
"""Problems one 422 lists at most."""
CONSOLE = (files("trawl.ops") / "console.html").read_text(encoding="utf-8")
FAVICON = (files("trawl.ops") / "favicon.svg").read_text(encoding="utf-8")
_CRAWL_ID = r"^[a-z0-9_]{1,40}$"
_URL_ID = r"^-?[0-9]{1,19}$"
_HOST_CHARACTERS = re.compile(r"[^\s/\\?#@%]{1,300}")
CrawlKey = Annotated[str, Path(pattern=_CRAWL_ID, description="The crawl's id.")]


class Problem(BaseModel):
    """Why a request was refused."""

    detail: str


class FieldProblem(BaseModel):
    """One part of a request that does not fit: where (``body``, ``query`` or ``path``,
    then the key) and why."""

    loc: list[str | int]
    msg: str
    type: str


class Invalid(BaseModel):
    """Why a request's JSON body or parameters do not fit."""

    detail: list[FieldProblem]


def _answers(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of ``statuses``."""
    return {status: _ANSWERS[status] for status in statuses}


_ANSWERS: dict[int, dict[str, Any]] = {
    400: {"model": Problem, "description": "The request body is not JSON"},
    401: {"model": Problem, "description": "A valid bearer token is required"},
    404: {"model": Problem, "description": "No such crawl"},
    409: {"model": Problem, "description": "The crawl's store cannot be read"},
    413: {"model": Problem, "description": f"The request body is over {BODY_LIMIT} bytes"},
    422: {"model": Invalid, "description": "The request does not fit; where and why"},
    503: {"model": Problem, "description": "The crawls' database cannot be reached"},
}
_ALWAYS = _answers(413, 503)
_READ = _answers(404, 422)
_WRITE = _answers(401, 404, 422)
_BODY = _answers(400, 401, 404, 409, 422)


class CrawlId(BaseModel):
    crawlId: str


class CrawlState(BaseModel):
    crawlId: str
    state: str
    """running, paused, done, cancelled, a budget's end, ..., or unreadable."""
    counts: dict[str, int]
    error: str | None = None
    """Why the crawl's store cannot be read (state ``unreadable``), one line."""
    errors: dict[str, int] = {}
    """Failed URLs by error reason."""


class HostPolicy(BaseModel):
    """An operator's rule for one host: a least delay between requests, or a block."""

    model_config = ConfigDict(extra="forbid")

    delay: Annotated[float, Field(strict=True, ge=0, le=86400, allow_inf_nan=False)] | None = None
    blocked: StrictBool = False


class BlockPattern(BaseModel):
    """URLs matching ``pattern`` (a regular expression) are no longer fetched."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1, max_length=1000, strict=True)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
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


class HostLine(BaseModel):
    host: str
    state: Literal[HOST_STATES]  # type: ignore[valid-type]
    """broken, backing off, robots-blocked, leased, resting, waiting or idle."""
    queued: int
    fetched: int
    responses: int
    meanMs: float
    errors: int
    blocked: int


class HostTable(BaseModel):
    total: int
    """Hosts in all."""
    hosts: list[HostLine]


class ChartPoint(BaseModel):
    at: float
    """Wall clock time, seconds since the epoch."""
    pagesPerSecond: dict[str, float]
    """By status class: 1xx to 5xx."""
    errorsPerSecond: dict[str, float]
    """By error reason."""
    queued: int
    hostsBackingOff: int


class Charts(BaseModel):
    period: float
    """Seconds between two samples."""
    points: list[ChartPoint]


class Policy(BaseModel):
    hosts: dict[str, HostPolicy]
    patterns: list[str]


class UrlRow(BaseModel):
    id: str
    """The URL's id: a signed 64-bit integer, in decimal."""
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
    next: str | None
    """Pass as ``after`` for the next page; null on the last one."""


def _state_of(view: CrawlView) -> CrawlState:
    s = view.summary
    counts = {
        "discovered": s.discovered, "fetched": s.fetched, "queued": s.queued,
        "failed": s.failed, "robotsBlocked": s.robots_blocked, "requests": s.requests,
        **{f"status{k}": v for k, v in s.status.items()},
    }  # fmt: skip
    return CrawlState(
        crawlId=view.crawl_id, state=view.state, counts=counts, error=view.error,
        errors=dict(s.errors_by_class),
    )  # fmt: skip


def _host_line(h: HostRow) -> HostLine:
    return HostLine(
        host=h.name, state=h.state, queued=h.queued, fetched=h.fetched, responses=h.responses,
        meanMs=round(h.mean_seconds * 1000, 1), errors=h.errors, blocked=h.blocked,
    )  # fmt: skip


def _chart_point(p: Point) -> ChartPoint:
    return ChartPoint(
        at=p.at, pagesPerSecond=p.pages_per_second, errorsPerSecond=p.errors_per_second,
        queued=p.queued, hostsBackingOff=p.backing_off,
    )  # fmt: skip


def _cut(text: str) -> str:
    """``text`` on one line, at most `MAX_DETAIL` characters."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 3] + "..."


def _problem(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": _cut(detail)}, status_code=status)


def _not_json(errors: list[Any]) -> str | None:
    """Why the request body is not JSON at all (a 400), or None when it is JSON."""
    for error in errors:
        if error["type"] == "json_invalid":
            return "the request body is not JSON"
        if tuple(error["loc"]) == ("body",) and error["type"] == "missing":
            return "the request needs a JSON body"
        if tuple(error["loc"]) == ("body",) and isinstance(error.get("input"), bytes):
            return "the request body is not JSON (Content-Type: application/json)"
    return None


def _invalid(errors: list[Any]) -> JSONResponse:
    """A 422 listing where and why the request does not fit, never the input."""
    problems = [
        {
            "loc": [part if isinstance(part, int) else _cut(str(part))[:100] for part in e["loc"]],
            "msg": _cut(str(e["msg"]).removeprefix("Value error, ")),
            "type": str(e["type"]),
        }
        for e in errors[:MAX_PROBLEMS]
    ]
    return JSONResponse({"detail": problems}, status_code=422)


def host_rule_key(host: str) -> str | None:
    """``host`` (``name`` or ``name:port``) as the crawl names it, through trawl's URL
    rules (IDNA to ASCII, lower case, a DNS name of 253 characters at most or an IP
    address, the default port dropped); None when it is no such host."""
    if not _HOST_CHARACTERS.fullmatch(host):
        return None
    url = normalize(f"http://{host}/", None, DEFAULT_RULES)
    return None if isinstance(url, Rejection) else host_key(url)


def _after(after: str | None) -> int | None:
    """The ``after`` cursor as an id; a 422 for a number beyond 64 bits."""
    if after is None:
        return None
    number = int(after)
    if not -LAST_ID - 1 <= number <= LAST_ID:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", "after"),
              "msg": "after must be a URL id, a signed 64-bit integer"}]
        )  # fmt: skip
    return number


@contextmanager
def _readable(crawl_id: str) -> Iterator[None]:
    """A crawl's store that cannot be read is a 409."""
    try:
        yield
    except StoreError as exc:
        raise HTTPException(409, f"crawl {crawl_id!r} cannot be read: {exc}") from exc


def _methods(app: FastAPI, path: str) -> list[str]:
    """Every method some route of ``app`` takes at ``path``."""
    methods = {
        method
        for route in app.routes
        if isinstance(route, APIRoute) and route.path_regex.fullmatch(path)
        for method in route.methods or ()
    }
    return sorted(methods)


def create_app(crawls: Crawls, token: str | None = None) -> FastAPI:
    """The API over ``crawls``; ``token`` protects every endpoint that changes state."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await crawls.aclose()

    app = FastAPI(title="trawl", version=__version__, lifespan=lifespan, responses=_ALWAYS)
    app.add_middleware(Guard, token=token)

    @app.exception_handler(RequestValidationError)
    async def refused(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        reason = _not_json(errors)
        return _invalid(errors) if reason is None else _problem(400, reason)

    @app.exception_handler(HTTPException)
    async def failed(request: Request, exc: HTTPException) -> JSONResponse:
        answer = _problem(exc.status_code, str(exc.detail))
        answer.headers.update(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route of the path only.
            answer.headers["Allow"] = ", ".join(_methods(app, request.url.path))
        return answer

    # Declares the bearer scheme in the document; the guard checks the token.
    write = [Depends(HTTPBearer(auto_error=False))] if token is not None else []

    async def found(crawl_id: str) -> CrawlView:
        """The crawl's view: a 404 when there is none, a 503 when the database of the
        crawls cannot be read."""
        try:
            return await crawls.view(crawl_id)
        except UsageError as exc:
            raise HTTPException(404, f"no crawl {crawl_id!r}") from exc
        except StoreError as exc:
            raise HTTPException(503, str(exc)) from exc

    async def readable(crawl_id: str) -> CrawlView:
        """The crawl's view; a 409 when its store cannot be read."""
        view = await found(crawl_id)
        if view.state == UNREADABLE:
            raise HTTPException(409, f"crawl {crawl_id!r} cannot be read: {view.error}")
        return view

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def console() -> str:
        """The operator's console (console.html): the crawls and their controls, a
        crawl's charts, policy, hosts and URLs, live."""
        return CONSOLE

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(FAVICON, media_type="image/svg+xml")

    async def acted(crawl_id: str, action: Callable[[str], Awaitable[None]]) -> CrawlState:
        """Apply ``action`` to an existing, readable crawl; its state afterwards."""
        await readable(crawl_id)
        with _readable(crawl_id):
            await action(crawl_id)
        return _state_of(await found(crawl_id))

    @app.post("/crawls", status_code=201, dependencies=write, responses=_answers(400, 401, 422))
    async def start(new: NewCrawl) -> CrawlId:
        """Start a crawl: its seeds, and any of the crawl options of docs/OPTIONS.md by
        their config file keys (docs/OPERATING.md says which)."""
        return CrawlId(crawlId=crawls.create(new.seeds, new.options()))

    @app.get("/crawls")
    async def every() -> list[CrawlState]:
        """Every crawl with its state and counts (an unreadable one with its error)."""
        try:
            ids = await crawls.ids()
        except StoreError as exc:
            raise HTTPException(503, str(exc)) from exc
        return [_state_of(await found(crawl_id)) for crawl_id in ids]

    @app.get("/crawls/{crawl_id}", responses=_READ)
    async def one(crawl_id: CrawlKey) -> CrawlState:
        return _state_of(await found(crawl_id))

    @app.post("/crawls/{crawl_id}/pause", dependencies=write, responses=_WRITE | _answers(409))
    async def pause(crawl_id: CrawlKey) -> CrawlState:
        return await acted(crawl_id, crawls.pause)

    @app.post(
        "/crawls/{crawl_id}/resume",
        dependencies=write,
        responses=_WRITE
        | {409: {"model": Problem, "description": "Cancelled, or its store cannot be read"}},
    )
    async def resume(crawl_id: CrawlKey) -> CrawlState:
        try:
            return await acted(crawl_id, crawls.resume)
        except UsageError as exc:
            raise HTTPException(409, str(exc)) from exc

    @app.post("/crawls/{crawl_id}/cancel", dependencies=write, responses=_WRITE | _answers(409))
    async def cancel(crawl_id: CrawlKey) -> CrawlState:
        return await acted(crawl_id, crawls.cancel)

    @app.get("/crawls/{crawl_id}/hosts", responses=_READ | _answers(409))
    async def hosts(
        crawl_id: CrawlKey, limit: Annotated[int, Query(ge=1, le=100)] = 10
    ) -> HostRanks:
        await readable(crawl_id)
        with _readable(crawl_id):
            slowest, blocked = await crawls.hosts(crawl_id, limit)

        def rank(h: HostFigures) -> HostRank:
            return HostRank(
                host=h.name, responses=h.responses, meanMs=round(h.mean_seconds * 1000, 1),
                blocked=h.blocked,
            )  # fmt: skip

        return HostRanks(slowest=[rank(h) for h in slowest], mostBlocked=[rank(h) for h in blocked])

    @app.get("/crawls/{crawl_id}/host-table", responses=_READ | _answers(409))
    async def host_table(
        crawl_id: CrawlKey,
        sort: Literal[HOST_ORDERS] = "queued",  # type: ignore[valid-type]
        order: Literal["asc", "desc"] = "desc",
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    ) -> HostTable:
        """Every host of the crawl with its queue, response time, errors and state
        (docs/OPERATING.md says how each state is read), sorted then by name, a page at
        a time."""
        await readable(crawl_id)
        with _readable(crawl_id):
            total, rows = await crawls.host_page(crawl_id, sort, order == "desc", limit, offset)
        return HostTable(total=total, hosts=[_host_line(h) for h in rows])

    @app.get("/crawls/{crawl_id}/charts", responses=_READ)
    async def charts(crawl_id: CrawlKey) -> Charts:
        """The crawl's figures over time, sampled by this server every second while the
        crawl runs (the last 15 minutes): pages/s by status class, errors/s by reason,
        the queue and the hosts backing off."""
        await found(crawl_id)
        points = crawls.samples.points(crawl_id)
        return Charts(period=PERIOD, points=[_chart_point(p) for p in points])

    @app.get("/crawls/{crawl_id}/settings", responses=_READ | _answers(409))
    async def settings(crawl_id: CrawlKey) -> dict[str, Any]:
        """The crawl's policy as the crawl stored it: seeds, scope, politeness, limits,
        timeouts, retries, freshness and the per-site settings, which name where each
        secret comes from and never hold one (an empty object before the crawl stored one)."""
        await readable(crawl_id)
        with _readable(crawl_id):
            return await crawls.settings(crawl_id)

    @app.get("/crawls/{crawl_id}/policy", responses=_READ | _answers(409))
    async def policy(crawl_id: CrawlKey) -> Policy:
        await readable(crawl_id)
        with _readable(crawl_id):
            return Policy.model_validate((await crawls.rules(crawl_id)).as_dict())

    @app.put("/crawls/{crawl_id}/hosts/{host}", dependencies=write, responses=_BODY)
    async def host_policy(
        crawl_id: CrawlKey,
        host: Annotated[str, Path(description="A host name or address, with :port or not.")],
        rule: HostPolicy,
    ) -> Policy:
        key = host_rule_key(host)
        if key is None:
            raise RequestValidationError(
                [{"type": "value_error", "loc": ("path", "host"),
                  "msg": "not a host name or IP address (with :port or not)"}]
            )  # fmt: skip
        await readable(crawl_id)
        with _readable(crawl_id):
            current = await crawls.rules(crawl_id)
            hosts = {**current.hosts, key: HostRule(rule.delay, rule.blocked)}
            updated = OperatorRules(hosts, current.patterns)
            await crawls.set_rules(crawl_id, updated)
        return Policy.model_validate(updated.as_dict())

    @app.post("/crawls/{crawl_id}/blocks", dependencies=write, responses=_BODY)
    async def block(crawl_id: CrawlKey, block: BlockPattern) -> Policy:
        await readable(crawl_id)
        with _readable(crawl_id):
            current = await crawls.rules(crawl_id)
            patterns = tuple(dict.fromkeys((*current.patterns, block.pattern)))
            updated = OperatorRules(current.hosts, patterns)
            await crawls.set_rules(crawl_id, updated)
        return Policy.model_validate(updated.as_dict())

    @app.get("/crawls/{crawl_id}/urls", responses=_READ | _answers(409))
    async def urls(
        crawl_id: CrawlKey,
        after: Annotated[
            str | None,
            Query(pattern=_URL_ID, description="The id after which the page starts: a "
                  "page's `next`, a signed 64-bit integer in decimal."),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        state: Literal["queued", "claimed", "done", "failed", "blocked", "parked"] | None = None,
        host: Annotated[str | None, Query(max_length=300, description="A host name or "
                        "address, with :port or not.")] = None,
        status: Annotated[int | None, Query(ge=100, le=599)] = None,
        error: Annotated[str | None, Query(min_length=1, max_length=100,
                         description="An error reason, as the URL rows give it.")] = None,
    ) -> UrlPage:  # fmt: skip
        start = _after(after)
        key = None if host is None else host_rule_key(host)
        if host is not None and key is None:
            raise RequestValidationError(
                [{"type": "value_error", "loc": ("query", "host"),
                  "msg": "not a host name or IP address (with :port or not)"}]
            )  # fmt: skip
        await readable(crawl_id)
        wanted = UrlFilter(
            state=None if state is None else State[state.upper()], host=key, status=status,
            error=error,
        )  # fmt: skip
        with _readable(crawl_id):
            rows = await crawls.urls(crawl_id, start, limit, wanted)
        page = [
            UrlRow(
                id=str(url_id), url=row.url, state=row.state.name.lower(), status=row.status,
                contentType=row.content_type, length=row.length, fetchedAt=row.fetched_at,
                depth=row.depth, error=row.error,
            )
            for url_id, row in rows
        ]  # fmt: skip
        return UrlPage(urls=page, next=str(rows[-1][0]) if len(rows) == limit else None)

    return app


def serve(crawls: Crawls, host: str, port: int, token: str | None) -> None:
    """Run the API until interrupted; the crawls it started are stopped, resumable."""
    uvicorn.run(create_app(crawls, token), host=host, port=port, log_level="warning")
