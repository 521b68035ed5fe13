"""The audit trail: model calls and tool executions as rows, read back as records (per turn) or
as pages for the admin page; idempotency keys that replay a result until they expire."""

from __future__ import annotations

import json

from bruce.records import LLMCallRecord, StoredToolExecution, ToolExecutionRecord, as_dict
from bruce.store import Store
from bruce.values import LLMCallStatus, ToolStatus, TurnSource


async def a_turn(store, turn_id: str = "t1", conversation_id: str = "test:1") -> str:
    await store.messages.ensure_conversation(conversation_id, "test", conversation_id.split(":")[1])
    await store.messages.start_turn(turn_id, conversation_id, source=TurnSource.CHAT, inbound_message_id=None)
    return turn_id


def execution(turn_id: str | None, name: str = "web.search", *, status: ToolStatus = ToolStatus.OK,
              output: object = None, **kwargs: object) -> ToolExecutionRecord:
    fields = {"turn_id": turn_id, "conversation_id": "test:1", "call_id": "c1", "tool_name": name, "risk": "low",
              "input": {"query": "café"}, "output": output, "status": status, "error": None, "latency_ms": 1.2345,
              "source": TurnSource.CHAT} | kwargs
    return ToolExecutionRecord(**fields)  # type: ignore[arg-type]


def call(turn_id: str, seq: int, *, model: str = "m", status: LLMCallStatus = LLMCallStatus.OK,
         cost: float | None = 0.01) -> LLMCallRecord:
    return LLMCallRecord(turn_id=turn_id, seq=seq, model=model, status=status, latency_ms=10.0, prompt_tokens=5,
                         completion_tokens=3, cost_usd=cost)


async def test_a_turns_tool_executions_come_back_in_order_with_input_and_output_decoded(store):
    t1, t2 = await a_turn(store, "t1"), await a_turn(store, "t2")
    await store.audit.record_tool_execution(execution(t1, output={"results": [1, 2]}))
    await store.audit.record_tool_execution(execution(t2, "clock.now", status=ToolStatus.CACHED, output="plain text",
                                                      input={}))
    await store.audit.record_tool_execution(execution(None, "notes.read", source=TurnSource.MCP, server="files"))
    found = await store.audit.tool_executions_of([t1, t2])
    assert [(e.tool_name, e.input, e.output, e.status) for e in found] == [
        ("web.search", {"query": "café"}, {"results": [1, 2]}, ToolStatus.OK),
        ("clock.now", {}, "plain text", ToolStatus.CACHED)]
    assert found[0].status is ToolStatus.OK and found[0].source is TurnSource.CHAT and found[0].latency_ms == 1.234
    assert await store.audit.tool_executions_of([]) == []


async def test_model_calls_of_some_turns_or_of_all(store):
    t1, t2 = await a_turn(store, "t1"), await a_turn(store, "t2")
    await store.audit.record_llm_call(call(t2, 1, model="b"))
    await store.audit.record_llm_call(call(t1, 1, model="a", status=LLMCallStatus.TIMEOUT, cost=None))
    await store.audit.record_llm_call(call(t1, 2, model="a"))
    assert [(c.turn_id, c.seq) for c in await store.audit.llm_calls_of(None)] == [(t2, 1), (t1, 1), (t1, 2)]
    mine = await store.audit.llm_calls_of([t1])
    assert mine == [call(t1, 1, model="a", status=LLMCallStatus.TIMEOUT, cost=None), call(t1, 2, model="a")]
    assert mine[0].status is LLMCallStatus.TIMEOUT
    assert await store.audit.llm_calls_of([]) == []


async def test_an_idempotent_result_is_replayed_until_it_expires(store):
    assert await store.audit.idempotent_result("k", now="2026-12-02T12:00:00") is None
    await store.audit.remember_result("k", "http.post", {"status": 200}, expires_at="2026-12-02T13:00:00")
    assert await store.audit.idempotent_result("k", now="2026-12-02T12:30:00") == {"status": 200}
    assert await store.audit.idempotent_result("k", now="2026-12-02T13:00:00") is None
    await store.audit.remember_result("k", "http.post", {"status": 201}, expires_at="2026-12-02T14:00:00")
    assert await store.audit.idempotent_result("k", now="2026-12-02T13:30:00") == {"status": 201}


async def test_pages_of_tool_executions_newest_first_filtered_and_cursored(store, clock):
    turn = await a_turn(store)
    ids = []
    for name in ("web.search", "clock.now", "web.search", "web.search"):
        ids.append(await store.audit.record_tool_execution(execution(turn, name)))
        clock.advance(minutes=1)
    page = await store.audit.tool_executions(filters={"tool_name": "web.search"}, before_id=None, limit=2)
    assert [r.id for r in page] == [ids[3], ids[2]] and page[0].input == '{"query": "café"}'
    older = await store.audit.tool_executions(filters={"tool_name": "web.search"}, before_id=ids[2], limit=2)
    assert [r.id for r in older] == [ids[0]]
    newer = await store.audit.tool_executions(filters={}, before_id=None, after_id=ids[1], limit=10)
    assert [r.id for r in newer] == [ids[3], ids[2]]
    since = await store.audit.tool_executions(filters={"since": page[0].created_at}, before_id=None, limit=10)
    assert [r.id for r in since] == [ids[3]]
    assert (await store.audit.tool_execution(ids[1])).tool_name == "clock.now"
    assert await store.audit.tool_execution(999) is None


