"""Issue 30, point 12: a JSON ``"\\ud800"`` escape decodes to a lone surrogate, which no UTF-8
encoder takes. A Telegram webhook update holding one was answered 500 (so Telegram sent it
again, forever); the same text by polling, or typed into the web chat, failed the same way.
Now it is read with U+FFFD in the surrogate's place, stored and answered like any message."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.app import build_app
from channels.web_chat import WebChat
from tests.fakes.llm_server import Step
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.helpers import rows

OWNER = 111
SECRET = "s3cret-token"
TOKEN = "web-chat-admin-token-0123456789"


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
def started(platform_config, start_app, api):
    def start(**telegram):
        section = {"enabled": True, "token": api.token, "api_base": api.base_url, "allowed_users": [OWNER],
                   "poll_timeout_s": 1, **telegram}
        return start_app(platform_config("telegram", section))
    return start


def update(text: str) -> dict:
    return {"update_id": 7, "message": {"message_id": 1, "date": 1_700_000_000, "text": text,
                                        "chat": {"id": OWNER, "type": "private"},
                                        "from": {"id": OWNER, "is_bot": False, "first_name": "Ana\ud800"}}}


async def stored_texts(app) -> list[str]:
    await app.worker.wait_idle()
    return [r["text"] for r in await rows(app, "SELECT text FROM messages WHERE direction = 'in'")]


async def test_a_webhook_update_with_a_lone_surrogate_is_answered_200_and_handled(started, api, fake_llm):
    app = await started(mode="webhook", webhook={"url": "https://bruce.example.org/tg", "secret_token": SECRET,
                                                  "port": 0})
    url = f"http://127.0.0.1:{app.channels['telegram'].webhook_port}/telegram/webhook"
    body = json.dumps(update("hi \ud800 there"))  # ensure_ascii: the surrogate travels as the escape \ud800
    assert "\\ud800" in body
    fake_llm.add(Step.text("Got it."))
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers={
            "X-Telegram-Bot-Api-Secret-Token": SECRET, "Content-Type": "application/json"}) as response:
        assert response.status == 200
    assert await stored_texts(app) == ["hi \ufffd there"]
    sent = await api.wait_for("sendMessage")
    assert sent[-1]["text"] == "Got it."


async def test_a_polled_update_with_a_lone_surrogate_is_handled_once(started, api, fake_llm):
    fake_llm.add(Step.text("Got it."))
    app = await started()
    api.push_message(OWNER, OWNER, "hi \ud800 there")
    sent = await api.wait_for("sendMessage")
    assert sent[-1]["text"] == "Got it."
    assert await stored_texts(app) == ["hi \ufffd there"]


async def test_a_web_chat_message_with_a_lone_surrogate_is_stored(make_config, clock, fake_llm):
    chat = WebChat(clock=clock)
    app = await build_app(make_config(), clock=clock, environ={}, extra_channels=[chat])
    await app.start()
    server = AdminServer(store=app.store, clock=clock, token=TOKEN, host="127.0.0.1", port=0,
                         chat_routes=chat.routes())
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        fake_llm.add(Step.text("Got it."))
        response = await client.post("/api/chat/messages", data=json.dumps({"text": "hi \ud800 there"}),
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        assert response.status == 202
        assert await stored_texts(app) == ["hi \ufffd there"]
    finally:
        await client.close()
        await app.stop()
