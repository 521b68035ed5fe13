"""The model calls: ``/llm`` (the calls, newest first, with usage per day and model, the day's
budget, totals per kind of call (chat completions and voice transcriptions: calls, failed,
mean latency, cost, over the ``since`` / ``until`` asked for), and the charts of latency p50 / p95
per model and of tokens and cost per day, drawn in the browser from ``bruce.admin.pages.charts``) and ``GET /api/llm-calls`` (filters ``model``, ``status``, ``kind``,
``since``, ``until``, ``limit``, ``cursor``)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from aiohttp import web

from bruce.admin.pages.listing import BadRequest, one_page, parse_filters
from bruce.admin.pages.rendering import Page
from bruce.clock import Clock
from bruce.llm.budget import Budget
from bruce.llm.usage import usage_by_day
from bruce.records import KindTotals, StoredLLMCall, as_dict
from bruce.store import Store
from bruce.values import LLMCallKind

__all__ = ["LLMPages"]

FILTERS = {"model": "model", "status": "status", "kind": "kind", "since": "since", "until": "until"}
STATUSES = ("ok", "error", "timeout")
USAGE_DAYS = 7


class LLMPages:
    def __init__(self, store: Store, clock: Clock, zone: ZoneInfo, budget: Budget | None, page: Page) -> None:
        self._store = store  # llm_calls through ``audit``; the usage per day through ``usage_by_day``
        self._clock = clock
        self._zone = zone
        self._budget = budget
        self._page = page

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/llm", self._llm_page), web.get("/api/llm-calls", self._api_llm_calls)]

    async def _calls(self, query: Mapping[str, str]) -> tuple[list[StoredLLMCall], int | None, list[KindTotals]]:
        """The page of calls the query asks for, the cursor of the next, and the totals per kind
        over the query's ``since`` / ``until``."""
        filters, limit, cursor = parse_filters(query, FILTERS, STATUSES)
        rows = await self._store.audit.llm_calls(filters=filters, before_id=cursor, limit=limit + 1)
        totals = await self._store.stats.llm_totals_by_kind(since=filters.get("since"), until=filters.get("until"))
        return *one_page(rows, limit), totals

    async def _api_llm_calls(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor, totals = await self._calls(request.query)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"items": [as_dict(c) for c in items], "next_cursor": next_cursor,
                                  "totals_by_kind": [as_dict(t) for t in totals]})

    async def _llm_page(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor, totals = await self._calls(request.query)
        except BadRequest as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        rows, hits = await usage_by_day(self._store, self._clock, self._zone, USAGE_DAYS)
        spend = await self._budget.spend() if self._budget is not None else None
        kind = request.query.get("kind", "")
        older = f"/llm?{urlencode({**request.query, 'cursor': next_cursor})}" if next_cursor else None
        return self._page("llm.html", request=request, items=items, usage=rows, hits=hits, spend=spend,
                          totals=totals, kinds=[k.value for k in LLMCallKind], kind=kind,
                          older=older)
