"""WHATWG URL Standard link-resolution vectors (web-platform-tests urltestdata).

Every case runs twice: `resolve` must give the standard's href (or fail where the
standard fails), and `normalize` must accept every http(s) result except those with
credentials or over the length limit, and reject every failure. Differences are listed
by case with their reason: ada's own are strict xfails (a fix upstream shows up), and
trawl's deliberate rejections must give exactly the listed reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from trawl.extract.resolution import resolve
from trawl.extract.urls import DEFAULT_RULES, Rejection, normalize

DATA = Path(__file__).parent / "data" / "conformance" / "link_resolution_whatwg.json"
DEFAULT_BASE = "http://example.org/"


@dataclass(frozen=True, slots=True)
class Case:
    """One vector: `href` is None where the standard says parsing fails."""

    index: int
    input: str
    base: str
    href: str | None


def _load() -> tuple[Case, ...]:
    raw: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return tuple(
        Case(
            index=c["wpt_index"],
            input=c["input"],
            base=c["base"] or DEFAULT_BASE,
            href=None if c.get("failure") else c["href"],
        )
        for c in raw["cases"]
    )


CASES = _load()

_ADA_PUNYCODE = (
    "ada accepts an xn-- label whose punycode does not decode to a valid IDNA label; "
    "the standard fails. normalize() rejects it as bad_host."
)
# wpt_index -> why ada's resolution differs from the standard.
RESOLVE_DIFFERENCES: dict[int, str] = {
    307: _ADA_PUNYCODE,
    308: _ADA_PUNYCODE,
    310: _ADA_PUNYCODE,
    311: _ADA_PUNYCODE,
    312: _ADA_PUNYCODE,
    313: _ADA_PUNYCODE,
    901: _ADA_PUNYCODE,
}

_PORT_ZERO = "port 0 is valid in the standard but no server listens on it"
_NOT_DNS = "a host no DNS resolver can look up (empty label or characters outside a-z0-9-_)"
# wpt_index -> (rejection, why) where normalize deliberately rejects a valid http(s) URL.
NORMALIZE_DIFFERENCES: dict[int, tuple[Rejection, str]] = {
    14: (Rejection.BAD_PORT, _PORT_ZERO),
    15: (Rejection.BAD_PORT, _PORT_ZERO),
    343: (Rejection.BAD_HOST, _NOT_DNS),
    344: (Rejection.BAD_HOST, _NOT_DNS),
    532: (Rejection.BAD_HOST, _NOT_DNS),
    874: (Rejection.BAD_HOST, _NOT_DNS),
}


def _expected_rejection(index: int, href: str) -> Rejection | None:
    """The rejection normalize must give case `index`, which the standard resolves to `href`."""
    if index in NORMALIZE_DIFFERENCES:
        return NORMALIZE_DIFFERENCES[index][0]
    if not href.startswith(("http:", "https:")):
        return Rejection.SCHEME
    parts = urlsplit(href)
    if parts.username or parts.password:
        return Rejection.CREDENTIALS
    if len(href) > DEFAULT_RULES.max_length:
        return Rejection.TOO_LONG
    return None


def _resolves(case: Case) -> bool:
    return resolve(case.input, case.base) == case.href


def _normalizes(case: Case) -> bool:
    got = normalize(case.input, case.base)
    if case.href is None:
        return isinstance(got, Rejection)
    expected = _expected_rejection(case.index, case.href)
    if expected is not None:
        return got is expected
    # Accepted, and the same identity as normalising the standard's own href.
    return not isinstance(got, Rejection) and got == normalize(case.href)


def _params(differences: dict[int, str]) -> list[Any]:
    return [
        pytest.param(
            case,
            id=f"wpt{case.index}",
            marks=(
                [pytest.mark.xfail(strict=True, reason=differences[case.index])]
                if case.index in differences
                else []
            ),
        )
        for case in CASES
    ]


def test_every_case_is_loaded() -> None:
    assert len(CASES) == 400
    assert len({c.index for c in CASES}) == 400
    assert set(RESOLVE_DIFFERENCES) <= {c.index for c in CASES}
    assert set(NORMALIZE_DIFFERENCES) <= {c.index for c in CASES if c.href is not None}


@pytest.mark.parametrize("case", _params(RESOLVE_DIFFERENCES))
def test_resolve(case: Case) -> None:
    assert resolve(case.input, case.base) == case.href


@pytest.mark.parametrize("case", _params({}))
def test_normalize(case: Case) -> None:
    assert _normalizes(case), (case.input, case.base, case.href, normalize(case.input, case.base))


def test_summary(capsys: pytest.CaptureFixture[str]) -> None:
    resolved = sum(_resolves(c) for c in CASES)
    normalized = sum(_normalizes(c) for c in CASES)
    failures = sum(c.href is None for c in CASES)
    with capsys.disabled():
        print(
            f"\nWHATWG link resolution: resolve {resolved}/{len(CASES)} "
            f"({len(RESOLVE_DIFFERENCES)} known ada differences), "
            f"normalize {normalized}/{len(CASES)} ({failures} failure cases, "
            f"{len(NORMALIZE_DIFFERENCES)} valid URLs deliberately rejected)"
        )
    assert resolved + len(RESOLVE_DIFFERENCES) == len(CASES)
    assert normalized == len(CASES)
