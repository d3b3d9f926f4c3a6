"""The upload benchmark runs: a small file put to moto's server, its figures printed."""

from __future__ import annotations

import json

import pytest
from bench.upload import main


def test_the_upload_benchmark_puts_a_file_and_prints_its_figures(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "bench")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "bench")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert main(["--mb", "2", "--runs", "2", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 2
    for run in runs:
        assert run["megabytes"] == pytest.approx(2.1, abs=0.05)
        assert run["megabytes_per_second"] > 0
        assert run["cpu_ms_per_megabyte"] > 0
