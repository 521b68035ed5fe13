"""The agent loop's rules, seen from the model's side (the requests it gets), the user's (the
progress and the answer) and the audit (turns, tool_executions).

docs/architecture.md, "The agent loop's ceilings": ``assistant.max_turns`` model calls may use
tools, then one final call without tools answers; an identical call (same tool, same arguments)
is not executed again in a turn, the model is told why and the final call is made at once.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from bruce.log import configure_logging
from bruce.turns.agent_loop import run_agent_loop
from bruce.turns.progress import TextDelta, Thinking, ToolFinished, ToolStarted
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, TurnSource
from tests.actions.test_registry import contract
from tests.conftest import T0
from tests.fakes.channel import ProgressRecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

CEILING_NOTE = ("You have used every tool call this turn allows. Do not call tools. Answer the user now with what the "
                "tool results above show, and say plainly what is still undone.")
AFTER_REPEAT_NOTE = ("Repeating the same tool call will not help. Do not call tools. Answer the user now with what the "
                     "tool results above show, and say plainly what is still undone.")


def repeat_note(name: str) -> str:
    return (f"Not executed: you already called {name} with exactly these arguments in this turn, and its result is "
            "above. Do not repeat it. Answer the user with what you have.")


@pytest.fixture
def channel() -> ProgressRecordingChannel:
    return ProgressRecordingChannel("test")


def tool_contents(request: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def turn(app) -> dict:
    (found,) = await rows(app, "SELECT llm_calls, tool_calls, hit_ceiling, stopped_repeat, status FROM turns "
                               "WHERE source != 'summary'")
    return found


async def test_an_answer_without_tools_ends_the_turn_at_once(app, fake_llm, channel):
    fake_llm.add(Step.text("  Hello!  "))
    await say(app, "hi")
    assert channel.texts() == ["Hello!"]
    assert len(fake_llm.requests) == 1
    assert await turn(app) == {"llm_calls": 1, "tool_calls": 0, "hit_ceiling": 0, "stopped_repeat": 0, "status": "ok"}
    first = fake_llm.requests[0]["messages"]
    assert first[0]["role"] == "system" and first[1:] == [{"role": "user", "content": "hi"}]


async def test_an_empty_answer_is_not_sent_as_such(app, fake_llm, channel):
    fake_llm.add(Step.text(""))
    await say(app, "hi")
    assert channel.texts() == ["The language model returned an empty answer, so I have nothing to tell you. Please ask "
                               "again. Nothing was done."]


async def test_an_empty_answer_at_the_ceiling_says_the_steps_ran_out(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"max_turns": 1})
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text(""))
    await say(app, "time?")
    assert channel.texts() == ["I could not finish this within the steps I'm allowed. These actions completed: "
                               "clock.now."]


async def test_results_go_back_to_the_model_under_their_call_ids(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "2+2"}, "call_a"),
                                 ("math_calculate", {"expression": "3*3"}, "call_b")),
                 Step.text("4 and 9."))
    await say(app, "two sums")
    second = fake_llm.requests[1]["messages"]
    assistant, *tools = second[-3:]
    assert assistant["role"] == "assistant" and [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert [(m["role"], m["tool_call_id"]) for m in tools] == [("tool", "call_a"), ("tool", "call_b")]
    assert [json.loads(m["content"]) for m in tools] == [
        {"ok": True, "result": {"expression": "2+2", "result": 4}},
        {"ok": True, "result": {"expression": "3*3", "result": 9}}]
    assert await turn(app) == {"llm_calls": 2, "tool_calls": 2, "hit_ceiling": 0, "stopped_repeat": 0, "status": "ok"}


async def test_the_model_reads_results_as_text_and_dates_as_text(app, fake_llm):
    async def rich(args, ctx):
        return {"city": "São Paulo", "when": T0}

    app.registry.register(contract("test.rich"), rich)
    fake_llm.add(Step.tool_calls(("test_rich", {})), Step.text("It is in São Paulo."))
    await say(app, "where?")
    (message,) = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert message["content"] == '{"ok": true, "result": {"city": "São Paulo", "when": "2026-12-02 12:00:00+00:00"}}'


async def test_progress_names_each_tool_and_its_outcome(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "1/0"}), ("clock_now", {})),
                 Step.text("Done."))
    await say(app, "go")
    steps = [e for e in channel.events if not isinstance(e, TextDelta)]
    assert steps[0] == Thinking() and steps[-1] == Thinking() and len(steps) == 6
    tools = steps[1:-1]
    assert sorted(e.tool for e in tools if isinstance(e, ToolStarted)) == ["clock.now", "math.calculate"]
    assert sorted((e.tool, str(e.status)) for e in tools if isinstance(e, ToolFinished)) == [
        ("clock.now", "ok"), ("math.calculate", "error")]
    for name in ("clock.now", "math.calculate"):
        assert tools.index(ToolStarted(name)) < next(i for i, e in enumerate(tools)
                                                      if isinstance(e, ToolFinished) and e.tool == name)


async def test_the_ceiling_allows_max_turns_tool_rounds_then_answers_without_tools(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"max_turns": 2})
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "1+1"})),
                 Step.tool_calls(("math_calculate", {"expression": "2+2"})),
                 Step.text("I got as far as 4."))
    await say(app, "keep adding")
    assert channel.texts() == ["I got as far as 4."]
    assert len(fake_llm.requests) == 3
    assert ["tools" in r for r in fake_llm.requests] == [True, True, False]
    assert fake_llm.requests[2]["messages"][-1] == {"role": "system", "content": CEILING_NOTE}
    assert await turn(app) == {"llm_calls": 3, "tool_calls": 2, "hit_ceiling": 1, "stopped_repeat": 0, "status": "ok"}


async def test_one_tool_round_then_an_answer_is_not_the_ceiling(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"max_turns": 2})
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "1+1"})), Step.text("2."))
    await say(app, "add")
    assert len(fake_llm.requests) == 2 and "tools" in fake_llm.requests[1]
    assert await turn(app) == {"llm_calls": 2, "tool_calls": 1, "hit_ceiling": 0, "stopped_repeat": 0, "status": "ok"}


async def test_an_identical_call_repeated_under_the_same_id_is_still_a_repeat(app, fake_llm):
    """A model (or a proxy) that reuses one call id: the copy is answered as a repeat, not
    handed the first call's result as if it had run again."""
    fake_llm.add(Step.tool_calls(("clock_now", {}, "call_1"), ("clock_now", {}, "call_1")), Step.text("Noon."))
    await say(app, "time twice")
    second = fake_llm.requests[1]
    assert "tools" not in second and second["messages"][-1] == {"role": "system", "content": AFTER_REPEAT_NOTE}
    answers = [json.loads(m["content"]) for m in second["messages"] if m["role"] == "tool"]
    assert answers[0]["ok"] is True
    assert answers[1] == {"ok": False, "status": "repeated", "error": repeat_note("clock_now")}
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 1
    assert (await turn(app))["stopped_repeat"] == 1


