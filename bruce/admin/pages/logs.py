"""The tool log: ``/logs`` (tool executions, newest first, filters, cursor pagination, new rows
live) and ``/logs/ID`` (one execution, pretty-printed). JSON: ``GET /api/tool-executions`` (the
filters ``tool``, ``status``, ``conversation``, ``source``, ``since``, ``until``, ``limit``,
``cursor``; answer ``{"items": [...], "next_cursor": ...}``), ``/api/tool-executions/ID``, and
``/api/tool-executions/events`` (server-sent events; each also carries ``started_local``, the
time as the page shows it, and ``started_utc``). A bad filter is a 400 naming it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from aiohttp import web

from bruce.admin.pages.listing import MAX_LIMIT, BadRequest, one_page, parse_filters
from bruce.admin.pages.rendering import Page
from bruce.clock import local_time, utc_title
from bruce.records import StoredToolExecution, from_json
from bruce.store.audit import AuditStore
from bruce.values import ToolStatus, TurnSource

__all__ = ["LogPages", "execution_item"]

FILTERS = {"tool": "tool_name", "status": "status", "conversation": "conversation_id", "source": "source",
           "since": "since", "until": "until"}
TOOL_STATUSES = tuple(status.value for status in ToolStatus)


def execution_item(row: StoredToolExecution) -> dict[str, Any]:
    """A tool execution as the API and the pages show it (input and output decoded)."""
    return {"id": row.id, "tool_name": row.tool_name, "status": row.status, "risk": row.risk,
            "source": row.source, "conversation_id": row.conversation_id, "turn_id": row.turn_id,
            "latency_ms": row.latency_ms, "started_at": row.created_at, "input": from_json(row.input),
            "output": from_json(row.output), "error": row.error}


class LogPages:
    def __init__(self, audit: AuditStore, page: Page, *, poll_s: float = 1.0, zone: ZoneInfo | None = None) -> None:
        self._audit = audit
        self._page = page
        self.zone = zone or ZoneInfo("UTC")  # the live rows' times, as the page's
        self.poll_s = poll_s  # how often the live log looks for new rows

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/logs", self._logs_page), web.get("/logs/{id}", self._log_page),
                web.get("/api/tool-executions", self._api_list),
                web.get("/api/tool-executions/events", self._live),
                web.get("/api/tool-executions/{id}", self._api_one)]

    async def _executions(self, query: Mapping[str, str]) -> tuple[list[dict[str, Any]], int | None]:
        filters, limit, cursor = parse_filters(query, FILTERS, TOOL_STATUSES)
        rows, next_cursor = one_page(await self._audit.tool_executions(filters=filters, before_id=cursor,
                                                                       limit=limit + 1), limit)
        return [execution_item(r) for r in rows], next_cursor

    async def _one(self, request: web.Request) -> dict[str, Any] | None:
        raw = request.match_info["id"]
        if not raw.isdigit() or len(raw) > 18:
            return None
        row = await self._audit.tool_execution(int(raw))
        return execution_item(row) if row else None

    async def _api_list(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor = await self._executions(request.query)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"items": items, "next_cursor": next_cursor})

    async def _api_one(self, request: web.Request) -> web.Response:
        item = await self._one(request)
        if item is None:
            return web.json_response({"error": f"no tool execution {request.match_info['id'][:40]!r}"}, status=404)
        return web.json_response(item)

    async def _live(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: each tool execution recorded after ``after`` (an id), matching the
        same filters as the list, as it is recorded (the page adds it at the top)."""
        query = {k: v for k, v in request.query.items() if k != "after"}
        after_text = request.query.get("after", "0")
        try:
            filters, _, _ = parse_filters(query, FILTERS, TOOL_STATUSES)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if not after_text.isdigit() or len(after_text) > 18:
            return web.json_response({"error": "after: the id of the newest row shown"}, status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        await response.write(b": connected\n\n")
        try:
            await self._follow(response, filters, int(after_text))
        except ConnectionResetError:  # the page went away
            pass
        return response

    async def _follow(self, response: web.StreamResponse, filters: dict[str, str], last: int) -> None:
        """Write each new matching row as an event, until the page goes away."""
        while True:
            rows = await self._audit.tool_executions(filters={**filters}, before_id=None, limit=MAX_LIMIT,
                                                     after_id=last)
            for row in sorted(rows, key=lambda r: r.id):
                last = max(last, row.id)
                shown = {**execution_item(row), "started_local": local_time(row.created_at, self.zone, seconds=True),
                         "started_utc": utc_title(row.created_at)}  # as the page's rows show it
                await response.write(f"data: {json.dumps(shown, ensure_ascii=False)}\n\n".encode())
            if not rows:
                await response.write(b": waiting\n\n")
            await asyncio.sleep(self.poll_s)

    async def _logs_page(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor = await self._executions(request.query)
        except BadRequest as exc:
            return self._page("logs.html", request=request, items=[], error=str(exc), query=request.query,
                              older=None, status=400)
        older = None
        if next_cursor is not None:
            older = "/logs?" + urlencode({**{k: v for k, v in request.query.items() if k != "cursor"},
                                          "cursor": next_cursor})
        live = None
        if "cursor" not in request.query:  # the newest page follows new rows as they are recorded
            newest = max((int(i["id"]) for i in items), default=0)
            live = "/api/tool-executions/events?" + urlencode(
                {**{k: v for k, v in request.query.items() if k != "limit" and v}, "after": newest})
        return self._page("logs.html", request=request, items=items, error=None, query=request.query, older=older,
                          statuses=[s.value for s in ToolStatus], sources=[s.value for s in TurnSource], live=live)

    async def _log_page(self, request: web.Request) -> web.Response:
        item = await self._one(request)
        if item is None:
            raise web.HTTPNotFound(text="no such tool execution")
        return self._page("log.html", request=request, item=item,
                          input_text=json.dumps(item["input"], indent=2, ensure_ascii=False),
                          output_text=json.dumps(item["output"], indent=2, ensure_ascii=False))