async def test_a_turns_trace_holds_its_message_calls_executions_and_replies(store):
    await store.messages.ensure_conversation("test:1", "test", "1")
    inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text="hi", platform_message_id="p1")
    await store.messages.start_turn("t1", "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
    await store.audit.record_llm_call(call("t1", 2))
    await store.audit.record_llm_call(call("t1", 1))
    await store.audit.record_tool_execution(execution("t1"))
    await store.messages.complete_turn("t1", conversation_id="test:1", reply="hello", llm_calls=2, tool_calls=1,
                                       inbound_id=inbound)
    trace = await store.audit.turn_trace("t1")
    assert trace is not None
    assert trace.turn.status == "ok" and trace.message.text == "hi"
    assert [c.seq for c in trace.llm_calls] == [1, 2]
    assert [e.tool_name for e in trace.tool_executions] == ["web.search"]
    assert [r.text for r in trace.replies] == ["hello"]
    assert await store.audit.turn_trace("nope") is None
    calls = await store.audit.llm_calls(filters={"model": "m", "status": "ok"}, before_id=None, limit=1)
    assert [c.seq for c in calls] == [1]  # newest first


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
                                          "created_at": trace.message.created_at, "attachments": None}
        assert await store.audit.turn_trace("nosuch") is None
    finally:
        await store.close()


async def answered(store, turn_id: str, text: str, *, error: str | None = None, output: object = "page text") -> None:
    """A chat turn that called ``web.read_url`` (with an output) and stored its reply (a notice with ``error``)."""
    inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text=text, platform_message_id=turn_id)
    await store.messages.start_turn(turn_id, "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
    await store.audit.record_tool_execution(execution(turn_id, "web.read_url", output=output))
    await store.audit.record_tool_execution(execution(turn_id, "clock.now", output=None))  # no output: not listed
    await store.messages.complete_turn(turn_id, conversation_id="test:1", reply=f"re {text}", llm_calls=1,
                                       tool_calls=2, inbound_id=inbound, error=error)


async def test_the_turns_answered_in_the_session_with_the_tools_that_returned_output(store):
    await store.messages.ensure_conversation("test:1", "test", "1")
    await answered(store, "before", "old")
    new_session, _ = await store.messages.add_inbound("test:1", sender_id="u", text="/new", platform_message_id="n")
    await store.messages.start_session("test:1", at_message_id=new_session)
    await answered(store, "read", "read my page")
    await answered(store, "failed", "again", error="llm down")  # its notice is not in the history
    turns = await store.audit.answered_turns("test:1")
    assert [(t.id, t.untrusted_run, t.tools) for t in turns] == [("read", False, ("web.read_url",))]
    assert await store.audit.answered_turns("test:2") == []


async def test_a_run_of_an_untrusted_job_is_marked_so(store):
    from tests.store.test_jobs import a_stored_job  # noqa: PLC0415  (test_jobs imports this module)

    job = await a_stored_job(store, untrusted=True)
    await store.messages.start_turn("run", "test:c1", source=TurnSource.PROACTIVE, inbound_message_id=None,
                                    job_id=job.id)
    await store.messages.complete_turn("run", conversation_id="test:c1", reply="done", llm_calls=1, tool_calls=0)
    (turn,) = await store.audit.answered_turns("test:c1")
    assert (turn.id, turn.untrusted_run, turn.tools) == ("run", True, ())


async def test_the_session_taint_lists_documents_read_skips_our_own_tools_and_counts_an_answer_after_new(store):
    """Only turns that may carry text from outside are listed: one that answered a document it read (not one
    whose document could not be read), not one that called only tools named ``ours``; a turn whose answer came
    after ``/new`` is in the new session even if it started before."""
    await store.messages.ensure_conversation("test:1", "test", "1")
    read = json.dumps([{"kind": "document", "name": "bill.pdf", "chars": 120}])
    unread = json.dumps([{"kind": "document", "name": "x.zip"}])
    for turn_id, attachments, tool in (("doc", read, None), ("zip", unread, None), ("clock", None, "clock.now")):
        inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text=turn_id, platform_message_id=turn_id,
                                                      attachments=attachments)
        await store.messages.start_turn(turn_id, "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
        if tool:
            await store.audit.record_tool_execution(execution(turn_id, tool, output="12:00"))
        await store.messages.complete_turn(turn_id, conversation_id="test:1", reply="ok", llm_calls=1, tool_calls=0,
                                           inbound_id=inbound)
    # a page read by a turn that was still running when /new arrived: its answer is stored after it
    inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text="read", platform_message_id="late")
    await store.messages.start_turn("late", "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
    await store.audit.record_tool_execution(execution("late", "web.read_url", output="page"))
    new_session, _ = await store.messages.add_inbound("test:1", sender_id="u", text="/new", platform_message_id="n")
    await store.messages.complete_turn("late", conversation_id="test:1", reply="ok", llm_calls=1, tool_calls=1,
                                       inbound_id=inbound)
    turns = await store.audit.answered_turns("test:1", ours={"clock.now"})
    assert [(t.id, t.read_document, t.tools) for t in turns] == [
        ("doc", True, ()), ("zip", False, ()), ("late", False, ("web.read_url",))]
    await store.messages.start_session("test:1", at_message_id=new_session)
    assert [t.id for t in await store.audit.answered_turns("test:1", ours={"clock.now"})] == ["late"]
