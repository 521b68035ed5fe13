"""channels.telegram.webhook: the webhook server, registered with the fake Bot API, which then
posts updates to it (the channel end to end: tests/channels/test_telegram.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from bruce.config.schema import TelegramWebhookConfig
from bruce.errors import BruceError, StoreError
from channels.telegram.api import BotAPI
from channels.telegram.webhook import WebhookServer
from tests.fakes.telegram_api import FakeTelegramAPI

SECRET = "webhook-secret-0123456789"


class Reader:
    def read_update(self, item: dict[str, Any]) -> dict[str, Any]:
        if "message" not in item:
            raise ValueError("not an update")
        return item


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
async def webhook(api):
    handled: list[str] = []
    received: list[bool] = []

    async def bot() -> Reader:
        return Reader()

    async def handle(update: dict[str, Any]) -> None:
        if update["message"]["text"] == "locked":
            raise StoreError("database is locked")
        handled.append(update["message"]["text"])

    bot_api = BotAPI(api.token, api.base_url)
    hook = TelegramWebhookConfig(url="http://127.0.0.1:{port}/telegram/webhook", secret_token=SECRET, port=0)
    async def handle_album(updates: list[dict[str, Any]]) -> None:
        texts = [update["message"]["text"] for update in updates]
        if "locked" in texts:
            raise StoreError("database is locked")
        handled.append("+".join(texts))

    server = WebhookServer(bot_api, hook, bot=bot, handle=handle, handle_album=handle_album,
                           received=lambda: received.append(True), album_quiet_s=0.3)
    yield SimpleNamespace(server=server, handled=handled, received=received)
    await server.stop()
    await bot_api.close()


async def start(webhook: SimpleNamespace, api: FakeTelegramAPI) -> None:
    await webhook.server.start()
    assert webhook.server.port
    api.webhook["url"] = f"http://127.0.0.1:{webhook.server.port}/telegram/webhook"  # the port given for 0


def message(text: str) -> dict[str, Any]:
    return {"message": {"message_id": 1, "date": 1_700_000_000, "text": text,
                        "chat": {"id": 111, "type": "private"}, "from": {"id": 111, "is_bot": False,
                                                                          "first_name": "Ana"}}}


async def test_it_registers_with_telegram_and_takes_updates_with_the_secret(webhook, api):
    await start(webhook, api)
    assert api.webhook["secret_token"] == SECRET
    assert api.webhook["allowed_updates"] == ["message", "edited_message", "callback_query"]
    assert await api.deliver_webhook(message("hello")) == (200, '{"ok": true}')
    assert webhook.handled == ["hello"] and webhook.received == [True]


async def test_a_request_without_the_secret_is_refused(webhook, api):
    await start(webhook, api)
    status, _ = await api.deliver_webhook(message("hello"), secret_token="wrong")
    assert status == 401 and webhook.handled == [] and webhook.received == []


async def test_what_is_not_an_update_is_a_bad_request_and_an_unstored_one_is_asked_again(webhook, api):
    await start(webhook, api)
    assert (await api.deliver_webhook({"poll": {"id": "1"}}))[0] == 400
    assert (await api.deliver_webhook(message("locked")))[0] == 503


async def test_a_refused_registration_is_a_start_up_error(webhook, api):
    api.fail_next("setWebhook", status=400, description="Bad Request: bad webhook: HTTPS url must be provided")
    with pytest.raises(BruceError, match="Telegram refused the webhook .*HTTPS url must be provided"):
        await webhook.server.start()


def album_item(text: str, group: str) -> dict[str, Any]:
    update = message(text)
    update["message"]["media_group_id"] = group
    return update


async def test_an_albums_requests_are_handled_as_one_and_answered_together(webhook, api):
    await start(webhook, api)
    answers = await asyncio.gather(*(api.deliver_webhook(album_item(text, "g1")) for text in ("a", "b", "c")))
    assert [status for status, _ in answers] == [200, 200, 200]
    assert len(webhook.handled) == 1 and sorted(webhook.handled[0].split("+")) == ["a", "b", "c"]


async def test_an_album_that_cannot_be_stored_is_asked_again_for_every_item(webhook, api):
    await start(webhook, api)
    answers = await asyncio.gather(*(api.deliver_webhook(album_item(text, "g2")) for text in ("locked", "b")))
    assert [status for status, _ in answers] == [503, 503] and webhook.handled == []
