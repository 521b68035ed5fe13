"""What the model calls cost, summed over a time window; a day's budget raised once; a budget
notice claimed once per day and level."""

from __future__ import annotations

from bruce.records import LLMCallRecord, Spent
from bruce.values import LLMCallStatus, ToolStatus, TurnSource
from tests.store.test_audit import a_turn, execution


async def calls(store, clock) -> None:
    turn = await a_turn(store)
    for seq, (status, cost, tokens) in enumerate([(LLMCallStatus.OK, 0.5, 10), (LLMCallStatus.ERROR, None, None),
                                                   (LLMCallStatus.OK, 0.25, 4)], start=1):
        await store.audit.record_llm_call(LLMCallRecord(turn_id=turn, seq=seq, model="m", status=status, latency_ms=1,
                                                        prompt_tokens=tokens, completion_tokens=tokens and 1,
                                                        cost_usd=cost))
        clock.advance(hours=1)


async def test_spent_sums_tokens_cost_and_calls_inside_the_window(store, clock):
    await calls(store, clock)
    assert await store.usage.spent_between("2026-12-02T00", "2026-12-03T00") == Spent(tokens=16, usd=0.75, calls=3)
    assert await store.usage.spent_between("2026-12-02T13", "2026-12-03T00") == Spent(tokens=5, usd=0.25, calls=2)
    assert await store.usage.spent_between("2026-12-03T00", "2026-12-04T00") == Spent(tokens=0, usd=0.0, calls=0)


async def test_each_call_and_each_cache_hit_in_the_window(store, clock):
    await calls(store, clock)
    assert await store.usage.calls_between("2026-12-02T12:30", "2026-12-03T00") == [
        ("2026-12-02T13:00:00.000000+00:00", "m", 0, 0, 0, None),
        ("2026-12-02T14:00:00.000000+00:00", "m", 1, 4, 1, 0.25)]
    await store.audit.record_tool_execution(execution(None, status=ToolStatus.CACHED, source=TurnSource.CHAT))
    await store.audit.record_tool_execution(execution(None))
    assert await store.usage.cache_hits_between("2026-12-02T00", "2026-12-03T00") == [
        "2026-12-02T15:00:00.000000+00:00"]


async def test_a_day_is_raised_once(store):
    assert await store.usage.allowance("2026-12-02") == (0.0, 0)
    assert await store.usage.allow("2026-12-02", usd=2.5, tokens=1000)
    assert not await store.usage.allow("2026-12-02", usd=9.0, tokens=9)
    assert await store.usage.allowance("2026-12-02") == (2.5, 1000)


async def test_a_notice_is_claimed_once_per_day_and_level(store):
    assert await store.usage.claim_notice("2026-12-02", "warning", "test:1")
    assert not await store.usage.claim_notice("2026-12-02", "warning", None)
    assert await store.usage.claim_notice("2026-12-02", "exhausted", None)
    assert await store.usage.claim_notice("2026-12-03", "warning", None)
