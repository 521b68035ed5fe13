"""Login limits (issue 30, point 9): guessing the admin token is bounded, however many addresses
the guesser has, and the token is long enough that a bounded number of guesses cannot find it.

A local user can bind any 127.x address: with a limit per address only, every new address
brought five more guesses a minute, without end. And a wrong Bearer token on the JSON API was
never counted at all. Over real sockets from several loopback source addresses."""

from __future__ import annotations

import aiohttp
import pytest
import yaml

from bruce.admin import AdminServer
from bruce.admin.auth import resolve_token
from bruce.cli.main import main
from bruce.errors import ConfigError
from tests.helpers import ADMIN_TOKEN


@pytest.fixture
async def served(app):
    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0)
    url = await server.start()
    yield url
    await server.stop()


async def login(url: str, token: str, source: str) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with aiohttp.ClientSession(connector=connector) as http, http.post(
            f"{url}/login", data={"token": token}, allow_redirects=False) as response:
        return response.status


async def bearer(url: str, token: str, source: str) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with aiohttp.ClientSession(connector=connector) as http, http.get(
            f"{url}/api/tool-executions", headers={"Authorization": f"Bearer {token}"}) as response:
        return response.status


async def test_guesses_spread_over_many_loopback_addresses_hit_one_global_budget(served, clock):
    for n in range(2, 7):  # 5 addresses x 4 guesses: each stays under its own limit of 5
        for _ in range(4):
            assert await login(served, "guess", f"127.0.0.{n}") == 401
    assert await login(served, ADMIN_TOKEN, "127.0.0.9") == 429  # a fresh address, even with the token
    assert await bearer(served, ADMIN_TOKEN, "127.0.0.10") == 429
    clock.advance(seconds=299)
    assert await login(served, ADMIN_TOKEN, "127.0.0.11") == 429
    clock.advance(seconds=2)
    assert await login(served, ADMIN_TOKEN, "127.0.0.11") == 303  # the lockout is over


async def test_wrong_bearer_tokens_count_as_failed_logins(served, clock):
    for _ in range(5):
        assert await bearer(served, "guess", "127.0.0.3") == 401
    assert await bearer(served, ADMIN_TOKEN, "127.0.0.3") == 429
    assert await login(served, ADMIN_TOKEN, "127.0.0.3") == 429
    assert await bearer(served, ADMIN_TOKEN, "127.0.0.4") == 200  # another address still may
    clock.advance(seconds=61)
    assert await bearer(served, ADMIN_TOKEN, "127.0.0.3") == 200


def _config(tmp_path, token: str):
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "bruce.db")},
                                    "admin": {"port": 0, "token": token}}))
    return path


@pytest.mark.parametrize("command", [["config", "check"], ["run"]])
def test_a_token_under_32_characters_is_refused_by_config_check_and_run_alike(tmp_path, capsys, monkeypatch,
                                                                             command):
    async def started(*_args):
        raise AssertionError("bruce run went past its config check")

    monkeypatch.setattr("bruce.cli.main._serve", started)  # a run that would start fails here instead
    path = _config(tmp_path, "x" * 31)
    assert main(["--config", str(path), *command]) == 2
    assert "admin.token: at least 32 characters (it has 31)" in capsys.readouterr().err
    assert not (tmp_path / "bruce.db").exists()


def test_a_token_of_32_characters_passes_and_a_generated_one_is_at_least_that(tmp_path, capsys):
    assert main(["--config", str(_config(tmp_path, "x" * 32)), "config", "check"]) == 0
    token, path = resolve_token(None, host="127.0.0.1", data_dir=tmp_path / "data")
    assert path is not None and len(token) >= 32
    with pytest.raises(ConfigError, match="admin.token: at least 32 characters"):
        resolve_token("y" * 31, host="0.0.0.0", data_dir=tmp_path)
