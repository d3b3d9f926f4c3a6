"""The fetcher against a live loopback site: one GET, decoded by hand, always bounded.

Bodies are encoded here with zlib and brotli directly, so decoding is checked against the
libraries rather than against the test server's own encoder.
"""

from __future__ import annotations

import gzip
import socket
import zlib
from collections.abc import AsyncIterator, Iterator, Mapping

import brotli
import pytest

from conftest import loopback_fetcher
from trawl.config import Timeouts
from trawl.demo import Response, Route, Site, SiteServer
from trawl.extract.parser import is_html
from trawl.fetch.fetcher import Fetcher, FetchError
from trawl.fetch.netguard import AddressPolicy
from trawl.fetch.resolver import GuardedResolver

PAGE = b"<!doctype html><title>t</title>" + b"<p>harbour tide net rope</p>" * 200


def raw_deflate(data: bytes) -> bytes:
    """Deflate without the zlib wrapper, as some servers send ``deflate``."""
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def encode(name: str, data: bytes) -> tuple[bytes, str]:
    """``data`` compressed as ``name``, and the Content-Encoding that labels it."""
    if name == "gzip":
        return gzip.compress(data, mtime=0), "gzip"
    if name == "deflate":
        return zlib.compress(data), "deflate"
    if name == "raw-deflate":
        return raw_deflate(data), "deflate"
    encoded: bytes = brotli.compress(data)
    return encoded, "br"


def encoded(name: str, data: bytes, content_type: str = "text/html") -> Response:
    """A response carrying ``data`` compressed as ``name``."""
    body, label = encode(name, data)
    return Response(body=body, content_type=content_type, headers=(("Content-Encoding", label),))


PDF = b"%PDF-1.4\n" + b"0" * 2_000_000
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
"""A valid gzip header; the deflate block type 3 after it is reserved, so invalid."""
BIG = b"<!doctype html>" + b"a" * 5_000_000
CAP = 10_000


