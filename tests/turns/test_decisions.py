"""Decisions from buttons: single use, bound to the requesting user, expiring, refused to strangers
and during shutdown; a denial recorded without waiting for the platform."""

from __future__ import annotations

import asyncio

from bruce.app import build_app
from bruce.values import ConversationId, DecisionOutcome
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import rows, say


async def ask_to_write(app, fake_llm, channel, *, sender="u1"):
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})), Step.text("Asked."))
    await say(app, "note milk", sender=sender)
    ((_, request),) = channel.confirmations
    return request


async def test_a_button_approval_runs_the_tool_once(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    fake_llm.add(Step.text("Written."))
    report = await app.worker.decide(ConversationId("test", "c1"), "u1", request.id, True)
    assert report.outcome is DecisionOutcome.APPROVED and report.accepted and request.id in report.text
    await app.worker.wait_idle()
    assert (notes / "todo.md").read_text() == "milk\n"
    assert channel.texts()[-2:] == [f"Done: files.write ran (request {request.id}).", "Written."]
    again = await app.worker.decide(ConversationId("test", "c1"), "u1", request.id, True)
    assert again.outcome is DecisionOutcome.ALREADY_DECIDED and not again.accepted
    await app.worker.wait_idle()
    runs = await rows(app, "SELECT status FROM tool_executions WHERE source = 'confirmation'")
    assert runs == [{"status": "ok"}]
    (row,) = await rows(app, "SELECT status, decided_via FROM pending_confirmations")
    assert row == {"status": "executed", "decided_via": "chat"}


async def test_only_the_requesting_user_may_press_the_button(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    before = list(channel.sent)
    report = await app.worker.decide(ConversationId("test", "c1"), "intruder", request.id, True)
    assert report.outcome is DecisionOutcome.WRONG_USER and "Only the person who asked" in report.text
    wrong_chat = await app.worker.decide(ConversationId("test", "other"), "u1", request.id, True)
    assert wrong_chat.outcome is DecisionOutcome.NOT_FOUND
    forged = await app.worker.decide(ConversationId("test", "c1"), "u1", "x' OR 1=1; --" * 1000, True)
    assert forged.outcome is DecisionOutcome.NOT_FOUND and len(forged.text) < 200
    await app.worker.wait_idle()
    assert not (notes / "todo.md").exists() and channel.sent == before  # nothing posted, nothing run
    (row,) = await rows(app, "SELECT status FROM pending_confirmations")
    assert row["status"] == "pending"


async def test_an_expired_request_cannot_be_approved_by_button(app_factory, fake_llm, channel, notes, clock):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    clock.advance(minutes=11)
    report = await app.worker.decide(ConversationId("test", "c1"), "u1", request.id, True)
    assert report.outcome is DecisionOutcome.EXPIRED
    await app.worker.wait_idle()
    assert not (notes / "todo.md").exists()


async def test_a_button_denial_is_recorded_in_the_conversation(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    report = await app.worker.decide(ConversationId("test", "c1"), "u1", request.id.upper(), False)
    assert report.outcome is DecisionOutcome.DENIED
    await app.worker.wait_idle()
    assert channel.texts()[-1] == f"Denied: files.write will not run (request {request.id})."
    assert not (notes / "todo.md").exists()


async def test_a_stranger_cannot_decide(app_factory, fake_llm, clock):
    telegram = RecordingChannel("telegram")
    base = await app_factory(channels={"telegram": {"allowed_users": ["111"]}})
    app = await build_app(base.config, clock=clock, environ={}, extra_channels=[telegram])
    try:
        report = await app.worker.decide(ConversationId("telegram", "5"), "999", "deadbeef", True)
        assert report.outcome is DecisionOutcome.WRONG_USER and fake_llm.requests == []
    finally:
        await app.stop()


async def test_a_button_during_shutdown_decides_nothing(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    await app.worker.close(1)
    report = await app.worker.decide(ConversationId("test", "c1"), "u1", request.id, True)
    assert report.outcome is DecisionOutcome.UNAVAILABLE and "try again" in report.text
    assert not (notes / "todo.md").exists()
    assert [r["status"] for r in await rows(app, "SELECT status FROM pending_confirmations")] == ["pending"]


async def test_a_denial_does_not_wait_for_the_platform(make_config, fake_llm, notes, clock):
    slow = _SlowChannel("test")
    app = await build_app(make_config(tools={"files": {"notes_dir": str(notes)}}), clock=clock, environ={},
                          extra_channels=[slow])
    await app.start()
    try:
        request = await ask_to_write(app, fake_llm, slow)
        slow.hold.clear()
        report = await asyncio.wait_for(app.worker.decide(ConversationId("test", "c1"), "u1", request.id, False), 1)
        assert report.outcome is DecisionOutcome.DENIED and not slow.texts()[-1].startswith("Denied")
        slow.hold.set()
        await app.worker.wait_idle()
        assert slow.texts()[-1].startswith("Denied: files.write")
    finally:
        await app.stop()


class _SlowChannel(RecordingChannel):
    """A platform that takes as long as the test says to accept a message."""

    def __init__(self, name):
        super().__init__(name)
        self.hold = asyncio.Event()
        self.hold.set()

    async def send_text(self, chat_id, text):
        await self.hold.wait()
        await super().send_text(chat_id, text)