async def test_a_repeat_sharing_its_id_with_a_new_call_gets_no_result_of_that_call(app, fake_llm):
    fake_llm.add(Step.tool_calls(("clock_now", {}, "call_1")),
                 Step.tool_calls(("math_calculate", {"expression": "6*7"}, "call_9"), ("clock_now", {}, "call_9")),
                 Step.text("42."))
    await say(app, "time, then math and time again")
    third = fake_llm.requests[2]
    answers = [json.loads(m["content"]) for m in third["messages"] if m["role"] == "tool"]
    assert answers[1]["ok"] is True and "42" in json.dumps(answers[1]["result"])
    assert answers[2] == {"ok": False, "status": "repeated", "error": repeat_note("clock_now")}
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 2


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ('{"timezone": "UTC"}', '{"timezone": "UTC"}'),
        ('{"timezone": "UTC", "x": 1}', '{"x": 1, "timezone": "UTC"}'),  # the same arguments in another order
        ("", "{}"),  # no arguments either way
        ("{not json", "{not json"),  # the same text, even if it is not JSON
    ],
)
async def test_a_repeated_identical_call_is_not_run_and_the_model_must_answer(app, fake_llm, channel, first, again):
    fake_llm.add(Step.tool_calls(("clock_now", first)), Step.tool_calls(("clock_now", again)), Step.text("Noon."))
    await say(app, "time?")
    assert channel.texts() == ["Noon."]
    assert len(fake_llm.requests) == 3 and "tools" not in fake_llm.requests[2]
    final = fake_llm.requests[2]["messages"]
    assert tool_contents(fake_llm.requests[2])[-1] == {"ok": False, "status": "repeated",
                                                       "error": repeat_note("clock_now")}
    assert final[-1] == {"role": "system", "content": AFTER_REPEAT_NOTE}
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 1
    assert await turn(app) == {"llm_calls": 3, "tool_calls": 1, "hit_ceiling": 0, "stopped_repeat": 1, "status": "ok"}


