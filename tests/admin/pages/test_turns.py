"""One turn's trace (``bruce.admin.pages.turns``): its message, each model call and tool
execution in time order, and its reply; page and JSON."""

from __future__ import annotations

from tests.fakes.llm_server import Step
from tests.helpers import BEARER, say


async def test_a_turn_trace_has_the_message_each_call_in_order_and_the_reply(app, admin, fake_llm):
    steps = [Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("It is 4.")]

    def answer(body):  # each model call takes a second
        app.clock.advance(seconds=1)
        return steps.pop(0)

    fake_llm.responder = answer
    await say(app, "what is 2+2?")
    (item,) = (await (await admin.get("/api/tool-executions", headers=BEARER)).json())["items"]
    trace = await (await admin.get(f"/api/turns/{item['turn_id']}", headers=BEARER)).json()
    assert trace["message"]["text"] == "what is 2+2?" and trace["turn"]["status"] == "ok"
    assert [s["kind"] for s in trace["steps"]] == ["llm_call", "tool_execution", "llm_call"]
    assert trace["steps"][0]["prompt_tokens"] == 10 and trace["steps"][1]["tool_name"] == "math.calculate"
    assert [r["text"] for r in trace["replies"]] == ["It is 4."]
    html = await (await admin.get(f"/turns/{item['turn_id']}", headers=BEARER)).text()
    assert "what is 2+2?" in html and f'href="/logs/{item["id"]}"' in html and "It is 4." in html
    assert f"<title>Turn {item['turn_id'][:8]} · Bruce admin</title>" in html  # nothing but the title in it
    assert html.count('src="/static/charts.js"') == 1 and html.count('src="/static/uplot/uPlot.iife.min.js"') == 1
    assert (await admin.get("/api/turns/nosuchturn", headers=BEARER)).status == 404
