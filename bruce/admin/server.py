"""The admin app: routes, security headers, and the auth gate (``bruce.admin.auth``).

Pages: ``/login``, ``/logs`` (tool executions, newest first, filters, cursor pagination) and
``/logs/ID`` (one execution, pretty-printed). JSON: ``GET /api/tool-executions`` (the same
filters: ``tool``, ``status``, ``conversation``, ``source``, ``since``, ``until``, ``limit``,
``cursor``; answer ``{"items": [...], "next_cursor": ...}``) and ``/api/tool-executions/ID``.
``GET /healthz`` needs no token. A bad filter is a 400 naming it, never a 500.
``/memory`` lists long-term memory (``GET /api/memory``); one fact or all of it can be forgotten
(``POST /api/memory/ID/forget``, ``POST /api/memory/forget-all``, and the page's forms).
``/evals`` lists the runs of ``bruce eval`` (``bruce.admin.evals``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import structlog
from aiohttp import web
from jinja2 import Environment, PackageLoader, select_autoescape

from bruce.admin.auth import COOKIE, LoginLimiter, Session, Sessions, same
from bruce.admin.evals import EvalPages
from bruce.clock import Clock, utc_iso
from bruce.jobs.book import JobBook, JobError, JobView
from bruce.llm.budget import Budget
from bruce.llm.usage import usage_by_day
from bruce.records import from_json
from bruce.store import Store
from bruce.values import DecisionOutcome, ToolStatus, TurnSource

__all__ = ["AdminServer", "SECURITY_HEADERS"]

log = structlog.get_logger(__name__)

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
OPEN_PATHS = ("/healthz", "/login", "/static/")
MAX_LIMIT = 200
FILTERS = {"tool": "tool_name", "status": "status", "conversation": "conversation_id", "source": "source",
           "since": "since", "until": "until"}
STATIC = Path(__file__).parent / "static"  # admin.css, chat.js: served from the package, never a CDN

Health = Callable[[], Awaitable[dict[str, Any]]]
SESSION = web.RequestKey("session", Session)


class BadRequest(ValueError):
    """A query the API cannot answer; the text names the parameter."""


class AdminServer:
    def __init__(self, *, store: Store, clock: Clock, token: str, host: str, port: int,
                 health: Health | None = None, artifacts_dir: Path | None = None, jobs: JobBook | None = None,
                 budget: Budget | None = None, zone: ZoneInfo | None = None,
                 chat_routes: list[web.RouteDef] | None = None, eval_runs_dir: Path | None = None) -> None:
        self._chat_routes = chat_routes or []
        self._eval_runs_dir = eval_runs_dir
        self._store = store
        self._budget = budget
        self._zone = zone or ZoneInfo("UTC")
        self._jobs = jobs
        self._artifacts_dir = artifacts_dir.resolve() if artifacts_dir is not None else None
        self._clock = clock
        self._token = token
        self._host = host
        self._port = port
        self._health = health
        self.sessions = Sessions()
        self.live_poll_s = 1.0  # how often the live log looks for new rows
        self.logins = LoginLimiter()
        self._runner: web.AppRunner | None = None
        self._templates = Environment(loader=PackageLoader("bruce.admin", "templates"),
                                      autoescape=select_autoescape(default=True))
        self.app = self._build()

    # lifecycle ------------------------------------------------------------------------------

    async def start(self) -> str:
        """Listen; returns the base URL (the port the system chose when ``port`` is 0)."""
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=2.0)  # open event streams end fast
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        port = self._runner.addresses[0][1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        url = f"http://{host}:{port}"
        log.info("admin.listening", url=url)
        return url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # the app --------------------------------------------------------------------------------

    def _build(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        app.on_response_prepare.append(self._headers)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/login", self._login_form)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)
        app.router.add_get("/", self._home)
        app.router.add_get("/logs", self._logs_page)
        app.router.add_get("/logs/{id}", self._log_page)
        app.router.add_get("/api/tool-executions", self._api_tool_executions)
        app.router.add_get("/api/tool-executions/events", self._live_executions)
        app.router.add_get("/api/tool-executions/{id}", self._api_tool_execution)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/llm", self._llm_page)
        app.router.add_get("/api/llm-calls", self._api_llm_calls)
        app.router.add_get("/turns/{id}", self._turn_page)
        app.router.add_get("/api/turns/{id}", self._api_turn)
        app.router.add_get("/jobs", self._jobs_page)
        app.router.add_get("/api/jobs", self._api_jobs)
        app.router.add_post("/api/jobs/{id}/{action}", self._api_job_action)
        app.router.add_post("/jobs/{id}/{action}", self._job_form)
        app.router.add_get("/pairing", self._pairing_page)
        app.router.add_get("/api/pairing", self._api_pairing)
        app.router.add_post("/api/pairing/{code}/{action}", self._api_pairing_decide)
        app.router.add_post("/pairing/{code}/{action}", self._pairing_form)
        app.router.add_get("/memory", self._memory_page)
        app.router.add_get("/api/memory", self._api_memory)
        app.router.add_post("/api/memory/forget-all", self._api_memory_forget_all)
        app.router.add_post("/api/memory/{id}/forget", self._api_memory_forget)
        app.router.add_post("/memory/forget-all", self._memory_forget_all_form)
        app.router.add_post("/memory/{id}/forget", self._memory_forget_form)
        app.router.add_get("/artifacts", self._artifacts_page)
        app.router.add_get("/artifacts/{id}/{filename}", self._artifact_file)
        app.router.add_get("/chat", self._chat_page)
        app.router.add_routes(EvalPages(self._eval_runs_dir, self._page).routes())  # bruce eval's runs
        app.router.add_routes(self._chat_routes)  # the web channel's (channels/web_chat.py), behind the same gate
        app.router.add_static("/static/", STATIC, append_version=False)
        return app

    @staticmethod
    async def _headers(request: web.Request, response: web.StreamResponse) -> None:
        """Every response, errors and event streams included, just before its headers go out."""
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)

    @web.middleware
    async def _gate(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                    ) -> web.StreamResponse:
        """Every route but the open ones needs the token (Bearer) or a session (cookie, plus
        CSRF on a state-changing request)."""
        if request.path.startswith(OPEN_PATHS) or request.path == "/login":
            return await handler(request)
        api = request.path.startswith("/api/") or request.path == "/metrics"  # machines get a 401, not a page
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            if same(header[7:].strip(), self._token):
                return await handler(request)
            return _unauthorized(api, "wrong admin token")
        session = self.sessions.get(request.cookies.get(COOKIE), self._clock.monotonic())
        if session is None:
            return _unauthorized(api, "the admin token is required (Authorization: Bearer TOKEN, or log in)")
        if request.method not in ("GET", "HEAD"):
            form = await request.post() if request.content_type.endswith("form-urlencoded") else {}
            given = request.headers.get("X-CSRF-Token") or str(form.get("csrf", ""))
            if not same(given, session.csrf):
                return web.json_response({"error": "missing or wrong CSRF token"}, status=403)
        request[SESSION] = session
        return await handler(request)

    # open routes ----------------------------------------------------------------------------

    async def _home(self, request: web.Request) -> web.Response:
        return _redirect("/logs")

    async def _healthz(self, request: web.Request) -> web.Response:
        found: dict[str, Any] = {"status": "ok"}
        try:
            row = await self._store.database.row("SELECT max(created_at) AS at FROM llm_calls WHERE status = 'ok'")
            found["database"] = "ok"
            found["llm_last_ok"] = row["at"] if row else None
        except Exception as exc:  # the page says what is wrong; it never fails itself
            cause = exc.__cause__ or exc  # (sqlite3's error, inside the store's StoreError)
            found.update(status="degraded", database=f"error: {type(cause).__name__}", llm_last_ok=None)
        if self._health is not None:
            found.update(await self._health())
        return web.json_response(found, status=200 if found["status"] == "ok" else 503)

    async def _login_form(self, request: web.Request) -> web.Response:
        return self._page("login.html", error=None, status=200)

    async def _login(self, request: web.Request) -> web.Response:
        client = request.remote or "?"
        now = self._clock.monotonic()
        wait = self.logins.blocked(client, now)
        if wait is not None:
            return self._page("login.html", error=f"Too many attempts; try again in {int(wait) + 1} s.", status=429)
        form = await request.post()
        if not same(str(form.get("token", "")).strip(), self._token):
            self.logins.failed(client, now)
            log.warning("admin.login_failed", client=client)
            return self._page("login.html", error="That is not the admin token.", status=401)
        sid, _ = self.sessions.new(now)
        response = _redirect("/logs")
        response.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", path="/", max_age=12 * 3600)
        log.info("admin.login", client=client)
        return response

    async def _logout(self, request: web.Request) -> web.Response:
        self.sessions.end(request.cookies.get(COOKIE))
        response = _redirect("/login")
        response.del_cookie(COOKIE, path="/")
        return response

    # tool executions ------------------------------------------------------------------------

    async def _executions(self, query: Mapping[str, str]) -> tuple[list[dict[str, Any]], int | None, dict[str, str]]:
        filters, limit, cursor = _parse_filters(query)
        rows = await self._store.audit.tool_executions(filters=filters, before_id=cursor, limit=limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return [_item(r) for r in rows], (rows[-1]["id"] if more and rows else None), filters

    async def _api_tool_executions(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor, _ = await self._executions(request.query)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"items": items, "next_cursor": next_cursor})

    async def _live_executions(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: each tool execution recorded after ``after`` (an id), matching the
        same filters as the list, as it is recorded (the page adds it at the top)."""
        query = {k: v for k, v in request.query.items() if k != "after"}
        after_text = request.query.get("after", "0")
        try:
            filters, _, _ = _parse_filters(query)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if not after_text.isdigit() or len(after_text) > 18:
            return web.json_response({"error": "after: the id of the newest row shown"}, status=400)
        last = int(after_text)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        await response.write(b": connected\n\n")
        try:
            while True:
                rows = await self._store.audit.tool_executions(filters={**filters}, before_id=None, limit=MAX_LIMIT,
                                                               after_id=last)
                for row in sorted(rows, key=lambda r: int(r["id"])):
                    last = max(last, int(row["id"]))
                    await response.write(f"data: {json.dumps(_item(row), ensure_ascii=False)}\n\n".encode())
                if not rows:
                    await response.write(b": waiting\n\n")
                await asyncio.sleep(self.live_poll_s)
        except ConnectionResetError:  # the page went away
            pass
        return response

    async def _api_tool_execution(self, request: web.Request) -> web.Response:
        item = await self._one(request)
        if item is None:
            return web.json_response({"error": f"no tool execution {request.match_info['id'][:40]!r}"}, status=404)
        return web.json_response(item)

    async def _one(self, request: web.Request) -> dict[str, Any] | None:
        raw = request.match_info["id"]
        if not raw.isdigit() or len(raw) > 18:
            return None
        row = await self._store.audit.tool_execution(int(raw))
        return _item(row) if row else None

    async def _logs_page(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor, _ = await self._executions(request.query)
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

    async def _metrics(self, request: web.Request) -> web.Response:
        from bruce.admin.metrics import render_metrics

        body = await render_metrics(self._store)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    # llm calls ------------------------------------------------------------------------------

    async def _llm(self, query: Mapping[str, str]) -> tuple[list[dict[str, Any]], int | None]:
        filters, limit, cursor = _parse_filters(query, LLM_FILTERS, LLM_STATUSES)
        rows = await self._store.audit.llm_calls(filters=filters, before_id=cursor, limit=limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (rows[-1]["id"] if more and rows else None)

    async def _api_llm_calls(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor = await self._llm(request.query)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"items": items, "next_cursor": next_cursor})

    async def _llm_page(self, request: web.Request) -> web.Response:
        try:
            items, next_cursor = await self._llm(request.query)
        except BadRequest as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        rows, hits = await usage_by_day(self._store, self._clock, self._zone, 7)
        spend = await self._budget.spend() if self._budget is not None else None
        chart = list(reversed(items[:100]))
        return self._page("llm.html", request=request, items=items, usage=rows, hits=hits, spend=spend,
                          latency=_svg_points([c["latency_ms"] for c in chart]),
                          tokens=_svg_points([(c["prompt_tokens"] or 0) + (c["completion_tokens"] or 0) for c in chart]),
                          older=f"/llm?cursor={next_cursor}" if next_cursor else None)

    # turn traces ----------------------------------------------------------------------------

    async def _trace(self, request: web.Request) -> dict[str, Any] | None:
        turn_id = request.match_info["id"]
        if not turn_id.isalnum() or len(turn_id) > 64:
            return None
        trace = await self._store.audit.turn_trace(turn_id)
        if trace is None:
            return None
        steps = [{"kind": "llm_call", "at": c["created_at"], "model": c["model"], "status": c["status"],
                  "latency_ms": c["latency_ms"], "prompt_tokens": c["prompt_tokens"],
                  "completion_tokens": c["completion_tokens"], "cost_usd": c["cost_usd"], "error": c["error"]}
                 for c in trace["llm_calls"]]
        steps += [{"kind": "tool_execution", **_item(t), "at": t["created_at"]} for t in trace["tool_executions"]]
        steps.sort(key=lambda step: (step["at"], 0 if step["kind"] == "llm_call" else 1))
        return {"turn": trace["turn"], "message": trace["message"], "steps": steps, "replies": trace["replies"]}

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

    # schedules ------------------------------------------------------------------------------

    async def _job_views(self) -> list[dict[str, Any]]:
        shown = []
        for job in await self._store.jobs.all(live_only=False):
            runs = await self._store.jobs.runs(job.id, limit=3)
            shown.append({**JobView(job).as_dict(), "conversation_id": job.conversation_id,
                          "last_runs": [{"scheduled_for": r.scheduled_for, "status": str(r.status),
                                         "lateness_ms": r.lateness_ms, "error": r.error} for r in runs]})
        return shown

    async def _api_jobs(self, request: web.Request) -> web.Response:
        return web.json_response({"items": await self._job_views()})

    async def _act_on_job(self, request: web.Request) -> tuple[dict[str, Any] | None, str | None]:
        """pause | resume | cancel | run-now, through ``JobBook`` (the scheduler hears of it)."""
        action, job_id = request.match_info["action"], request.match_info["id"]
        if self._jobs is None:
            return None, "the scheduler's jobs are not available here"
        try:
            if action == "pause":
                view = await self._jobs.pause(None, job_id)
            elif action == "resume":
                view = await self._jobs.resume(None, job_id)
            elif action == "cancel":
                view = await self._jobs.cancel(None, job_id)
            elif action == "run-now":
                view = await self._jobs.run_now(job_id)
            else:
                return None, f"action: {action[:20]!r} is not pause, resume, cancel or run-now"
        except JobError as exc:
            return None, str(exc)
        log.info("admin.job_changed", job=view.job.id, action=action)
        return view.as_dict(), None

    async def _api_job_action(self, request: web.Request) -> web.Response:
        job, error = await self._act_on_job(request)
        if job is None:
            return web.json_response({"error": error}, status=400)
        return web.json_response(job)

    async def _job_form(self, request: web.Request) -> web.Response:
        _, error = await self._act_on_job(request)
        if error:
            return self._page("jobs.html", request=request, jobs=await self._job_views(), error=error, status=400)
        return _redirect("/jobs")

    async def _jobs_page(self, request: web.Request) -> web.Response:
        return self._page("jobs.html", request=request, jobs=await self._job_views(), error=None)

    # web chat -------------------------------------------------------------------------------

    async def _chat_page(self, request: web.Request) -> web.Response:
        if not self._chat_routes:
            raise web.HTTPNotFound(text="web chat is served by `bruce run`")
        rows = await self._store.database.rows(
            "SELECT direction, kind, text FROM messages WHERE conversation_id = 'web:owner'"
            " ORDER BY id DESC LIMIT 50")
        return self._page("chat.html", request=request, history=list(reversed([dict(r) for r in rows])))

    # pairing --------------------------------------------------------------------------------

    async def _pending(self) -> list[dict[str, Any]]:
        return [{"code": r.code, "channel": r.channel, "sender_id": r.sender_id, "display_name": r.display_name,
                 "created_at": r.created_at, "expires_at": r.expires_at} for r in await self._store.pairing.pending()]

    async def _api_pairing(self, request: web.Request) -> web.Response:
        return web.json_response({"items": await self._pending()})

    async def _decide_pairing(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        """approve | deny a pending code, as ``bruce pairing approve|deny`` does."""
        action, code = request.match_info["action"], request.match_info["code"]
        if action not in ("approve", "deny"):
            return 400, {"error": f"action: {action[:20]!r} is not approve or deny"}
        typed = "".join(code.split()).replace("-", "").upper()[:16]
        outcome, found = await self._store.pairing.decide(typed, approve=action == "approve")
        if found is None or outcome not in (DecisionOutcome.APPROVED, DecisionOutcome.DENIED):
            return 400, {"error": f"pairing code {typed!r} is not pending ({outcome})"}
        log.info("admin.pairing_decided", code=typed, outcome=str(outcome), channel=found.channel)
        return 200, {"code": typed, "outcome": str(outcome), "channel": found.channel, "sender_id": found.sender_id}

    async def _api_pairing_decide(self, request: web.Request) -> web.Response:
        status, body = await self._decide_pairing(request)
        return web.json_response(body, status=status)

    async def _pairing_form(self, request: web.Request) -> web.Response:
        status, body = await self._decide_pairing(request)
        if status != 200:
            return self._page("pairing.html", request=request, requests=await self._pending(), error=body["error"],
                              status=status)
        return _redirect("/pairing")

    async def _pairing_page(self, request: web.Request) -> web.Response:
        return self._page("pairing.html", request=request, requests=await self._pending(), error=None)

    # long-term memory -----------------------------------------------------------------------

    async def _memory(self) -> dict[str, Any]:
        """Facts (active and archived) and summaries, newest first (facts by when last seen)."""
        facts = sorted(await self._store.memory.facts(include_archived=True),
                       key=lambda f: (f.last_seen_at, f.id), reverse=True)
        summaries = sorted(await self._store.memory.summaries(), key=lambda s: s.id, reverse=True)
        return {"facts": [f.as_dict() for f in facts], "summaries": [s.as_dict() for s in summaries]}

    async def _forget_fact(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        """Forget one fact for good (``MemoryStore.forget``: its row, its search entry, the
        summaries that covered it)."""
        raw = request.match_info["id"]
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
            return 400, {"error": f"id: {raw[:20]!r} is not a memory fact's id (a positive whole number)"}
        fact_id = int(raw)
        if await self._store.memory.get(fact_id) is None:
            return 404, {"error": f"no memory fact {fact_id}"}
        count = await self._store.memory.forget([fact_id])
        log.info("admin.memory_forgotten", fact=fact_id, count=count)
        return 200, {"id": fact_id, "forgotten": count}

    async def _forget_all(self) -> dict[str, Any]:
        count = await self._store.memory.forget_all()
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
        return _redirect("/memory")

    async def _memory_forget_all_form(self, request: web.Request) -> web.Response:
        """The page's button needs its box ticked too: one stray click never wipes the memory."""
        form = await request.post()
        if form.get("confirm") != "yes":
            return self._page("memory.html", request=request, **await self._memory(),
                              error="confirm: tick the box to forget everything", status=400)
        await self._forget_all()
        return _redirect("/memory")

    async def _memory_page(self, request: web.Request) -> web.Response:
        return self._page("memory.html", request=request, **await self._memory(), error=None)

    # artifacts ------------------------------------------------------------------------------

    async def _artifacts_page(self, request: web.Request) -> web.Response:
        shown = []
        for record in await self._store.artifacts.recent(limit=100):
            preview = ""
            file = self._file(record.path)
            if record.format != "html" and file is not None:
                try:
                    with open(file, encoding="utf-8", errors="replace") as handle:
                        preview = handle.read(300)
                except OSError:
                    preview = "(the file is missing)"
            shown.append({"record": record, "url": f"/artifacts/{record.id}/{record.filename}", "preview": preview})
        return self._page("artifacts.html", request=request, artifacts=shown)

    async def _artifact_file(self, request: web.Request) -> web.StreamResponse:
        """One artifact, as ``artifact.save`` linked it. The URL only names a row (id, and its exact
        filename); the file is the row's, and must lie inside the artifacts folder: no path
        in a URL ever reaches the file system. ``sandbox``: a saved page can never script this origin."""
        artifact_id, filename = request.match_info["id"], request.match_info["filename"]
        record = await self._store.artifacts.get(artifact_id) if artifact_id.isalnum() and len(artifact_id) <= 64 \
            else None
        file = self._file(record.path) if record is not None and record.filename == filename else None
        if record is None or file is None:
            raise web.HTTPNotFound(text="no such artifact")
        kind = {"html": "text/html", "markdown": "text/markdown"}.get(record.format, "text/plain")
        try:
            body = file.read_bytes()
        except OSError:
            raise web.HTTPNotFound(text="the artifact's file is missing") from None
        return web.Response(body=body, content_type=kind, charset="utf-8",
                            headers={"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"})

    def _file(self, stored: str) -> Path | None:
        """The file a row names (relative to the artifacts folder, as ``artifact.save`` stores it),
        if it lies inside that folder; None otherwise."""
        if self._artifacts_dir is None:
            return None
        try:
            path = (self._artifacts_dir / stored).resolve()
        except (OSError, ValueError):
            return None
        return path if path.is_relative_to(self._artifacts_dir) else None

    def _page(self, name: str, *, status: int = 200, request: web.Request | None = None, **values: Any) -> web.Response:
        session: Session | None = request.get(SESSION) if request is not None else None
        html = self._templates.get_template(name).render(csrf=session.csrf if session else "", **values)
        return web.Response(text=html, content_type="text/html", status=status)


LLM_FILTERS = {"model": "model", "status": "status", "since": "since", "until": "until"}
LLM_STATUSES = ("ok", "error", "timeout")
TOOL_STATUSES = tuple(status.value for status in ToolStatus)


def _parse_filters(query: Mapping[str, str], known: Mapping[str, str] = FILTERS,
                   statuses: tuple[str, ...] = TOOL_STATUSES) -> tuple[dict[str, str], int, int | None]:
    unknown = sorted(set(query) - set(known) - {"limit", "cursor"})
    if unknown:
        raise BadRequest(f"unknown parameter {unknown[0][:40]!r}; use {', '.join([*known, 'limit', 'cursor'])}")
    filters: dict[str, str] = {}
    for name, column in known.items():
        value = query.get(name, "").strip()
        if not value:
            continue
        if name == "status" and value not in statuses:
            raise BadRequest(f"status: {value[:40]!r} is not one of {', '.join(statuses)}")
        if name == "source" and value not in {s.value for s in TurnSource}:
            raise BadRequest(f"source: {value[:40]!r} is not one of {', '.join(s.value for s in TurnSource)}")
        if name in ("since", "until"):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                raise BadRequest(f"{name}: {value[:40]!r} is not an ISO 8601 date-time") from None
            if moment.tzinfo is None:
                raise BadRequest(f"{name}: give a UTC offset, e.g. {value[:19]}Z")
            value = utc_iso(moment)
        filters[column] = value[:200]
    limit_text = query.get("limit", "50")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIMIT:
        raise BadRequest(f"limit: a whole number from 1 to {MAX_LIMIT} (got {limit_text[:20]!r})")
    cursor_text = query.get("cursor", "")
    if cursor_text and (not cursor_text.isdigit() or len(cursor_text) > 18):
        raise BadRequest(f"cursor: give the next_cursor of the previous page (got {cursor_text[:20]!r})")
    return filters, int(limit_text), int(cursor_text) if cursor_text else None


def _item(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "tool_name": row["tool_name"], "status": row["status"], "risk": row["risk"],
            "source": row["source"], "conversation_id": row["conversation_id"], "turn_id": row["turn_id"],
            "latency_ms": row["latency_ms"], "started_at": row["created_at"], "input": from_json(row["input"]),
            "output": from_json(row["output"]), "error": row["error"]}


def _svg_points(values: list[float], width: int = 600, height: int = 120) -> str:
    """A polyline's points for a small server-drawn chart (no script, no library)."""
    if not values:
        return ""
    top = max(values) or 1.0
    step = width / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - (v / top) * (height - 4) - 2:.1f}" for i, v in enumerate(values))


def _redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


def _unauthorized(api: bool, reason: str) -> web.Response:
    if api:
        return web.json_response({"error": reason}, status=401, headers={"WWW-Authenticate": "Bearer"})
    return _redirect("/login")
