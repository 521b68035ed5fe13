"""AuditStore's reads for the admin page: when a model call last succeeded (``/healthz``)."""

from __future__ import annotations

from bruce.store import Store
from bruce.store.records import LLMCallRecord
from bruce.values import LLMCallStatus, TurnSource


async def test_the_last_successful_model_call_is_the_newest_ok_one(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        assert await store.audit.last_ok_llm_call() is None
        await store.messages.ensure_conversation("test:1", "test", "1")
        await store.messages.start_turn("t1", "test:1", source=TurnSource.CHAT, inbound_message_id=None)
        await store.audit.record_llm_call(LLMCallRecord("t1", 1, "m", LLMCallStatus.OK, 1.0))
        ok_at = store.database.now()
        clock.advance(minutes=1)
        await store.audit.record_llm_call(LLMCallRecord("t1", 2, "m", LLMCallStatus.ERROR, 1.0))
        assert await store.audit.last_ok_llm_call() == ok_at
    finally:
        await store.close()
