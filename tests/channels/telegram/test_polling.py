"""channels.telegram.polling: the polling loop against the fake Bot API, with a stand-in for the
channel's side (reading an update, handling it); the channel end to end: tests/channels/test_telegram.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from bruce.errors import ConfigError, StoreError
from channels.telegram.api import BotAPI
from channels.telegram.polling import Poller
from tests.fakes.clock import FakeClock
from tests.fakes.telegram_api import FakeTelegramAPI


class Reader:
    """The aiogram side as the poller uses it: an update read as it came (None: unreadable)."""

    def read_update(self, item: dict[str, Any]) -> dict[str, Any]:
        if "message" not in item:
            raise ValueError("not an update aiogram knows")
        return item


class Channel:
    def __init__(self, connects: list[bool | Exception] | None = None) -> None:
        self.handled: list[str] = []
        self.albums: list[list[str]] = []
        self.received = 0
        self.fail_store: set[str] = set()
        self.connects = connects or []

    async def connect(self) -> bool:
        outcome = self.connects.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def bot(self) -> Reader:
        return Reader()

    async def handle(self, update: dict[str, Any]) -> None:
        text = update["message"]["text"]
        if text in self.fail_store:
            self.fail_store.discard(text)
            raise StoreError("database is locked")
        self.handled.append(text)

    async def handle_album(self, updates: list[dict[str, Any]]) -> None:
        self.albums.append([update["message"]["text"] for update in updates])
        self.handled.append("+".join(self.albums[-1]))

    def got(self) -> None:
        self.received += 1


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


async def polling(api: FakeTelegramAPI, channel: Channel, *, connected: bool = True,
                  clock: FakeClock | None = None) -> tuple[Poller, BotAPI]:
    bot_api = BotAPI(api.token, api.base_url)
    poller = Poller(bot_api, poll_timeout_s=1, clock=clock or FakeClock(), connect=channel.connect, bot=channel.bot,
                    handle=channel.handle, handle_album=channel.handle_album, received=channel.got)
    poller.start(connected)
    return poller, bot_api


async def until(predicate, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_updates_are_handled_in_order_after_the_webhook_is_deleted(api):
    channel = Channel()
    for text in ("one", "two", "three"):
        api.push_message(111, 111, text)
    poller, bot_api = await polling(api, channel)
    try:
        await until(lambda: len(channel.handled) == 3)
    finally:
        await poller.stop()
        await bot_api.close()
    assert channel.handled == ["one", "two", "three"] and channel.received >= 1
    assert api.calls_to("deleteWebhook") and api.calls_to("getUpdates")[0]["allowed_updates"] == [
        "message", "edited_message", "callback_query"]


async def test_an_update_that_cannot_be_stored_is_fetched_again(api):
    channel = Channel()
    channel.fail_store = {"two"}
    for text in ("one", "two", "three"):
        api.push_message(111, 111, text)
    poller, bot_api = await polling(api, channel)
    try:
        await until(lambda: len(channel.handled) == 3)
    finally:
        await poller.stop()
        await bot_api.close()
    assert channel.handled == ["one", "two", "three"]


async def test_an_unreadable_update_is_skipped(api):
    channel = Channel()
    api.push_update({"poll": {"id": "1"}})
    api.push_message(111, 111, "after it")
    poller, bot_api = await polling(api, channel)
    try:
        await until(lambda: channel.handled == ["after it"])
    finally:
        await poller.stop()
        await bot_api.close()


async def test_not_connected_at_start_it_connects_again_then_polls(api):
    channel = Channel(connects=[False, True])
    api.push_message(111, 111, "hello")
    poller, bot_api = await polling(api, channel, connected=False)
    try:
        await until(lambda: channel.handled == ["hello"])
    finally:
        await poller.stop()
        await bot_api.close()
    assert channel.connects == []


async def test_a_refused_token_stops_polling(api):
    for channel, connected in ((Channel(connects=[ConfigError("channels.telegram.token was refused")]), False),
                               (Channel(), True)):
        api.revoked = connected  # the second: getMe answered, then the token was revoked
        with capture_logs() as logs:
            poller, bot_api = await polling(api, channel, connected=connected)
            try:
                await until(lambda: any(entry["event"] == "telegram.stopped" for entry in logs))
            finally:
                await poller.stop()
                await bot_api.close()
    assert api.calls_to("getUpdates") == []  # neither got as far as polling


def album_item(api: FakeTelegramAPI, text: str, group: str, *, chat: int = 111) -> int:
    """A message of an album (the poller goes by the raw update; the stand-in reads ``text``)."""
    return api.push_update({"message": {"message_id": 1, "date": 1, "chat": {"id": chat, "type": "private"},
                                        "text": text, "media_group_id": group}})


async def test_an_album_in_one_answer_is_handled_as_one_between_the_messages_around_it(api):
    channel = Channel()
    api.push_message(111, 111, "before")
    for text in ("a", "b", "c"):
        album_item(api, text, "g1")
    album_item(api, "other album", "g2")
    api.push_message(111, 111, "after")
    poller, bot_api = await polling(api, channel)
    try:
        await until(lambda: len(channel.handled) == 4)
    finally:
        await poller.stop()
        await bot_api.close()
    assert channel.handled == ["before", "a+b+c", "other album", "after"]
    assert channel.albums == [["a", "b", "c"], ["other album"]]


async def test_an_album_at_the_end_of_an_answer_waits_for_the_rest_and_stays_unconfirmed(api):
    """The album's first items end a getUpdates answer: the poller waits a quiet second (the fake
    clock), asks again from the album's first update, and sees the rest that came meanwhile."""
    channel, clock = Channel(), FakeClock()
    first = album_item(api, "a", "g1")
    seen_pending: list[list[int]] = []

    def rest_arrives() -> None:
        seen_pending.append([u["update_id"] for u in api.pending_updates])
        album_item(api, "b", "g1")

    clock.on_sleep.append(rest_arrives)
    poller, bot_api = await polling(api, channel, clock=clock)
    try:
        await until(lambda: channel.handled == ["a+b"])
    finally:
        await poller.stop()
        await bot_api.close()
    assert seen_pending == [[first]]  # not confirmed while it waited: a crash then loses nothing
    assert 1.0 in clock.sleeps
    assert any(call.get("offset") == first for call in api.calls_to("getUpdates"))


async def test_an_album_that_cannot_be_stored_is_fetched_again_whole(api):
    channel = Channel()
    calls: list[list[str]] = []

    async def flaky(updates: list[dict[str, Any]]) -> None:
        calls.append([u["message"]["text"] for u in updates])
        if len(calls) == 1:
            raise StoreError("database is locked")
        channel.handled.append("+".join(calls[-1]))

    channel.handle_album = flaky  # type: ignore[method-assign]
    for text in ("a", "b"):
        album_item(api, text, "g1")
    api.push_message(111, 111, "after")
    poller, bot_api = await polling(api, channel)
    try:
        await until(lambda: channel.handled == ["a+b", "after"])
    finally:
        await poller.stop()
        await bot_api.close()
    assert calls == [["a", "b"], ["a", "b"]]
