"""StatsStore: the totals ``/metrics`` reports, counted over every row (turns, model calls, tool
executions, unsent replies, jobs) and the latency histograms, cumulative per bound."""

from __future__ import annotations

import pytest

from bruce.records import Count, LatencyHistogram, LLMCallRecord, ModelTotals, ToolExecutionRecord
from bruce.store import Store
from bruce.values import LLMCallStatus, MessageKind, MessageStatus, ToolStatus, TurnSource, TurnStatus


@pytest.fixture
async def store(tmp_path, clock):
    opened = await Store.open(tmp_path / "b.db", clock)
    await opened.messages.ensure_conversation("test:1", "test", "1")
    yield opened
    await opened.close()


def a_call(model: str, status: LLMCallStatus, latency_ms: float, *, prompt: int | None = None,
           completion: int | None = None, usd: float | None = None) -> LLMCallRecord:
    return LLMCallRecord(turn_id="t1", seq=1, model=model, status=status, latency_ms=latency_ms,
                         prompt_tokens=prompt, completion_tokens=completion, cost_usd=usd)


def an_execution(tool: str, status: ToolStatus, latency_ms: float) -> ToolExecutionRecord:
    return ToolExecutionRecord(turn_id="t1", conversation_id="test:1", call_id=None, tool_name=tool, risk="low",
                               input={}, output=None, status=status, error=None, latency_ms=latency_ms,
                               source=TurnSource.CHAT)


async def test_an_empty_database_counts_nothing(store):
    stats = store.stats
    assert await stats.turns_by_source_status() == [] and await stats.llm_calls_by_model_status() == []
    assert await stats.llm_totals_by_model() == [] and await stats.tool_executions_by_tool_status() == []
    assert await stats.unsent_replies() == 0 and await stats.jobs_by_status() == []
    assert await stats.llm_call_latency([10.0, 100.0]) == LatencyHistogram(0, 0.0, (0, 0))


async def test_turns_calls_and_tool_executions_are_counted_by_their_labels(store):
    await store.messages.start_turn("t1", "test:1", source=TurnSource.CHAT, inbound_message_id=None)
    await store.messages.finish_turn("t1", status=TurnStatus.OK)
    await store.messages.start_turn("t2", "test:1", source=TurnSource.PROACTIVE, inbound_message_id=None)
    for call in (a_call("m/a", LLMCallStatus.OK, 5, prompt=10, completion=2, usd=0.5),
                 a_call("m/a", LLMCallStatus.OK, 50, prompt=20),
                 a_call("m/a", LLMCallStatus.ERROR, 500),
                 a_call("m/b", LLMCallStatus.TIMEOUT, 5000)):
        await store.audit.record_llm_call(call)
    for execution in (an_execution("clock.now", ToolStatus.OK, 3), an_execution("clock.now", ToolStatus.OK, 30),
                      an_execution("math.calculate", ToolStatus.INVALID_ARGS, 1)):
        await store.audit.record_tool_execution(execution)
    stats = store.stats
    assert await stats.turns_by_source_status() == [Count(("chat", "ok"), 1), Count(("proactive", "running"), 1)]
    assert await stats.llm_calls_by_model_status() == [Count(("m/a", "error"), 1), Count(("m/a", "ok"), 2),
                                                       Count(("m/b", "timeout"), 1)]
    assert await stats.llm_totals_by_model() == [ModelTotals("m/a", 30, 2, 0.5), ModelTotals("m/b", 0, 0, 0.0)]
    assert await stats.tool_executions_by_tool_status() == [Count(("clock.now", "ok"), 2),
                                                            Count(("math.calculate", "invalid_args"), 1)]
    assert await stats.llm_call_latency([5.0, 50.0, 1000.0]) == LatencyHistogram(4, 5555.0, (1, 2, 3))
    assert await stats.tool_latency([1.0, 10.0]) == LatencyHistogram(3, 34.0, (1, 2))


async def test_unsent_replies_are_the_pending_and_unsent_ones(store):
    first = await store.outbound.add("test:1", "one", turn_id=None)
    await store.outbound.add("test:1", "two", turn_id=None)
    sent = await store.outbound.add("test:1", "three", turn_id=None, kind=MessageKind.NOTICE)
    await store.messages.set_status(first, MessageStatus.UNSENT)
    await store.messages.set_status(sent, MessageStatus.SENT)
    assert await store.stats.unsent_replies() == 2