def routes() -> Mapping[str, Response | Route]:
    """Every route of the fetcher's test site, on one host."""
    table: dict[str, Response | Route] = {
        "/moved": Response(status=302, headers=(("Location", "/target"),)),
        "/target": Response(body=PAGE),
        "/slow": Response(body=PAGE, delay=2.0),
        "/plain-big": Response(body_size=5_000_000),
        "/pdf": Response(body=PDF, content_type="application/pdf"),
        "/untyped-html": Response(body=PAGE, content_type=None),
        "/untyped-bin": Response(body=b"\x89PNG\r\n\x1a\n" + b"\x00" * 4000, content_type=None),
        "/compress": Response(body=b"xyz", headers=(("Content-Encoding", "compress"),)),
        "/corrupt": Response(
            body=GZIP_HEADER + b"\xff\xff\xff\xff", headers=(("Content-Encoding", "gzip"),)
        ),
        "/headers": Response(
            status=503,
            body=PAGE,
            headers=(
                ("Retry-After", "7"),
                ("X-Robots-Tag", "noindex"),
                ("X-Robots-Tag", "nofollow"),
            ),
        ),
    }
    for name in ("gzip", "deflate", "raw-deflate", "br"):
        table[f"/page.{name}"] = encoded(name, PAGE)
        table[f"/big.{name}"] = encoded(name, BIG)
        body, label = encode(name, PAGE)
        table[f"/cut.{name}"] = Response(
            body=body[: len(body) // 2], headers=(("Content-Encoding", label),)
        )
    return {f"http://fetch.test{path}": value for path, value in table.items()}


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    """The fetcher's test site, served for the whole module."""
    with SiteServer(lambda port: Site.build(port, routes(), ["http://fetch.test/"])) as served:
        yield served


@pytest.fixture
async def fetcher(server: SiteServer) -> AsyncIterator[Fetcher]:
    """A fetcher resolving the site's host to loopback, capped at ``CAP`` bytes, with time
    enough for any answer of the site but ``/slow`` on a loaded machine."""
    async with loopback_fetcher(
        server,
        user_agent="trawl-test/1 (+http://fetch.test/bot)",
        timeouts=Timeouts(connect=2.0, total=5.0),
        max_body=CAP,
    ) as opened:
        yield opened


@pytest.fixture
async def hasty(server: SiteServer) -> AsyncIterator[Fetcher]:
    """A fetcher that gives up on an answer after half a second, well before ``/slow``'s."""
    async with loopback_fetcher(
        server, timeouts=Timeouts(connect=2.0, total=0.5), max_body=CAP
    ) as opened:
        yield opened


def hits(server: SiteServer, path: str) -> int:
    """How many times the server was asked for ``path``."""
    return sum(1 for record in server.requests if record.path == path)


async def test_redirect_is_returned_not_followed(server: SiteServer, fetcher: Fetcher) -> None:
    before = hits(server, "/target")
    result = await fetcher.fetch(server.site.url("fetch.test", "/moved"))
    assert (result.status, result.location, result.error) == (302, "/target", None)
    assert hits(server, "/target") == before


@pytest.mark.parametrize("name", ["gzip", "deflate", "raw-deflate", "br"])
async def test_content_encodings_are_decoded(
    server: SiteServer, fetcher: Fetcher, name: str
) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", f"/page.{name}"), max_body=len(PAGE))
    assert result.error is None
    assert result.body == PAGE
    assert (result.length, result.truncated) == (len(PAGE), False)


@pytest.mark.parametrize("name", ["gzip", "deflate", "raw-deflate", "br"])
async def test_compressed_body_cut_off_is_marked_truncated(
    server: SiteServer, fetcher: Fetcher, name: str
) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", f"/cut.{name}"), max_body=len(PAGE))
    assert result.status == 200
    assert result.truncated is True
    assert len(result.body) < len(PAGE)
    assert PAGE.startswith(result.body)


@pytest.mark.parametrize("name", ["gzip", "deflate", "raw-deflate", "br"])
async def test_cap_applies_to_decoded_bytes(
    server: SiteServer, fetcher: Fetcher, name: str
) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", f"/big.{name}"))
    assert result.body == BIG[:CAP]
    assert (result.length, result.truncated, result.error) == (CAP, True, None)


async def test_cap_applies_to_plain_bodies(server: SiteServer, fetcher: Fetcher) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", "/plain-big"))
    assert (len(result.body), result.length, result.truncated) == (CAP, CAP, True)


async def test_timeout_is_reported_as_such(server: SiteServer, hasty: Fetcher) -> None:
    result = await hasty.fetch(server.site.url("fetch.test", "/slow"))
    assert (result.status, result.error) == (None, FetchError.TIMEOUT)
    assert result.error == "timeout"
    assert 0.4 <= result.elapsed < 1.5


async def test_response_time_is_the_answers_and_the_whole_fetch_when_unanswered(
    server: SiteServer, fetcher: Fetcher, hasty: Fetcher
) -> None:
    answered = await fetcher.fetch(server.site.url("fetch.test", "/target"))
    assert 0 < answered.response_time <= answered.elapsed
    timed_out = await hasty.fetch(server.site.url("fetch.test", "/slow"))
    assert timed_out.response_time == timed_out.elapsed
    cut = await fetcher.fetch(server.site.url("fetch.test", "/plain-big"))
    assert cut.truncated
    assert cut.response_time == cut.elapsed  # the rest of the answer was never read


async def test_refused_connection_is_reported_as_refused(fetcher: Fetcher) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        port = sock.getsockname()[1]
        result = await fetcher.fetch(f"http://fetch.test:{port}/")
    assert (result.status, result.error) == (None, FetchError.CONNECTION_REFUSED)


async def test_body_of_declared_non_html_is_not_read(server: SiteServer, fetcher: Fetcher) -> None:
    calls: list[tuple[str | None, bytes]] = []

    def accept(content_type: str | None, head: bytes) -> bool:
        calls.append((content_type, head))
        return is_html(content_type, head)

    result = await fetcher.fetch(server.site.url("fetch.test", "/pdf"), accept=accept)
    assert calls == [("application/pdf", b"")]
    assert (result.status, result.body, result.truncated) == (200, b"", False)
    assert result.length == len(PDF)
    assert result.content_type == "application/pdf"


@pytest.mark.parametrize(("path", "wanted"), [("/untyped-html", True), ("/untyped-bin", False)])
async def test_untyped_body_is_sniffed(
    server: SiteServer, fetcher: Fetcher, path: str, wanted: bool
) -> None:
    calls: list[tuple[str | None, bytes]] = []

    def accept(content_type: str | None, head: bytes) -> bool:
        calls.append((content_type, head))
        return is_html(content_type, head)

    result = await fetcher.fetch(
        server.site.url("fetch.test", path), accept=accept, max_body=len(PAGE)
    )
    assert len(calls) == 1
    assert calls[0][0] is None
    assert calls[0][1]
    assert result.content_type is None
    assert result.body == (PAGE if wanted else b"")


async def test_unknown_encoding_is_not_read(server: SiteServer, fetcher: Fetcher) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", "/compress"))
    assert (result.status, result.body, result.error) == (200, b"", None)


async def test_corrupt_encoding_is_a_decode_error(server: SiteServer, fetcher: Fetcher) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", "/corrupt"))
    assert (result.status, result.error) == (None, FetchError.DECODE)


async def test_headers_in_and_out(server: SiteServer, fetcher: Fetcher) -> None:
    result = await fetcher.fetch(server.site.url("fetch.test", "/headers"))
    assert (result.status, result.retry_after) == (503, "7")
    assert result.robots_tags == ("noindex", "nofollow")
    sent = next(r for r in server.requests if r.path == "/headers").headers
    assert sent["User-Agent"] == "trawl-test/1 (+http://fetch.test/bot)"
    assert {e.strip() for e in sent["Accept-Encoding"].split(",")} == {"gzip", "deflate", "br"}
    assert "Cookie" not in sent


async def test_fetch_outside_the_context_is_refused() -> None:
    idle = Fetcher(
        user_agent="trawl-test/1",
        timeouts=Timeouts(),
        max_body=CAP,
        resolver=GuardedResolver(AddressPolicy()),
    )
    with pytest.raises(RuntimeError, match="outside its context"):
        await idle.fetch("http://fetch.test/")


async def test_idle_connections_are_kept_for_more_hosts_than_requests_in_flight(
    server: SiteServer,
) -> None:
    """A polite crawl has far more hosts at rest between turns than requests in flight:
    each host's idle connection is kept for its next turn (within the idle timeout and
    the file-descriptor budget), not closed to make room for another host's."""
    hosts = [f"h{n}.fetch.test" for n in range(300)]
    address = server.resolve_map()["fetch.test"]
    resolver = GuardedResolver(
        AddressPolicy(server.allow_networks()), overrides=dict.fromkeys(hosts, address)
    )
    async with Fetcher(
        user_agent="trawl-test/1", timeouts=Timeouts(connect=2.0, total=2.0), max_body=CAP,
        resolver=resolver,
    ) as fetcher:  # fmt: skip
        for _ in range(2):
            for host in hosts:
                result = await fetcher.fetch(server.site.url(host, "/"))
                assert result.status is not None, result.error
        assert fetcher._client is not None
        assert fetcher._client.opened == len(hosts)
        assert fetcher._client.idle == len(hosts)
