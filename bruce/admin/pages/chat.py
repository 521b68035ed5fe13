"""``/chat``: the web chat's page, with the conversation's latest messages. The chat itself is a
channel (``channels/web_chat.py``, conversation ``web:owner``) whose routes the assembly gives
the admin app; without them (any process but ``bruce run``) this page is a 404. A message sent
with files shows their names."""

from __future__ import annotations

import json

from aiohttp import web

from bruce.admin.pages.rendering import Page
from bruce.store.messages import MessageStore

__all__ = ["ChatPage"]

CONVERSATION = "web:owner"
HISTORY = 50


class ChatPage:
    def __init__(self, messages: MessageStore, page: Page, *, served: bool) -> None:
        self._messages = messages
        self._page = page
        self._served = served  # the web chat's routes are mounted

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/chat", self._chat_page)]

    async def _chat_page(self, request: web.Request) -> web.Response:
        if not self._served:
            raise web.HTTPNotFound(text="web chat is served by `bruce run`")
        history = await self._messages.latest(CONVERSATION, limit=HISTORY)
        files = {m.id: _names(m.attachments) for m in history if m.attachments}
        return self._page("chat.html", request=request, history=history, files=files)


def _names(attachments: str) -> list[str]:
    """The file names of a message's stored attachments (its kind when one has no name)."""
    try:
        listed = json.loads(attachments)
    except ValueError:
        return []
    return [str(a.get("name") or a.get("kind") or "file") for a in listed if isinstance(a, dict)] \
        if isinstance(listed, list) else []
