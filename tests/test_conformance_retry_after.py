"""Retry-After conformance: every case of retry_after.json (RFC 9110 10.2.3 and 5.6.7).

Dates are checked from both sides: a response received before the date waits until it,
one received after it waits 0. trawl parses strictly, so the lower-case date that a
lenient parser may accept is invalid here, as the file's ``expected`` says.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from trawl.fetch.retry import parse_retry_after

DATA = Path(__file__).parent / "data" / "conformance" / "retry_after.json"
CASES: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["cases"]
NOW = 1_000_000_000.0  # 2001-09-09: inside the 1994..2043 window the RFC 850 case needs


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_retry_after_case(case: dict[str, Any]) -> None:
    expected = case["expected"]
    value = case["value"]
    if expected["kind"] == "invalid":
        assert parse_retry_after(value, NOW) is None
    elif expected["kind"] == "delay":
        assert parse_retry_after(value, NOW) == float(expected["seconds"])
    else:
        when = datetime.fromisoformat(expected["utc"].replace("Z", "+00:00")).timestamp()
        assert parse_retry_after(value, when - 90.0) == 90.0
        assert parse_retry_after(value, when) == 0.0
        assert parse_retry_after(value, when + 3600.0) == 0.0
