"""The model calls page (``bruce.admin.pages.llm``): filters and the cursor, the day's usage and
budget, and where the page finds its charts (drawn in the browser: tests/e2e)."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER, rows, say


async def test_llm_calls_filters_totals_budget_and_charts(app_factory, fake_llm):
    app = await app_factory(llm={"budget": {"daily_tokens": 1000}})
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         budget=app.llm.budget, zone=app.config.assistant.zone)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        fake_llm.add(Step.text("one"), Step.error(400, "bad request"))
        await say(app, "hi")
        await say(app, "again")
        calls = (await (await client.get("/api/llm-calls", headers=BEARER)).json())["items"]
        assert [c["status"] for c in calls][:1] == ["error"] and calls[-1]["status"] == "ok"
        ok = (await (await client.get("/api/llm-calls", params={"status": "ok"}, headers=BEARER)).json())["items"]
        assert [c["prompt_tokens"] for c in ok] == [10]
        page = await (await client.get("/api/llm-calls", params={"limit": "1"}, headers=BEARER)).json()
        assert len(page["items"]) == 1 and page["next_cursor"] == page["items"][0]["id"]
        bad = await client.get("/api/llm-calls", params={"status": "cached"}, headers=BEARER)
        assert bad.status == 400 and "status" in (await bad.json())["error"]
        html = await (await client.get("/llm", headers=BEARER)).text()
        assert "Today (2026-12-02): " in html and "of 1,000 tokens" in html
        assert "openai/primary" in html and 'data-chart="/api/charts/latency"' in html
        assert '<script src="/static/uplot/uPlot.iife.min.js">' in html
    finally:
        await client.close()



async def test_transcriptions_are_told_apart_from_chat_calls_with_totals_per_kind(app, admin, fake_llm):
    from bruce.records import LLMCallRecord
    from bruce.values import LLMCallKind, LLMCallStatus

    await say(app, "hi")
    (turn,) = await rows(app, "SELECT id FROM turns")
    for latency, status, cost in ((300.0, LLMCallStatus.OK, 0.006), (500.0, LLMCallStatus.ERROR, None)):
        await app.store.audit.record_llm_call(LLMCallRecord(
            turn_id=turn["id"], seq=9, model="openai/whisper-1", status=status, latency_ms=latency, cost_usd=cost,
            kind=LLMCallKind.TRANSCRIPTION))
    heard = await (await admin.get("/api/llm-calls", params={"kind": "transcription"}, headers=BEARER)).json()
    assert [(c["model"], c["kind"]) for c in heard["items"]] == [("openai/whisper-1", "transcription")] * 2
    chat = await (await admin.get("/api/llm-calls", params={"kind": "chat"}, headers=BEARER)).json()
    assert [c["model"] for c in chat["items"]] == ["openai/primary"]
    totals = {t["kind"]: t for t in heard["totals_by_kind"]}
    assert totals["transcription"] == {"kind": "transcription", "calls": 2, "failed": 1, "mean_latency_ms": 400.0,
                                       "usd": 0.006}
    assert totals["chat"]["calls"] == 1 and totals["chat"]["failed"] == 0
    bad = await admin.get("/api/llm-calls", params={"kind": "vision"}, headers=BEARER)
    assert bad.status == 400 and "kind: 'vision' is not one of chat, transcription" in (await bad.json())["error"]
    html = await (await admin.get("/llm", params={"kind": "transcription"}, headers=BEARER)).text()
    assert '<td><a href="/llm?kind=transcription">transcription</a></td><td>2</td><td>1</td><td>400</td>' \
           '<td>0.0060</td>' in html
    assert '<option value="transcription" selected>' in html
    assert '<td class="kind-transcription">transcription</td><td>openai/whisper-1</td>' in html
    assert '<td class="kind-chat">' not in html  # the filter shows transcriptions only
    trace = await (await admin.get(f"/turns/{turn['id']}", headers=BEARER)).text()
    assert "<strong>LLM</strong> (transcription) openai/whisper-1" in trace
