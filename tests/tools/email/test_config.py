"""``tools.email`` in config.yml: the issue's keys, and a clear error for each mistake."""

from __future__ import annotations

from typing import Any

import pytest

from bruce.config.loader import parse_config
from bruce.errors import ConfigError

SERVER = {"host": "imap.example.org", "port": 993, "security": "ssl", "user": "me@example.org",
          "password": "${IMAP_PASSWORD}"}


def email(**section: Any) -> dict[str, Any]:
    return {"tools": {"email": {"enabled": True, "address": "me@example.org", "imap": SERVER,
                                "smtp": {**SERVER, "host": "smtp.example.org", "port": 465}, **section}}}


def test_the_issues_example_parses_and_its_passwords_are_secrets():
    config = parse_config(email(allowed_recipients=["Ana@Example.net"]), environ={"IMAP_PASSWORD": "s3cret-pw"})
    section = config.tools.email
    assert section.imap is not None and section.imap.password.get_secret_value() == "s3cret-pw"
    assert section.allowed_recipients == ["ana@example.net"]
    assert "s3cret-pw" in config.secrets()


@pytest.mark.parametrize(("section", "message"), [
    ({"imap": {**SERVER, "security": "none"}}, "security: none (no TLS) is allowed only for a loopback host"),
    ({"imap": {**SERVER, "security": "tls"}}, "tools.email.imap.security"),
    ({"address": "not-an-address"}, "is not an email address"),
    ({"smtp": None}, "tools.email is enabled but smtp is not set"),
    ({"allowed_recipients": ["ana"]}, "'ana' is not an email address"),
    ({"imap": {**SERVER, "pasword": "x"}}, "tools.email.imap.pasword"),
])
def test_mistakes_are_named(section: dict[str, Any], message: str):
    with pytest.raises(ConfigError) as info:
        parse_config(email(**section), environ={"IMAP_PASSWORD": "x"})
    assert message in str(info.value)


def test_none_is_allowed_on_loopback_and_off_needs_nothing():
    parse_config(email(imap={**SERVER, "host": "127.0.0.1", "security": "none"},
                       smtp={**SERVER, "host": "localhost", "security": "none"}), environ={"IMAP_PASSWORD": "x"})
    assert parse_config({"tools": {"email": {"enabled": False}}}, environ={}).tools.email.imap is None
