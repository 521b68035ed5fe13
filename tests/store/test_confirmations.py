"""Pending confirmations: each state change a conditional move, so a decision is used once;
what an approved action did, and its report, recorded together."""

from __future__ import annotations

import asyncio

from bruce.values import ConfirmationState, DecidedVia, MessageStatus

CONV = "test:1"
LATER = "2026-12-02T13:00:00.000000+00:00"


async def a_confirmation(store, confirmation_id: str = "c1", **kwargs) -> str:
    await store.messages.ensure_conversation(CONV, "test", "1")
    args = {"conversation_id": CONV, "user_id": "u1", "turn_id": None, "call_id": "call-1", "tool_name": "http.post",
            "arguments": {"url": "https://example.org", "body": "ç"}, "preview": {"would": "post"}, "step_up": False,
            "expires_at": LATER} | kwargs
    await store.confirmations.add(confirmation_id=confirmation_id, **args)
    return confirmation_id


async def test_a_confirmation_is_stored_pending_with_its_arguments_as_json(store):
    await a_confirmation(store, step_up=True, preview=None)
    found = await store.confirmations.get("c1")
    assert found is not None
    assert (found.status, found.step_up, found.tool_name, found.preview) == (
        ConfirmationState.PENDING, True, "http.post", None)
    assert found.arguments == '{"url": "https://example.org", "body": "ç"}'
    assert found.decided_at is None and found.expires_at == LATER
    assert await store.confirmations.get("nope") is None


async def test_a_decision_moves_it_once_however_many_ask_at_once(store):
    await a_confirmation(store)
    moves = await asyncio.gather(*(store.confirmations.move(
        "c1", from_status=ConfirmationState.PENDING, to_status=ConfirmationState.RUNNING, via=DecidedVia.CHAT)
        for _ in range(5)))
    assert sorted(moves) == [False] * 4 + [True]
    found = await store.confirmations.get("c1")
    assert found is not None and (found.status, found.decided_via) == (ConfirmationState.RUNNING, "chat")
    assert found.decided_at is not None


async def test_an_expired_confirmation_is_not_moved_when_asked_unexpired(store):
    await a_confirmation(store)
    assert not await store.confirmations.move("c1", from_status=ConfirmationState.PENDING,
                                              to_status=ConfirmationState.RUNNING, unexpired_at=LATER)
    assert await store.confirmations.move("c1", from_status=ConfirmationState.PENDING,
                                          to_status=ConfirmationState.EXPIRED)
    assert [c.id for c in await store.confirmations.with_status(ConfirmationState.EXPIRED)] == ["c1"]
    assert await store.confirmations.with_status(ConfirmationState.PENDING) == []


async def test_finishing_records_the_result_and_stores_its_report_closing_the_decision_message(store):
    await a_confirmation(store)
    decision, _ = await store.messages.add_inbound(CONV, sender_id="u1", text="/approve c1", platform_message_id="p")
    report = await store.confirmations.finish("c1", status=ConfirmationState.EXECUTED, result={"status": 200},
                                              report="Posted.", conversation_id=CONV, turn_id=None,
                                              inbound_id=decision)
    assert report is not None
    found = await store.confirmations.get("c1")
    assert found is not None and (found.status, found.result) == (ConfirmationState.EXECUTED, '{"status": 200}')
    (pending,) = await store.outbound.unsent(CONV)
    assert (pending.id, pending.text) == (report, "Posted.")
    assert (await store.messages.get(decision)).status is MessageStatus.DONE  # type: ignore[union-attr]


async def test_finishing_without_a_report_stores_no_message(store):
    await a_confirmation(store)
    assert await store.confirmations.finish("c1", status=ConfirmationState.FAILED, result="it broke") is None
    found = await store.confirmations.get("c1")
    assert found is not None and (found.status, found.result) == (ConfirmationState.FAILED, "it broke")
    assert await store.outbound.unsent(CONV) == []
