"""``--events`` values: a file path, ``nats://`` or ``amqp://``, read the same from the
command line, a config file and ``POST /crawls``; bad ones are one line, credentials
never shown; a broker that cannot be reached at the start, or a client that is not
installed, is one line and a non-zero exit; ``--fresh`` cannot empty a stream and says
so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from brokers import Destination, destination, events_site, require
from test_cli import Run, assert_one_error_line, trawl
from test_events import event
from trawl.content.events import event_json
from trawl.demo import SiteServer
from trawl.errors import UsageError
from trawl.events.sink import EXTRA, event_body, idempotency_key
from trawl.events.target import (
    DUPLICATE_WINDOW,
    MAX_AGE,
    PASSWORD_ENV,
    USER_ENV,
    AmqpTarget,
    NatsTarget,
    parse_events,
)
from trawl.ops.crawl_request import NewCrawl, crawl_arguments
from trawl.settings import library_values

__all__ = ["destination"]

SECRET = "s3cr3t-pw"


def test_a_value_without_a_scheme_is_a_file() -> None:
    assert parse_events("out/events.jsonl") == Path("out/events.jsonl")
    assert parse_events("/tmp/x:y@z.jsonl") == Path("/tmp/x:y@z.jsonl")


def test_nats_defaults_and_parameters() -> None:
    target = parse_events("nats://127.0.0.1/trawl.pages-all", env={})
    assert target == NatsTarget("127.0.0.1", 4222, "trawl.pages-all", "TRAWL_PAGES_ALL")
    assert (target.duplicate_window, target.max_age, target.max_bytes) == (
        DUPLICATE_WINDOW, MAX_AGE, -1,
    )  # fmt: skip
    given = parse_events(
        "nats://h.example:4333/a.b?stream=S-1&duplicate_window=30&max_age=0&max_bytes=1000"
    )
    assert given == NatsTarget("h.example", 4333, "a.b", "S-1", 30.0, 0.0, 1000)


def test_amqp_defaults_vhost_and_parameters() -> None:
    target = parse_events("amqp://127.0.0.1", env={})
    assert target == AmqpTarget(
        "127.0.0.1", 5672, "/", "trawl", "page.fetched", "trawl.page_fetched"
    )
    assert parse_events("amqp://h/%2F", env={}) == AmqpTarget("h", 5672, "/")
    named = parse_events("amqp://h:5673/crawls?exchange=ex&routing_key=a.b&queue=q.1", env={})
    assert named == AmqpTarget("h", 5673, "crawls", "ex", "a.b", "q.1")


def test_credentials_come_from_the_url_or_the_environment_and_are_never_shown() -> None:
    env = {"TRAWL_EVENTS_USER": "envuser", "TRAWL_EVENTS_PASSWORD": SECRET}
    from_env = parse_events("amqp://h/", env=env)
    assert isinstance(from_env, AmqpTarget)
    assert (from_env.user, from_env.password) == ("envuser", SECRET)
    in_url = parse_events(f"nats://me:{SECRET}@h:4222/s", env=env)
    assert isinstance(in_url, NatsTarget)
    assert (in_url.user, in_url.password) == ("me", SECRET)
    assert in_url.server == f"nats://me:{SECRET}@h:4222"
    token = parse_events("nats://tok@h/s", env={})
    assert isinstance(token, NatsTarget)
    assert (token.user, token.password) == ("tok", None)
    for target in (from_env, in_url):
        assert SECRET not in target.shown
        assert SECRET not in repr(target)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("kafka://h:9092/topic", "unknown scheme kafka://"),
        ("nats://h:4222", "no subject"),
        ("nats://h:4222/", "no subject"),
        ("nats://h/a.*", "without spaces or wildcards"),
        ("nats://h/a..b", "without spaces or wildcards"),
        ("nats://h/a?stream=bad.name", "stream name 'bad.name'"),
        ("nats://h/a?duplicate_window=0", "duplicate_window must be a number of seconds"),
        ("nats://h/a?max_age=-1", "max_age must be a number of seconds"),
        ("nats://h/a?max_age=10&duplicate_window=60", "must not be longer than max_age"),
        ("nats://h/a?max_bytes=0", "max_bytes must be a positive integer"),
        ("nats://h/a?exchange=x", "unknown parameter 'exchange'"),
        ("nats://h/a?stream=A&stream=B", "stream given twice"),
        ("amqp://h/?queue=a b", "queue must be"),
        ("amqp://h:port/", "--events amqp://h:port/"),
        ("amqp:///", "no host"),
        ("nats://h/a#x", "fragment"),
    ],
)
def test_a_bad_url_is_one_line_without_the_password(value: str, says: str) -> None:
    with_secret = value.replace("://", f"://me:{SECRET}@", 1)
    for given in (value, with_secret):
        with pytest.raises(UsageError) as raised:
            parse_events(given, env={})
        message = str(raised.value)
        assert says in message.replace(f"me:{SECRET}@", "").replace("***@", "")
        assert SECRET not in message
        assert "\n" not in message


def test_the_command_line_a_config_file_and_the_api_agree(tmp_path: Path) -> None:
    bad = "nats://127.0.0.1:4222/a.>"
    expected = parse_error(bad)
    cli = trawl("crawl", "http://a.test/", "--data-dir", str(tmp_path / "d"), "--events", bad)
    assert assert_one_error_line(cli) == f"trawl: error: {expected}"
    config = tmp_path / "crawl.toml"
    config.write_text(f'events = "{bad}"\n')
    from_file = trawl(
        "crawl", "http://a.test/", "--data-dir", str(tmp_path / "d"), "--config", str(config)
    )
    assert assert_one_error_line(from_file) == f"trawl: error: {expected}"
    with pytest.raises(ValidationError) as refused:
        NewCrawl.model_validate({"seeds": ["http://a.test/"], "events": bad})
    assert expected in str(refused.value)
    assert not (tmp_path / "d").exists()


def parse_error(value: str) -> str:
    with pytest.raises(UsageError) as raised:
        parse_events(value)
    return str(raised.value)


def test_the_api_takes_a_broker_url_without_credentials() -> None:
    url = "amqp://127.0.0.1:5672/?exchange=crawls"
    request = NewCrawl.model_validate({"seeds": ["http://a.test/"], "events": url})
    assert request.options() == {"events": url}
    assert crawl_arguments(["http://a.test/"], request.options(), "/data/c1") == [
        f"--events={url}", "--", "http://a.test/",
    ]  # fmt: skip
    named = NewCrawl.model_validate({"seeds": ["http://a.test/"], "events": "ev.jsonl"})
    assert crawl_arguments([], named.options(), "/data/c1") == ["--events=/data/c1/ev.jsonl", "--"]
    with pytest.raises(ValidationError) as refused:
        NewCrawl.model_validate(
            {"seeds": ["http://a.test/"], "events": f"amqp://guest:{SECRET}@127.0.0.1/"}
        )
    # The 422 lists where and why, never the input (trawl.ops.api).
    (problem,) = refused.value.errors()
    assert "TRAWL_EVENTS_PASSWORD" in problem["msg"]
    assert SECRET not in problem["msg"]


def test_the_library_takes_a_path_or_a_url() -> None:
    assert library_values({"events": Path("a/b.jsonl")})["events"] == "a/b.jsonl"
    assert library_values({"events": "nats://h/s"})["events"] == "nats://h/s"


def test_the_message_body_is_the_file_line_and_the_id_the_key() -> None:
    shown = event(3)
    assert (
        event_body(shown) + b"\n"
        == (
            json.dumps(event_json(shown), ensure_ascii=False, separators=(",", ":")) + "\n"
        ).encode()
    )
    assert idempotency_key(shown) == f"{event_json(shown)['urlHash']}:{shown.content_hash}"


def unreachable(tmp_path: Path, url: str) -> Run:
    return trawl("crawl", "http://a.test/", "--data-dir", str(tmp_path / "d"), "--events", url)


def test_a_broker_not_there_at_the_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    from bench.servers import free_port

    for url in (
        f"nats://me:{SECRET}@127.0.0.1:{free_port()}/a.b",
        f"amqp://me:{SECRET}@127.0.0.1:{free_port()}/",
    ):
        run = unreachable(tmp_path, url)
        line = assert_one_error_line(run, code=1)
        assert "cannot reach" in line
        assert "127.0.0.1" in line
        assert SECRET not in run.err


def test_wrong_amqp_credentials_are_one_line(tmp_path: Path) -> None:
    """Refused credentials, from the URL or from the environment (which the URL without
    any leaves to it), are one line that shows neither."""
    require(("127.0.0.1", 5672))
    run = unreachable(tmp_path, f"amqp://guest:{SECRET}@127.0.0.1:5672/")
    line = assert_one_error_line(run, code=1)
    assert "cannot reach amqp://127.0.0.1:5672/" in line
    assert SECRET not in run.err
    env = {**os.environ, USER_ENV: "guest", PASSWORD_ENV: SECRET}
    done = subprocess.run(
        [sys.executable, "-m", "trawl", "crawl", "http://a.test/", "--data-dir",
         str(tmp_path / "e"), "--events", "amqp://127.0.0.1:5672/"],
        capture_output=True, text=True, timeout=30, check=False, env=env,
    )  # fmt: skip
    line = assert_one_error_line(Run(done.returncode, done.stdout, done.stderr), code=1)
    assert "ACCESS_REFUSED" in line
    assert SECRET not in done.stderr


@pytest.mark.parametrize(
    ("module", "url"), [("nats", "nats://127.0.0.1/a"), ("aio_pika", "amqp://127.0.0.1/")]
)
def test_a_missing_client_names_the_extra(tmp_path: Path, module: str, url: str) -> None:
    code = (
        "import sys; sys.modules[sys.argv[1]] = None; sys.argv[1:2] = []; "
        "from trawl.cli.launch import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, module, "crawl", "http://a.test/", "--data-dir",
         str(tmp_path / "d"), "--events", url],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    line = assert_one_error_line(Run(done.returncode, done.stdout, done.stderr))
    assert f"pip install 'trawl[{EXTRA}]'" in line
    assert module in line


def test_fresh_leaves_a_stream_as_it_is_and_says_so(
    destination: Destination, tmp_path: Path
) -> None:
    with SiteServer(lambda port: events_site(port, pages=2)) as server:
        command = [
            "crawl", *server.site.seeds, *server.resolve_args(), "--data-dir", str(tmp_path / "d"),
            "--delay", "0", "--no-progress", "--json", "--events", destination.url(),
        ]  # fmt: skip
        first = trawl(*command)
        assert first.code == 0, first.err
        again = trawl(*command, "--fresh")
        assert again.code == 0, again.err
    target = parse_events(destination.url())
    assert isinstance(target, NatsTarget | AmqpTarget)
    assert f"--fresh does not empty {target.shown}" in again.err
    events = len(server.site.ground_truth)
    held = destination.messages()
    # JetStream drops the second crawl's events as repeats within its window; a queue
    # keeps both.
    assert len(held) == (events if destination.kind == "nats" else 2 * events)
