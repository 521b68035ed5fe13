"""run_agent_loop through the real LLM service (litellm) and the fake OpenAI server."""

from __future__ import annotations

import json

from tests.fakes.llm_server import Step
from tests.helpers import rows, say


async def test_two_step_chain_calculates_then_answers(app, fake_llm, channel):
    fake_llm.add(
        Step.tool_calls(("math_calculate", {"expression": "1234*5678"})),
        Step.text("1234 × 5678 = 7006652."),
    )
    await say(app, "what is 1234 times 5678?")

    assert channel.texts() == ["1234 × 5678 = 7006652."]
    calls = await rows(app, "SELECT seq, model, status, prompt_tokens, completion_tokens FROM llm_calls ORDER BY seq")
    assert [(c["seq"], c["status"]) for c in calls] == [(1, "ok"), (2, "ok")]
    assert calls[0]["prompt_tokens"] == 10 and calls[0]["completion_tokens"] == 5
    (execution,) = await rows(app, "SELECT tool_name, status, input, output, risk, source FROM tool_executions")
    assert execution["tool_name"] == "math.calculate" and execution["status"] == "ok"
    assert json.loads(execution["input"]) == {"expression": "1234*5678"}
    assert json.loads(execution["output"])["result"] == 7006652
    # the tool result went back to the model, tied to its call id
    tool_msgs = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and json.loads(tool_msgs[0]["content"])["result"]["result"] == 7006652
    assert tool_msgs[0]["tool_call_id"] == fake_llm.requests[1]["messages"][-2]["tool_calls"][0]["id"]


async def test_tool_definitions_are_sent_with_wire_names(app, fake_llm):
    fake_llm.add(Step.text("hi"))
    await say(app, "hello")
    names = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert {"math_calculate", "clock_now"} <= names


async def test_ceiling_stops_after_max_turns_with_a_final_answer(app, fake_llm, channel):
    for i in range(5):
        fake_llm.add(Step.tool_calls(("math_calculate", {"expression": f"{i}+1"})))
    fake_llm.add(Step.text("I computed several sums; here they are."))
    await say(app, "keep calculating")

    assert channel.texts() == ["I computed several sums; here they are."]
    assert len(fake_llm.requests) == 6
    assert "tools" not in fake_llm.requests[-1], "the final call must have tools disabled"
    (turn,) = await rows(app, "SELECT status, llm_calls, tool_calls, hit_ceiling FROM turns WHERE source='chat'")
    assert turn == {"status": "ok", "llm_calls": 6, "tool_calls": 5, "hit_ceiling": 1}
    assert len(await rows(app, "SELECT id FROM llm_calls")) == 6


async def test_identical_repeated_call_is_stopped_early(app, fake_llm, channel):
    fake_llm.add(
        Step.tool_calls(("clock_now", {"timezone": "UTC"})),
        Step.tool_calls(("clock_now", {"timezone": "UTC"})),
        Step.text("It is noon UTC."),
    )
    await say(app, "what time is it?")

    assert channel.texts() == ["It is noon UTC."]
    assert len(fake_llm.requests) == 3
    repeat_feedback = [m for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"][-1]
    assert "already called clock_now" in repeat_feedback["content"]
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 1
    (turn,) = await rows(app, "SELECT stopped_repeat, hit_ceiling FROM turns WHERE source='chat'")
    assert turn == {"stopped_repeat": 1, "hit_ceiling": 0}


async def test_independent_calls_in_one_response_all_run(app, fake_llm, channel):
    fake_llm.add(
        Step.tool_calls(("math_calculate", {"expression": "2+2"}), ("math_calculate", {"expression": "3*3"}),
                        ("clock_now", {})),
        Step.text("4 and 9."),
    )
    await say(app, "two sums and the time")
    statuses = await rows(app, "SELECT tool_name, status FROM tool_executions ORDER BY id")
    assert sorted(s["tool_name"] for s in statuses) == ["clock.now", "math.calculate", "math.calculate"]
    assert all(s["status"] == "ok" for s in statuses)
    tool_msgs = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    call_ids = [c["id"] for c in fake_llm.requests[1]["messages"][-4]["tool_calls"]]
    assert [m["tool_call_id"] for m in tool_msgs] == call_ids


async def test_an_empty_final_answer_is_a_clear_note_and_not_ok(app, fake_llm, channel):
    fake_llm.add(Step.text("   "))
    await say(app, "hello?")
    (notice,) = channel.texts()
    assert notice.startswith("The language model returned an empty answer") and "Nothing was done." in notice
    (turn,) = await rows(app, "SELECT status, error FROM turns WHERE source = 'chat'")
    assert turn == {"status": "failed", "error": "empty answer"}
    (reply,) = await rows(app, "SELECT kind FROM messages WHERE direction = 'out'")
    assert reply["kind"] == "notice"  # kept out of the model's history
