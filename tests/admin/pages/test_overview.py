"""The overview (``/``, ``/api/overview``, ``/api/overview/events``) and the charts' data
(``/api/charts/...``): what the owner sees at a glance after real turns through the app."""

from __future__ import annotations

import asyncio
import json

from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.store import Store
from bruce.values import ConversationId
from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN, BEARER, say


async def _turns(app, fake_llm) -> None:
    """One turn with a tool run that answers, one whose model call fails."""
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is 09:00."), Step.error(400, "bad request"))
    await say(app, "what time is it?")
    await say(app, "and now?")


async def test_the_overview_shows_today_upcoming_jobs_health_and_the_last_failures(app, admin, fake_llm):
    await _turns(app, fake_llm)
    await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Water the plants",
                                                        "cron": "0 8 * * *"})
    found = await (await admin.get("/api/overview", headers=BEARER)).json()
    a = found["activity"]
    assert a["messages"]["today"] == 2 and a["turns_ok"]["today"] == 1 and a["turns_failed"]["today"] == 1
    assert a["tool_runs"]["ok"]["today"] == 1 and a["llm_calls"]["today"] == 3 and a["tokens"]["today"] > 0
    assert a["turns_ok"]["week_mean"] == 0  # nothing in the 7 days before today
    (job,) = found["jobs"]
    assert job["description"] and job["next_run"]["local"].endswith(" 08:00 -03 (America/Sao_Paulo)")  # São Paulo's zone, named
    assert job["next_run"]["at"].endswith("-03:00")  # the API: ISO 8601 with the offset
    assert found["health"]["database"] == "ok"
    assert [c["name"] for c in found["health"]["channels"]] == ["test"]
    assert found["health"]["channels"][0]["last_send"]["local"] != "-"
    failure = found["failures"][0]
    assert failure["kind"] in ("turn", "provider") and failure["turn_id"]
    html = await (await admin.get("/", headers=BEARER)).text()
    assert "Today against the last 7 days" in html and f'href="/turns/{failure["turn_id"]}"' in html
    assert 'data-live="/api/overview/events"' in html and 'data-chart="/api/charts/tool-runs"' in html
    assert "No daily budget is set" in html and "Water the plants" in html


async def test_the_budget_is_a_bar_against_llm_budget(app_factory, fake_llm):
    app = await app_factory(llm={"budget": {"daily_tokens": 1000}})
    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0,
                         budget=app.llm.budget, zone=app.config.assistant.zone)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        fake_llm.add(Step.text("hello"))
        await say(app, "hi")
        budget = (await (await client.get("/api/overview", headers=BEARER)).json())["budget"]
        assert budget["limit_tokens"] == 1000 and 0 < budget["fraction"] < 1
        html = await (await client.get("/", headers=BEARER)).text()
        assert '<meter min="0" max="1"' in html and "of 1,000" in html
    finally:
        await client.close()


async def test_the_charts_data_has_days_statuses_tokens_and_latency_per_model(app, admin, fake_llm):
    await _turns(app, fake_llm)
    tools = await (await admin.get("/api/charts/tool-runs", headers=BEARER)).json()
    assert tools["zone"] == "America/Sao_Paulo" and len(tools["x"]) == 7
    assert [(s["label"], s["values"][-1]) for s in tools["series"]] == [("ok", 1)]
    usage = await (await admin.get("/api/charts/usage", params={"days": "3"}, headers=BEARER)).json()
    assert [s["label"] for s in usage["series"]] == ["prompt tokens", "completion tokens", "cost"]
    assert usage["series"][0]["values"][-1] == 20 and len(usage["x"]) == 3  # two answered calls, 10 each
    latency = await (await admin.get("/api/charts/latency", headers=BEARER)).json()
    assert [s["label"] for s in latency["series"]] == ["openai/primary p50", "openai/primary p95"]
    assert latency["series"][0]["unit"] == "ms" and latency["series"][0]["values"][0] is not None
    bad = await admin.get("/api/charts/usage", params={"days": "0"}, headers=BEARER)
    assert bad.status == 400 and "days" in (await bad.json())["error"]