async def test_an_identical_call_within_one_reply_runs_once(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("clock_now", {}, "call_1"), ("clock_now", {}, "call_2")), Step.text("Noon."))
    await say(app, "time twice")
    second = fake_llm.requests[1]
    assert "tools" not in second and second["messages"][-1] == {"role": "system", "content": AFTER_REPEAT_NOTE}
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["call_1", "call_2"]
    assert json.loads(answers[0]["content"])["ok"] is True
    assert json.loads(answers[1]["content"]) == {"ok": False, "status": "repeated", "error": repeat_note("clock_now")}
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 1
    assert await turn(app) == {"llm_calls": 2, "tool_calls": 1, "hit_ceiling": 0, "stopped_repeat": 1, "status": "ok"}


@pytest.mark.parametrize(
    ("first", "again"),
    [
        (("math_calculate", {"expression": "1+1"}), ("math_calculate", {"expression": "1+2"})),
        (("clock_now", {}), ("math_calculate", {})),  # another tool, the same (empty) arguments
    ],
)
async def test_a_different_call_is_not_a_repeat(app, fake_llm, first, again):
    fake_llm.add(Step.tool_calls(first), Step.tool_calls(again), Step.text("Done."))
    await say(app, "go on")
    assert len(fake_llm.requests) == 3 and "tools" in fake_llm.requests[2]
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 2
    assert (await turn(app))["stopped_repeat"] == 0


async def test_a_turn_with_no_tool_allowed_sends_no_tool_list(app, fake_llm):
    fake_llm.add(Step.text("Briefing."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "briefing", tools=lambda c: False)
    assert "tools" not in fake_llm.requests[0]


async def test_the_loop_reports_what_it_did(app, fake_llm):
    """run_agent_loop's own result, for a caller other than the chat turn."""
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")

    async def scope() -> TurnScope:
        s = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1")
        await app.store.messages.start_turn(s.turn_id, "test:c1", source=TurnSource.CHAT, inbound_message_id=None)
        return s

    history = [{"role": "user", "content": "go"}]
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.tool_calls(("clock_now", {})), Step.text(" Noon. "))
    repeated = await run_agent_loop(app.llm, app.registry, "sys", history, 5, scope=await scope())
    assert (repeated.text, repeated.llm_calls, repeated.hit_ceiling, repeated.stopped_repeat) == ("Noon.", 3, False,
                                                                                                True)
    assert [r.name for r in repeated.tool_results] == ["clock_now"]

    fake_llm.add(Step.tool_calls(("clock_now", {}, "k1")), Step.tool_calls(("math_calculate", {"expression": "1"}, "k2")),
                 Step.text("Both."))
    ceiling = await run_agent_loop(app.llm, app.registry, "sys", history, 2, scope=await scope())
    assert (ceiling.text, ceiling.llm_calls, ceiling.hit_ceiling, ceiling.stopped_repeat) == ("Both.", 3, True, False)
    assert [(r.call_id, r.name, str(r.status)) for r in ceiling.tool_results] == [
        ("k1", "clock_now", "ok"), ("k2", "math_calculate", "ok")]

    for i in range(5):  # the default: five rounds may use tools
        fake_llm.add(Step.tool_calls(("math_calculate", {"expression": f"{i}+1"})))
    fake_llm.add(Step.text("Five sums."))
    default = await run_agent_loop(app.llm, app.registry, "sys", history, scope=await scope())
    assert (default.llm_calls, default.hit_ceiling, len(default.tool_results)) == (6, True, 5)

    fake_llm.add(Step.text("At once."))
    direct = await run_agent_loop(app.llm, app.registry, "sys", history, 0, scope=await scope())
    assert (direct.text, direct.llm_calls, direct.hit_ceiling, direct.tool_results) == ("At once.", 1, True, ())
    assert "tools" not in fake_llm.requests[-1]



