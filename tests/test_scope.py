"""Scope verdicts for each mode, patterns, and the registrable-domain rule."""

from __future__ import annotations

import pytest

from trawl.extract.scope import Scope, ScopeMode, Verdict, registrable_domain


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("a.trawl.test", "trawl.test"),
        ("trawl.test", "trawl.test"),
        ("www.example.com", "example.com"),
        ("a.b.example.co.uk", "example.co.uk"),
        ("foo.github.io", "foo.github.io"),
        ("x.foo.github.io", "foo.github.io"),
        ("co.uk", "co.uk"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "[::1]"),
        ("xn--mnchen-3ya.de", "xn--mnchen-3ya.de"),
    ],
)
def test_registrable_domain(host: str, domain: str) -> None:
    assert registrable_domain(host) == domain


@pytest.mark.parametrize(
    ("url", "verdict"),
    [
        ("http://www.trawl.test:8080/", Verdict.IN),
        ("http://a.b.trawl.test:8080/x", Verdict.IN),
        ("https://trawl.test/", Verdict.IN),
        ("http://trawl.test:9999/other", Verdict.IN),
        ("http://other.test:8080/", Verdict.OFF_SCOPE),
        ("http://nottrawl.test/", Verdict.OFF_SCOPE),
        ("http://trawl.test.evil.test/", Verdict.OFF_SCOPE),
        ("http://test/", Verdict.OFF_SCOPE),
    ],
)
def test_domain_mode(url: str, verdict: Verdict) -> None:
    scope = Scope(["http://www.trawl.test:8080/"])
    assert scope.check(url) is verdict


def test_domain_mode_any_seed_and_public_suffixes() -> None:
    scope = Scope(["https://shop.example.co.uk/", "https://blog.foo.github.io/"])
    assert scope.check("http://www.example.co.uk/") is Verdict.IN
    assert scope.check("https://foo.github.io/") is Verdict.IN
    assert scope.check("https://a.blog.foo.github.io/") is Verdict.IN
    assert scope.check("https://other.co.uk/") is Verdict.OFF_SCOPE
    assert scope.check("https://bar.github.io/") is Verdict.OFF_SCOPE


def test_domain_mode_seed_on_a_public_suffix_admits_its_subdomains() -> None:
    scope = Scope(["https://github.io/"])
    assert scope.check("https://foo.github.io/") is Verdict.IN
    assert scope.check("https://github.com/") is Verdict.OFF_SCOPE


@pytest.mark.parametrize(
    ("url", "verdict"),
    [
        ("http://www.trawl.test:8080/a", Verdict.IN),
        ("https://www.trawl.test:8080/a", Verdict.IN),
        ("http://www.trawl.test/", Verdict.OFF_SCOPE),
        ("http://www.trawl.test:8081/", Verdict.OFF_SCOPE),
        ("http://a.www.trawl.test:8080/", Verdict.OFF_SCOPE),
        ("http://trawl.test:8080/", Verdict.OFF_SCOPE),
    ],
)
def test_host_mode(url: str, verdict: Verdict) -> None:
    scope = Scope(["http://www.trawl.test:8080/"], mode=ScopeMode.HOST)
    assert scope.check(url) is verdict


def test_host_mode_ignores_scheme_for_default_ports() -> None:
    scope = Scope(["http://a.test/"], mode=ScopeMode.HOST)
    assert scope.check("https://a.test/x") is Verdict.IN


@pytest.mark.parametrize(
    ("url", "verdict"),
    [
        ("https://a.test/docs/", Verdict.IN),
        ("https://a.test/docs/x/y?z=1", Verdict.IN),
        ("https://a.test/blog/", Verdict.IN),
        ("https://a.test/blog-old/", Verdict.IN),
        ("https://a.test/doc", Verdict.OFF_SCOPE),
        ("http://a.test/docs/", Verdict.OFF_SCOPE),
        ("https://b.a.test/docs/", Verdict.OFF_SCOPE),
    ],
)
def test_prefix_mode(url: str, verdict: Verdict) -> None:
    scope = Scope(["https://a.test/docs/", "https://a.test/blog"], mode=ScopeMode.PREFIX)
    assert scope.check(url) is verdict


@pytest.mark.parametrize(
    ("mode", "seed", "inside", "outside"),
    [
        (ScopeMode.DOMAIN, "http://127.0.0.1:8000/", "http://127.0.0.1:9000/", "http://127.0.0.2/"),
        (ScopeMode.HOST, "http://127.0.0.1:8000/", "http://127.0.0.1:8000/x", "http://127.0.0.1/"),
        (ScopeMode.DOMAIN, "http://[::1]:8000/", "http://[::1]/x", "http://[::2]/"),
        (ScopeMode.HOST, "http://[::1]:8000/", "https://[::1]:8000/", "http://[::1]:8001/"),
        (
            ScopeMode.DOMAIN,
            "http://localhost:8000/",
            "http://a.localhost/",
            "http://localhost.test/",
        ),
        (
            ScopeMode.HOST,
            "http://localhost:8000/",
            "http://localhost:8000/x",
            "http://a.localhost:8000/",
        ),
    ],
)
def test_ip_literal_and_localhost_seeds(
    mode: ScopeMode, seed: str, inside: str, outside: str
) -> None:
    scope = Scope([seed], mode=mode)
    assert scope.check(inside) is Verdict.IN
    assert scope.check(outside) is Verdict.OFF_SCOPE


def test_include_requires_a_match() -> None:
    scope = Scope(["https://a.test/"], include=[r"/docs/", r"\.html$"])
    assert scope.check("https://a.test/docs/x") is Verdict.IN
    assert scope.check("https://a.test/page.html") is Verdict.IN
    assert scope.check("https://a.test/blog/x") is Verdict.EXCLUDED


def test_exclude_wins_over_include() -> None:
    scope = Scope(["https://a.test/"], include=[r"/docs/"], exclude=[r"/docs/private", r"\?"])
    assert scope.check("https://a.test/docs/public") is Verdict.IN
    assert scope.check("https://a.test/docs/private/x") is Verdict.EXCLUDED
    assert scope.check("https://a.test/docs/?page=2") is Verdict.EXCLUDED


def test_off_scope_wins_over_patterns() -> None:
    scope = Scope(["https://a.test/"], include=[r"b\.test"], exclude=[r"c\.test"])
    assert scope.check("https://b.test/") is Verdict.OFF_SCOPE
    assert scope.check("https://c.test/") is Verdict.OFF_SCOPE


def test_bad_include_regex_names_the_pattern() -> None:
    with pytest.raises(ValueError, match=r"invalid include pattern '\(unclosed'"):
        Scope(["https://a.test/"], include=["ok", "(unclosed"])


def test_bad_exclude_regex_names_the_pattern() -> None:
    with pytest.raises(ValueError, match=r"invalid exclude pattern '\[z-a\]'"):
        Scope(["https://a.test/"], exclude=["[z-a]"])


@pytest.mark.parametrize("seed", ["mailto:x@a.test", "not a url", "HTTP://a.test/"])
def test_bad_seed_is_rejected(seed: str) -> None:
    with pytest.raises(ValueError, match="invalid seed URL"):
        Scope([seed])


def test_no_seeds_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least one seed"):
        Scope([])
