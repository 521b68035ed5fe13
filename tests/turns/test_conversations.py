"""Conversations: the order within a conversation, posts that need no model, the doors once
stopping, and channels built from config."""

from __future__ import annotations

import asyncio
import json

import pytest

from bruce.app import CHANNEL_FACTORIES, build_app
from bruce.values import ConversationId
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows, say


async def test_a_proactive_turn_waits_for_the_conversations_turn_in_flight(app, fake_llm, channel):
    seen = []

    def responder(body):
        seen.append(body["messages"][-1]["content"])
        return Step.delay(0.1, Step.text("answer")) if len(seen) == 1 else Step.text("briefing")

    fake_llm.responder = responder
    handle = await app.worker.deliver(incoming(app, "a question"))
    while not seen:  # the chat turn is in flight (its model call has started)
        await asyncio.sleep(0.005)
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "The briefing.")
    await handle
    assert channel.texts() == ["answer", "briefing"] and outcome.ok
    assert seen[0] == "a question" and "The briefing." in seen[1]


async def test_post_sends_a_stored_text_without_the_model(app, fake_llm, channel):
    message_id = await app.worker.post(ConversationId("test", "c2"), "Reminder: take the bins out.")
    assert channel.sent == [("c2", "Reminder: take the bins out.")] and fake_llm.requests == []
    (row,) = await rows(app, "SELECT id, text, status, kind FROM messages")
    assert row == {"id": message_id, "text": "Reminder: take the bins out.", "status": "sent", "kind": "chat"}
    with pytest.raises(ValueError, match="empty"):
        await app.worker.post(ConversationId("test", "c2"), "  ")
    fake_llm.add(Step.text("Great."))
    await say(app, "done", chat="c2")
    assert {"role": "assistant", "content": "Reminder: take the bins out."} in fake_llm.requests[0]["messages"]


async def test_channels_are_built_from_their_config_section(make_config, clock, fake_llm, monkeypatch):
    built = []

    def factory(section, context):
        channel = RecordingChannel("telegram")
        built.append((section.allowed_users, channel))
        return channel

    monkeypatch.setitem(CHANNEL_FACTORIES, "telegram", factory)
    config = make_config(channels={"telegram": {"enabled": True, "allowed_users": [42], "token": "t"}})
    app = await build_app(config, clock=clock, environ={})
    try:
        await app.start()
        ((allowed, telegram),) = built
        assert allowed == ["42"] and app.channels == {"telegram": telegram}
        assert not any("no telegram adapter" in w for w in app.warnings())
        assert await app.worker.deliver(incoming(app, "hi", channel="telegram", sender="7")) is None
        await say(app, "hi", channel="telegram", sender="42")
        assert telegram.texts() == ["Sorry, I only talk to my owner.", "ok"]  # the stranger: one refusal
    finally:
        await app.stop()
    assert json.dumps(built[0][0]) == '["42"]'


async def test_an_enabled_channel_without_an_adapter_is_reported(make_config, clock, monkeypatch):
    monkeypatch.delitem(CHANNEL_FACTORIES, "discord")  # as for a platform this version has no adapter for
    config = make_config(channels={"discord": {"enabled": True}})
    app = await build_app(config, clock=clock, environ={})
    try:
        assert any(w.startswith("channels.discord.enabled is true, but this version") for w in app.warnings())
        assert app.channels == {}
    finally:
        await app.stop()


async def test_proactive_turns_and_posts_are_refused_once_stopping(app, fake_llm):
    from bruce.errors import ShuttingDown

    await app.stop()
    with pytest.raises(ShuttingDown):
        await app.worker.run_proactive(ConversationId("test", "c1"), "The briefing.")
    with pytest.raises(ShuttingDown):
        await app.worker.post(ConversationId("test", "c1"), "Reminder.")
    assert fake_llm.requests == []


async def test_a_proactive_turn_in_flight_at_shutdown_is_drained_not_lost(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"shutdown_timeout_s": 5})
    fake_llm.add(Step.delay(0.2, Step.text("Your briefing.")))
    job = asyncio.create_task(app.worker.run_proactive(ConversationId("test", "c1"), "The briefing."))
    while not fake_llm.requests:
        await asyncio.sleep(0.005)
    await app.stop()
    outcome = await job
    assert outcome.ok and channel.texts() == ["Your briefing."]
    assert [r["status"] for r in await rows(app, "SELECT status FROM turns")] == ["ok"]
