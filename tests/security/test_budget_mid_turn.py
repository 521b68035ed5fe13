"""Issue 30, point 8: the daily budget was checked when a turn started, and not before its later
model calls, so a turn that began under the budget kept calling the model after it was spent.
It is checked before every model call now. When it runs out between two calls of a turn, no
further call is made; the turn ends with the code-written budget notice (its reset time) and
names what the tools already did, stored and sent once.

``llm.budget.daily_tokens`` is 1,000; an earlier turn spent 950 of them."""

from __future__ import annotations

from dataclasses import replace

from bruce.values import ConversationId
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

CID = ConversationId("test", "c1")
NOTICE = ("Today's LLM budget is used up (1,050 of 1,000 tokens), so I cannot answer with the model until "
          "Thu 2026-12-03 00:00 -03 (America/Sao_Paulo). The owner can raise today's budget once with "
          "`bruce budget allow --usd N`. Reminders still arrive.")


def spending(step: Step, tokens: int) -> Step:
    return replace(step, prompt_tokens=tokens - 5, completion_tokens=5)


async def nearly_spent(app_factory, fake_llm):
    app = await app_factory(llm={"budget": {"daily_tokens": 1000}})
    fake_llm.add(spending(Step.text("Hello."), 950))
    await say(app, "hi")
    return app


async def test_a_call_that_spends_the_budget_is_the_turns_last_and_the_user_hears_what_was_done(
        app_factory, fake_llm, channel) -> None:
    app = await nearly_spent(app_factory, fake_llm)
    before, seen = len(fake_llm.requests), len(channel.texts())
    create = ("proactive_create", {"execution_mode": "message", "content": "Call Ana", "in_seconds": 3600})
    fake_llm.add(spending(Step.tool_calls(create), 100),  # 1,050 of 1,000 tokens once it returns
                 Step.text("Done: I will remind you in an hour."))  # never asked for
    await say(app, "remind me to call Ana in an hour")
    assert len(fake_llm.requests) == before + 1  # no model call after the budget was spent
    assert [j["content"] for j in await rows(app, "SELECT content FROM proactive_jobs")] == ["Call Ana"]  # the tool ran
    expected = f"{NOTICE} These actions completed: proactive.create."
    assert channel.texts()[seen:] == [expected]  # once, and no 80 % note after it
    (_, turn) = await rows(app, "SELECT status, llm_calls, error FROM turns ORDER BY rowid")
    assert turn == {"status": "failed", "llm_calls": 1, "error": "over budget"}
    (stored,) = await rows(app, "SELECT text, status FROM messages WHERE direction = 'out' AND text LIKE 'Today%'")
    assert stored == {"text": expected, "status": "sent"}


async def test_a_scheduled_run_that_spends_the_budget_stops_after_its_tool_and_says_so(
        app_factory, fake_llm, channel, clock) -> None:
    app = await nearly_spent(app_factory, fake_llm)
    await app.jobs.create(CID, {"execution_mode": "agent", "content": "What time is it?", "in_seconds": 60})
    before = len(fake_llm.requests)
    fake_llm.add(spending(Step.tool_calls(("clock_now", {})), 100), Step.text("It is noon."))
    clock.advance(seconds=60)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()
    assert len(fake_llm.requests) == before + 1
    assert channel.texts()[-1] == f"I could not complete a scheduled task. {NOTICE} These actions completed: clock.now."


async def test_the_claim_correction_call_is_not_made_over_the_budget(app_factory, fake_llm, channel) -> None:
    app = await nearly_spent(app_factory, fake_llm)
    before = len(fake_llm.requests)
    fake_llm.add(spending(Step.text("I've saved it for you."), 100), Step.text("Sorry, I did not save it."))
    await say(app, "save my notes")
    assert len(fake_llm.requests) == before + 1  # the correction would have been a second call
    assert channel.texts()[-1].startswith("I've saved it for you.\n\n(Note from Bruce: no tool saved anything")
