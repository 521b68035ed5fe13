"""The arrival order of a conversation's messages: a message's turn waits for every older one
queued in its conversation, whatever order the turns were started in; a turn that ends in any
way lets the next one go; other conversations never wait."""

from __future__ import annotations

import asyncio

import pytest

from bruce.turns.arrival import ArrivalOrder
from bruce.values import ConversationId

C1 = ConversationId("test", "c1")
C2 = ConversationId("test", "c2")


async def test_a_newer_message_started_first_waits_for_the_older_ones_queued_before_it():
    order = ArrivalOrder()
    order.queue(C1, 3)  # left pending by a crash, queued before the channels start
    order.queue(C1, 5)
    ran: list[int] = []

    async def turn(conversation: ConversationId, message_id: int) -> None:
        async with order.turn(conversation, message_id):
            ran.append(message_id)
            await asyncio.sleep(0)

    newest = asyncio.create_task(turn(C1, 9))  # arrived while recovery was still going
    other = asyncio.create_task(turn(C2, 10))
    await asyncio.sleep(0.01)
    assert ran == [10] and order.waiting(C1) == [3, 5, 9]  # another chat does not wait
    await asyncio.gather(turn(C1, 5), turn(C1, 3), newest, other)
    assert ran == [10, 3, 5, 9] and order.waiting(C1) == []


async def test_a_message_closed_without_a_turn_leaves_the_queue_and_lets_the_next_go():
    order = ArrivalOrder()
    order.queue(C1, 1)  # e.g. too old: an apology instead of an answer
    newer = asyncio.create_task(_enter(order, C1, 2))
    await asyncio.sleep(0.01)
    assert not newer.done()
    order.leave(C1, 1)
    assert await asyncio.wait_for(newer, 1) == 2
    order.leave(C1, 1)  # again: nothing happens


async def test_a_failed_or_cancelled_turn_lets_the_next_go():
    order = ArrivalOrder()
    with pytest.raises(RuntimeError):
        async with order.turn(C1, 1):
            order.queue(C1, 2)
            raise RuntimeError("the model failed")
    stuck = asyncio.create_task(_enter(order, C1, 3))
    await asyncio.sleep(0.01)
    assert not stuck.done()  # 2 is older and still queued
    waiting = asyncio.create_task(_enter(order, C1, 2, hold=60))
    await asyncio.sleep(0.01)
    waiting.cancel()  # shutdown cancels the turn in flight
    assert await asyncio.wait_for(stuck, 1) == 3
    assert order.waiting(C1) == []


async def _enter(order: ArrivalOrder, conversation: ConversationId, message_id: int, hold: float = 0) -> int:
    async with order.turn(conversation, message_id):
        await asyncio.sleep(hold)
        return message_id
