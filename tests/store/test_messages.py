"""Conversations, messages, session summaries and turns: a message stored once however often
the platform delivers it, what a turn sees, and how turns end (the outbox's rows:
test_outbound.py)."""

from __future__ import annotations

import pytest

from bruce.errors import StoreError
from bruce.store import Store
from bruce.values import Direction, MessageKind, MessageStatus, ToolStatus, TurnSource, TurnStatus
from tests.store.test_audit import execution

CONV = "test:1"


async def inbound(store, text: str, platform_id: str | None = None, conversation_id: str = CONV) -> int:
    await store.messages.ensure_conversation(conversation_id, *conversation_id.split(":", 1))
    message_id, _ = await store.messages.add_inbound(conversation_id, sender_id="u", text=text,
                                                     platform_message_id=platform_id or text)
    return int(message_id)


async def test_a_redelivered_platform_message_is_the_stored_one(store):
    first = await inbound(store, "hi", "p1")
    again, new = await store.messages.add_inbound(CONV, sender_id="u", text="hi", platform_message_id="p1")
    assert (again, new) == (first, False)
    found = await store.messages.inbound_by_platform_id(CONV, "p1")
    assert found is not None and (found.id, found.direction, found.status) == (first, Direction.IN,
                                                                             MessageStatus.PENDING)
    assert await store.messages.inbound_by_platform_id(CONV, "p2") is None
    assert await store.messages.inbound_by_platform_id("test:2", "p1") is None
    assert await store.messages.max_id() == first


async def test_a_chats_first_message_makes_its_conversation_in_the_same_write(store):
    """``where``: the conversation's row comes with its first message, all or nothing; a write that fails
    leaves neither (and the next message of that chat makes the row)."""
    await store.database.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON messages"
                                 " BEGIN SELECT RAISE(ABORT, 'the message cannot be written'); END")
    with pytest.raises(StoreError, match="the message cannot be written"):
        await store.messages.add_inbound("test:9", sender_id="u", text="hi", platform_message_id="p0",
                                         where=("test", "9"))
    assert await store.database.rows("SELECT id FROM conversations WHERE id = 'test:9'") == []
    await store.database.execute("DROP TRIGGER refuse")
    first, new = await store.messages.add_inbound("test:9", sender_id="u", text="hi", platform_message_id="p1",
                                                  where=("test", "9"))
    again, _ = await store.messages.add_inbound("test:9", sender_id="u", text="hi", platform_message_id="p1",
                                                where=("test", "9"))
    assert new and again == first
    rows = await store.database.rows("SELECT channel, chat_id FROM conversations WHERE id = 'test:9'")
    assert [tuple(r) for r in rows] == [("test", "9")]


async def test_what_a_turn_sees_starts_after_the_summary_and_the_session_start(store):
    one = await inbound(store, "one")
    await store.outbound.add(CONV, "reply one", turn_id=None, inbound_id=one)
    two = await inbound(store, "two")
    await store.outbound.add(CONV, "reply two", turn_id=None, inbound_id=two)
    await store.outbound.add(CONV, "sorry", turn_id=None, kind=MessageKind.NOTICE)  # not the model's
    three = await inbound(store, "three")
    view = await store.messages.turn_view(CONV, limit=10, inbound_id=three)
    assert view.summary is None and [m.text for m in view.history] == ["one", "reply one", "two", "reply two",
                                                                       "three"]
    await store.messages.add_summary(CONV, "one was said", up_to_message_id=one)
    view = await store.messages.turn_view(CONV, limit=2, inbound_id=three)
    assert view.summary is not None and view.summary.summary == "one was said"
    assert [m.text for m in view.history] == ["reply two", "three"]
    await store.messages.start_session(CONV, at_message_id=two)
    assert [m.text for m in (await store.messages.turn_view(CONV, limit=10)).history] == ["reply two", "three"]
    assert (await store.messages.latest_summary(CONV)).up_to_message_id == one  # type: ignore[union-attr]


