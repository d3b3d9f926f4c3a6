"""The OpenAPI document of ``trawl serve`` holds: schemathesis generates requests for every
operation from it, and every answer must match it and never be a server error.

The API's root holds a crawl of a loopback site (``cdone``) and a damaged one
(``cbroken``); generated crawl ids go to either or to no crawl at all, so that the
operations run on real data, an unreadable store and unknown ids alike. ``POST /crawls``
is generated too, with its seeds replaced by a loopback address before it is sent: the
crawls it starts keep trawl's network guard on (no ``--allow-network``), which refuses
loopback, so no generated request starts a fetch, on the machine or off it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import positive_data_acceptance

from test_api import AUTH, FAST, TOKEN
from trawl.demo import SiteServer, generate_site
from trawl.ops.api import create_app
from trawl.ops.crawls import Crawls

ROOT = Path(tempfile.mkdtemp(prefix="trawl-schema-")) / "crawls"
REFUSED_SEED = "http://127.0.0.1:9/"
"""Every generated seed becomes this: loopback, which the crawls' network guard refuses."""
CRAWL_ID = re.compile(r"[a-z0-9_]{1,40}")
_CRAWLS = Crawls(ROOT, crawl_options=["--max-time", "20", "--parse-workers", "0"])
_APP = create_app(_CRAWLS, TOKEN)
# A generated body over the API's 64 KiB limit is refused with its documented 413.
_REFUSED = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
_CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": _REFUSED}}}
)
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP, config=_CONFIG)


@pytest.fixture(scope="module", autouse=True)
def crawls() -> Any:
    """A finished crawl of a small loopback site and a damaged crawl under the root; the
    crawls the generated requests started are stopped at the end."""
    with SiteServer(lambda port: generate_site(port, hosts=4, pages_per_host=4, seed=3)) as site:
        subprocess.run(
            [sys.executable, "-m", "trawl", "crawl", *site.site.seeds, "--no-progress",
             "--data-dir", str(ROOT / "cdone"), *site.resolve_args(), *FAST],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    (ROOT / "cbroken").mkdir()
    (ROOT / "cbroken" / "crawl.db").write_bytes(b"not a database " * 100)
    yield
    _CRAWLS.close()
    shutil.rmtree(ROOT.parent)


def _aimed(case: Any) -> dict[str, str]:
    """Point ``case`` at the crawls of the root (a valid id: one of them, or none) and
    keep its seeds on loopback; the headers to send: the token unless the case is about
    a missing one."""
    crawl_id = case.path_parameters.get("crawl_id") if case.path_parameters else None
    if crawl_id is not None and CRAWL_ID.fullmatch(crawl_id):
        case.path_parameters["crawl_id"] = ("cdone", "cbroken", crawl_id)[len(crawl_id) % 3]
    if isinstance(case.body, dict) and isinstance(case.body.get("seeds"), list):
        case.body["seeds"] = [REFUSED_SEED for _ in case.body["seeds"]]
    header = case.meta.components.get(ParameterLocation.HEADER) if case.meta else None
    return {} if header is not None and header.mode.is_negative else AUTH


@schema.exclude(method="POST", path="/crawls").parametrize()
def test_every_answer_matches_the_openapi_document(case: Any) -> None:
    # A generated body can be refused for what the schema cannot say (a block pattern
    # that does not compile, a delay the crawl's checks refuse): that is a documented
    # 422, not a failure.
    case.call_and_validate(headers=_aimed(case), excluded_checks=[positive_data_acceptance])


@schema.include(method="POST", path="/crawls").parametrize()
@hypothesis.settings(max_examples=25, deadline=None)
def test_starting_crawls_of_generated_requests_matches_the_document(case: Any) -> None:
    case.call_and_validate(headers=_aimed(case), excluded_checks=[positive_data_acceptance])
