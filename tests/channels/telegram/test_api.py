"""channels.telegram.api: the Bot API's control calls against the fake Bot API on 127.0.0.1."""

from __future__ import annotations

import socket

import pytest

from bruce.errors import ConfigError
from channels.telegram.api import BotAPI, Refused, Unreachable, check_token
from tests.fakes.telegram_api import FakeTelegramAPI


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


async def test_a_call_returns_its_result(api):
    bot = BotAPI(api.token, api.base_url)
    try:
        me = await bot.call("getMe", {})
        assert me["username"] == api.bot_username and me["id"] == api.bot_id
        assert await bot.call("deleteWebhook", {"drop_pending_updates": False}) is True
    finally:
        await bot.close()
    assert api.calls_to("deleteWebhook") == [{"drop_pending_updates": False}]


async def test_a_refusal_carries_its_status_description_and_wait(api):
    bot = BotAPI(api.token, api.base_url)
    api.fail_next("getUpdates", status=429, description="Too Many Requests: retry after 7", retry_after=7)
    try:
        with pytest.raises(Refused) as refused:
            await bot.call("getUpdates", {})
    finally:
        await bot.close()
    assert (refused.value.status, refused.value.retry_after) == (429, 7.0)
    assert refused.value.description == "Too Many Requests: retry after 7"


@pytest.mark.parametrize(("body", "description"), [
    ("<html>bad gateway</html>", "not a JSON answer"), ("[1, 2]", "not a Bot API answer"),
    ("[" * 100_000, "not a JSON answer")])
async def test_an_answer_that_is_not_the_bot_api_is_a_refusal(api, body, description):
    bot = BotAPI(api.token, api.base_url)
    api.answer_next_raw("getMe", body, status=502)
    try:
        with pytest.raises(Refused) as refused:
            await bot.call("getMe", {})
    finally:
        await bot.close()
    assert (refused.value.status, refused.value.description) == (502, description)


async def test_no_answer_at_all_is_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bot = BotAPI("123:abc", f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(Unreachable):
            await bot.call("getMe", {}, timeout=5)
    finally:
        await bot.close()


@pytest.mark.parametrize("token", ["", "123456", "abc:def", "123456:", "123 456:abc", "123456:ab c"])
def test_a_token_of_the_wrong_shape_is_named(token):
    with pytest.raises(ConfigError, match="channels.telegram.token: not a Telegram bot token"):
        check_token(token)


def test_a_token_of_the_right_shape_passes():
    check_token("123456:ABC-def_ghi")
