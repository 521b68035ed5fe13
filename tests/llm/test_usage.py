"""bruce.llm.usage: model calls summed per local day and model over a real database, and the
chat's /usage text. (``bruce usage`` and ``/usage`` end to end: tests/llm/test_budget.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bruce.llm.usage import DayUsage, usage_by_day, usage_text
from bruce.records import LLMCallRecord, ToolExecutionRecord
from bruce.store import Store
from bruce.values import LLMCallStatus, ToolStatus, TurnSource
from tests.fakes.clock import FakeClock

SAO_PAULO = ZoneInfo("America/Sao_Paulo")  # UTC-3


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        await store.migrate()
        await store.messages.ensure_conversation("test:c1", "test", "c1")
        await store.messages.start_turn("t1", "test:c1", source=TurnSource.CHAT, inbound_message_id=None)
        yield store
    finally:
        await store.close()


async def call_at(store: Store, clock: FakeClock, moment: datetime, model: str, *, prompt: int = 100,
                  completion: int = 10, cost: float | None = 0.001, ok: bool = True) -> None:
    clock.set(moment)
    await store.audit.record_llm_call(LLMCallRecord(
        turn_id="t1", seq=0, model=model, status=LLMCallStatus.OK if ok else LLMCallStatus.ERROR, latency_ms=5.0,
        prompt_tokens=prompt if ok else None, completion_tokens=completion if ok else None,
        cost_usd=cost if ok else None))


async def cache_hit_at(store: Store, clock: FakeClock, moment: datetime) -> None:
    clock.set(moment)
    await store.audit.record_tool_execution(ToolExecutionRecord(
        turn_id=None, conversation_id=None, call_id="c", tool_name="web.search", risk="low", input={}, output=None,
        status=ToolStatus.CACHED, error=None, latency_ms=0.1, source=TurnSource.CHAT, idempotency_key=None))


async def test_calls_are_summed_per_local_day_and_model(store: Store, clock: FakeClock) -> None:
    await call_at(store, clock, datetime(2026, 11, 30, 12, 0, tzinfo=UTC), "openai/a")  # three days ago: outside
    await call_at(store, clock, datetime(2026, 12, 2, 2, 30, tzinfo=UTC), "openai/a")  # 23:30 on Dec 1, local
    await call_at(store, clock, datetime(2026, 12, 2, 12, 0, tzinfo=UTC), "openai/a", prompt=200, cost=0.002)
    await call_at(store, clock, datetime(2026, 12, 2, 13, 0, tzinfo=UTC), "openai/a", ok=False)
    await call_at(store, clock, datetime(2026, 12, 2, 14, 0, tzinfo=UTC), "ollama/local", cost=None)
    await cache_hit_at(store, clock, datetime(2026, 12, 2, 15, 0, tzinfo=UTC))
    clock.set(datetime(2026, 12, 2, 20, 0, tzinfo=UTC))

    rows, hits = await usage_by_day(store, clock, SAO_PAULO, days=2)

    assert rows == [
        DayUsage("2026-12-01", "openai/a", calls=1, failed=0, prompt_tokens=100, completion_tokens=10,
                 cost_usd=pytest.approx(0.001)),
        DayUsage("2026-12-02", "ollama/local", calls=1, failed=0, prompt_tokens=100, completion_tokens=10,
                 cost_usd=0.0),  # a model litellm does not price costs nothing
        DayUsage("2026-12-02", "openai/a", calls=2, failed=1, prompt_tokens=200, completion_tokens=10,
                 cost_usd=pytest.approx(0.002)),
    ]
    assert hits == {"2026-12-02": 1}
    today_only, _ = await usage_by_day(store, clock, SAO_PAULO, days=1)
    assert {r.day for r in today_only} == {"2026-12-02"}


def test_usage_text_lists_days_newest_first_with_totals() -> None:
    rows = [DayUsage("2026-12-01", "openai/a", calls=1, prompt_tokens=1000, completion_tokens=234, cost_usd=0.5),
            DayUsage("2026-12-02", "openai/a", calls=2, failed=1, prompt_tokens=10, completion_tokens=5, cost_usd=0.25),
            DayUsage("2026-12-02", "ollama/local", calls=3, prompt_tokens=1, completion_tokens=1)]
    assert usage_text(rows, {"2026-12-02": 4, "2026-11-30": 1}, 7) == "\n".join([
        "Model usage, last 7 days:",
        "- 2026-12-02: 5 calls, 17 tokens, $0.2500, 4 cache hits",
        "- 2026-12-01: 1 calls, 1,234 tokens, $0.5000, 0 cache hits",
        "- 2026-11-30: 0 calls, 0 tokens, $0.0000, 1 cache hits",
    ])
    assert usage_text([], {}, 3) == "No model calls in the last 3 days."
