"""Pairing replies (issue 30, point 11): a stranger writing to the bot cannot make it write back
once per message. Before, 30 messages from a stranger with a pending pairing code drew 30
copies of the code: a way to make the bot send at someone else's pace. Now the code is told at
most once per ten minutes per stranger. Through the real Telegram adapter against the fake Bot
API, with the daemon's real wiring."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes.telegram_api import FakeTelegramAPI

OWNER = 111
STRANGER = 666
OTHER_STRANGER = 667


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
def started(platform_config, api, start_app):
    section = {"enabled": True, "token": api.token, "api_base": api.base_url, "allowed_users": [OWNER],
               "poll_timeout_s": 1, "pairing": True}
    return lambda: start_app(platform_config("telegram", section))


def sent_to(api: FakeTelegramAPI, chat: int) -> list[str]:
    return [c["text"] for c in api.calls_to("sendMessage") if int(c["chat_id"]) == chat]


async def read_all(api: FakeTelegramAPI, settle_s: float = 1.0) -> None:
    """Until Bruce has confirmed every update, then a moment for the replies they started."""
    async with asyncio.timeout(20):
        while api.pending_updates:
            await asyncio.sleep(0.02)
    await asyncio.sleep(settle_s)


async def test_thirty_messages_from_a_stranger_draw_one_pairing_reply(started, api, clock, fake_llm):
    await started()
    for n in range(30):
        api.push_message(STRANGER, STRANGER, f"hello {n}", first_name="Mallory")
    await read_all(api)
    (told,) = sent_to(api, STRANGER)
    assert "bruce pairing approve" in told
    assert fake_llm.requests == []

    clock.advance(seconds=599)
    api.push_message(STRANGER, STRANGER, "still there?")
    await read_all(api)
    assert len(sent_to(api, STRANGER)) == 1

    clock.advance(seconds=2)  # ten minutes after the reply: the same code, told once more
    for n in range(5):
        api.push_message(STRANGER, STRANGER, f"again {n}")
    await read_all(api)
    assert sent_to(api, STRANGER) == [told, told]


async def test_each_stranger_has_its_own_ten_minutes(started, api):
    await started()
    api.push_message(STRANGER, STRANGER, "hi")
    api.push_message(OTHER_STRANGER, OTHER_STRANGER, "hi")
    api.push_message(STRANGER, STRANGER, "hi again")
    await read_all(api)
    assert len(sent_to(api, STRANGER)) == 1 and len(sent_to(api, OTHER_STRANGER)) == 1
    assert sent_to(api, STRANGER) != sent_to(api, OTHER_STRANGER)  # two codes
