"""AuditStore's reads for the admin page: when a model call last succeeded (``/healthz``), and
the tool executions, model calls and turn traces as records, newest first, filtered and paged."""

from __future__ import annotations

from bruce.store import Store
from bruce.store.records import LLMCallRecord, StoredToolExecution, ToolExecutionRecord, as_dict
from bruce.values import LLMCallStatus, ToolStatus, TurnSource


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


async def test_the_audit_reads_are_records_newest_first_filtered_and_paged(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        await store.messages.ensure_conversation("test:1", "test", "1")
        inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text="2+2?", platform_message_id="p1")
        await store.messages.start_turn("t1", "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
        await store.audit.record_llm_call(LLMCallRecord("t1", 1, "m", LLMCallStatus.OK, 5.0, 10, 2, 0.01))
        for tool, status in (("clock.now", ToolStatus.OK), ("math.calculate", ToolStatus.INVALID_ARGS),
                             ("math.calculate", ToolStatus.OK)):
            await store.audit.record_tool_execution(ToolExecutionRecord(
                "t1", "test:1", None, tool, "low", {"x": 1}, None, status, None, 1.0, TurnSource.CHAT))
        await store.messages.complete_turn("t1", conversation_id="test:1", reply="4", llm_calls=1, tool_calls=3,
                                           inbound_id=inbound)
        newest = await store.audit.tool_executions(filters={}, before_id=None, limit=2)
        assert all(isinstance(r, StoredToolExecution) for r in newest) and [r.id for r in newest] == [3, 2]
        assert [r.id for r in await store.audit.tool_executions(filters={}, before_id=2, limit=5)] == [1]
        assert [r.id for r in await store.audit.tool_executions(filters={}, before_id=None, limit=5, after_id=2)] == [3]
        only = await store.audit.tool_executions(filters={"tool_name": "math.calculate", "status": "ok"},
                                                 before_id=None, limit=5)
        assert [(r.id, r.input) for r in only] == [(3, '{"x": 1}')]
        assert (await store.audit.tool_execution(1)).tool_name == "clock.now"
        assert await store.audit.tool_execution(99) is None
        (call,) = await store.audit.llm_calls(filters={"model": "m"}, before_id=None, limit=5)
        assert (call.prompt_tokens, call.completion_tokens, call.cost_usd) == (10, 2, 0.01)
        trace = await store.audit.turn_trace("t1")
        assert trace is not None and trace.turn.status == "ok" and trace.turn.tool_calls == 3
        assert trace.message is not None and trace.message.text == "2+2?"
        assert [c.seq for c in trace.llm_calls] == [1] and [t.id for t in trace.tool_executions] == [1, 2, 3]
        assert [(r.text, r.kind) for r in trace.replies] == [("4", "chat")]
        assert as_dict(trace.message) == {"id": inbound, "text": "2+2?", "sender_id": "u",
                                          "created_at": trace.message.created_at}
        assert await store.audit.turn_trace("nosuch") is None
    finally:
        await store.close()
