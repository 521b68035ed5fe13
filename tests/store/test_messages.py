"""MessageStore's reads for the admin page: a conversation's latest messages, every kind and
status, oldest first, and only that conversation's."""

from __future__ import annotations

from bruce.store import Store
from bruce.values import Direction, MessageKind


async def test_the_latest_messages_of_a_conversation_oldest_first(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        for conversation in ("web:owner", "test:1"):
            await store.messages.ensure_conversation(conversation, conversation.split(":")[0], "x")
        for i in range(3):
            await store.messages.add_inbound("web:owner", sender_id="owner", text=f"q{i}", platform_message_id=None)
            await store.messages.add_outbound("web:owner", f"a{i}", turn_id=None)
        await store.messages.add_outbound("web:owner", "over budget", turn_id=None, kind=MessageKind.NOTICE)
        await store.messages.add_outbound("test:1", "elsewhere", turn_id=None)
        latest = await store.messages.latest("web:owner", limit=4)
        assert [m.text for m in latest] == ["a1", "q2", "a2", "over budget"]
        assert latest[1].direction is Direction.IN and latest[-1].kind is MessageKind.NOTICE
        assert await store.messages.latest("nobody:1", limit=50) == []
    finally:
        await store.close()
