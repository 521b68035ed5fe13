"""The outbox's rows: a reply and the message it answers closed together, what is still to be
sent (by conversation, oldest first), and how far each send got."""

from __future__ import annotations

from bruce.values import Direction, MessageKind, MessageStatus
from tests.store.test_messages import CONV, inbound


async def test_a_reply_closes_the_message_it_answers(store):
    asked = await inbound(store, "hi")
    reply = await store.outbound.add(CONV, "hello", turn_id=None, inbound_id=asked)
    stored = await store.messages.get(reply)
    assert stored is not None and (stored.direction, stored.kind, stored.status, stored.role) == (
        Direction.OUT, MessageKind.CHAT, MessageStatus.PENDING, "assistant")
    assert (await store.messages.get(asked)).status is MessageStatus.DONE  # type: ignore[union-attr]
    assert await store.messages.get(999) is None


async def test_unsent_replies_by_conversation_and_their_send_record(store):
    await inbound(store, "x", conversation_id="test:2")
    first = await store.outbound.add("test:2", "one", turn_id=None)
    second = await store.outbound.add("test:2", "two", turn_id=None)
    assert await store.outbound.conversations_with_unsent() == ["test:2"]
    await store.outbound.record_part_sent(first, 1)
    await store.outbound.record_send(first, status=MessageStatus.SENT, parts_sent=2, attempts=1, error=None)
    await store.outbound.record_send(second, status=MessageStatus.UNSENT, parts_sent=0, attempts=2, error="down",
                                     retry_at="later")
    (left,) = await store.outbound.unsent("test:2")
    assert (left.id, left.status, left.send_attempts, left.send_error, left.retry_at) == (
        second, MessageStatus.UNSENT, 2, "down", "later")
    sent = await store.messages.get(first)
    assert sent is not None and (sent.status, sent.parts_sent, sent.send_attempts) == (MessageStatus.SENT, 2, 1)
    assert [m.id for m in await store.messages.with_status(Direction.OUT, MessageStatus.SENT, up_to_id=first)] == [
        first]
