"""The web chat's page (``bruce.admin.pages.chat``), through aiohttp's test client on a real
socket: a 404 where the web chat is not served; where it is, behind the token, the last 50
messages of ``web:owner`` (and only of it), oldest first, escaped, notices told apart."""

from __future__ import annotations

import re

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.values import MessageKind
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER


async def test_without_the_web_chat_the_page_is_not_there(admin):
    response = await admin.get("/chat", headers=BEARER)
    assert response.status == 404 and "served by `bruce run`" in await response.text()


async def test_the_page_shows_the_latest_messages_of_the_web_chat(app):
    store = app.store.messages
    await store.ensure_conversation("web:owner", "web", "owner")
    await store.ensure_conversation("test:c1", "test", "c1")
    for i in range(30):
        await store.add_inbound("web:owner", sender_id="owner", text=f"question {i}", platform_message_id=None)
        await app.store.outbound.add("web:owner", f"answer {i}", turn_id=None)
        await app.store.outbound.add("test:c1", "not the web chat", turn_id=None)
    await app.store.outbound.add("web:owner", "<b>over budget</b>", turn_id=None, kind=MessageKind.NOTICE)

    async def never(request: web.Request) -> web.Response:
        raise AssertionError("not called")

    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         chat_routes=[web.get("/api/chat/events", never)])
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        assert (await client.get("/chat", allow_redirects=False)).status == 303  # log in first
        response = await client.get("/chat", headers=BEARER)
        assert response.status == 200
        shown = re.findall(r'<div class="msg (\w+)">(.*?)</div>', await response.text())
        assert len(shown) == 50
        assert shown[0] == ("bruce", "answer 5") and shown[1] == ("you", "question 6")  # 61 stored
        assert shown[-1] == ("notice", "&lt;b&gt;over budget&lt;/b&gt;")
    finally:
        await client.close()
