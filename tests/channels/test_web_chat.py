"""Web chat (channels/web_chat.py) behind the admin token: a message goes through the worker, the
answer streams as server-sent events and arrives as a reply; a pending confirmation comes
with its id and is decided through the same door as a button; a reply made while no page was
open waits for the next one."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.app import build_app
from channels.web_chat import WebChat
from tests.fakes.llm_server import Step
from tests.helpers import rows

TOKEN = "web-chat-admin-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def web(make_config, clock, tmp_path):
    (tmp_path / "notes").mkdir()
    config = make_config(tools={"files": {"notes_dir": str(tmp_path / "notes")}})
    chat = WebChat(clock=clock)
    app = await build_app(config, clock=clock, environ={}, extra_channels=[chat])
    await app.start()
    server = AdminServer(store=app.store, clock=clock, token=TOKEN, host="127.0.0.1", port=0,
                         chat_routes=chat.routes())
    client = TestClient(TestServer(server.app))
    await client.start_server()
    yield app, client
    await client.close()
    await app.stop()


async def events_until(response, stop: str, timeout: float = 20) -> list[dict]:
    """Read server-sent events until one of type ``stop`` arrives."""
    seen: list[dict] = []
    async with asyncio.timeout(timeout):
        while True:
            line = (await response.content.readline()).decode()
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if seen[-1]["type"] == stop:
                    return seen


async def test_a_message_is_answered_and_the_answer_streams_in(web, fake_llm):
    app, client = web
    fake_llm.add(Step.text("Hello! The weather in Recife is sunny today."))
    stream = await client.get("/api/chat/events", headers=BEARER)
    assert stream.headers["Content-Type"] == "text/event-stream"
    sent = await client.post("/api/chat/messages", json={"text": "hi"}, headers=BEARER)
    assert sent.status == 202
    seen = await events_until(stream, "text")
    kinds = [e["type"] for e in seen]
    assert "thinking" in kinds and "delta" in kinds and kinds.index("delta") < kinds.index("text")
    assert "".join(e["text"] for e in seen if e["type"] == "delta") == "Hello! The weather in Recife is sunny today."
    assert seen[-1]["text"] == "Hello! The weather in Recife is sunny today."
    await app.worker.wait_idle()
    stored = await rows(app, "SELECT conversation_id, direction, status FROM messages ORDER BY id")
    assert stored == [{"conversation_id": "web:owner", "direction": "in", "status": "done"},
                      {"conversation_id": "web:owner", "direction": "out", "status": "sent"}]
    stream.close()


async def test_a_tool_step_carries_the_label_of_the_tools_contract(web, fake_llm):
    app, client = web
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is nine."))
    stream = await client.get("/api/chat/events", headers=BEARER)
    await client.post("/api/chat/messages", json={"text": "what time is it?"}, headers=BEARER)
    seen = await events_until(stream, "text")
    (started,) = [e for e in seen if e["type"] == "tool_started"]
    assert started == {"type": "tool_started", "tool": "clock.now", "activity": "Checking the time"}
    await app.worker.wait_idle()
    stream.close()


async def test_a_confirmation_is_decided_from_the_page(web, fake_llm, tmp_path):
    app, client = web
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                 Step.text("I need your approval to write todo.md."))
    stream = await client.get("/api/chat/events", headers=BEARER)
    await client.post("/api/chat/messages", json={"text": "note: milk"}, headers=BEARER)
    seen = await events_until(stream, "confirmation")
    request = seen[-1]
    assert request["tool_name"] == "files.write" and request["step_up"] is False and len(request["id"]) == 8
    fake_llm.add(Step.text("Written."))
    decided = await client.post("/api/chat/decide", json={"id": request["id"], "approve": True}, headers=BEARER)
    assert decided.status == 200 and (await decided.json())["outcome"] == "approved"
    texts = [e["text"] for e in await events_until(stream, "text") if e["type"] == "text"]
    for _ in range(200):
        if (tmp_path / "notes" / "todo.md").exists():
            break
        await asyncio.sleep(0.02)
    assert (tmp_path / "notes" / "todo.md").read_text() == "milk\n"
    assert texts
    again = await client.post("/api/chat/decide", json={"id": request["id"], "approve": True}, headers=BEARER)
    assert (await again.json())["outcome"] != "approved"  # single use
    stream.close()


async def test_a_reply_made_with_no_page_open_arrives_when_one_opens(web, fake_llm):
    app, client = web
    fake_llm.add(Step.text("You were away; here it is."))
    await client.post("/api/chat/messages", json={"text": "hi"}, headers=BEARER)
    await app.worker.wait_idle()
    (reply,) = await rows(app, "SELECT status FROM messages WHERE direction = 'out'")
    assert reply["status"] == "unsent"
    stream = await client.get("/api/chat/events", headers=BEARER)
    seen = await events_until(stream, "text")
    assert seen[-1]["text"] == "You were away; here it is."
    stream.close()


@pytest.mark.parametrize(("body", "named"), [
    ({"text": ""}, "text"), ({"text": 5}, "text"), ({}, "text"), ({"text": "x" * 100_001}, "at most"),
])
async def test_bad_messages_are_400_and_nothing_is_stored(web, body, named):
    app, client = web
    response = await client.post("/api/chat/messages", json=body, headers=BEARER)
    assert response.status == 400 and named in (await response.json())["error"]
    assert await rows(app, "SELECT id FROM messages") == []


async def test_a_body_nested_too_deeply_is_400_not_a_crash(web):
    app, client = web
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError, not ValueError
    response = await client.post("/api/chat/messages", data=deep, headers={**BEARER, "Content-Type": "application/json"})
    assert response.status == 400 and "JSON object" in (await response.json())["error"]
    assert await rows(app, "SELECT id FROM messages") == []


async def test_the_chat_needs_the_token_and_a_csrf_token_with_the_cookie(web):
    _, client = web
    assert (await client.post("/api/chat/messages", json={"text": "hi"})).status == 401
    assert (await client.get("/api/chat/events")).status == 401
    await client.post("/login", data={"token": TOKEN})
    assert (await client.post("/api/chat/messages", json={"text": "hi"})).status == 403  # no CSRF header
    page = await (await client.get("/chat")).text()
    csrf = page.split('name="csrf" content="', 1)[1].split('"', 1)[0]
    response = await client.post("/api/chat/messages", json={"text": "hi"}, headers={"X-CSRF-Token": csrf})
    assert response.status == 202
    assert (await client.post("/api/chat/decide", data="not json", headers={"X-CSRF-Token": csrf})).status == 400
