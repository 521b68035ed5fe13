"""The admin page's Evals tab: the runs ``bruce eval run`` wrote under ``eval.runs_dir``, newest
first (``/evals``, ``GET /api/evals``), and one run with its cases, checks, judge scores and
transcripts (``/evals/ID``, ``GET /api/evals/ID``: its run.json). Read only; a run is named by
its folder, and nothing in a URL is used as a path beyond that one checked name."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from aiohttp import web

from bruce.admin.pages.rendering import Page
from bruce.eval.report import RunError, list_runs, load_run

__all__ = ["EvalPages", "MAX_LISTED"]

MAX_LISTED = 100  # the newest runs shown; older folders stay on disk
_RUN_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,99}")


class EvalPages:
    def __init__(self, runs_dir: Path | None, page: Page) -> None:
        self._runs_dir = runs_dir
        self._page = page

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/evals", self._list_page), web.get("/evals/{id}", self._run_page),
                web.get("/api/evals", self._api_list), web.get("/api/evals/{id}", self._api_run)]

    async def _runs(self) -> list[dict[str, Any]]:
        if self._runs_dir is None:
            return []
        return await asyncio.to_thread(list_runs, self._runs_dir, MAX_LISTED)  # files: off the event loop

    async def _run(self, request: web.Request) -> dict[str, Any] | None:
        """The run named in the URL, or None when there is none by that name (or it is unreadable)."""
        run_id = request.match_info["id"]
        if self._runs_dir is None or not _RUN_ID.fullmatch(run_id) or ".." in run_id:
            return None
        try:
            return await asyncio.to_thread(load_run, self._runs_dir / run_id)
        except RunError:
            return None

    async def _api_list(self, request: web.Request) -> web.Response:
        return web.json_response({"runs_dir": str(self._runs_dir) if self._runs_dir else None,
                                  "items": await self._runs()})

    async def _api_run(self, request: web.Request) -> web.Response:
        run = await self._run(request)
        if run is None:
            return web.json_response({"error": f"no eval run {request.match_info['id'][:100]!r}"}, status=404)
        return web.json_response(run)

    async def _list_page(self, request: web.Request) -> web.Response:
        return self._page("evals.html", request=request, runs=await self._runs(), runs_dir=self._runs_dir)

    async def _run_page(self, request: web.Request) -> web.Response:
        run = await self._run(request)
        if run is None:
            raise web.HTTPNotFound(text="no such eval run")
        return self._page("eval_run.html", request=request, run=run)