async def test_the_overview_follows_a_finished_turn_as_an_event(app, fake_llm):
    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0)
    server.overview.poll_s = 0.05
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        events = await client.get("/api/overview/events", headers=BEARER)
        assert events.headers["Content-Type"] == "text/event-stream"

        async def next_event() -> dict:
            while True:
                line = (await events.content.readline()).decode()
                if line.startswith("data: "):
                    return json.loads(line[6:])

        first = await asyncio.wait_for(next_event(), 5)
        assert 'id="turns-ok"' in first["html"]
        fake_llm.add(Step.text("hello"))
        await say(app, "hi")
        changed = await asyncio.wait_for(next_event(), 5)
        row = changed["html"].split('id="turns-ok"', 1)[1]
        assert row.split('class="today">', 1)[1].startswith("1<")
        events.close()
    finally:
        await client.close()


async def test_a_pending_approval_links_to_its_turn_and_each_mcp_server_shows_its_state(app_factory, tmp_path,
                                                                                       fake_llm):
    (tmp_path / "notes").mkdir()
    app = await app_factory(tools={"files": {"notes_dir": str(tmp_path / "notes")}})

    async def health():  # what the daemon reports (bruce/runtime/daemon.py): channels and MCP servers
        return {"channels": {"telegram": {"last_receive": "2026-12-02T11:58:00.000000+00:00"}},
                "mcp": {"github": "ready", "notes": "failed"}}

    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0,
                         health=health, zone=app.config.assistant.zone)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                     Step.text("I need your approval to write todo.md."))
        await say(app, "note: milk")
        found = await (await client.get("/api/overview", headers=BEARER)).json()
        (approval,) = found["approvals"]
        assert approval["tool_name"] == "files.write" and approval["expires"]["local"].endswith("-03 (America/Sao_Paulo)")
        assert found["health"]["mcp"] == [{"server": "github", "state": "ready"}, {"server": "notes", "state": "failed"}]
        telegram = next(c for c in found["health"]["channels"] if c["name"] == "telegram")
        assert telegram["last_receive"]["local"] == "2026-12-02 08:58 -03 (America/Sao_Paulo)"
        assert telegram["last_send"]["local"] == "-"
        html = await (await client.get("/", headers=BEARER)).text()
        assert f'<a href="/turns/{approval["turn_id"]}">files.write</a>' in html
        assert '<th>MCP notes</th><td class="status-error">failed</td>' in html
    finally:
        await client.close()


async def test_the_overview_says_when_the_database_does_not_answer(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    await store.migrate()
    server = AdminServer(store=store, clock=clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        assert (await client.get("/", headers=BEARER)).status == 200
        await store.close()  # every read fails from now on
        response = await client.get("/", headers=BEARER)
        assert response.status == 503 and "The database did not answer (error: " in await response.text()
        response = await client.get("/api/overview", headers=BEARER)
        assert response.status == 503 and (await response.json())["health"]["database"].startswith("error: ")
    finally:
        await client.close()


async def test_the_past_week_is_read_when_the_page_starts_not_by_the_first_visitor(app, clock):
    from bruce.admin.pages.overview import local_days
    from bruce.clock import utc_iso

    server = AdminServer(store=app.store, clock=clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0,
                         zone=app.config.assistant.zone)
    assert server.overview.warm_since is None
    await server.start()
    try:
        for _ in range(100):
            if server.overview.warm_since is not None:
                break
            await asyncio.sleep(0.01)
        starts, _ = local_days(clock.now(), app.config.assistant.zone, 8)
        assert server.overview.warm_since == utc_iso(starts[-1])  # today's: nobody has asked for the page yet
    finally:
        await server.stop()
