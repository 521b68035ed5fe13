"""The doctor's check of the admin page: its port, where it listens, its token."""

from __future__ import annotations

import socket

from bruce.cli.checks.admin import MIN_ADMIN_TOKEN, check_admin

LONG = "a-long-enough-admin-token-0123456789"


def lines(make_config, raw=None, **admin) -> list[str]:
    return [f.line() for f in check_admin(make_config(admin={"enabled": True, "port": 0, **admin}), raw or {})]


def test_a_free_local_port_and_a_long_token_are_ticks(make_config):
    assert lines(make_config, {"admin": {"token": "${ADMIN}"}}, token=LONG) == [
        "✓ admin: 127.0.0.1:0 is free", "✓ admin: token from $ADMIN is set"]


def test_a_port_in_use_is_a_warning(make_config):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        first = lines(make_config, port=port, token=LONG)[0]
    assert first.startswith(f"! admin: 127.0.0.1:{port} is in use")


def test_no_token_is_fine_locally_and_blocks_beyond_this_machine(make_config, tmp_path):
    assert lines(make_config)[1].startswith("✓ admin: no token set; one is generated at the first start into "
                                            f"{tmp_path / 'admin.token'}")
    beyond = lines(make_config, host="0.0.0.0")
    assert beyond[1].startswith("! admin: listens on 0.0.0.0, beyond this machine")
    assert beyond[2].startswith("✗ admin: no token, and the page listens beyond this machine — fix: ")


def test_a_short_token_is_refused_without_being_shown(make_config):
    (_, short) = lines(make_config, token="shortish")
    assert short == (f"✗ admin: the token from **** is 8 characters — fix: use at least {MIN_ADMIN_TOKEN}: "
                     "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")


def test_a_disabled_page_is_not_checked(make_config):
    assert [f.line() for f in check_admin(make_config(admin={"enabled": False}), {})] == ["– admin: disabled"]
