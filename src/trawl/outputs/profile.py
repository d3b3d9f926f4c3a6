"""Credentials and region from the AWS shared files, for an environment that sets none.

obstore reads the environment (``AWS_ACCESS_KEY_ID``, ``AWS_REGION``...), web identity
tokens and the ECS and EC2 instance roles, but not the files the AWS CLI and SDKs share:
``~/.aws/credentials`` and ``~/.aws/config`` (or ``AWS_SHARED_CREDENTIALS_FILE`` and
``AWS_CONFIG_FILE``), profile ``AWS_PROFILE`` (default ``default``). This reads their
static keys and region, as those tools do, when the environment holds none.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

_KEYS = {
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
}


def _section(path: Path, name: str) -> dict[str, str]:
    """The keys of section ``name`` of the INI file ``path`` (none if it is missing or
    unreadable)."""
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error):
        return {}
    return dict(parser[name]) if parser.has_section(name) else {}


def shared_profile() -> dict[str, str]:
    """obstore config keys (``access_key_id``, ``secret_access_key``, ``session_token``,
    ``region``) for what the environment leaves out and the profile gives."""
    profile = os.environ.get("AWS_PROFILE") or "default"
    home = Path.home() / ".aws"
    credentials = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials")
    config_file = Path(os.environ.get("AWS_CONFIG_FILE") or home / "config")
    config = _section(config_file, profile if profile == "default" else f"profile {profile}")
    found: dict[str, str] = {}
    if not os.environ.get("AWS_ACCESS_KEY_ID"):
        given = {**config, **_section(credentials, profile)}
        if given.get("aws_access_key_id") and given.get("aws_secret_access_key"):
            found.update((_KEYS[name], given[name]) for name in _KEYS if given.get(name))
    region_set = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if config.get("region") and not region_set:
        found["region"] = config["region"]
    return found
