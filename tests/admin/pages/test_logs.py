"""The tool log (``bruce.admin.pages.logs``), through aiohttp's test client on a real socket: every
filter and the cursor, a bad filter a 400 naming it, the page and one execution's detail, and new
executions arriving live over server-sent events."""

from __future__ import annotations

import pytest

from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER, say


async def some_executions(app, fake_llm) -> None:
    """Three tool executions from two conversations: clock ok, math ok, math invalid."""
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Noon."))
    await say(app, "time?")
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("4."))
    await say(app, "2+2?", chat="c2")
    app.clock.advance(hours=1)
    fake_llm.add(Step.tool_calls(("math_calculate", {"nope": 1})), Step.text("Hm."))
    await say(app, "again", chat="c2")


async def test_the_filters_and_the_cursor(app, admin, fake_llm):
    await some_executions(app, fake_llm)

    async def items(**query) -> dict:
        response = await admin.get("/api/tool-executions", params=query, headers=BEARER)
        assert response.status == 200, await response.text()
        return await response.json()

    everything = (await items())["items"]
    assert [i["tool_name"] for i in everything] == ["math.calculate", "math.calculate", "clock.now"]  # newest first
    first = everything[-1]
    assert set(first) == {"id", "tool_name", "status", "risk", "source", "conversation_id", "turn_id", "latency_ms",
                          "started_at", "input", "output", "error"}
    assert first["output"]["timezone"] == "America/Sao_Paulo" and first["source"] == "chat"
    assert [i["tool_name"] for i in (await items(tool="clock.now"))["items"]] == ["clock.now"]
    assert [i["status"] for i in (await items(status="invalid_args"))["items"]] == ["invalid_args"]
    assert len((await items(conversation="test:c2"))["items"]) == 2
    assert len((await items(source="chat"))["items"]) == 3 and (await items(source="proactive"))["items"] == []
    assert len((await items(since="2026-12-02T12:30:00Z"))["items"]) == 1
    assert len((await items(until="2026-12-02T12:30:00+00:00"))["items"]) == 2
    page = await items(limit="2")
    assert len(page["items"]) == 2 and page["next_cursor"] == page["items"][-1]["id"]
    rest = await items(limit="2", cursor=str(page["next_cursor"]))
    assert [i["tool_name"] for i in rest["items"]] == ["clock.now"] and rest["next_cursor"] is None
    one = await admin.get(f"/api/tool-executions/{first['id']}", headers=BEARER)
    assert (await one.json())["tool_name"] == "clock.now"


@pytest.mark.parametrize(("query", "named"), [
    ({"status": "great"}, "status"), ({"source": "email"}, "source"), ({"since": "yesterday"}, "since"),
    ({"until": "2026-12-02T12:00:00"}, "until"), ({"limit": "0"}, "limit"), ({"limit": "201"}, "limit"),
    ({"limit": "many"}, "limit"), ({"cursor": "-1"}, "cursor"), ({"colour": "red"}, "colour"),
])
async def test_a_bad_filter_is_a_400_naming_it(admin, query, named):
    response = await admin.get("/api/tool-executions", params=query, headers=BEARER)
    assert response.status == 400
    assert named in (await response.json())["error"]


async def test_the_logs_page_filters_and_shows_a_detail(app, admin, fake_llm):
    await some_executions(app, fake_llm)
    await admin.post("/login", data={"token": TOKEN})
    html = await (await admin.get("/logs", params={"status": "invalid_args"})).text()
    assert html.count("<tr class=\"status-") == 1 and "math.calculate" in html
    html = await (await admin.get("/logs", params={"tool": "clock.now"})).text()
    detail_id = html.split('href="/logs/', 1)[1].split('"', 1)[0]
    detail = await (await admin.get(f"/logs/{detail_id}")).text()
    assert '\n  &#34;timezone&#34;: &#34;America/Sao_Paulo&#34;' in detail  # pretty-printed, escaped
    assert (await admin.get("/logs/999999")).status == 404
    assert (await admin.get("/logs", params={"status": "great"})).status == 400


async def test_new_tool_executions_arrive_live_over_server_sent_events(app, admin, fake_llm):
    import asyncio
    import json as _json

    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Noon."))
    await say(app, "time?")
    (first,) = (await (await admin.get("/api/tool-executions", headers=BEARER)).json())["items"]
    assert (await admin.get("/api/tool-executions/events", params={"after": "x"}, headers=BEARER)).status == 400
    stream = await admin.get("/api/tool-executions/events", params={"after": str(first["id"]), "tool": "math.calculate"},
                             headers=BEARER)
    assert stream.headers["Content-Type"] == "text/event-stream"
    fake_llm.add(Step.tool_calls(("clock_now", {}), ("math_calculate", {"expression": "6*7"})), Step.text("42."))
    await say(app, "time and 6*7?")
    async with asyncio.timeout(10):
        while True:
            line = (await stream.content.readline()).decode()
            if line.startswith("data: "):
                item = _json.loads(line[6:])
                break
    assert item["tool_name"] == "math.calculate" and item["id"] > first["id"]  # the filter holds, clock.now is not sent
    stream.close()
