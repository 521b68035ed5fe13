"""After a crash, each chat's pending messages are answered oldest first, before any newer message
of that chat (even one that arrives while recovery is still going), and each recovered turn sees
the conversation as it stood when its message arrived: no later question, no reply to one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from bruce.app import build_app
from bruce.channel import Inbound, IncomingMessage
from bruce.store import Store
from bruce.values import MessageStatus, TurnSource
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import rows

LEFT = {"c1": ["c1 first", "c1 second", "c1 third"], "c2": ["c2 first", "c2 second"]}
NEWEST = "c1 newest"  # written while Bruce was down: the platform hands it over as the channel starts
UNSENT = "a reply the crash left unsent"  # in a third chat: re-sent by recovery, before it answers anything
DURING = "c2 during recovery"  # arrives while that reply is being re-sent


class BacklogChannel(RecordingChannel):
    """A channel whose platform has a message waiting, delivered the moment the channel starts
    (before the daemon has recovered anything, as Telegram's first getUpdates returns the
    backlog), and another that arrives while recovery re-sends what the crash left unsent."""

    def __init__(self, name: str, at: datetime) -> None:
        super().__init__(name)
        self.at = at

    async def start(self, inbound: Inbound) -> None:
        await super().start(inbound)
        await self.arrives(inbound, "c1", NEWEST)

    async def send_text(self, chat_id: str, text: str) -> None:
        await super().send_text(chat_id, text)
        if text == UNSENT and self.inbound is not None:
            await self.arrives(self.inbound, "c2", DURING)

    async def arrives(self, inbound: Inbound, chat: str, text: str) -> None:
        await inbound.deliver(IncomingMessage(channel=self.name, chat_id=chat, sender_id="u1", text=text,
                                              platform_message_id=text, timestamp=self.at))


@pytest.fixture
def channel(clock) -> BacklogChannel:
    return BacklogChannel("test", clock.now())


async def crashed_with_pending_messages(config, clock) -> None:
    """The store as a process killed mid-turn left it: every chat's messages stored pending, the
    first of each with a turn row still running (the model had been called, nothing acted)."""
    store = await Store.open(config.storage.path, clock)
    try:
        for chat, texts in LEFT.items():
            cid = f"test:{chat}"
            await store.messages.ensure_conversation(cid, "test", chat)
            for n, text in enumerate(texts):
                message_id, _ = await store.messages.add_inbound(cid, sender_id="u1", text=text,
                                                                 platform_message_id=f"{chat}-{n}")
                if n == 0:
                    await store.messages.start_turn(f"turn-{chat}", cid, source=TurnSource.CHAT,
                                                    inbound_message_id=message_id)
        await store.messages.ensure_conversation("test:c3", "test", "c3")
        await store.outbound.add("test:c3", UNSENT, turn_id=None)
    finally:
        await store.close()


def answering(requests: list[list[dict[str, Any]]]):
    """A model that answers each question by name and records the context it was given."""

    def respond(body: dict[str, Any]) -> Step:
        messages = [m for m in body["messages"] if m["role"] != "system"]
        requests.append(messages)
        return Step.text(f"answer to {messages[-1]['content']}")

    return respond


async def test_pending_messages_are_answered_oldest_first_and_see_nothing_that_came_after(
        make_config, app_factory, clock, channel, fake_llm):
    config = make_config()
    await crashed_with_pending_messages(config, clock)
    clock.advance(minutes=2)
    requests: list[list[dict[str, Any]]] = []
    fake_llm.responder = answering(requests)

    app = await app_factory(config)
    await app.worker.wait_idle()

    asked = {"c1": [*LEFT["c1"], NEWEST], "c2": [*LEFT["c2"], DURING]}
    for chat, questions in asked.items():  # the new ones waited for those left over, which came in order
        assert channel.texts(chat) == [f"answer to {q}" for q in questions]
    assert channel.texts("c3") == [UNSENT]
    assert len(requests) == 7
    for context in requests:
        own = context[-1]
        assert own["role"] == "user"
        questions = next(q for q in asked.values() if own["content"] in q)
        earlier = questions[:questions.index(own["content"])]
        # the conversation as it stood: the earlier questions with their answers, then its own question
        assert context == [m for q in earlier for m in ({"role": "user", "content": q},
                                                        {"role": "assistant", "content": f"answer to {q}"})] + [own]
    turns = await rows(app, "SELECT id, status FROM turns WHERE id LIKE 'turn-%' ORDER BY id")
    assert turns == [{"id": "turn-c1", "status": "interrupted"}, {"id": "turn-c2", "status": "interrupted"}]
    statuses = await rows(app, "SELECT DISTINCT status FROM messages WHERE direction = 'in'")
    assert statuses == [{"status": "done"}]


async def test_a_message_left_behind_by_an_earlier_run_does_not_see_the_answers_that_overtook_it(
        make_config, app_factory, clock, channel, fake_llm):
    """An earlier run answered a newer message first and then died: the older one, answered now,
    is answered from the conversation as it stood when it arrived."""
    config = make_config()
    store = await Store.open(config.storage.path, clock)
    try:
        await store.messages.ensure_conversation("test:c1", "test", "c1")
        older, _ = await store.messages.add_inbound("test:c1", sender_id="u1", text="older", platform_message_id="o")
        newer, _ = await store.messages.add_inbound("test:c1", sender_id="u1", text="newer", platform_message_id="n")
        await store.messages.start_turn("t-newer", "test:c1", source=TurnSource.CHAT, inbound_message_id=newer)
        reply = await store.messages.complete_turn("t-newer", conversation_id="test:c1", reply="answer to newer",
                                                   llm_calls=1, tool_calls=0, inbound_id=newer)
        await store.outbound.record_send(reply, status=MessageStatus.SENT, parts_sent=1, attempts=1, error=None)
        await store.messages.start_turn("t-older", "test:c1", source=TurnSource.CHAT, inbound_message_id=older)
    finally:
        await store.close()
    requests: list[list[dict[str, Any]]] = []
    fake_llm.responder = answering(requests)

    app = await app_factory(config)
    await app.worker.wait_idle()

    assert requests[0] == [{"role": "user", "content": "older"}]
    assert requests[1] == [{"role": "user", "content": "older"}, {"role": "assistant", "content": "answer to older"},
                           {"role": "user", "content": "newer"}, {"role": "assistant", "content": "answer to newer"},
                           {"role": "user", "content": NEWEST}]
    assert channel.texts("c1") == ["answer to older", f"answer to {NEWEST}"]


async def test_a_newer_message_waits_for_the_apology_for_an_expired_older_one(
        make_config, app_factory, clock, fake_llm):
    config = make_config(assistant={"recovery_max_age_s": 600})
    store = await Store.open(config.storage.path, clock)
    try:
        await store.messages.ensure_conversation("test:c1", "test", "c1")
        await store.messages.add_inbound("test:c1", sender_id="u1", text="book the table", platform_message_id="b")
    finally:
        await store.close()
    clock.advance(hours=3)
    channel = BacklogChannel("test", clock.now())
    requests: list[list[dict[str, Any]]] = []
    fake_llm.responder = answering(requests)

    app = await build_app(config, clock=clock, environ={}, extra_channels=[channel])
    try:
        await app.start()
        await app.worker.wait_idle()
    finally:
        await app.stop()

    apology, answer = channel.texts("c1")
    assert "book the table" in apology and "Nothing was done" in apology
    assert answer == f"answer to {NEWEST}" and requests == [[{"role": "user", "content": NEWEST}]]
