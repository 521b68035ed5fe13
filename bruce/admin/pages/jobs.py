"""The proactive jobs: ``/jobs`` and ``GET /api/jobs`` (each job with its last runs), and
``POST /api/jobs/ID/ACTION`` or the page's forms (``/jobs/ID/ACTION``): pause, resume, cancel or
run-now, through ``JobBook`` as the chat tools do, so the scheduler hears of it. An untrusted job
is marked so; a change from here keeps it untrusted."""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web

from bruce.admin.pages.rendering import Page, redirect
from bruce.jobs.book import JobBook, JobError, JobView
from bruce.store.jobs import JobStore

__all__ = ["JobPages"]

log = structlog.get_logger(__name__)

LAST_RUNS = 3


class JobPages:
    def __init__(self, jobs: JobStore, book: JobBook | None, page: Page) -> None:
        self._jobs = jobs
        self._book = book  # None: a process without the scheduler's jobs (changes are refused)
        self._page = page

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/jobs", self._jobs_page), web.get("/api/jobs", self._api_jobs),
                web.post("/api/jobs/{id}/{action}", self._api_job_action), web.post("/jobs/{id}/{action}", self._job_form)]

    async def _job_views(self) -> list[dict[str, Any]]:
        shown = []
        for job in await self._jobs.all(live_only=False):
            runs = await self._jobs.runs(job.id, limit=LAST_RUNS)
            shown.append({**JobView(job).as_dict(), "next_run_at": job.next_run_at,
                          "conversation_id": job.conversation_id, "person": job.person,
                          "last_runs": [{"scheduled_for": r.scheduled_for, "status": str(r.status),
                                         "lateness_ms": r.lateness_ms, "error": r.error} for r in runs]})
        return shown

    async def _act_on_job(self, request: web.Request) -> tuple[dict[str, Any] | None, str | None]:
        """pause | resume | cancel | run-now, through ``JobBook`` (the scheduler hears of it)."""
        action, job_id = request.match_info["action"], request.match_info["id"]
        if self._book is None:
            return None, "the scheduler's jobs are not available here"
        try:
            if action == "pause":
                view = await self._book.pause(None, job_id)
            elif action == "resume":
                view = await self._book.resume(None, job_id)
            elif action == "cancel":
                view = await self._book.cancel(None, job_id)
            elif action == "run-now":
                view = await self._book.run_now(job_id)
            else:
                return None, f"action: {action[:20]!r} is not pause, resume, cancel or run-now"
        except JobError as exc:
            return None, str(exc)
        log.info("admin.job_changed", job=view.job.id, action=action)
        return view.as_dict(), None

    async def _api_jobs(self, request: web.Request) -> web.Response:
        return web.json_response({"items": await self._job_views()})

    async def _api_job_action(self, request: web.Request) -> web.Response:
        job, error = await self._act_on_job(request)
        if job is None:
            return web.json_response({"error": error}, status=400)
        return web.json_response(job)

    async def _job_form(self, request: web.Request) -> web.Response:
        _, error = await self._act_on_job(request)
        if error:
            return self._page("jobs.html", request=request, jobs=await self._job_views(), error=error, status=400)
        return redirect("/jobs")

    async def _jobs_page(self, request: web.Request) -> web.Response:
        return self._page("jobs.html", request=request, jobs=await self._job_views(), error=None)