@pytest.fixture
def log_lines():
    buffer = io.StringIO()
    configure_logging(fmt="json", stream=buffer)
    yield lambda event: [line for line in map(json.loads, buffer.getvalue().splitlines()) if line["event"] == event]
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


async def test_the_log_says_why_a_turn_stopped_using_tools(app_factory, fake_llm, log_lines):
    app = await app_factory(assistant={"max_turns": 1})
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Noon."))
    await say(app, "time?")
    (line,) = log_lines("agent.ceiling_hit")
    assert (line["level"], line["max_model_calls"]) == ("info", 1)
    assert log_lines("agent.repeat_stopped") == []

    fake_llm.add(Step.tool_calls(("clock_now", {}), ("clock_now", {})), Step.text("Noon."))
    await say(app, "time twice?")
    (line,) = log_lines("agent.repeat_stopped")
    assert (line["level"], line["tool"]) == ("info", "clock_now")
    assert len(log_lines("agent.ceiling_hit")) == 1


TOKEN_NOTE = ("This turn has used the tokens it may use. Do not call tools. Answer the user now with what the tool "
              "results above show, and say plainly what is still undone.")


def tool_step(expression: str, prompt_tokens: int) -> Step:
    step = Step.tool_calls(("math_calculate", {"expression": expression}))
    return Step(step.kind, calls=step.calls, prompt_tokens=prompt_tokens, completion_tokens=100)


async def test_the_turn_token_ceiling_forces_the_final_answer_before_the_call_that_would_cross_it(
        app_factory, fake_llm, channel):
    app = await app_factory(assistant={"max_turns": 5, "max_turn_tokens": 18000})
    # 6,100 used after the first call, the next estimated at a little over 6,100 more: under 18,000;
    # 12,200 after the second, and the third would cross it: the final answer comes instead
    fake_llm.add(tool_step("1+1", 6000), tool_step("2+2", 6000), Step.text("I got as far as 4."))
    await say(app, "keep adding")
    assert channel.texts() == ["I got as far as 4."]
    assert ["tools" in r for r in fake_llm.requests] == [True, True, False]
    assert fake_llm.requests[-1]["messages"][-1] == {"role": "system", "content": TOKEN_NOTE}
    assert await turn(app) == {"llm_calls": 3, "tool_calls": 2, "hit_ceiling": 1, "stopped_repeat": 0, "status": "ok"}


async def test_under_the_token_ceiling_the_loop_goes_on(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"max_turns": 5, "max_turn_tokens": 60000})
    fake_llm.add(tool_step("1+1", 6000), tool_step("2+2", 6000), Step.text("4."))
    await say(app, "keep adding")
    assert ["tools" in r for r in fake_llm.requests] == [True, True, True]
    assert await turn(app) == {"llm_calls": 3, "tool_calls": 2, "hit_ceiling": 0, "stopped_repeat": 0, "status": "ok"}