async def answered(store, inbound_id: int, reply: str) -> None:
    """A chat turn that answered the message, as a turn stores it."""
    turn = f"turn-{inbound_id}"
    await store.messages.start_turn(turn, CONV, source=TurnSource.CHAT, inbound_message_id=inbound_id)
    await store.messages.complete_turn(turn, conversation_id=CONV, reply=reply, llm_calls=1, tool_calls=0,
                                       inbound_id=inbound_id)


async def test_a_turn_sees_the_conversation_as_it_stood_when_its_message_arrived(store):
    """A message a crash left pending, answered after newer ones were: it sees none of them, and
    no reply to them (its context would end with answers to questions it never shows)."""
    zero = await inbound(store, "zero")
    await answered(store, zero, "reply zero")
    one = await inbound(store, "one")  # left pending by a crash
    two = await inbound(store, "two")
    await answered(store, two, "reply two")
    await store.outbound.add(CONV, "a reminder", turn_id=None)  # posted by the scheduler, no question
    three = await inbound(store, "three")
    await answered(store, one, "reply one")  # stored after "three" arrived: still before it
    view = await store.messages.turn_view(CONV, limit=10, inbound_id=one)
    assert [m.text for m in view.history] == ["zero", "reply zero", "one"]
    view = await store.messages.turn_view(CONV, limit=10, inbound_id=three)
    assert [m.text for m in view.history] == ["zero", "reply zero", "one", "reply one", "two", "reply two",
                                              "a reminder", "three"]
    assert [m.text for m in (await store.messages.turn_view(CONV, limit=10)).history][-2:] == ["a reminder", "three"]


async def test_to_fold_is_older_than_the_kept_messages_and_than_any_pending_one(store):
    asked = {}
    for text in ("a", "b", "c"):
        asked[text] = await inbound(store, text)
        reply = await store.outbound.add(CONV, f"re {text}", turn_id=None, inbound_id=asked[text])
        await store.outbound.record_send(reply, status=MessageStatus.SENT, parts_sent=1, attempts=1, error=None)
    assert [m.text for m in await store.messages.to_fold(CONV, keep_last=2)] == ["a", "re a", "b", "re b"]
    await store.messages.set_status(asked["b"], MessageStatus.PENDING)  # "b" waits for its turn again
    assert [m.text for m in await store.messages.to_fold(CONV, keep_last=0)] == ["a", "re a"]


async def test_a_turns_replies_and_the_notices_after_a_message(store, clock):
    asked = await inbound(store, "hi", "p1")
    await store.messages.start_turn("t1", CONV, source=TurnSource.CHAT, inbound_message_id=asked)
    await store.messages.finish_turn("t1", status=TurnStatus.FAILED, error="boom")
    clock.advance(seconds=1)
    await store.messages.start_turn("t2", CONV, source=TurnSource.CHAT, inbound_message_id=asked)
    reply = await store.messages.complete_turn("t2", conversation_id=CONV, reply="hello", llm_calls=2, tool_calls=1,
                                               inbound_id=asked, unbacked_claims=1, hit_ceiling=True)
    turns = await store.messages.turns_for_message(asked)
    assert [(t.id, t.status, t.error) for t in turns] == [("t1", TurnStatus.FAILED, "boom"), ("t2", TurnStatus.OK, None)]
    assert (turns[1].source, turns[1].llm_calls, turns[1].unbacked_claims, turns[1].hit_ceiling) == (
        TurnSource.CHAT, 2, 1, True)
    assert await store.messages.turn_of(asked) == "t2"
    assert [m.id for m in await store.messages.replies_of_turns(["t1", "t2"])] == [reply]
    assert await store.messages.replies_of_turns([]) == []
    notice = await store.outbound.add(CONV, "a notice", turn_id=None, kind=MessageKind.NOTICE)
    assert [m.id for m in await store.messages.outbound_after(CONV, asked)] == [reply, notice]
    assert await store.messages.outbound_after(CONV, notice) == []


