"""The OpenAPI document of ``trawl serve`` holds: schemathesis generates requests for every
operation from it, and every answer must match it and never be a server error."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

from test_api import AUTH, TOKEN
from trawl.ops.api import create_app
from trawl.ops.crawls import Crawls

_APP = create_app(Crawls(Path(tempfile.mkdtemp(prefix="trawl-schema-")) / "crawls"), TOKEN)
# /crawls is left out: starting crawls of generated seeds would send requests off the
# machine (tests/test_api.py covers it), and Starlette's 405 for it names only one of
# its two routes' methods.
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP).exclude(path="/crawls")


@schema.parametrize()
def test_every_answer_matches_the_openapi_document(case: Any) -> None:
    # A block pattern must compile as a Python regular expression, which the schema can
    # only say as a string: a refused pattern is a documented 422, not a failure.
    case.call_and_validate(headers=AUTH, excluded_checks=[positive_data_acceptance])
