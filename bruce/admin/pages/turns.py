"""One turn's trace: ``/turns/ID`` and ``GET /api/turns/ID``: the message it answered (with what it
carried: a photo's thumbnail, a voice note's transcript, a document's name, size and characters
read, ``bruce.admin.pages.media``), its model calls and tool executions as one list of steps in
time order, and its replies."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bruce.admin.pages.logs import execution_item
from bruce.admin.pages.media import MediaFiles, attachment_items
from bruce.admin.pages.rendering import Page
from bruce.records import as_dict
from bruce.store.audit import AuditStore

__all__ = ["TurnPages"]


class TurnPages:
    def __init__(self, audit: AuditStore, page: Page, files: MediaFiles | None = None) -> None:
        self._audit = audit
        self._page = page
        self._files = files or MediaFiles(None)

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/turns/{id}", self._turn_page), web.get("/api/turns/{id}", self._api_turn)]

    async def _trace(self, request: web.Request) -> dict[str, Any] | None:
        turn_id = request.match_info["id"]
        if not turn_id.isalnum() or len(turn_id) > 64:
            return None
        trace = await self._audit.turn_trace(turn_id)
        if trace is None:
            return None
        steps = [{"kind": "llm_call", "at": c.created_at, "model": c.model, "call_kind": c.kind, "status": c.status,
                  "latency_ms": c.latency_ms, "prompt_tokens": c.prompt_tokens,
                  "completion_tokens": c.completion_tokens, "cost_usd": c.cost_usd, "error": c.error}
                 for c in trace.llm_calls]
        steps += [{"kind": "tool_execution", **execution_item(t), "at": t.created_at} for t in trace.tool_executions]
        steps.sort(key=lambda step: (step["at"], 0 if step["kind"] == "llm_call" else 1))
        message = None
        if trace.message is not None:
            message = {**as_dict(trace.message),
                       "attachments": attachment_items(trace.message.attachments, trace.message.id, self._files)}
        return {"turn": as_dict(trace.turn), "message": message, "steps": steps,
                "replies": [as_dict(r) for r in trace.replies]}

    async def _api_turn(self, request: web.Request) -> web.Response:
        trace = await self._trace(request)
        if trace is None:
            return web.json_response({"error": f"no turn {request.match_info['id'][:64]!r}"}, status=404)
        return web.json_response(trace)

    async def _turn_page(self, request: web.Request) -> web.Response:
        trace = await self._trace(request)
        if trace is None:
            raise web.HTTPNotFound(text="no such turn")
        return self._page("turn.html", request=request, **trace)
