"""Per-site settings across the workers of a PostgreSQL crawl: ``trawl worker`` takes
the sites from the crawl's stored policy and each secret from its own environment, so
every worker sends the site's headers; a worker without the variable refuses to start
in one line, and the store never holds the secret."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pg import URL as PG_URL
from pg import crawl_name
from test_workers import Workers, slowed
from trawl.demo import SiteServer
from trawl.policy import POLICY_KEY
from trawl.store.location import StoreLocation

__all__ = ["crawl_name"]


def environment(token: str | None) -> dict[str, str]:
    """This process's environment with ``FLEET_TOKEN`` set to ``token`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "FLEET_TOKEN"}
    if token is not None:
        env["FLEET_TOKEN"] = token
    return env


@pytest.fixture
def server() -> Iterator[SiteServer]:
    with SiteServer(slowed(0.03, hosts=8, pages=10)) as s:
        yield s


def test_every_worker_sends_the_sites_headers_with_its_own_secret(
    server: SiteServer, crawl_name: str, tmp_path: Path
) -> None:
    domain = server.site.hosts[0].removeprefix("www.")
    config = tmp_path / "sites.toml"
    config.write_text(
        f'[sites."*.{domain}"]\n'
        'headers = {"X-Site" = "fleet", "X-Token" = {env = "FLEET_TOKEN"}}\n'
    )
    fleet = Workers(server, crawl_name, tmp_path)
    fleet.policy += ["--config", str(config)]
    try:
        first = fleet.begin(3, environment("token-of-w0"))
        bare = fleet.start(3, environment(None))  # no FLEET_TOKEN in its environment
        code, _, err = fleet.end(bare)
        assert code == 2, err
        assert err.strip().splitlines() == [
            f"trawl: error: site '*.{domain}': header 'X-Token': environment variable "
            "FLEET_TOKEN is not set"
        ]
        second = fleet.start(3, environment("token-of-w1"))
        results = {name: fleet.end(name) for name in (first, second)}
    finally:
        fleet.kill_all()
    for name, (code, out, err) in results.items():
        assert code == 0, (name, err)
        assert json.loads(out)["state"] == "done", name
        assert "token-of" not in out + err
    fetched = {name: json.loads(out)["fetched_this_run"] for name, (_, out, _) in results.items()}
    assert all(count > 0 for count in fetched.values()), fetched
    requests = server.requests
    assert {r.host for r in requests} == set(server.site.hosts)
    for record in requests:
        assert record.headers.get("X-Site") == "fleet", (record.host, record.path)
    tokens = [record.headers.get("X-Token") for record in requests]
    assert set(tokens) == {"token-of-w0", "token-of-w1"}  # each worker's own secret

    async def stored_policy() -> str:
        async with StoreLocation(tmp_path, PG_URL, crawl_name).open(readonly=True) as store:
            return await store.get_meta(POLICY_KEY) or ""

    policy = asyncio.run(stored_policy())
    assert "token-of" not in policy
    assert json.loads(policy)["sites"][f"*.{domain}"]["headers"]["X-Token"] == {
        "env": "FLEET_TOKEN"
    }
