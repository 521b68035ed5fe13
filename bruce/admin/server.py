"""The admin app: its lifecycle, the Host check, the auth gate (``bruce.admin.auth``), the
security headers on every response, ``/login`` and ``/logout``, and ``GET /healthz`` (no token needed). The pages are
groups in ``bruce.admin.pages``, each a class with its ``routes()``, mounted here behind the
gate in this order: the overview (``/``, where a login lands) and its charts' data, logs,
metrics, llm, turns, media (kept photos), jobs, pairing, memory, artifacts, chat, evals, then the web chat channel's own routes and the static files.

Every request, ``/healthz`` and the web chat's included, first passes the Host check: the
``Host`` header must name this machine (``localhost``, a loopback address), the address the page
listens on, or an ``admin.allowed_hosts`` entry; any other gets 421 before auth. A page on an
attacker's domain that re-points its name at 127.0.0.1 (DNS rebinding) sends its own name, so
the browser's same-origin rule cannot be turned against the page this way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import structlog
from aiohttp import web

from bruce.admin.auth import COOKIE, LoginLimiter, Sessions, same
from bruce.admin.pages.artifacts import ArtifactPages
from bruce.admin.pages.charts import ChartData
from bruce.admin.pages.chat import ChatPage
from bruce.admin.pages.evals import EvalPages
from bruce.admin.pages.jobs import JobPages
from bruce.admin.pages.llm import LLMPages
from bruce.admin.pages.logs import LogPages
from bruce.admin.pages.media import MediaFiles, MediaPages
from bruce.admin.pages.memory import MemoryPages
from bruce.admin.pages.metrics import MetricsPage
from bruce.admin.pages.overview import OverviewPage
from bruce.admin.pages.pairing import PairingPages
from bruce.admin.pages.rendering import SESSION, PageGroup, Templates, redirect
from bruce.admin.pages.turns import TurnPages
from bruce.clock import Clock
from bruce.config.rules import host_entry, host_header_allowed
from bruce.jobs.book import JobBook
from bruce.llm.budget import Budget
from bruce.store import Store

__all__ = ["AdminServer", "SECURITY_HEADERS"]

log = structlog.get_logger(__name__)

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
OPEN_PATHS = ("/healthz", "/login", "/static/")
STATIC = Path(__file__).parent / "static"  # admin.css, chat.js: served from the package, never a CDN

Health = Callable[[], Awaitable[dict[str, Any]]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AdminServer:
    def __init__(self, *, store: Store, clock: Clock, token: str, host: str, port: int,
                 health: Health | None = None, artifacts_dir: Path | None = None, jobs: JobBook | None = None,
                 budget: Budget | None = None, zone: ZoneInfo | None = None,
                 chat_routes: list[web.RouteDef] | None = None, eval_runs_dir: Path | None = None,
                 allowed_hosts: Sequence[str] = (), data_dir: Path | None = None) -> None:
        """``data_dir``: the data folder (``storage.path``'s), whose ``media/`` holds the kept
        photos shown on a turn's trace; None: none is shown."""
        self._store = store
        self._clock = clock
        self._token = token
        self._host = host
        self._port = port
        self._health = health
        wildcard = host in ("", "0.0.0.0", "::")
        self._allowed_hosts = (*allowed_hosts, *(() if wildcard else (host_entry(host),)))
        self.sessions = Sessions()
        self.logins = LoginLimiter()
        self._runner: web.AppRunner | None = None
        self._warm: asyncio.Task[None] | None = None  # the overview's past week, read before anyone asks
        self._templates = Templates(zone)
        page = self._templates.page
        self._logs = LogPages(store.audit, page, zone=self._templates.zone)
        chat_routes = chat_routes or []
        files = MediaFiles(data_dir)
        zone = zone or ZoneInfo("UTC")
        self.overview = OverviewPage(store.overview, clock, zone, budget, health, page, self._templates.text)
        self._pages: list[PageGroup] = [
            self.overview, ChartData(store.overview, clock, zone), self._logs, MetricsPage(store.stats),
            LLMPages(store, clock, zone, budget, page),
            TurnPages(store.audit, page, files), MediaPages(store.media, files), JobPages(store.jobs, jobs, page),
            PairingPages(store.pairing, page),
            MemoryPages(store.memory, page), ArtifactPages(store.artifacts, artifacts_dir, page),
            ChatPage(store.messages, page, served=bool(chat_routes)), EvalPages(eval_runs_dir, page)]
        self.app = self._build(chat_routes)

    @property
    def live_poll_s(self) -> float:
        """How often the live log looks for new rows."""
        return self._logs.poll_s

    @live_poll_s.setter
    def live_poll_s(self, seconds: float) -> None:
        self._logs.poll_s = seconds

    # lifecycle ------------------------------------------------------------------------------

    async def start(self) -> str:
        """Listen; returns the base URL (the port the system chose when ``port`` is 0)."""
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=2.0)  # open event streams end fast
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self._warm = asyncio.create_task(self.overview.keep_warm(), name="admin:overview-warm")
        port = self._runner.addresses[0][1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        url = f"http://{host}:{port}"
        log.info("admin.listening", url=url)
        return url

    async def stop(self) -> None:
        if self._warm is not None:
            self._warm.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warm
            self._warm = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # the app --------------------------------------------------------------------------------

    def _build(self, chat_routes: list[web.RouteDef]) -> web.Application:
        app = web.Application(middlewares=[self._host_check, self._gate])
        app.on_response_prepare.append(self._headers)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/login", self._login_form)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)
        for group in self._pages:
            app.router.add_routes(group.routes())
        app.router.add_routes(chat_routes)  # the web channel's (channels/web_chat.py), behind the same gate
        app.router.add_static("/static/", STATIC, append_version=False)
        return app

    @staticmethod
    async def _headers(request: web.Request, response: web.StreamResponse) -> None:
        """Every response, errors and event streams included, just before its headers go out."""
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)

    @web.middleware
    async def _host_check(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Before anything else: a request must name a host this page answers to (DNS rebinding)."""
        if not host_header_allowed(request.headers.get("Host"), self._allowed_hosts):
            log.warning("admin.host_refused", host=(request.headers.get("Host") or "")[:100])
            return web.json_response({"error": "this page answers only to localhost and admin.allowed_hosts"},
                                     status=421)
        return await handler(request)

    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every route but the open ones needs the token (Bearer) or a session (cookie, plus
        CSRF on a state-changing request). A wrong Bearer token counts as a failed login."""
        if request.path.startswith(OPEN_PATHS) or request.path == "/login":
            return await handler(request)
        api = request.path.startswith("/api/") or request.path == "/metrics"  # machines get a 401, not a page
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            client, now = request.remote or "?", self._clock.monotonic()
            wait = self.logins.blocked(client, now)
            if wait is not None:
                return web.json_response({"error": f"too many attempts; try again in {int(wait) + 1} s"}, status=429,
                                         headers={"Retry-After": str(int(wait) + 1)})
            if same(header[7:].strip(), self._token):
                return await handler(request)
            self.logins.failed(client, now)
            log.warning("admin.login_failed", client=client, via="bearer")
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

    async def _healthz(self, request: web.Request) -> web.Response:
        found: dict[str, Any] = {"status": "ok"}
        try:
            last_ok = await self._store.audit.last_ok_llm_call()
            found["database"] = "ok"
            found["llm_last_ok"] = last_ok
        except Exception as exc:  # the page says what is wrong; it never fails itself
            cause = exc.__cause__ or exc  # (sqlite3's error, inside the store's StoreError)
            found.update(status="degraded", database=f"error: {type(cause).__name__}", llm_last_ok=None)
        if self._health is not None:
            found.update(await self._health())
        return web.json_response(found, status=200 if found["status"] == "ok" else 503)

    async def _login_form(self, request: web.Request) -> web.Response:
        return self._templates.page("login.html", error=None, status=200)

    async def _login(self, request: web.Request) -> web.Response:
        client = request.remote or "?"
        now = self._clock.monotonic()
        wait = self.logins.blocked(client, now)
        if wait is not None:
            return self._templates.page("login.html", error=f"Too many attempts; try again in {int(wait) + 1} s.",
                                        status=429)
        form = await request.post()
        if not same(str(form.get("token", "")).strip(), self._token):
            self.logins.failed(client, now)
            log.warning("admin.login_failed", client=client)
            return self._templates.page("login.html", error="That is not the admin token.", status=401)
        sid, _ = self.sessions.new(now)
        response = redirect("/")
        response.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", path="/", max_age=12 * 3600)
        log.info("admin.login", client=client)
        return response

    async def _logout(self, request: web.Request) -> web.Response:
        self.sessions.end(request.cookies.get(COOKIE))
        response = redirect("/login")
        response.del_cookie(COOKIE, path="/")
        return response


def _unauthorized(api: bool, reason: str) -> web.Response:
    if api:
        return web.json_response({"error": reason}, status=401, headers={"WWW-Authenticate": "Bearer"})
    return redirect("/login")