async def test_a_failed_turns_reply_is_a_notice_and_its_message_failed(store):
    asked = await inbound(store, "hi")
    await store.messages.start_turn("t1", CONV, source=TurnSource.CHAT, inbound_message_id=asked)
    reply = await store.messages.complete_turn("t1", conversation_id=CONV, reply="Sorry.", llm_calls=1, tool_calls=0,
                                               inbound_id=asked, error="LLMTimeout")
    assert (await store.messages.get(reply)).kind is MessageKind.NOTICE  # type: ignore[union-attr]
    assert (await store.messages.get(asked)).status is MessageStatus.FAILED  # type: ignore[union-attr]
    (turn,) = await store.messages.turns_for_message(asked)
    assert (turn.status, turn.error) == (TurnStatus.FAILED, "LLMTimeout")


async def test_open_turns_are_interrupted_on_the_given_channels_only(store):
    mine = await inbound(store, "a", conversation_id="test:1")
    theirs = await inbound(store, "b", conversation_id="other:1")
    await store.messages.start_turn("t1", "test:1", source=TurnSource.CHAT, inbound_message_id=mine)
    await store.messages.start_turn("t2", "other:1", source=TurnSource.CHAT, inbound_message_id=theirs)
    assert await store.messages.interrupt_open_turns([], error="stopped") == 0
    assert await store.messages.interrupt_open_turns(["test"], error="stopped") == 1
    assert [(t.status, t.error) for t in await store.messages.turns_for_message(mine)] == [
        (TurnStatus.INTERRUPTED, "stopped")]
    await store.messages.interrupt_turns_of(theirs, error="gone")
    assert [t.status for t in await store.messages.turns_for_message(theirs)] == [TurnStatus.INTERRUPTED]


async def test_the_tools_that_acted_for_a_message_dry_runs_excepted(store):
    asked = await inbound(store, "do it")
    await store.messages.start_turn("t1", CONV, source=TurnSource.CHAT, inbound_message_id=asked)
    await store.audit.record_tool_execution(execution("t1", "notes.write", output={"saved": True}))
    await store.audit.record_tool_execution(execution("t1", "http.post", output={"dry_run": True}))
    await store.audit.record_tool_execution(execution("t1", "web.search", status=ToolStatus.ERROR))
    await store.audit.record_tool_execution(execution("t1", "email.send", status=ToolStatus.AWAITING_CONFIRMATION,
                                                      output={"confirmation_id": "c9"}))
    acted = await store.messages.actions_for_message(asked)
    assert [(a.tool_name, a.status, a.confirmation_id) for a in acted] == [
        ("notes.write", ToolStatus.OK, None), ("email.send", ToolStatus.AWAITING_CONFIRMATION, "c9")]


async def test_the_latest_conversation_is_outside_the_console(store):
    assert await store.messages.latest_conversation() is None
    await inbound(store, "a", conversation_id="telegram:5")
    await inbound(store, "b", conversation_id="console:local")
    assert await store.messages.latest_conversation() == "telegram:5"


async def test_the_latest_messages_of_a_conversation_oldest_first(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        for conversation in ("web:owner", "test:1"):
            await store.messages.ensure_conversation(conversation, conversation.split(":")[0], "x")
        for i in range(3):
            await store.messages.add_inbound("web:owner", sender_id="owner", text=f"q{i}", platform_message_id=None)
            await store.outbound.add("web:owner", f"a{i}", turn_id=None)
        await store.outbound.add("web:owner", "over budget", turn_id=None, kind=MessageKind.NOTICE)
        await store.outbound.add("test:1", "elsewhere", turn_id=None)
        latest = await store.messages.latest("web:owner", limit=4)
        assert [m.text for m in latest] == ["a1", "q2", "a2", "over budget"]
        assert latest[1].direction is Direction.IN and latest[-1].kind is MessageKind.NOTICE
        assert await store.messages.latest("nobody:1", limit=50) == []
    finally:
        await store.close()
