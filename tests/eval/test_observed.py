"""bruce.eval.observed: what a case's turn did, as values: tool runs, model-call totals summed
over turns and read back from a real database, and the dict a run file stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bruce.eval.observed import CallStats, ToolRun, TurnRecord, call_stats
from bruce.records import LLMCallRecord
from bruce.store import Store
from bruce.values import LLMCallStatus, TurnSource
from tests.fakes.clock import FakeClock


def test_a_tool_run_succeeded_when_it_ran_or_was_answered_from_the_cache() -> None:
    assert ToolRun("web.search", {"query": "otters"}, "ok").succeeded
    assert ToolRun("web.search", {"query": "otters"}, "cached").succeeded
    for status in ("error", "timeout", "awaiting_confirmation", "skipped", "denied"):
        assert not ToolRun("files.write", {}, status).succeeded
    failed = ToolRun("web.read_url", {"url": "u"}, "error", error="http_error: 404", output={"big": "x" * 100})
    assert failed.as_dict() == {"name": "web.read_url", "arguments": {"url": "u"}, "status": "error",
                                "error": "http_error: 404"}  # the output stays out of the run file


def test_call_stats_add_up_and_an_unknown_price_stays_unknown() -> None:
    priced = CallStats(calls=2, failed=1, prompt_tokens=100, completion_tokens=10, cost_usd=0.25, latency_ms=300.04,
                       models=("openai/a",))
    local = CallStats(calls=1, prompt_tokens=50, completion_tokens=5, cost_usd=None, latency_ms=100.0,
                      models=("ollama/b", "openai/a"))
    total = priced + local
    assert total == CallStats(calls=3, failed=1, prompt_tokens=150, completion_tokens=15, cost_usd=0.25,
                              latency_ms=pytest.approx(400.04), models=("openai/a", "ollama/b"))
    assert (local + CallStats()).cost_usd is None
    assert total.as_dict() == {"calls": 3, "failed": 1, "prompt_tokens": 150, "completion_tokens": 15,
                               "cost_usd": 0.25, "latency_ms": 400.0, "models": ["openai/a", "ollama/b"]}


def test_a_turn_record_as_the_run_file_stores_it() -> None:
    turn = TurnRecord(index=1, user="What is 6*7?", reply="42.", said_at=datetime(2026, 3, 7, 13, 0, tzinfo=UTC),
                      tools=(ToolRun("math.calculate", {"expression": "6*7"}, "ok"),), confirmations=("files.write",),
                      llm=CallStats(calls=2, latency_ms=12.345), duration_ms=99.99)
    stored = turn.as_dict()
    assert stored["said_at"] == "2026-03-07T13:00:00+00:00"
    assert stored["tools"] == [{"name": "math.calculate", "arguments": {"expression": "6*7"}, "status": "ok",
                                "error": None}]
    assert (stored["jobs"], stored["confirmations"], stored["unbacked_claims"], stored["error"]) == (
        [], ["files.write"], 0, None)
    assert stored["llm"]["calls"] == 2 and stored["llm"]["latency_ms"] == 12.3 and stored["duration_ms"] == 100.0


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    store = await Store.open(tmp_path / "case.db", clock)
    try:
        await store.migrate()
        await store.messages.ensure_conversation("eval:c", "eval", "c")
        for turn in ("t1", "t2"):
            await store.messages.start_turn(turn, "eval:c", source=TurnSource.CHAT, inbound_message_id=None)
        yield store
    finally:
        await store.close()


async def test_call_stats_read_the_model_calls_of_the_turns_asked_for(store: Store) -> None:
    calls = [("t1", "openai/a", LLMCallStatus.OK, 100, 10, 0.5, 20.0),
             ("t1", "openai/a", LLMCallStatus.TIMEOUT, None, None, None, 60.0),
             ("t2", "ollama/b", LLMCallStatus.OK, 40, 4, None, 5.0)]
    for seq, (turn, model, status, prompt, completion, cost, latency) in enumerate(calls):
        await store.audit.record_llm_call(LLMCallRecord(turn_id=turn, seq=seq, model=model, status=status,
                                                        latency_ms=latency, prompt_tokens=prompt,
                                                        completion_tokens=completion, cost_usd=cost))
    assert await call_stats(store, ["t1"]) == CallStats(calls=2, failed=1, prompt_tokens=100, completion_tokens=10,
                                                        cost_usd=0.5, latency_ms=80.0, models=("openai/a",))
    assert await call_stats(store, ["t2"]) == CallStats(calls=1, prompt_tokens=40, completion_tokens=4,
                                                        cost_usd=None, latency_ms=5.0, models=("ollama/b",))
    everything = await call_stats(store, None)
    assert (everything.calls, everything.failed, everything.models) == (3, 1, ("openai/a", "ollama/b"))
    assert await call_stats(store, []) == CallStats()
