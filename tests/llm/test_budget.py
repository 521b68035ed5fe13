"""The daily LLM budget and the usage report, as the owner and the user see them: at 80 % one
notice; at 100 % a new chat turn gets a notice with the reset time and makes no model call, an
agent job is skipped and recorded, a reminder still fires; summaries stop at 90 %; it resets at
local midnight; ``bruce budget`` and ``bruce usage`` show it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
import yaml

from bruce.cli.main import main
from bruce.errors import OverBudget
from bruce.records import ToolExecutionRecord
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, JobRunStatus, ToolStatus, TurnSource
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

CID = "test:c1"


def reply(tokens: int, text: str = "ok") -> Step:
    return Step.text(text, prompt_tokens=tokens - 5, completion_tokens=5)


def chat_requests(fake_llm) -> int:
    return len([r for r in fake_llm.requests if "tools" in r])


async def test_at_the_budget_a_turn_gets_the_notice_and_no_model_call_until_local_midnight(
        app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"budget": {"daily_tokens": 100}})
    fake_llm.responder = lambda body: reply(50)
    await say(app, "one")
    await say(app, "two")  # 100 of 100 tokens
    assert chat_requests(fake_llm) == 2
    await say(app, "three")
    assert chat_requests(fake_llm) == 2  # no model call
    notice = channel.texts()[-1]
    assert notice.startswith("Today's LLM budget is used up (100 of 100 tokens)")
    assert "until Thu 2026-12-03 00:00 -03 (America/Sao_Paulo)." in notice and "bruce budget allow" in notice
    (three,) = await rows(app, "SELECT status FROM messages WHERE text = 'three'")
    assert three["status"] == "done"  # answered with the notice, never later by the model
    clock.set(datetime(2026, 12, 3, 2, 59, tzinfo=UTC))  # 23:59 in São Paulo: still today
    await say(app, "four")
    assert chat_requests(fake_llm) == 2
    clock.set(datetime(2026, 12, 3, 3, 0, tzinfo=UTC))  # local midnight: a new day, a new budget
    await say(app, "five")
    assert chat_requests(fake_llm) == 3 and channel.texts()[-1] == "ok"


async def test_the_80_percent_notice_comes_once(app_factory, fake_llm, channel):
    app = await app_factory(llm={"budget": {"daily_tokens": 1000}})
    fake_llm.responder = lambda body: reply(300)
    await say(app, "one")  # 30 %
    await say(app, "two")  # 60 %
    assert not any(t.startswith("Note:") for t in channel.texts())
    await say(app, "three")  # 90 %: told
    await say(app, "four")  # 120 %: already told (and the next turn gets the budget notice)
    warnings = [t for t in channel.texts() if t.startswith("Note:")]
    assert warnings == ["Note: 90% of today's LLM budget is used (900 of 1,000 tokens). At 100% I stop using the "
                        "model until 00:00 -03 (America/Sao_Paulo)."]
    await say(app, "five")
    assert len([t for t in channel.texts() if t.startswith("Note:")]) == 1
    assert channel.texts()[-1].startswith("Today's LLM budget is used up")


async def test_over_budget_a_reminder_still_fires_and_an_agent_job_is_skipped_and_recorded(
        app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"budget": {"daily_tokens": 50}})
    fake_llm.responder = lambda body: reply(50)
    await say(app, "spend it")
    requests = len(fake_llm.requests)
    reminder = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "message", "content": "Call Ana", "in_seconds": 60})).job
    briefing = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "agent", "content": "Brief me.", "in_seconds": 60})).job
    clock.advance(seconds=60)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()
    assert "Call Ana" in channel.texts() and len(fake_llm.requests) == requests
    (skipped,) = await app.store.jobs.runs(briefing.id)
    assert skipped.status is JobRunStatus.OVER_BUDGET and "budget" in skipped.error
    (sent,) = await app.store.jobs.runs(reminder.id)
    assert sent.status is JobRunStatus.DELIVERED


async def test_background_calls_stop_at_90_percent(app_factory, fake_llm):
    app = await app_factory(llm={"budget": {"daily_tokens": 100}})
    fake_llm.responder = lambda body: reply(90)
    await say(app, "spend 90 %")
    before = len(fake_llm.requests)
    scope = TurnScope(turn_id=new_turn_id(), conversation_id=ConversationId.parse(CID), user_id=None, source=TurnSource.SUMMARY)
    with pytest.raises(OverBudget):
        await app.llm.complete([{"role": "user", "content": "summarize"}], scope=scope)
    assert len(fake_llm.requests) == before
    chat = TurnScope(turn_id=new_turn_id(), conversation_id=ConversationId.parse(CID), user_id=None)
    await app.store.messages.start_turn(chat.turn_id, CID, source=TurnSource.CHAT, inbound_message_id=None)
    await app.llm.complete([{"role": "user", "content": "still a chat call"}], scope=chat)  # under 100 %: allowed
    assert len(fake_llm.requests) == before + 1


async def test_the_cost_budget_uses_litellms_prices(app_factory, fake_llm, channel):
    app = await app_factory(llm={"model": "openai/gpt-4o-mini", "budget": {"daily_usd": 0.2}})
    fake_llm.responder = lambda body: Step.text("ok", prompt_tokens=1_000_000, completion_tokens=0)  # $0.15
    await say(app, "one")
    (call,) = await rows(app, "SELECT cost_usd FROM llm_calls")
    assert call["cost_usd"] == pytest.approx(0.15)
    await say(app, "two")  # $0.30 of $0.20 after it
    await say(app, "three")
    assert chat_requests(fake_llm) == 2
    assert channel.texts()[-1].startswith("Today's LLM budget is used up ($0.30 of $0.20)")


@pytest.fixture
def bruce(tmp_path, clock, monkeypatch):
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"assistant": {"timezone": "America/Sao_Paulo"},
                                      "llm": {"budget": {"daily_tokens": 100}},
                                      "storage": {"path": str(tmp_path / "bruce.db")}}))
    monkeypatch.setattr("bruce.cli.usage.SystemClock", lambda: clock)

    async def run(capsys, *argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["--config", str(config), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


async def test_bruce_budget_status_and_allow_once(app_factory, fake_llm, channel, bruce, capsys):
    app = await app_factory(llm={"budget": {"daily_tokens": 100}})
    fake_llm.responder = lambda body: reply(100)
    await say(app, "spend it")
    code, out, _ = await bruce(capsys, "budget", "status")
    assert code == 0 and "today (2026-12-02, America/Sao_Paulo): 1 model calls, 100 tokens" in out
    assert "100 of 100 tokens (100%; spent: chat turns and agent jobs wait)" in out
    code, out, _ = await bruce(capsys, "budget", "allow", "--tokens", "100")
    assert code == 0 and "raised today's budget: 100 of 200 tokens" in out
    await say(app, "again")
    assert channel.texts()[-1] == "ok"
    code, _, err = await bruce(capsys, "budget", "allow", "--tokens", "100")
    assert code == 1 and "raised already" in err
    code, _, err = await bruce(capsys, "budget", "allow")
    assert code == 2 and "--usd" in err


async def test_allowing_dollars_when_only_tokens_are_limited_is_refused_and_keeps_the_days_allowance(
        app_factory, bruce, capsys):
    await app_factory(llm={"budget": {"daily_tokens": 100}})
    code, _, err = await bruce(capsys, "budget", "allow", "--usd", "5")
    assert code == 2 and "llm.budget.daily_usd is null" in err and "nothing changed" in err
    code, out, _ = await bruce(capsys, "budget", "allow", "--tokens", "50")
    assert code == 0 and "0 of 150 tokens" in out


async def test_bruce_usage_and_slash_usage_show_tokens_cost_calls_and_cache_hits(
        app_factory, fake_llm, channel, bruce, capsys, clock):
    app = await app_factory()
    fake_llm.responder = lambda body: reply(40)
    await say(app, "one")
    clock.advance(days=1)
    await say(app, "two")
    await app.store.audit.record_tool_execution(  # a search answered from the cache, today
        ToolExecutionRecord(turn_id=None, conversation_id=None, call_id="c", tool_name="web.search", risk="low",
                            input={}, output=None, status=ToolStatus.CACHED, error=None, latency_ms=0.1,
                            source=TurnSource.CHAT, idempotency_key=None))
    code, out, _ = await bruce(capsys, "usage", "--json")
    data = json.loads(out)
    assert [(u["day"], u["model"], u["calls"], u["prompt_tokens"] + u["completion_tokens"]) for u in data["usage"]] == [
        ("2026-12-02", "openai/primary", 1, 40), ("2026-12-03", "openai/primary", 1, 40)]
    assert data["cache_hits"] == {"2026-12-03": 1}
    code, out, _ = await bruce(capsys, "usage", "--days", "1")
    assert code == 0 and "2026-12-03" in out and "2026-12-02" not in out and "cache hits: 2026-12-03 1" in out
    await say(app, "/usage")
    listing = channel.texts()[-1]
    assert listing.startswith("Model usage, last 7 days:")
    assert "- 2026-12-03: 1 calls, 40 tokens, $0.0000, 1 cache hits" in listing
    assert "- 2026-12-02: 1 calls, 40 tokens" in listing
    code, _, err = await bruce(capsys, "usage", "--days", "0")
    assert code == 2 and "--days" in err
