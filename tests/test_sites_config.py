"""Per-site settings as given: the ``[sites."HOST"]`` tables of a config file and the
library's ``sites`` argument, which host gets which rule, what the stored policy keeps
(never a secret), and bad settings refused in one line with exit 2."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from test_cli import Run, assert_one_error_line, trawl_inline
from trawl import Crawler
from trawl.config import Politeness
from trawl.errors import UsageError
from trawl.policy import policy_json, with_policy
from trawl.politeness.scheduler import HostScheduler
from trawl.settings import build_config, library_values
from trawl.sites.requests import REDACTED, site_requests
from trawl.sites.rules import Sites, parse_sites

SEED = "http://a.test/"
ENV = {"SITE_TOKEN": "tok-3f9a", "SITE_USER": "alice", "SITE_PASSWORD": "pw-77c1"}
SECRETS = ("tok-3f9a", "pw-77c1", "c00kie-91", base64.b64encode(b"alice:pw-77c1").decode())
SITES = {
    "a.test": {
        "delay": 2.5,
        "per-host": 2,
        "headers": {"X-Plain": "shown", "X-Token": {"env": "SITE_TOKEN"}},
        "cookies": {"lang": "en", "session": {"value": "c00kie-91", "secret": True}},
        "auth": {"user_env": "SITE_USER", "password_env": "SITE_PASSWORD"},
        "render": "always",
        "proxy": "http://proxy.test:3128",
        "max_pages": 5,
        "max_depth": 2,
    },
    "*.a.test": {"delay": 0.5, "render": "auto"},
    "*.deep.a.test": {"per_host": 3},
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def test_the_most_specific_rule_applies_whole_and_ports_do_not_matter() -> None:
    sites = parse_sites(SITES)
    assert sites.for_host("a.test") is not None
    assert sites.render_mode_for("a.test:8080") == "always"  # exact beats *.a.test
    assert sites.render_mode_for("www.a.test") == "auto"
    assert sites.render_mode_for("x.y.a.test") == "auto"  # subdomains at any depth
    deep = sites.for_host("x.deep.a.test")
    assert deep is not None
    assert deep.per_host == 3
    assert deep.render is None  # the longer wildcard wins whole: nothing merges
    assert sites.render_mode_for("b.test") is None  # no rule: the crawl's own
    assert sites.render_mode_for("aa.test") is None
    assert sites.proxy_for("A.TEST") == "http://proxy.test:3128"
    assert sites.proxy_for("www.a.test") is None
    assert sites.page_budget_for("a.test") == 5


def test_a_sites_delay_and_per_host_replace_the_crawls_for_its_hosts_only() -> None:
    now = [100.0]
    sites = parse_sites({"fast.test": {"delay": 0, "per_host": 2}, "slow.test": {"delay": 5}})
    scheduler = HostScheduler(Politeness(delay=1.0, response_factor=0), lambda: now[0], sites)
    fast, slow, other = (
        scheduler.slot(i, n) for i, n in enumerate(("fast.test:81", "slow.test", "o.test"))
    )
    assert (fast.per_host, fast.delay) == (2, 0.0)
    assert (slow.per_host, slow.delay) == (1, 5.0)
    assert (other.per_host, other.delay) == (1, 1.0)
    assert scheduler.delay_after(fast, 0.01) == 0.0
    assert scheduler.delay_after(slow, 0.01) == 5.0
    assert scheduler.delay_after(other, 0.01) == 1.0


def test_the_stored_policy_names_where_secrets_come_from_and_holds_none(env: None) -> None:
    config = build_config((SEED,), {**library_values({}), "sites": SITES})
    stored = policy_json(config)
    assert not [s for s in SECRETS if s in stored]
    sites = json.loads(stored)["sites"]
    assert sites["a.test"]["headers"] == {
        "X-Plain": {"text": "shown"}, "X-Token": {"env": "SITE_TOKEN"}
    }  # fmt: skip
    assert sites["a.test"]["cookies"] == {"lang": {"text": "en"}, "session": {"secret": True}}
    assert sites["a.test"]["auth"] == {"user_env": "SITE_USER", "password_env": "SITE_PASSWORD"}
    assert sites["a.test"]["per_host"] == 2
    assert sites["*.a.test"] == {
        "delay": 0.5,
        "render": "auto",
    }
    # A worker gets every setting back; the secret given as a value was never stored, so
    # a worker cannot send it and refuses to start, in one line.
    joined = with_policy(build_config((), library_values({})), stored)
    assert {site.pattern for site in joined.sites.rules} == {"a.test", "*.a.test", "*.deep.a.test"}
    mine, theirs = config.sites.for_host("a.test"), joined.sites.for_host("a.test")
    assert mine is not None
    assert theirs is not None
    assert theirs.headers == mine.headers
    assert theirs.auth == mine.auth
    assert (theirs.delay, theirs.per_host, theirs.render, theirs.proxy) == (
        2.5,
        2,
        "always",
        mine.proxy,
    )
    assert (theirs.max_pages, theirs.max_depth) == (5, 2)
    with pytest.raises(UsageError, match=r"cookie 'session' is a secret .* \{env = \"NAME\"\}"):
        site_requests(joined.sites)


def test_request_headers_are_made_once_and_the_archive_redacts_secrets(env: None) -> None:
    requests = site_requests(parse_sites(SITES))
    request = requests.find("a.test")
    assert request is not None
    token = base64.b64encode(b"alice:pw-77c1").decode()
    assert request.headers == {
        "X-Plain": "shown", "X-Token": "tok-3f9a", "Cookie": "lang=en; session=c00kie-91",
        "Authorization": f"Basic {token}",
    }  # fmt: skip
    sent = [("Host", "a.test"), *request.headers.items()]
    assert request.redact(sent) == [
        ("Host", "a.test"), ("X-Plain", "shown"), ("X-Token", REDACTED),
        ("Cookie", f"lang=en; session={REDACTED}"), ("Authorization", REDACTED),
    ]  # fmt: skip
    assert requests.find("www.a.test") is None  # a rule without headers sends none
    plain = site_requests(parse_sites({"b.test": {"headers": {"Authorization": "Bearer x"}}}))
    found = plain.find("b.test")
    assert found is not None
    assert found.redact([("Authorization", "Bearer x")]) == [("Authorization", REDACTED)]


def test_the_library_takes_sites_and_refuses_bad_ones(env: None, tmp_path: Path) -> None:
    crawler = Crawler(SEED, data_dir=tmp_path, sites=SITES)
    sites = crawler.config().sites
    assert isinstance(sites, Sites)
    assert sites.proxy_for("a.test") == "http://proxy.test:3128"
    with pytest.raises(UsageError, match=r"site 'a\.test': delay must not be negative"):
        Crawler(SEED, data_dir=tmp_path, sites={"a.test": {"delay": -1}})
    with pytest.raises(UsageError, match="environment variable NOPE_NOT_SET is not set"):
        Crawler(
            SEED, data_dir=tmp_path, sites={"a.test": {"headers": {"X": {"env": "NOPE_NOT_SET"}}}}
        )


A = '[sites."a.test"]\n'
"""The table of site a.test, in a config file."""
BAD = [
    (A + 'speed = 1\n', "site 'a.test': unknown key 'speed'"),
    (A + 'dealy = 1\n', "(did you mean 'delay'?)"),
    ('[sites."a..test"]\ndelay = 1\n', "site 'a..test' is not a host name nor *.DOMAIN"),
    ('[sites."a.*.test"]\ndelay = 1\n', "is not a host name nor *.DOMAIN"),
    ('[sites."http://a.test/"]\ndelay = 1\n', "is not a host name nor *.DOMAIN"),
    (A + 'delay = -1\n', "site 'a.test': delay must not be negative"),
    (A + 'delay = "slow"\n', "delay must be a number of seconds"),
    (A + 'per_host = 0\n', "per_host must be at least 1"),
    (A + 'headers = {"Bad Name" = "x"}\n', "header 'Bad Name' is not a valid header name"),
    (A + 'headers = {"X-A" = "one\\r\\nX-Evil: 1"}\n', "header 'X-A': a line break or NUL"),
    (A + 'cookies = {s = "a\\nb"}\n', "cookie 's': a line break or NUL"),
    (A + 'cookies = {s = "a; admin=1"}\n', "cookie 's': a ';' or ','"),
    (A + 'headers = {Host = "b.test"}\n', "header 'Host' cannot be set per site"),
    (A + 'headers = {Cookie = "a=b"}\n', "give cookies in cookies"),
    (A + 'headers = {X = {env = "A", oops = 1}}\n', "must be a string, {env"),
    (A + 'auth = {user = "me", password = "pw"}\n', "auth must be {user_env"),
    (A + 'auth = {user_env = "NOPE_U", password_env = "NOPE_P"}\n',
     "site 'a.test': auth user: environment variable NOPE_U is not set"),
    (A + 'headers = {X = {env = "NOPE_X"}}\n', "environment variable NOPE_X is not set"),
    (A + 'render = "sometimes"\n', "render must be one of never, auto, always"),
    (A + 'proxy = "ftp://p.test"\n', "proxy must be a URL http://HOST[:PORT]"),
    (A + 'proxy = "http://p.test/x"\n', "proxy must be a URL"),
    (A + 'proxy = "http://u:pw@p.test:3128"\n', "proxy credentials come from the environment"),
    (A + 'max_pages = 0\n', "max_pages must be at least 1"),
    ('max_pages_per_host = 10\n' + A + 'max_pages = 11\n',
     "max_pages 11 is above --max-pages-per-host 10: a site may only tighten"),
    ('max_depth = 3\n' + A + 'max_depth = 4\n', "max_depth 4 is above --max-depth 3"),
    ('sites = 3\n', "sites must be a table of host patterns"),
    ('[sites]\n"a.test" = 1\n', "site 'a.test' must be a table of settings"),
    ('[sites."A.test"]\n[sites."a.test"]\n', "site 'a.test' is given twice"),
]  # fmt: skip


@pytest.mark.parametrize(("config", "said"), BAD, ids=[said for _, said in BAD])
def test_bad_site_settings_are_one_line_and_exit_2(
    config: str, said: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    Path("c.toml").write_text(config)
    run: Run = trawl_inline(capsys, "crawl", SEED, "--config", "c.toml", "--no-progress")
    line = assert_one_error_line(run)
    assert said in line, line
    assert not Path("trawl-data").exists()  # refused before anything was made


def test_a_configuration_printed_whole_shows_no_secret(env: None) -> None:
    config = build_config((SEED,), {**library_values({}), "sites": SITES})
    shown = repr(config) + repr(config.sites.rules)
    assert "X-Plain" in shown
    assert not [s for s in SECRETS if s in shown]
