"""Long-term memory: ``/memory`` and ``GET /api/memory`` (facts, active and archived, and
summaries, newest first); one fact or all of it forgotten for good (``POST /api/memory/ID/forget``,
``POST /api/memory/forget-all``, and the page's forms, whose forget-all needs its box ticked)."""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web

from bruce.admin.pages.rendering import Page, redirect
from bruce.store.memory import MemoryStore

__all__ = ["MemoryPages"]

log = structlog.get_logger(__name__)


class MemoryPages:
    def __init__(self, memory: MemoryStore, page: Page) -> None:
        self._memory_store = memory
        self._page = page

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/memory", self._memory_page), web.get("/api/memory", self._api_memory),
                web.post("/api/memory/forget-all", self._api_memory_forget_all),
                web.post("/api/memory/{id}/forget", self._api_memory_forget),
                web.post("/memory/forget-all", self._memory_forget_all_form),
                web.post("/memory/{id}/forget", self._memory_forget_form)]

    async def _memory(self) -> dict[str, Any]:
        """Facts (active and archived) and summaries, newest first (facts by when last seen)."""
        facts = sorted(await self._memory_store.facts(include_archived=True),
                       key=lambda f: (f.last_seen_at, f.id), reverse=True)
        summaries = sorted(await self._memory_store.summaries(), key=lambda s: s.id, reverse=True)
        return {"facts": [f.as_dict() for f in facts], "summaries": [s.as_dict() for s in summaries]}

    async def _forget_fact(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        """Forget one fact for good (``MemoryStore.forget``: its row, its search entry, the
        summaries that covered it)."""
        raw = request.match_info["id"]
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
            return 400, {"error": f"id: {raw[:20]!r} is not a memory fact's id (a positive whole number)"}
        fact_id = int(raw)
        if await self._memory_store.get(fact_id) is None:
            return 404, {"error": f"no memory fact {fact_id}"}
        count = await self._memory_store.forget([fact_id])
        log.info("admin.memory_forgotten", fact=fact_id, count=count)
        return 200, {"id": fact_id, "forgotten": count}

    async def _forget_all(self) -> dict[str, Any]:
        count = await self._memory_store.forget_all()
        log.info("admin.memory_forgotten_all", count=count)
        return {"forgotten": count}

    async def _api_memory(self, request: web.Request) -> web.Response:
        return web.json_response(await self._memory())

    async def _api_memory_forget(self, request: web.Request) -> web.Response:
        status, body = await self._forget_fact(request)
        return web.json_response(body, status=status)

    async def _api_memory_forget_all(self, request: web.Request) -> web.Response:
        return web.json_response(await self._forget_all())

    async def _memory_forget_form(self, request: web.Request) -> web.Response:
        status, body = await self._forget_fact(request)
        if status != 200:
            return self._page("memory.html", request=request, **await self._memory(), error=body["error"],
                              status=status)
        return redirect("/memory")

    async def _memory_forget_all_form(self, request: web.Request) -> web.Response:
        """The page's button needs its box ticked too: one stray click never wipes the memory."""
        form = await request.post()
        if form.get("confirm") != "yes":
            return self._page("memory.html", request=request, **await self._memory(),
                              error="confirm: tick the box to forget everything", status=400)
        await self._forget_all()
        return redirect("/memory")

    async def _memory_page(self, request: web.Request) -> web.Response:
        return self._page("memory.html", request=request, **await self._memory(), error=None)
