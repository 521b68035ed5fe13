"""Web chat: the ``web`` channel, in the admin page (``/chat``), conversation ``web:owner``.

The owner chats with Bruce in the browser through the same worker, audit and policy as every
channel. The admin app (``bruce.admin``) serves the page and puts its token gate (and CSRF) in
front of these routes, which the app assembly mounts (``routes``):

* ``POST /api/chat/messages`` ``{"text": "..."}``: delivered like any message (202); or a
  ``multipart/form-data`` body with ``text`` (the caption, may be empty) and up to 10 ``files``:
  stored under the uploads folder (``channels/web_uploads.py``), then delivered as one message
  with those attachments, which the core fetches back (``fetch``);
* ``GET /api/chat/events``: server-sent events, one JSON object per event: ``thinking``,
  ``tool_started`` (with the tool's ``activity`` label) / ``tool_finished``, ``delta`` (the
  answer's text as it streams), ``text`` (a reply), ``confirmation`` (Approve / Deny; none for a step-up request), ``file``;
* ``POST /api/chat/decide`` ``{"id": "...", "approve": true}``: the same decision as a button
  on Telegram (``inbound.decide``);
* ``GET /api/chat/pending``: ``{"items": [...]}``, each approval request of the conversation
  still waiting for a decision, as its ``confirmation`` event showed it (read from the store:
  ``inbound.pending_requests``); the page rebuilds their cards when it opens, after a reload or
  in another tab.

With no browser listening, a reply cannot go out: it stays unsent (a permanent failure for
now) and is sent when a page connects again (``inbound.resend``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import structlog
from aiohttp import web

from bruce.channel import Attachment, ConfirmationRequest, IncomingMessage, LocalInbound
from bruce.clock import Clock
from bruce.errors import ChannelSendError, MediaFetchError, StoreError
from bruce.safe_text import read_json
from bruce.turns.progress import ProgressEvent, TextDelta, Thinking, ToolFinished, ToolStarted
from bruce.values import ConversationId
from channels.web_uploads import MAX_FILES, UploadRefused, Uploads

__all__ = ["WebChat", "CHAT_ID", "USER_ID"]

log = structlog.get_logger(__name__)

CHAT_ID = "owner"
USER_ID = "owner"
MAX_TEXT_CHARS = 100_000
HEARTBEAT_S = 15.0
QUEUE_LIMIT = 1000  # a page that stops reading is dropped past this many events


class _Sink:
    wants_text = True

    def __init__(self, chat: WebChat) -> None:
        self._chat = chat

    async def emit(self, event: ProgressEvent) -> None:
        match event:
            case Thinking():
                shown: dict[str, Any] = {"type": "thinking"}
            case ToolStarted(tool=tool, activity=activity):
                shown = {"type": "tool_started", "tool": tool, "activity": activity}
            case ToolFinished(tool=tool, status=status):
                shown = {"type": "tool_finished", "tool": tool, "status": str(status)}
            case TextDelta(text=text):
                shown = {"type": "delta", "text": text}
            case _:
                return
        await self._chat.broadcast(shown, required=False)


class WebChat:
    name = "web"
    max_message_length = MAX_TEXT_CHARS

    def __init__(self, *, clock: Clock, uploads: Path | None = None, max_file_mb: float = 20.0,
                 keep_days: int = 30) -> None:
        """``uploads``: the folder files sent from the page are kept in (None: the page sends text only)."""
        self._clock = clock
        self._uploads = None if uploads is None else Uploads(uploads, clock=clock, max_file_mb=max_file_mb,
                                                             keep_days=keep_days, max_text_chars=MAX_TEXT_CHARS)
        self._inbound: LocalInbound | None = None
        self._pages: set[asyncio.Queue[dict[str, Any] | None]] = set()

    @property
    def conversation_id(self) -> ConversationId:
        return ConversationId(self.name, CHAT_ID)

    async def start(self, inbound: Any) -> None:
        self._inbound = cast(LocalInbound, inbound)
        if self._uploads is not None:
            await asyncio.to_thread(self._uploads.clean_if_due)

    async def stop(self) -> None:
        self._inbound = None
        for page in list(self._pages):
            page.put_nowait(None)  # each event stream ends

    async def broadcast(self, event: dict[str, Any], *, required: bool = True) -> None:
        reached = 0
        for page in list(self._pages):
            if page.qsize() >= QUEUE_LIMIT:
                self._pages.discard(page)
                page.put_nowait(None)
                continue
            page.put_nowait(event)
            reached += 1
        if required and not reached:
            raise ChannelSendError("no web chat page is open", retryable=False)

    # the channel port ----------------------------------------------------------------------

    async def send_text(self, chat_id: str, text: str) -> None:
        await self.broadcast({"type": "text", "text": text})

    @contextlib.asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        await self.broadcast({"type": "thinking"}, required=False)
        yield

    @contextlib.asynccontextmanager
    async def progress(self, chat_id: str) -> AsyncIterator[_Sink]:
        yield _Sink(self)

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        await self.broadcast(_card(request))

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        await self.broadcast({"type": "file", "name": path.name, "caption": caption})

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """An uploaded file's bytes (``MediaChannel``)."""
        if self._uploads is None:
            raise MediaFetchError("this web chat keeps no uploads")
        return await self._uploads.fetch(attachment.ref, max_bytes=max_bytes)

    # routes (mounted behind the admin token by the app assembly) ----------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/api/chat/messages", self._message), web.get("/api/chat/events", self._events),
                web.post("/api/chat/decide", self._decide), web.get("/api/chat/pending", self._pending)]

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = read_json(await request.read())
        except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
            raise web.HTTPBadRequest(text=json.dumps({"error": "the body must be a JSON object"}),
                                     content_type="application/json") from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text=json.dumps({"error": "the body must be a JSON object"}),
                                     content_type="application/json")
        return body

    async def _message(self, request: web.Request) -> web.Response:
        inbound = self._inbound
        if inbound is None:
            return web.json_response({"error": "Bruce is stopping; try again after the restart"}, status=503)
        if request.content_type == "multipart/form-data":
            return await self._upload(request, inbound)
        text = (await self._body(request)).get("text")
        if not isinstance(text, str) or not text.strip():
            return web.json_response({"error": "text: give the message as a non-empty string"}, status=400)
        if len(text) > MAX_TEXT_CHARS:
            return web.json_response({"error": f"text: at most {MAX_TEXT_CHARS} characters (got {len(text)})"},
                                     status=400)
        return await self._deliver(inbound, text, ())

    async def _upload(self, request: web.Request, inbound: LocalInbound) -> web.Response:
        uploads = self._uploads
        if uploads is None:
            return web.json_response({"error": "this web chat takes no files"}, status=400)
        if (request.content_length or 0) > uploads.max_body_bytes:
            return web.json_response({"error": f"the upload is larger than {MAX_FILES} files of media.max_file_mb "
                                               f"({uploads.max_file_mb:g} MB) each; nothing was sent"}, status=413)
        await asyncio.to_thread(uploads.clean_if_due)
        try:
            received = await uploads.receive(request)
        except UploadRefused as exc:
            log.info("web.upload_refused", status=exc.status, error=exc.message)
            return web.json_response({"error": exc.message}, status=exc.status)
        if not received.text.strip() and not received.attachments:
            return web.json_response({"error": "text: give a message, a file, or both"}, status=400)
        response = await self._deliver(inbound, received.text, received.attachments)
        if response.status != 202:
            uploads.discard(received.attachments)
        return response

    async def _deliver(self, inbound: LocalInbound, text: str, attachments: tuple[Attachment, ...]) -> web.Response:
        message = IncomingMessage(channel=self.name, chat_id=CHAT_ID, sender_id=USER_ID, text=text,
                                  platform_message_id=f"web:{uuid.uuid4().hex}", timestamp=self._clock.now(),
                                  private=True, sender_name="owner", attachments=attachments)
        try:
            await inbound.deliver(message)
        except StoreError as exc:
            log.warning("web.store_failed", error=str(exc))
            return web.json_response({"error": "the message could not be stored; send it again"}, status=503)
        shown = [{"name": a.name, "kind": str(a.kind), "size": a.size} for a in attachments]
        return web.json_response({"stored": True, "attachments": shown} if shown else {"stored": True}, status=202)

    async def _decide(self, request: web.Request) -> web.Response:
        inbound = self._inbound
        if inbound is None:
            return web.json_response({"error": "Bruce is stopping; try again after the restart"}, status=503)
        body = await self._body(request)
        rid, approve = body.get("id"), body.get("approve")
        if not isinstance(rid, str) or not rid.strip() or len(rid) > 64 or not isinstance(approve, bool):
            return web.json_response({"error": "give id (the request's id) and approve (true or false)"}, status=400)
        report = await inbound.decide(self.conversation_id, USER_ID, rid.strip(), approve)
        return web.json_response({"outcome": str(report.outcome), "text": report.text})

    async def _pending(self, request: web.Request) -> web.Response:
        inbound = self._inbound
        if inbound is None:
            return web.json_response({"error": "Bruce is stopping; try again after the restart"}, status=503)
        try:
            waiting = await inbound.pending_requests(self.conversation_id)
        except StoreError as exc:
            log.warning("web.store_failed", error=str(exc))
            return web.json_response({"error": "the pending requests could not be read; reload the page"}, status=503)
        return web.json_response({"items": [_card(r) for r in waiting]})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        page: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._pages.add(page)
        try:
            await response.write(b": connected\n\n")
            if self._inbound is not None:
                await self._inbound.resend(self.conversation_id)  # what waited for a page
            while True:
                try:
                    event = await asyncio.wait_for(page.get(), HEARTBEAT_S)
                except TimeoutError:
                    await response.write(b": heartbeat\n\n")
                    continue
                if event is None:
                    break
                data = json.dumps(event, ensure_ascii=False, default=str)
                await response.write(f"data: {data}\n\n".encode())
        except ConnectionResetError:  # the page went away
            pass
        finally:
            self._pages.discard(page)
        return response


def _card(request: ConfirmationRequest) -> dict[str, Any]:
    """An approval request as the page builds its card (the event, and the pending listing)."""
    return {"type": "confirmation", **asdict(request), "expires_at": request.expires_at.isoformat()}
