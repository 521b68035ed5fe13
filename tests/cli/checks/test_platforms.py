"""The doctor's checks of the chat platforms' tokens and allow-lists, and of MCP (the daemon over its
socket: tests/channels/test_telegram.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bruce.cli.checks.platforms import check_channels, check_mcp

GOOD = "111111:good-telegram-token-value"


@pytest.fixture
async def telegram() -> AsyncIterator[str]:
    async def get_me(request: web.Request) -> web.Response:
        if request.match_info["token"] != GOOD:
            return web.json_response({"ok": False, "description": "Unauthorized"}, status=401)
        return web.json_response({"ok": True, "result": {"username": "doctor_bot"}})

    app = web.Application()
    app.router.add_get("/bot{token}/getMe", get_me)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def telegram_config(make_config, api_base: str, **section):
    return make_config(channels={"telegram": {"enabled": True, "api_base": api_base, **section}})


async def test_a_working_token_and_an_allow_list_are_ticks(make_config, telegram):
    config = telegram_config(make_config, telegram, token=GOOD, allowed_users=[1])
    found = await check_channels(config, {"channels": {"telegram": {"token": "${TG}"}}}, 5)
    assert [f.line() for f in found] == ["✓ telegram: token from $TG works (bot @doctor_bot)",
                                         "✓ telegram: 1 allowed user(s)", "– discord: disabled"]


async def test_a_refused_token_and_pairing_only_say_what_to_do(make_config, telegram):
    config = telegram_config(make_config, telegram, token="999:revoked-token-value-0000", pairing=True)
    refused, pairing, _ = await check_channels(config, {}, 5)
    assert refused.line() == ("✗ telegram: token from ****0000 refused (401: Unauthorized) — fix: put the bot's "
                              "current token in channels.telegram.token")
    assert pairing.mark == "!" and "only paired users" in pairing.text


async def test_no_token_and_nobody_allowed_block_start_up(make_config, telegram):
    config = telegram_config(make_config, telegram)
    no_token, nobody, _ = await check_channels(config, {"channels": {"telegram": {"token": "${TG}"}}}, 5)
    assert no_token.line().startswith("✗ telegram: no token ($TG is empty) — fix: set TG to the bot token")
    assert nobody.line().startswith("✗ telegram: allowed_users is empty: nobody can talk to Bruce")


async def test_an_unreachable_platform_is_named_without_the_token(make_config):
    config = telegram_config(make_config, "http://127.0.0.1:1", token=GOOD, allowed_users=[1])
    (finding, *_) = await check_channels(config, {}, 5)
    assert finding.line().startswith("✗ telegram: token from ****alue cannot connect to 127.0.0.1:1")
    assert GOOD not in finding.line()


def test_mcp_servers_are_counted_not_checked(make_config):
    assert [f.line() for f in check_mcp(make_config())] == ["– MCP: none configured"]
    config = make_config(mcp_servers={"one": {"command": "python"}})
    assert [f.line() for f in check_mcp(config)] == ["– MCP: 1 server(s) configured; not checked by doctor yet"]
